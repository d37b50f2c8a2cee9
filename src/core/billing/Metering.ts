/**
 * Metering (docs/billing.md, "Segments"): what a run of capacity costs, from its facts, split into the spec's cost
 * segments (spec: CostSegments):
 *
 * - Boot (Restore for a replacement after capacity loss): billing start (the capacity request) until the program
 *   started. A boot the provider failed (boot failure, node lost while booting, capacity gone) is covered: nodus pays.
 * - Running: the program started until it stopped or its stop was asked.
 * - Teardown: stop until the host was released. The billing increment's round-up and the minimum charge are added to
 *   Teardown's USD, not its seconds. A run that lost its capacity has its teardown covered.
 *
 * Charges are cumulative per run and only grow, so a driver captures the difference from what it captured before:
 * while the run lasts, whole billing increments are charged; once the host is released the final charge adds the
 * partial increment and the minimum. A boot is charged once it is known not to be covered. Pure.
 */
import { type AttemptFacts, isInterruption } from "../capacity/Capacity.ts"
import type { Segment } from "./Ledger.ts"
import { type BillingRule, chargeFor, roundDownTo, roundUpTo } from "./Pricebook.ts"

export type PerSegment<A> = Record<Segment, A>

export interface Interval {
  readonly segment: Segment
  readonly from: number
  readonly to: number
  readonly covered: boolean
}

export interface AttemptMeter {
  readonly rateMicroUsdPerHour: bigint
  /** Cumulative charge per segment so far (monotone over time: what captures must reach). */
  readonly charges: PerSegment<bigint>
  readonly total: bigint
  /** Time in each segment so far: charged and covered, as intervals (a Job counts parallel runs once). */
  readonly intervals: ReadonlyArray<Interval>
  /** The host is released: the charges are final. */
  readonly final: boolean
  /** The charge for every millisecond so far, covered or pending ones included: what the run's hold must pay. */
  readonly exposure: bigint
}

const zero = (): PerSegment<bigint> => ({ Boot: 0n, Running: 0n, Restore: 0n, Teardown: 0n })

/** A boot the provider failed: the program never started and the run ended by losing its capacity. */
const bootCoveredOf = (facts: AttemptFacts): boolean =>
  facts.bootedAt === undefined && facts.outcome !== undefined &&
  (isInterruption(facts.outcome) || facts.outcome.type === "Unavailable")

export const meterAttempt = (facts: AttemptFacts, rule: BillingRule, now: number): AttemptMeter => {
  const rate = facts.variant.rateMicroUsdPerHour
  const clip = (at: number) => Math.max(facts.requestedAt, Math.min(at, now))
  const start = facts.requestedAt
  const bootEnd = clip(facts.bootedAt ?? facts.stoppingAt ?? facts.releasedAt ?? now)
  const runEnd = facts.bootedAt === undefined ? bootEnd : clip(facts.stoppingAt ?? facts.releasedAt ?? now)
  const tearEnd = facts.stoppingAt === undefined ? runEnd : clip(facts.releasedAt ?? now)
  const bootSegment: Segment = facts.recovery ? "Restore" : "Boot"
  const bootResolved = facts.bootedAt !== undefined || facts.outcome !== undefined
  const bootCovered = bootCoveredOf(facts)
  // Covered only when the loss itself ended the run: a teardown the customer's stop began stays charged even if the
  // host is lost while it tears down (a charge never shrinks once captured).
  const lostBeforeStop = facts.stoppingAt === undefined || facts.endedAt === undefined ||
    facts.stoppingAt >= facts.endedAt
  const teardownCovered = facts.outcome !== undefined && isInterruption(facts.outcome) && lostBeforeStop
  const bootMs = bootEnd - start
  const runMs = runEnd - bootEnd
  const tearMs = tearEnd - runEnd
  const chargedBoot = bootResolved && !bootCovered ? bootMs : 0
  // A boot stopped before it resolved: its teardown is charged with the boot, once the outcome says the boot is charged
  // (charged earlier, the boot's charge would land before it later and the cumulative Teardown charge could shrink).
  const chargedTear = teardownCovered || !bootResolved ? 0 : tearMs
  const beforeTeardown = chargedBoot + runMs
  const chargedMs = beforeTeardown + chargedTear
  const final = facts.releasedAt !== undefined && now >= facts.releasedAt
  // Final: the partial increment rounds up and the minimum applies; before: whole increments only.
  const billedMs = final
    ? chargedMs === 0 ? 0 : Math.max(roundUpTo(chargedMs, rule.incrementMs), rule.minimumMs)
    : roundDownTo(chargedMs, rule.incrementMs)
  const charges = zero()
  const bootCharge = chargeFor(rate, Math.min(chargedBoot, billedMs))
  const throughRunning = chargeFor(rate, Math.min(beforeTeardown, billedMs))
  charges[bootSegment] = bootCharge
  charges.Running = throughRunning - bootCharge
  charges.Teardown = billedMs > beforeTeardown ? chargeFor(rate, billedMs) - throughRunning : 0n
  const intervals: Array<Interval> = []
  if (bootMs > 0) intervals.push({ segment: bootSegment, from: start, to: bootEnd, covered: bootCovered })
  if (runMs > 0) intervals.push({ segment: "Running", from: bootEnd, to: runEnd, covered: false })
  if (tearMs > 0) intervals.push({ segment: "Teardown", from: runEnd, to: tearEnd, covered: teardownCovered })
  return {
    rateMicroUsdPerHour: rate,
    charges,
    total: charges.Boot + charges.Restore + charges.Running + charges.Teardown,
    intervals,
    final,
    exposure: chargeFor(rate, tearEnd - start)
  }
}

/** Milliseconds covered by the union of intervals (parallel runs counted once). */
export const unionMs = (intervals: ReadonlyArray<{ readonly from: number; readonly to: number }>): number => {
  if (intervals.length === 0) return 0
  const sorted = [...intervals].sort((a, b) => a.from - b.from)
  let total = 0
  let from = sorted[0]!.from
  let to = sorted[0]!.to
  for (const interval of sorted) {
    if (interval.from > to) {
      total += to - from
      from = interval.from
      to = interval.to
    } else if (interval.to > to) to = interval.to
  }
  return total + to - from
}

/**
 * Seconds per segment over many runs, charged and covered, each a union (spec: "parallel allocations counted once").
 */
export const segmentSeconds = (
  meters: ReadonlyArray<AttemptMeter>
): { readonly charged: PerSegment<number>; readonly covered: PerSegment<number> } => {
  const charged: PerSegment<number> = { Boot: 0, Running: 0, Restore: 0, Teardown: 0 }
  const covered: PerSegment<number> = { Boot: 0, Running: 0, Restore: 0, Teardown: 0 }
  for (const segment of Object.keys(charged) as Array<Segment>) {
    const of = (isCovered: boolean) =>
      meters.flatMap((meter) =>
        meter.intervals.filter((interval) => interval.segment === segment && interval.covered === isCovered)
      )
    charged[segment] = Math.floor(unionMs(of(false)) / 1000)
    covered[segment] = Math.floor(unionMs(of(true)) / 1000)
  }
  return { charged, covered }
}
