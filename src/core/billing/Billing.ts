/**
 * Billing a workload's runs (docs/billing.md): the two-phase holds, the captures, and what money allows next. It is
 * pure over a Ledger (itself pure): drivers — the simulator and the live server — call it around every controller
 * step, so both bill the same way.
 *
 * - Before capacity starts, a run's first hold is placed: the larger of the minimum charge and one hold window at the
 *   run's rate, which must fit the available balance, every matching Budget and the object's own maxCostUSD. The
 *   controller launches only what `launchBudget` pays for (`Funding`), and the driver places the holds of its Launch
 *   actions with `holdLaunch`.
 * - As a run goes on (`settle`), what it accrued is captured from its hold per billing increment (Metering), and the
 *   hold is topped up to a window ahead; `fundedUntilTime` is when the money held stops paying.
 * - When a hold cannot be topped up and pays for less than `stopLeadMs` more, the controller is told to stop by then:
 *   FundingLost (balance or a Budget) or MaxCostReached (the object's cap); it checkpoints until stopByTime.
 * - Once a run's host is released the final charge (partial increment, minimum charge) is captured and the hold is
 *   released; a charge beyond the hold and the balance is posted as arrears.
 */
import type { AttemptFacts } from "../capacity/Capacity.ts"
import type { Variant } from "../capacity/Offering.ts"
import * as Limits from "../Limits.ts"
import { formatMicroUsd, minMicro } from "../Money.ts"
import { iso } from "../StatusText.ts"
import { type Charges, type Ledger, type Segment, segments } from "./Ledger.ts"
import { type AttemptMeter, meterAttempt, segmentSeconds } from "./Metering.ts"
import { chargeFor, minimumChargeOf, msFor, type Pricebook, ruleOf } from "./Pricebook.ts"

/** How far ahead a run's hold pays (docs/billing.md): the first hold and every top-up aim for this much time. */
export const holdWindowMs = Limits.hourMs

/** A run whose hold pays for less than this and cannot be topped up is told to checkpoint and stop by its edge. */
export const stopLeadMs = 10 * Limits.minuteMs

/** A hold that is never settled again (its object vanished) expires this long after the time it pays until. */
export const holdExpiryGraceMs = Limits.hourMs

/** The codes a create or a launch is refused or made to wait with (spec: Registered codes). */
export type BlockingCode = "InsufficientCredits" | "BudgetExceeded" | "ArrearsOutstanding"

export interface Blocking {
  readonly code: BlockingCode
  readonly message: string
  readonly fix: string
  /** The Budget that refused (BudgetExceeded from a Budget, not from maxCostUSD): it reports budget.exceeded. */
  readonly budget?: string
}

/** A limit on new holds beside the balance: a matching Budget's room (amount minus spent and held this period). */
export interface Room {
  readonly code: "BudgetExceeded"
  readonly name: string
  readonly room: bigint
}

/** What money allows the controller this step (JobController reads it; undefined = billing off). */
export interface Funding {
  /** Money new runs' first holds may take this step. */
  readonly launchBudget: bigint
  readonly initialHold: (variant: Variant) => bigint
  /** Why `launchBudget` may not pay for a launch (for the Funded condition). */
  readonly blocked: Blocking | undefined
  /** Running work must stop by `at` (spec: funding lost → stopByTime; maxCostUSD reached → Suspended). */
  readonly stop: {
    readonly reason: "FundingLost" | "MaxCostReached"
    readonly at: number
    readonly message: string
    /** The Budget whose room ran out, when one did. */
    readonly budget?: string
  } | undefined
}

export interface BillingSubject {
  /** The object's uid: its charges and holds are the owner's. */
  readonly owner: string
  /** The object's maxCostUSD in micro-USD. */
  readonly capMicro: bigint | undefined
  readonly attempts: ReadonlyArray<AttemptFacts>
  /** The variant a launch would take now (for deciding whether a stopped Job may start again). */
  readonly nextVariant: Variant | undefined
  /** The Job has run before (a stop for money is FundingLost, not a wait for credits). */
  readonly hasRun: boolean
  /** Matching Budgets' rooms. */
  readonly rooms: ReadonlyArray<Room>
}

export interface Settled {
  readonly funding: Funding
  /** The run of each attempt, metered now. */
  readonly meters: ReadonlyMap<string, AttemptMeter>
  readonly fundedUntil: number | undefined
  /** When billing must look again: a host's release (the final charge) or the funded edge. */
  readonly wakeAt: number | undefined
  /** Charges no money covered, posted this settle (billing.arrears_posted). */
  readonly arrearsPosted: bigint
}

export const holdIdOf = (owner: string, attempt: string): string => `${owner}/${attempt}`

/** A run's first hold: one window at its rate, at least the minimum charge. */
export const initialHoldOf = (pricebook: Pricebook, variant: Variant): bigint => {
  const window = chargeFor(variant.rateMicroUsdPerHour, holdWindowMs)
  const minimum = minimumChargeOf(pricebook, variant)
  return window > minimum ? window : minimum
}

/** Money new holds of this owner may take: the balance, each Budget's room and the cap's room, whichever is least. */
const headroom = (
  ledger: Ledger,
  subject: BillingSubject
): { readonly money: bigint; readonly binding: "Balance" | "Cap" | Room } => {
  let money = ledger.available
  let binding: "Balance" | "Cap" | Room = "Balance"
  for (const room of subject.rooms) {
    if (room.room < money) {
      money = room.room < 0n ? 0n : room.room
      binding = room
    }
  }
  if (subject.capMicro !== undefined) {
    const capRoom = subject.capMicro - ledger.chargesFor(subject.owner).total - ledger.heldBy(subject.owner)
    if (capRoom < money) {
      money = capRoom < 0n ? 0n : capRoom
      binding = "Cap"
    }
  }
  return { money, binding }
}

/**
 * Captures a run's charges up to its meter, per segment; the keys name the cumulative target, so a repeat is a no-op.
 */
const capture = (ledger: Ledger, owner: string, hold: string, meter: AttemptMeter, at: number): bigint => {
  const before = ledger.arrears
  const captured: Charges = ledger.chargesOn(hold)
  for (const segment of segments) {
    const target = meter.charges[segment]
    const amount = target - captured.bySegment[segment]
    if (amount > 0n) ledger.capture(`capture/${hold}/${segment}/${target}`, at, { hold, owner, segment, amount })
  }
  return ledger.arrears - before
}

/**
 * Meters every run of the subject, captures what accrued, finishes released runs and tops up the holds of live ones;
 * answers what money allows the controller now.
 */
export const settle = (ledger: Ledger, pricebook: Pricebook, billed: BillingSubject, now: number): Settled => {
  const subject = shrinkingRooms(ledger, billed)
  const meters = new Map<string, AttemptMeter>()
  let arrearsPosted = 0n
  let wakeAt: number | undefined
  const wake = (at: number) => {
    if (at > now && (wakeAt === undefined || at < wakeAt)) wakeAt = at
  }
  const live: Array<{ readonly facts: AttemptFacts; readonly hold: string; readonly meter: AttemptMeter }> = []
  for (const facts of subject.attempts) {
    const meter = meterAttempt(facts, ruleOf(pricebook, facts.variant), now)
    meters.set(facts.name, meter)
    const hold = holdIdOf(subject.owner, facts.name)
    // A live run without any hold lost its launch hold with a commit the store refused (the server's ledger was
    // rebuilt from the store): it is held again under the same key, so it is billed like any other.
    if (!ledger.holds.has(hold) && facts.releasedAt === undefined) {
      holdLaunch(ledger, pricebook, subject.owner, facts.name, facts.variant, now)
    }
    // Only runs with an open hold are billed: a run whose hold ended was finished (a restart replays facts too).
    if (!ledger.holds.has(hold) || ledger.holds.get(hold)!.state !== "Open") continue
    arrearsPosted += capture(ledger, subject.owner, hold, meter, now)
    if (meter.final) ledger.release(`release/${hold}`, now, hold)
    else {
      live.push({ facts, hold, meter })
      if (facts.releasedAt !== undefined) wake(facts.releasedAt)
    }
  }
  const fundedUntil = topUp(ledger, subject, live, now)
  const funding = fundingOf(ledger, pricebook, subject, live.length > 0, fundedUntil, now)
  if (fundedUntil !== undefined) wake(fundedUntil.at - stopLeadMs > now ? fundedUntil.at - stopLeadMs : fundedUntil.at)
  return { funding, meters, fundedUntil: fundedUntil?.at, wakeAt, arrearsPosted }
}

/**
 * The subject with rooms that shrink as this settle holds and charges for the owner: the caller read each room before
 * the settle, so without this two runs topping up in one settle could each take the whole room and pass the Budget.
 * A release gives its money back to the rooms the same way.
 */
const shrinkingRooms = (ledger: Ledger, subject: BillingSubject): BillingSubject => {
  if (subject.rooms.length === 0) return subject
  const usedOf = () => ledger.chargesFor(subject.owner).total + ledger.heldBy(subject.owner)
  const usedBefore = usedOf()
  return {
    ...subject,
    get rooms() {
      const used = usedOf() - usedBefore
      return used === 0n ? subject.rooms : subject.rooms.map((room) => ({ ...room, room: room.room - used }))
    }
  }
}

interface FundedEdge {
  readonly at: number
  /** The hold could not be topped up to a full window, and what bound it. */
  readonly limitedBy: "Balance" | "Cap" | Room | undefined
}

/** Tops up each live run's hold to a window ahead, as far as money allows; answers the earliest funded edge. */
const topUp = (
  ledger: Ledger,
  subject: BillingSubject,
  live: ReadonlyArray<{ readonly facts: AttemptFacts; readonly hold: string; readonly meter: AttemptMeter }>,
  now: number
): FundedEdge | undefined => {
  let edge: FundedEdge | undefined
  for (const { facts, hold, meter } of live) {
    const rate = facts.variant.rateMicroUsdPerHour
    // What the hold still pays for: what it holds, less what the run accrued and was not charged yet.
    const unpaid = meter.exposure - ledger.chargesOn(hold).total
    const cover = () => ledger.remaining(hold) - (unpaid > 0n ? unpaid : 0n)
    const target = chargeFor(rate, holdWindowMs)
    let limitedBy: FundedEdge["limitedBy"]
    if (cover() < target) {
      const room = headroom(ledger, subject)
      const amount = minMicro(target - cover(), room.money)
      if (amount > 0n) {
        ledger.hold(`hold/${hold}/${now}`, now, {
          hold,
          owner: subject.owner,
          amount,
          expiresAt: now + holdWindowMs + holdExpiryGraceMs
        })
      }
      if (cover() < target) limitedBy = room.binding
    }
    const left = cover()
    const at = now + (left > 0n ? msFor(rate, left) : 0)
    ledger.extendExpiry(hold, at + holdExpiryGraceMs)
    if (edge === undefined || at < edge.at) edge = { at, limitedBy }
  }
  return edge
}

const roomMessage = (binding: "Balance" | "Cap" | Room, ledger: Ledger, subject: BillingSubject): string => {
  if (binding === "Balance") return `the available balance is ${formatMicroUsd(ledger.available)} USD`
  if (binding === "Cap") {
    return `maxCostUSD ${formatMicroUsd(subject.capMicro ?? 0n)} leaves ${
      formatMicroUsd(headroom(ledger, subject).money)
    } USD`
  }
  return `Budget ${binding.name} has ${formatMicroUsd(binding.room < 0n ? 0n : binding.room)} USD left this period`
}

const budgetOf = (
  binding: "Balance" | "Cap" | Room
): { readonly budget?: string } => (typeof binding === "object" ? { budget: binding.name } : {})

const fundingOf = (
  ledger: Ledger,
  pricebook: Pricebook,
  subject: BillingSubject,
  running: boolean,
  edge: FundedEdge | undefined,
  now: number
): Funding => {
  const room = headroom(ledger, subject)
  const initialHold = (variant: Variant) => initialHoldOf(pricebook, variant)
  const arrears = ledger.arrears
  const blocked = arrears > 0n
    ? blockedBy.arrears(arrears)
    : blockingOf(room.binding, room.money, subject, ledger, pricebook)
  const launchBudget = arrears > 0n ? 0n : room.money
  let stop: Funding["stop"]
  if (running && edge !== undefined && edge.limitedBy !== undefined && edge.at - now <= stopLeadMs) {
    const reason = edge.limitedBy === "Cap" ? "MaxCostReached" as const : "FundingLost" as const
    stop = {
      reason,
      at: edge.at,
      message: `Funds held pay until ${iso(edge.at)}: ${roomMessage(edge.limitedBy, ledger, subject)}.`,
      ...budgetOf(edge.limitedBy)
    }
  } else if (!running && subject.nextVariant !== undefined && launchBudget < initialHold(subject.nextVariant)) {
    // Nothing runs and the next run's hold does not fit: a Job that ran stays stopped for money; one that never ran
    // waits.
    if (room.binding === "Cap") {
      stop = {
        reason: "MaxCostReached",
        at: now,
        message: `maxCostUSD ${formatMicroUsd(subject.capMicro ?? 0n)} is reached.`
      }
    } else if (subject.hasRun) {
      stop = {
        reason: "FundingLost",
        at: now,
        message: `The next run's hold of ${formatMicroUsd(initialHold(subject.nextVariant))} USD does not fit: ${
          roomMessage(room.binding, ledger, subject)
        }.`,
        ...budgetOf(room.binding)
      }
    }
  }
  return { launchBudget, initialHold, blocked, stop }
}

/**
 * The blocking reasons (spec: Estimate.blockingReasons — the code a real create would return, the amounts and a fix),
 * one constructor per cause: the controller's Funded condition and the estimate say the same words.
 */
export const blockedBy = {
  arrears: (arrears: bigint): Blocking => ({
    code: "ArrearsOutstanding",
    message: `${formatMicroUsd(arrears)} USD of charges are unpaid; new work waits until they are paid.`,
    fix: "Add credits (a TopUp); they pay the arrears first."
  }),
  balance: (hold: bigint, available: bigint): Blocking => ({
    code: "InsufficientCredits",
    message: `A run's first hold is ${formatMicroUsd(hold)} USD; the available balance is ${
      formatMicroUsd(available)
    } USD.`,
    fix: `Add at least ${
      formatMicroUsd(hold - available)
    } USD of credits with a TopUp, or choose cheaper capacity (placement.maxRateUSDPerHour, interruptible: Allow).`
  }),
  /** `cap` as the spec writes it; `room` what it leaves after charges and holds. */
  cap: (hold: bigint, cap: string, room: bigint): Blocking => ({
    code: "BudgetExceeded",
    message: `A run's first hold is ${formatMicroUsd(hold)} USD; spec.maxCostUSD is ${cap}, which leaves ${
      formatMicroUsd(room)
    } USD.`,
    fix: `Raise spec.maxCostUSD by at least ${formatMicroUsd(hold - room)} USD.`
  }),
  budget: (hold: bigint, name: string, room: bigint): Blocking => ({
    code: "BudgetExceeded",
    budget: name,
    message: `A run's first hold is ${formatMicroUsd(hold)} USD; Budget ${name} has ${
      formatMicroUsd(room < 0n ? 0n : room)
    } USD left this period.`,
    fix: `Raise Budget ${name}'s amountUSD, or wait for its next period.`
  })
}

const blockingOf = (
  binding: "Balance" | "Cap" | Room,
  money: bigint,
  subject: BillingSubject,
  ledger: Ledger,
  pricebook: Pricebook
): Blocking | undefined => {
  const variant = subject.nextVariant
  if (variant === undefined) return undefined
  const hold = initialHoldOf(pricebook, variant)
  if (money >= hold) return undefined
  if (binding === "Balance") return blockedBy.balance(hold, ledger.available)
  if (binding === "Cap") return blockedBy.cap(hold, formatMicroUsd(subject.capMicro ?? 0n), money)
  return blockedBy.budget(hold, binding.name, money)
}

/** Places a launched run's first hold (the controller launched only what `launchBudget` pays for). */
export const holdLaunch = (
  ledger: Ledger,
  pricebook: Pricebook,
  owner: string,
  attempt: string,
  variant: Variant,
  now: number
): boolean => {
  const hold = holdIdOf(owner, attempt)
  const result = ledger.hold(`launch/${hold}`, now, {
    hold,
    owner,
    amount: initialHoldOf(pricebook, variant),
    expiresAt: now + holdWindowMs + holdExpiryGraceMs
  })
  return result._tag === "Held"
}

// ---------------------------------------------------------------------------------------------------------------------
// The display copy (spec: Conventions 3 — status.cost is a copy of the ledger)

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

export interface CostStatus {
  readonly totalUSD: string
  readonly heldUSD: string
  readonly limitUSD?: string
  readonly rateUSDPerHour: string
  readonly fundedUntilTime?: string
  readonly final: boolean
  readonly bySegment: Readonly<Record<string, unknown>>
}

const prefixOf = (segment: Segment): string => segment.charAt(0).toLowerCase() + segment.slice(1)

/** status.cost of an object: sums from the ledger, seconds from the meters of its runs (spec: Cost, CostSegments). */
export const costStatusOf = (
  ledger: Ledger,
  owner: string,
  settled: Settled,
  options: { readonly capMicro: bigint | undefined; readonly final: boolean }
): CostStatus => {
  const charges = ledger.chargesFor(owner)
  const meters = [...settled.meters.values()]
  const seconds = segmentSeconds(meters)
  const bySegment: Record<string, unknown> = {}
  const covered: Array<Segment> = []
  for (const segment of segments) {
    const prefix = prefixOf(segment)
    const charged = seconds.charged[segment]
    const coveredSeconds = seconds.covered[segment]
    // Spec: bootSeconds is omitted when there was none (so are the other segments' empty fields).
    if (charged > 0 || charges.bySegment[segment] > 0n) {
      bySegment[`${prefix}Seconds`] = charged
      bySegment[`${prefix}USD`] = formatMicroUsd(charges.bySegment[segment])
    }
    if (coveredSeconds > 0) {
      bySegment[`${prefix}CoveredSeconds`] = coveredSeconds
      covered.push(segment)
    }
  }
  if (covered.length > 0) bySegment["coveredByNodus"] = covered
  let rate = 0n
  for (const meter of meters) if (!meter.final) rate += meter.rateMicroUsdPerHour
  const held = ledger.heldBy(owner)
  const cost: Mutable<CostStatus> = {
    totalUSD: formatMicroUsd(charges.total),
    heldUSD: formatMicroUsd(held),
    rateUSDPerHour: formatMicroUsd(rate),
    final: options.final && held === 0n && meters.every((meter) => meter.final),
    bySegment
  }
  if (options.capMicro !== undefined) cost.limitUSD = formatMicroUsd(options.capMicro)
  if (settled.fundedUntil !== undefined) cost.fundedUntilTime = iso(settled.fundedUntil)
  return cost
}
