/**
 * Billing around a step (docs/billing.md), written once for every driver and every kind: before the step, what the
 * object's runs accrued is captured and their holds are topped up (`settle`), which tells the step what money allows
 * (`Funding`); after it, the first hold of each run it launches is placed before capacity starts (spec: "the first hold
 * must fit"), and `status.cost` is the display copy of the ledger (spec: Conventions 3). The headless simulator
 * (src/backends/sim/Simulation.ts) and the runtime's reconciler (src/runtime/Reconciler.ts) both step objects only
 * through here, on the ledger they hold; the ledger is pure, so this is too, and the postings it made are returned
 * for the driver to persist.
 */
import { type BillingSubject, costStatusOf, holdLaunch, type Room, settle, type Settled } from "../billing/Billing.ts"
import type { Ledger, Posting } from "../billing/Ledger.ts"
import type { Pricebook } from "../billing/Pricebook.ts"
import type { Variant } from "../capacity/Offering.ts"
import { choose, type Market, type Ranking } from "../capacity/Placement.ts"
import { parseMicroUsd } from "../Money.ts"
import type { Machine, Observation, StepContext, StepResult } from "./Controller.ts"

/** The ledger a driver bills on, and what else billing reads. */
export interface Billing {
  readonly ledger: Ledger
  readonly pricebook: Pricebook
  /** The rooms of the Budgets matching the object now (none when absent). */
  readonly rooms: ReadonlyArray<Room>
}

export interface BilledStep<Status> {
  /** The machine's result, its status carrying `cost` when billed. */
  readonly result: StepResult<Status>
  /** The settle before the step; undefined when nothing is billed. */
  readonly settled: Settled | undefined
  /** Postings made by the settle and the launch holds, in order: what the driver persists. */
  readonly postings: ReadonlyArray<Posting>
  /** When the object must be stepped again: the machine's wake-up or billing's (a host's release, the funded edge). */
  readonly wakeAt: number | undefined
}

const noPostings: ReadonlyArray<Posting> = []

const earliest = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b)

/** What billing reads of an object: its uid owns the charges; `nextVariant` is what a launch would take now. */
export const subjectOf = (
  uid: string,
  maxCostUSD: string | undefined,
  attempts: BillingSubject["attempts"],
  nextVariant: Variant | undefined,
  rooms: ReadonlyArray<Room>
): BillingSubject => ({
  owner: uid,
  capMicro: maxCostUSD === undefined ? undefined : parseMicroUsd(maxCostUSD),
  attempts,
  nextVariant,
  hasRun: attempts.length > 0,
  rooms
})

/** The variant a launch would take now: the best-ranked with capacity, else the best-ranked (it would queue for it). */
export const nextVariantOf = (ranking: Ranking, market: Market): Variant | undefined =>
  choose(ranking, market)?.variant ?? ranking.kept[0]?.variant

/** Steps `observation` with `machine`, billed on `billing` when given (else nothing is billed and no cost is shown). */
export const billedStep = <Spec, Status extends object>(
  machine: Machine<Spec, Status>,
  observation: Observation<Spec, Status>,
  context: Omit<StepContext, "funding">,
  billing: Billing | undefined
): BilledStep<Status> => {
  if (billing === undefined) {
    const result = machine.step(observation, context)
    return { result, settled: undefined, postings: noPostings, wakeAt: result.wakeAt }
  }
  const { ledger, pricebook } = billing
  const { now } = context
  const posted = ledger.postings.length
  const subject = subjectOf(
    observation.uid,
    machine.maxCostOf(observation.spec),
    observation.attempts,
    nextVariantOf(context.ranking, context.market),
    billing.rooms
  )
  const settled = settle(ledger, pricebook, subject, now)
  const stepped = machine.step(observation, { ...context, funding: settled.funding })
  // Spec: the first hold is placed before capacity starts (the step launched only what `launchBudget` pays for).
  for (const action of stepped.actions) {
    if (action._tag === "Launch") holdLaunch(ledger, pricebook, observation.uid, action.attempt, action.variant, now)
  }
  const cost = costStatusOf(ledger, observation.uid, settled, {
    capMicro: subject.capMicro,
    final: machine.isFinal(stepped.status)
  })
  const result = { ...stepped, status: { ...stepped.status, cost } }
  const postings = ledger.postings.length === posted ? noPostings : ledger.postings.slice(posted)
  return { result, settled, postings, wakeAt: earliest(stepped.wakeAt, settled.wakeAt) }
}

/**
 * Bills an object that is gone (deleted by its owner or its ttl) until its hosts are released (docs/billing.md,
 * "Release"): the time up to the stop and the teardown are charged and every hold closes. Answers when to look again,
 * or undefined once every run is released.
 */
export const billRemoved = (
  billing: Billing,
  uid: string,
  maxCostUSD: string | undefined,
  attempts: BillingSubject["attempts"],
  now: number
): { readonly wakeAt: number | undefined; readonly done: boolean } => {
  const { wakeAt } = settle(
    billing.ledger,
    billing.pricebook,
    subjectOf(uid, maxCostUSD, attempts, undefined, billing.rooms),
    now
  )
  const done = attempts.every((attempt) => attempt.releasedAt !== undefined && attempt.releasedAt <= now)
  return { wakeAt, done }
}
