/**
 * What a scenario run cost, from the run's ledger (docs/simulator.md, "Cost"): the charges the production ledger posted
 * for each object (core/billing/Ledger.ts, by cost segment: spec CostSegments), summed over the whole run, per Job
 * policy (interruptible, continuity, profile), per Job class (the workload's name), for the Sandbox sessions and for
 * the Functions, and what nodus covered (a boot the provider failed, the teardown of a run that lost its capacity;
 * docs/billing.md, "Segments"): seconds from the runs' meters and what they would have cost at the run's rate, which no
 * posting holds.
 */
import { type Ledger, type Segment, segments } from "../../core/billing/Ledger.ts"
import { meterAttempt } from "../../core/billing/Metering.ts"
import { chargeFor, type Pricebook, ruleOf } from "../../core/billing/Pricebook.ts"
import { type AttemptFacts, isInterruption } from "../../core/capacity/Capacity.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { continuityOf } from "../../kinds/job/JobMachine.ts"
import type { JobSpecType } from "../../kinds/job/JobSchema.ts"

/** Charges by segment (USD strings, as the ledger posted them) and what nodus covered. */
export interface SegmentCost {
  readonly totalUSD: string
  readonly bySegment: Readonly<Record<Segment, string>>
  /** Time nodus paid for (not posted to the customer): seconds, and its value at the run's rate. */
  readonly covered: { readonly seconds: number; readonly usd: string }
}

/** A group of objects (a policy, a Job class, the Sandboxes) and what the ledger charged them. */
export interface CostGroup extends SegmentCost {
  /** How many objects (Jobs or Sandboxes) the group has. */
  readonly objects: number
}

export interface CostSummary {
  /** The pricebook the run was billed with. */
  readonly pricebook: string
  /** Every charge of the run: the Jobs' and the Sandboxes'. */
  readonly total: SegmentCost
  readonly jobs: CostGroup
  /** Per Job policy, keyed `interruptible=<…> continuity=<…> profile=<…>` (defaults filled in). */
  readonly byPolicy: Readonly<Record<string, CostGroup>>
  /** Per Job class: the workload name of the scenario the Job came from. */
  readonly byClass: Readonly<Record<string, CostGroup>>
  /** The agent sessions' Sandboxes, when the scenario has some. */
  readonly sandboxes?: CostGroup
  /** The Functions' workers, when the scenario has some. */
  readonly functions?: CostGroup
}

/** A Job's policy as placement and recovery read it (Placement.ts, JobMachine.continuityOf: their defaults). */
export const policyOf = (spec: JobSpecType): string =>
  `interruptible=${spec.placement.interruptible ?? "Never"} continuity=${continuityOf(spec)} profile=${
    spec.placement.profile ?? "Balanced"
  }`

interface Sums {
  objects: number
  readonly bySegment: Record<Segment, bigint>
  coveredMs: number
  coveredMicro: bigint
}

const emptySums = (): Sums => ({
  objects: 0,
  bySegment: { Boot: 0n, Running: 0n, Restore: 0n, Teardown: 0n },
  coveredMs: 0,
  coveredMicro: 0n
})

const add = (into: Sums, from: Sums) => {
  into.objects += from.objects
  for (const segment of segments) into.bySegment[segment] += from.bySegment[segment]
  into.coveredMs += from.coveredMs
  into.coveredMicro += from.coveredMicro
}

const costOf = (sums: Sums): SegmentCost => {
  let total = 0n
  const bySegment = {} as Record<Segment, string>
  for (const segment of segments) {
    total += sums.bySegment[segment]
    bySegment[segment] = formatMicroUsd(sums.bySegment[segment])
  }
  return {
    totalUSD: formatMicroUsd(total),
    bySegment,
    covered: { seconds: Math.floor(sums.coveredMs / 1000), usd: formatMicroUsd(sums.coveredMicro) }
  }
}

const groupOf = (sums: Sums): CostGroup => ({ objects: sums.objects, ...costOf(sums) })

/**
 * The run's owners (by uid) and their groups. Owners are registered as they are created; their charges are read from
 * the ledger once the run is over (a deleted Job is still charged until its hosts are released). Only the runs that
 * may hold covered time (interrupted, or never given capacity) are kept, so a million-Job run keeps a string per Job.
 */
export class CostAccounts {
  private readonly jobs = new Map<string, { readonly policy: string; readonly jobClass: string }>()
  private readonly sandboxes = new Set<string>()
  private readonly functions = new Set<string>()
  private readonly coverable: Array<{ readonly owner: string; readonly facts: AttemptFacts }> = []
  private readonly ledger: Ledger
  private readonly pricebook: Pricebook

  constructor(ledger: Ledger, pricebook: Pricebook) {
    this.ledger = ledger
    this.pricebook = pricebook
  }

  job(uid: string, jobClass: string, spec: JobSpecType): void {
    this.jobs.set(uid, { policy: policyOf(spec), jobClass })
  }

  sandbox(uid: string): void {
    this.sandboxes.add(uid)
  }

  function(uid: string): void {
    this.functions.add(uid)
  }

  /** An object's runs, once it is deleted or the run is over: those that may hold covered time are kept. */
  runs(uid: string, attempts: ReadonlyArray<AttemptFacts>): void {
    for (const facts of attempts) {
      if (facts.outcome !== undefined && (isInterruption(facts.outcome) || facts.outcome.type === "Unavailable")) {
        this.coverable.push({ owner: uid, facts })
      }
    }
  }

  summary(now: number): CostSummary {
    const covered = new Map<string, { ms: number; micro: bigint }>()
    for (const { owner, facts } of this.coverable) {
      const meter = meterAttempt(facts, ruleOf(this.pricebook, facts.variant), now)
      for (const interval of meter.intervals) {
        if (!interval.covered) continue
        const entry = covered.get(owner) ?? { ms: 0, micro: 0n }
        entry.ms += interval.to - interval.from
        entry.micro += chargeFor(meter.rateMicroUsdPerHour, interval.to - interval.from)
        covered.set(owner, entry)
      }
    }
    const sumsOf = (uid: string): Sums => {
      const charges = this.ledger.chargesFor(uid)
      const coveredHere = covered.get(uid)
      return {
        objects: 1,
        bySegment: { ...charges.bySegment },
        coveredMs: coveredHere?.ms ?? 0,
        coveredMicro: coveredHere?.micro ?? 0n
      }
    }
    const jobs = emptySums()
    const byPolicy = new Map<string, Sums>()
    const byClass = new Map<string, Sums>()
    const into = (groups: Map<string, Sums>, key: string, sums: Sums) => {
      let group = groups.get(key)
      if (group === undefined) groups.set(key, group = emptySums())
      add(group, sums)
    }
    for (const [uid, { policy, jobClass }] of this.jobs) {
      const sums = sumsOf(uid)
      add(jobs, sums)
      into(byPolicy, policy, sums)
      into(byClass, jobClass, sums)
    }
    const sandboxes = emptySums()
    for (const uid of this.sandboxes) add(sandboxes, sumsOf(uid))
    const functions = emptySums()
    for (const uid of this.functions) add(functions, sumsOf(uid))
    const total = emptySums()
    add(total, jobs)
    add(total, sandboxes)
    add(total, functions)
    const sorted = (groups: Map<string, Sums>) =>
      Object.fromEntries([...groups].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, sums]) => [key, groupOf(sums)]))
    return {
      pricebook: this.pricebook.version,
      total: costOf(total),
      jobs: groupOf(jobs),
      byPolicy: sorted(byPolicy),
      byClass: sorted(byClass),
      ...(this.sandboxes.size === 0 ? {} : { sandboxes: groupOf(sandboxes) }),
      ...(this.functions.size === 0 ? {} : { functions: groupOf(functions) })
    }
  }
}
