/**
 * The estimate of a Job (spec: Estimate; Create semantics 1 and 3; docs/billing.md, "Estimates"): where it would be
 * placed now, what its first hold is, and what it will cost as p50/p90 bands. The bands come from the simulator
 * itself: a seeded Monte Carlo that runs the Job through the same core (Job controller, metering) many times over the chosen offering's provider model (boot times and failures, preemptions, node loss,
 * teardown) with the Job's declared duration (spec.expectedDuration, else an hour). A Job of many indexes is
 * sampled one index at a time, and its total sums independent draws of the per-index cost over its completions.
 *
 * The estimate reads the ledger's balance, arrears and the matching Budgets' rooms to list what would block a real
 * create (blockingReasons: the code, the amounts and a fix).
 */
import { type Blocking, blockedBy, initialHoldOf, type Room } from "../../core/billing/Billing.ts"
import { runProfileOf } from "../../core/kinds/job/JobMachine.ts"
import { type JobSpecType } from "../../core/schemas/Job.ts"
import { meterAttempt } from "../../core/billing/Metering.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd, parseMicroUsd } from "../../core/Money.ts"
import { type Offering, type Variant, variantKeyOf } from "../../core/capacity/Offering.ts"
import { type Candidate, choose, defaultExpectedWorkMs, explain, type Market, rank } from "../../core/capacity/Placement.ts"
import { minimumChargeOf, type Pricebook, ruleOf } from "../../core/billing/Pricebook.ts"
import { durationMs, iso } from "../../core/StatusText.ts"
import { formatDurationMs } from "../../core/Units.ts"
import { Engine } from "./Engine.ts"
import { Prng } from "./Prng.ts"
import { type SimProviderModel, SimCapacity, type WorkloadModel } from "./SimCapacity.ts"
import { Simulation } from "./Simulation.ts"

/** Runs per estimate: enough for a stable p90 at request speed (bench:estimate measures it). */
export const estimateSamples = 200

/**
 * Simulated work an estimate affords (samples × the Job's work): a long Job gets fewer samples, down to
 * `estimateSamplesMin`, and its p90 — an upper confidence bound — widens accordingly instead of the request slowing.
 */
export const estimateWorkBudgetMs = 200 * 6 * Limits.hourMs
export const estimateSamplesMin = 50

/** Draws of the Job's total from the per-index runs (completions above one). */
export const estimateTotals = 400

/** How long the prices of an estimate stay current (spec: Estimate.validUntil). */
export const estimateValidityMs = 15 * Limits.minuteMs

/** Checkpoint size the estimate assumes for a checkpointed Job (its size is not declared before it runs). */
export const assumedCheckpointBytes = Limits.GiB

export interface Funds {
  readonly available: bigint
  readonly arrears: bigint
  readonly rooms: ReadonlyArray<Room>
}

export interface EstimateInput {
  readonly spec: JobSpecType
  readonly catalog: ReadonlyArray<Offering>
  /** Provider models per variant (the simulator's, or the server's sim backend's). */
  readonly models: (variant: Variant) => SimProviderModel
  /** Capacity now, for the placement preview. */
  readonly market: Market
  readonly pricebook: Pricebook
  readonly now: number
  readonly funds: Funds
  readonly seed: string
  readonly samples?: number
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }
type EstimateJson = Record<string, unknown>

/** Nearest-rank percentile of sorted values. */
const percentile = <A>(sorted: ReadonlyArray<A>, p: number): A => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!

const bigintOrder = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0)

interface Sample {
  readonly cost: bigint
  readonly overhead: bigint
  readonly coldStartMs: number | undefined
}

/** Jobs of up to this many indexes are simulated whole; bigger ones sum independent draws of one index. */
export const wholeJobCompletionsMax = 4

/**
 * The Job (or one index of it, `perIndex`), run `samples` times on the chosen variant with capacity for all of them;
 * every sample draws its boot, preemptions and losses from the seeded generator.
 */
const sampleRuns = (input: EstimateInput, variant: Variant, samples: number, perIndex: boolean): ReadonlyArray<Sample> => {
  const { spec, pricebook } = input
  const shape = perIndex ? { completions: 1, parallelism: 1 } : { completions: spec.completions, parallelism: spec.parallelism }
  const one: JobSpecType = { ...spec, ...shape, placement: { ...spec.placement, offerings: [variant.offering.id], interruptible: variant.interruptible ? "Prefer" : "Never", queueTimeout: "0s" } }
  const model = input.models(variant)
  const workload: WorkloadModel = {
    durationMs: durationMs(spec.expectedDuration, defaultExpectedWorkMs),
    exitCode: 0,
    runFailureRate: 0,
    oomRate: 0,
    checkpointSizeBytes: assumedCheckpointBytes,
    checkpointFailureRate: 0,
    suspendCheckpointFailureRate: 0
  }
  const key = variantKeyOf(variant)
  // One simulation runs every sample as its own Job on its own hosts: none waits for another.
  const models = (candidate: Variant): SimProviderModel => ({ ...model, capacity: variantKeyOf(candidate) === key ? samples * shape.parallelism : 0 })
  const engine = new Engine(input.now)
  const capacity = new SimCapacity(engine, new Prng(input.seed).derive("samples"), models)
  const simulation = new Simulation({ engine, capacity, catalog: [variant.offering], trace: { record: () => {} } })
  const jobs = Array.from({ length: samples }, (_, index) => simulation.submit("estimate", `sample-${index}`, one, workload))
  engine.run(Number.POSITIVE_INFINITY)
  // Every run is over: its final charges are what billing captures (Metering is the one source of both).
  const rule = ruleOf(pricebook, variant)
  const out: Array<Sample> = []
  for (const job of jobs) {
    let cost = 0n
    let overhead = 0n
    for (const attempt of job.attempts) {
      const meter = meterAttempt(attempt, rule, engine.now)
      cost += meter.total
      overhead += meter.total - meter.charges.Running
    }
    const first = job.attempts[0]
    out.push({ cost, overhead, coldStartMs: first?.bootedAt === undefined ? undefined : first.bootedAt - first.requestedAt })
  }
  return out
}

/** Totals of `completions` independent per-index draws (one run per index), `estimateTotals` times. */
const totals = (values: ReadonlyArray<bigint>, completions: number, random: Prng): Array<bigint> => {
  if (completions === 1) return [...values]
  const out: Array<bigint> = []
  for (let draw = 0; draw < estimateTotals; draw++) {
    let total = 0n
    for (let index = 0; index < completions; index++) total += values[random.int(0, values.length - 1)]!
    out.push(total)
  }
  return out
}

/**
 * The p50 of the draws, and for p90 the order statistic that bounds the true 90th percentile from above with 95 %
 * confidence (normal approximation of the binomial: rank n·0.9 + 1.645·√(n·0.9·0.1)). A plain sample p90 falls below
 * the true one about half the time, and a band users read as "covers 90 % of runs" must not (docs/billing.md). `n`
 * is the number of independent runs behind the values (totals drawn from them know no more than the runs do).
 */
const band = (values: Array<bigint>, n: number) => {
  values.sort(bigintOrder)
  const upper = Math.min(1, (n * 0.9 + 1.645 * Math.sqrt(n * 0.9 * 0.1)) / n)
  return { p50: formatMicroUsd(percentile(values, 0.5)), p90: formatMicroUsd(percentile(values, upper)) }
}

const durationBand = (values: Array<number>) => {
  values.sort((a, b) => a - b)
  return { p50: formatDurationMs(Math.round(percentile(values, 0.5) / 1000) * 1000), p90: formatDurationMs(Math.round(percentile(values, 0.9) / 1000) * 1000) }
}

/** What a real create would be refused with now (spec: Create semantics 3), with amounts and a fix. */
export const blockingReasonsOf = (spec: JobSpecType, holdMicro: bigint, funds: Funds): ReadonlyArray<Blocking> => {
  const reasons: Array<Blocking> = []
  if (funds.arrears > 0n) reasons.push(blockedBy.arrears(funds.arrears))
  else if (holdMicro > funds.available) reasons.push(blockedBy.balance(holdMicro, funds.available))
  if (spec.maxCostUSD !== undefined && parseMicroUsd(spec.maxCostUSD) < holdMicro) reasons.push(blockedBy.cap(holdMicro, spec.maxCostUSD, parseMicroUsd(spec.maxCostUSD)))
  for (const room of funds.rooms) if (room.room < holdMicro) reasons.push(blockedBy.budget(holdMicro, room.name, room.room))
  return reasons
}

/** The estimate of creating the Job now (spec: Estimate), as `status.estimate` shows it. */
export const estimateJob = (input: EstimateInput): EstimateJson => {
  const { spec, pricebook, now } = input
  const ranking = rank(spec, input.catalog, input.market, runProfileOf(spec))
  const estimate: Mutable<EstimateJson> = { pricebookVersion: pricebook.version, validUntil: iso(now + estimateValidityMs) }
  // Capacity now, else the best match when capacity frees up (the Job would queue for it).
  const chosen: Candidate | undefined = choose(ranking, input.market) ?? ranking.kept[0]
  const warnings: Array<{ code: string; message: string }> = []
  if (chosen === undefined) {
    warnings.push({ code: "NoMatchingOffering", message: "No offering matches the resources and placement; the Job would wait until queueTimeout and fail with CapacityUnavailable." })
    estimate["warnings"] = warnings
    estimate["placementPreview"] = { explain: explain(ranking, undefined, input.market) }
    return estimate
  }
  const variant = chosen.variant
  const hold = initialHoldOf(pricebook, variant)
  const slots = Math.min(spec.parallelism, spec.completions)
  const concurrent = hold * BigInt(slots)
  const perIndex = spec.completions > wholeJobCompletionsMax
  const workMs = durationMs(spec.expectedDuration, defaultExpectedWorkMs) * (perIndex ? 1 : spec.completions)
  const affordable = Math.max(estimateSamplesMin, Math.min(estimateSamples, Math.floor(estimateWorkBudgetMs / Math.max(1, workMs))))
  const samples = sampleRuns(input, variant, input.samples ?? affordable, perIndex)
  const draws = perIndex ? spec.completions : 1
  const random = new Prng(input.seed).derive("totals")
  const model = input.models(variant)
  estimate["rateUSDPerHour"] = formatMicroUsd(variant.rateMicroUsdPerHour)
  estimate["holdUSD"] = formatMicroUsd(hold)
  estimate["minimumChargeUSD"] = formatMicroUsd(minimumChargeOf(pricebook, variant))
  estimate["concurrentHoldUSD"] = formatMicroUsd(concurrent)
  estimate["costUSD"] = band(totals(samples.map((sample) => sample.cost), draws, random), samples.length)
  estimate["overheadUSD"] = band(totals(samples.map((sample) => sample.overhead), draws, random), samples.length)
  const cold = samples.flatMap((sample) => (sample.coldStartMs === undefined ? [] : [sample.coldStartMs]))
  estimate["startup"] = {
    ...(cold.length === 0 ? {} : { cold: durationBand(cold) }),
    warm: { p50: formatDurationMs(model.warmStartMs), p90: formatDurationMs(model.warmStartMs) }
  }
  estimate["placementPreview"] = {
    offering: variant.offering.id,
    regionClass: variant.offering.regionClass,
    interruptible: variant.interruptible,
    warmReuse: false,
    explain: explain(ranking, chosen, input.market)
  }
  warnings.push({ code: "ColdStart", message: `No warm host of the project fits; expect a cold boot of about ${formatDurationMs(model.bootMedianMs)}.` })
  if (variant.interruptible) warnings.push({ code: "InterruptibleSelected", message: "Interruptible capacity was chosen by expected cost; preemptions add restore time, which the bands include." })
  if (input.market.available(variant) <= 0) warnings.push({ code: "NoCapacityNow", message: "No matching capacity is free now; the Job would queue for it." })
  estimate["warnings"] = warnings
  const blocking = blockingReasonsOf(spec, hold, input.funds)
  // The spec's fields only (which Budget refused stays with the server, for budget.exceeded).
  if (blocking.length > 0) estimate["blockingReasons"] = blocking.map(({ code, message, fix }) => ({ code, message, fix }))
  return estimate
}
