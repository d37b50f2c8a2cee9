/**
 * The estimate of a Job (spec: Estimate; Create semantics 1 and 3; docs/billing.md, "Estimates"): where it would be
 * placed now, what its first hold is, what it will cost as p50/p90 bands, and what would block a real create. Pure:
 *
 * - `placementOf` ranks the catalog for the Job and chooses over the market now (cheap; done per request, since
 *   what is free changes).
 * - The bands are the sampled part (JobSampling.ts): runs of the Job on the chosen variant under its provider model,
 *   simulated by a RunSampler. They depend only on the spec, the variant, the model and the pricebook, so a server
 *   may compute them elsewhere and reuse them.
 * - `placedEstimate` assembles `status.estimate` from both, with the funds (the ledger's balance and arrears, the
 *   matching Budgets' rooms) giving the blocking reasons: the code, the amounts and a fix.
 */
import { initialHoldOf } from "../../core/billing/Billing.ts"
import { minimumChargeOf } from "../../core/billing/Pricebook.ts"
import type { Variant } from "../../core/capacity/Offering.ts"
import { type Candidate, choose, explain, type Market, rank, type Ranking } from "../../core/capacity/Placement.ts"
import type { ProviderModel } from "../../core/capacity/ProviderModels.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { formatDurationMs } from "../../core/Units.ts"
import { blockingReasonsOf, type EstimateBase, type EstimateJson, headerOf, type KindEstimate } from "../Estimate.ts"
import { runProfileOf } from "./JobMachine.ts"
import { type RunSampler, type SampledPart, sampledPartOf, type SampleRequest } from "./JobSampling.ts"
import type { JobSpecType } from "./JobSchema.ts"

/** A Job's estimate reads its spec and a seed beside what every kind's estimate reads. */
export interface EstimateInput extends EstimateBase {
  readonly spec: JobSpecType
  /** Seeds the sampled runs; the server's is the spec's hash, so the same spec gives the same bands. */
  readonly seed: string
}

export interface EstimatePlacement {
  readonly ranking: Ranking
  /** Capacity now, else the best match when capacity frees up (the Job would queue for it); undefined: no match. */
  readonly chosen: Candidate | undefined
}

/** The placement preview's ranking and choice over the market now. */
export const placementOf = (input: EstimateInput): EstimatePlacement => {
  const ranking = rank(input.spec, input.catalog, input.market, runProfileOf(input.spec))
  return { ranking, chosen: choose(ranking, input.market) ?? ranking.kept[0] }
}

/** What the sampled part of the estimate on `variant` depends on. */
export const sampleRequestOf = (input: EstimateInput, variant: Variant): SampleRequest => ({
  spec: input.spec,
  variant,
  model: input.models(variant),
  pricebook: input.pricebook,
  seed: input.seed
})

/** The estimate when no offering matches: no bands, nothing blocks (the Job would wait and fail). */
export const unplacedEstimate = (input: EstimateInput, ranking: Ranking): KindEstimate => ({
  estimate: {
    ...headerOf(input),
    warnings: [{
      code: "NoMatchingOffering",
      message:
        "No offering matches the resources and placement; the Job would wait until queueTimeout and fail with CapacityUnavailable."
    }],
    placementPreview: { explain: explain(ranking, undefined, input.market) }
  },
  blocking: []
})

const warningsOf = (
  variant: Variant,
  model: ProviderModel,
  market: Market
): Array<{ code: string; message: string }> => {
  // A start under a second (a Pool's host, up already) is no cold start worth a warning.
  const warnings = model.bootMedianMs < Limits.secondMs
    ? []
    : [{
      code: "ColdStart",
      message: `No warm host of the project fits; expect a cold boot of about ${formatDurationMs(model.bootMedianMs)}.`
    }]
  if (variant.interruptible) {
    warnings.push({
      code: "InterruptibleSelected",
      message:
        "Interruptible capacity was chosen by expected cost; preemptions add restore time, which the bands include."
    })
  }
  if (market.available(variant) <= 0) {
    warnings.push({ code: "NoCapacityNow", message: "No matching capacity is free now; the Job would queue for it." })
  }
  return warnings
}

/** The estimate of creating the Job now on the chosen candidate (spec: Estimate), with its sampled part. */
export const placedEstimate = (
  input: EstimateInput,
  ranking: Ranking,
  chosen: Candidate,
  sampled: SampledPart
): KindEstimate => {
  const { spec, pricebook } = input
  const variant = chosen.variant
  const model = input.models(variant)
  const hold = initialHoldOf(pricebook, variant)
  const blocking = blockingReasonsOf(spec, hold, input.funds)
  const estimate: EstimateJson = {
    ...headerOf(input),
    rateUSDPerHour: formatMicroUsd(variant.rateMicroUsdPerHour),
    holdUSD: formatMicroUsd(hold),
    minimumChargeUSD: formatMicroUsd(minimumChargeOf(pricebook, variant)),
    concurrentHoldUSD: formatMicroUsd(hold * BigInt(Math.min(spec.parallelism, spec.completions))),
    costUSD: sampled.costUSD,
    overheadUSD: sampled.overheadUSD,
    startup: {
      ...(sampled.cold === undefined ? {} : { cold: sampled.cold }),
      warm: { p50: formatDurationMs(model.warmStartMs), p90: formatDurationMs(model.warmStartMs) }
    },
    placementPreview: {
      offering: variant.offering.id,
      regionClass: variant.offering.regionClass,
      interruptible: variant.interruptible,
      warmReuse: false,
      explain: explain(ranking, chosen, input.market)
    },
    warnings: warningsOf(variant, model, input.market),
    // The spec's fields only (which Budget refused stays with the server, for budget.exceeded).
    ...(blocking.length === 0
      ? {}
      : { blockingReasons: blocking.map(({ code, message, fix }) => ({ code, message, fix })) })
  }
  return { estimate, blocking }
}

/** The whole estimate in one call, sampling with `sampler` here and now (the simulator's tests and benchmarks). */
export const estimateJob = (input: EstimateInput, sampler: RunSampler, workMsMax?: number): KindEstimate => {
  const { ranking, chosen } = placementOf(input)
  if (chosen === undefined) return unplacedEstimate(input, ranking)
  return placedEstimate(
    input,
    ranking,
    chosen,
    sampledPartOf(sampleRequestOf(input, chosen.variant), sampler, workMsMax)
  )
}
