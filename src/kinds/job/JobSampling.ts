/**
 * The sampled part of a Job's estimate (spec: Estimate — costUSD, overheadUSD, startup.cold; docs/billing.md,
 * "Estimates"): the bands come from runs of the Job on the chosen variant, simulated by a `RunSampler` (the
 * simulator's is src/backends/sim/RunSampler.ts, run on a worker thread by the server). This module decides what to
 * sample and turns the samples into bands. It is pure, and its work is bounded whatever the Job declares:
 *
 * - **Runs.** A sampled run simulates at most `runWorkMsMax` of work. A longer run that keeps its progress across
 *   interruptions is the sampled run as its first chunk plus (W − B)/B independent steady chunks (the sampled run
 *   without its first boot and last teardown), summed as a normal approximation (core/billing/CostBands.ts). A run
 *   that keeps nothing (Ephemeral, or onInterruption Fail) is simulated whole: it ends after a bounded number of
 *   attempts, so its simulation costs attempts, not hours.
 * - **Indexes.** A Job of up to `wholeJobCompletionsMax` indexes whose whole work fits the bound is simulated whole;
 *   a bigger one is sampled one index at a time, and its total is the normal approximation of the sum of its
 *   indexes: the work no longer grows with completions.
 *
 * Runs sampled whole keep the bands they always had: the order statistics of the runs. A Job's total used to be drawn
 * 400 times from the sampled runs (a bootstrap of 400 × completions draws); measured against Jobs actually simulated,
 * those draws put the p90 below the 90th percentile in 6 of 30 seeds at 8 indexes and 15 of 30 at 40 (they do not
 * know how far the runs' mean is off, and that error grows with the indexes), the normal sum in 1 and 2 of 30.
 */
import {
  type Band,
  chunkedRunEstimate,
  normalBand,
  orderStatisticBand,
  percentile,
  sumOf
} from "../../core/billing/CostBands.ts"
import type { Pricebook } from "../../core/billing/Pricebook.ts"
import type { Variant } from "../../core/capacity/Offering.ts"
import { defaultExpectedWorkMs } from "../../core/capacity/Placement.ts"
import type { ProviderModel } from "../../core/capacity/ProviderModels.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs } from "../../core/StatusText.ts"
import { formatDurationMs } from "../../core/Units.ts"
import { continuityOf } from "./JobMachine.ts"
import type { JobSpecType } from "./JobSchema.ts"

/** Runs per estimate: enough for a stable p90 at request speed (bench:estimate measures it). */
export const estimateSamples = 200

/**
 * Simulated work an estimate affords (samples × the work of one sampled run): a long run gets fewer samples, down to
 * `estimateSamplesMin`, and its p90 — an upper confidence bound — widens accordingly instead of the request slowing.
 */
export const estimateWorkBudgetMs = 200 * 6 * Limits.hourMs
export const estimateSamplesMin = 50

/**
 * Jobs of up to this many indexes are simulated whole (when their work fits the bound); bigger ones one index at a
 * time.
 */
export const wholeJobCompletionsMax = 4

/** Checkpoint size the estimate assumes for a checkpointed Job (its size is not declared before it runs). */
export const assumedCheckpointBytes = Limits.GiB

/**
 * The most work one sampled run simulates; longer runs are extended from it. A checkpointed run's simulation costs
 * about one engine event per checkpoint, so a sampled run of 48 hours of work, 50 times, is about 10 ms on one core
 * (bench:estimate), and 48 hours keeps every run of two days or less estimated as it always was.
 */
export const runWorkMsMax = 48 * Limits.hourMs

/** One simulated run: its final charges, the overhead among them, and what it paid once. */
export interface RunSample {
  /** Every attempt's final metered charge, micro-USD. */
  readonly cost: bigint
  /** Boot, Restore and Teardown charges, micro-USD. */
  readonly overhead: bigint
  /** What the run pays once whatever its length: the first attempt's Boot and the last one's Teardown, micro-USD. */
  readonly oneOff: bigint
  /** From the capacity request to the program's start on the first attempt; undefined when it never booted. */
  readonly coldStartMs: number | undefined
}

/** What a RunSampler simulates. */
export interface RunRequest {
  readonly spec: JobSpecType
  readonly variant: Variant
  readonly model: ProviderModel
  readonly pricebook: Pricebook
  readonly seed: string
  readonly samples: number
  /** One index of the Job (completions 1) instead of the whole Job. */
  readonly perIndex: boolean
  /** Work of each run (of each index): the declared duration, or the first chunk of a longer run. */
  readonly workMs: number
}

/**
 * Runs the Job (or one index of it) `samples` times on the variant, each on its own hosts, every draw from the seed.
 * Deterministic: the same request gives the same samples.
 */
export type RunSampler = (request: RunRequest) => ReadonlyArray<RunSample>

/** What the sampled part depends on (the server keys its cache by the same). */
export interface SampleRequest {
  readonly spec: JobSpecType
  readonly variant: Variant
  readonly model: ProviderModel
  readonly pricebook: Pricebook
  readonly seed: string
}

export interface TextBand {
  readonly p50: string
  readonly p90: string
}

/** The sampled part of an estimate: its cost bands and cold start, as `status.estimate` shows them. */
export interface SampledPart {
  readonly costUSD: TextBand
  readonly overheadUSD: TextBand
  /** Undefined when no sampled run booted. */
  readonly cold: TextBand | undefined
}

/** A request to a sampler on another thread (src/runtime/WorkerSampler.ts, src/backends/sim/EstimateWorker.ts). */
export interface SampleMessage {
  readonly id: number
  readonly request: SampleRequest
}

/** Its answer: the sampled part, or why there is none. */
export type SampleReply =
  | { readonly id: number; readonly part: SampledPart }
  | { readonly id: number; readonly error: string }

interface Plan {
  readonly perIndex: boolean
  /** Work of each sampled run. */
  readonly workMs: number
  /** Work past the sampled run, each index (0: the run is sampled whole). */
  readonly extraMs: number
  readonly samples: number
  /** Indexes the total sums (1: the sampled runs are whole Jobs). */
  readonly indexes: number
}

/** Whether a run keeps its progress across interruptions, so that a long one is a sum of independent chunks. */
const keepsProgress = (spec: JobSpecType): boolean =>
  continuityOf(spec) !== "Ephemeral" && spec.recovery.onInterruption !== "Fail"

const planOf = (spec: JobSpecType, workMsMax: number): Plan => {
  const declaredMs = durationMs(spec.expectedDuration, defaultExpectedWorkMs)
  const whole = spec.completions <= wholeJobCompletionsMax && declaredMs * spec.completions <= workMsMax
  const chunked = !whole && keepsProgress(spec) && declaredMs > workMsMax
  const workMs = chunked ? workMsMax : declaredMs
  const simulatedMs = workMs * (whole ? spec.completions : 1)
  const samples = Math.max(
    estimateSamplesMin,
    Math.min(estimateSamples, Math.floor(estimateWorkBudgetMs / Math.max(1, simulatedMs)))
  )
  return { perIndex: !whole, workMs, extraMs: declaredMs - workMs, samples, indexes: whole ? 1 : spec.completions }
}

/**
 * The band of one amount of every run (`of`): the order statistics where each run is a draw of the whole cost, else
 * the normal approximation of the first chunk and the steady ones, summed over the indexes.
 */
const bandOf = (plan: Plan, runs: ReadonlyArray<RunSample>, of: (run: RunSample) => bigint): Band => {
  const values = runs.map(of)
  if (plan.extraMs === 0 && plan.indexes === 1) return orderStatisticBand(values, runs.length)
  const steady = runs.map((run) => of(run) - run.oneOff)
  return normalBand(sumOf(chunkedRunEstimate(values, steady, plan.extraMs, plan.workMs), plan.indexes))
}

const textOf = (band: Band): TextBand => ({ p50: formatMicroUsd(band.p50), p90: formatMicroUsd(band.p90) })

const durationBand = (values: Array<number>): TextBand => {
  values.sort((a, b) => a - b)
  return {
    p50: formatDurationMs(Math.round(percentile(values, 0.5) / 1000) * 1000),
    p90: formatDurationMs(Math.round(percentile(values, 0.9) / 1000) * 1000)
  }
}

/**
 * The sampled part of the estimate of `request`, from the sampler's runs. `workMsMax` is `runWorkMsMax` but in tests,
 * which shrink it so that the runs it extends can still be simulated whole to check against.
 */
export const sampledPartOf = (
  request: SampleRequest,
  sampler: RunSampler,
  workMsMax: number = runWorkMsMax
): SampledPart => {
  const plan = planOf(request.spec, workMsMax)
  const runs = sampler({ ...request, samples: plan.samples, perIndex: plan.perIndex, workMs: plan.workMs })
  if (runs.length !== plan.samples) throw new Error(`the sampler ran ${runs.length} of ${plan.samples} runs`)
  const cold = runs.flatMap((run) => (run.coldStartMs === undefined ? [] : [run.coldStartMs]))
  return {
    costUSD: textOf(bandOf(plan, runs, (run) => run.cost)),
    overheadUSD: textOf(bandOf(plan, runs, (run) => run.overhead)),
    cold: cold.length === 0 ? undefined : durationBand(cold)
  }
}
