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
import { blockedBy, type Blocking, initialHoldOf, type Room } from "../../core/billing/Billing.ts"
import { minimumChargeOf, type Pricebook } from "../../core/billing/Pricebook.ts"
import type { Offering, Variant } from "../../core/capacity/Offering.ts"
import {
  type Candidate,
  choose,
  explain,
  type Market,
  type PlacementRequest,
  rank,
  type Ranking,
  type RunProfile
} from "../../core/capacity/Placement.ts"
import type { ProviderModel } from "../../core/capacity/ProviderModels.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd, parseMicroUsd } from "../../core/Money.ts"
import { iso } from "../../core/StatusText.ts"
import { formatDurationMs } from "../../core/Units.ts"
import { runProfileOf } from "./JobMachine.ts"
import { type RunSampler, type SampledPart, sampledPartOf, type SampleRequest } from "./JobSampling.ts"
import type { JobSpecType } from "./JobSchema.ts"

/** How long the prices of an estimate stay current (spec: Estimate.validUntil). */
export const estimateValidityMs = 15 * Limits.minuteMs

export interface Funds {
  readonly available: bigint
  readonly arrears: bigint
  readonly rooms: ReadonlyArray<Room>
}

export interface EstimateInput {
  readonly spec: JobSpecType
  readonly catalog: ReadonlyArray<Offering>
  /** Provider models per variant (the fleet's: boots, failures, interruptions). */
  readonly models: (variant: Variant) => ProviderModel
  /** Capacity now, for the placement preview. */
  readonly market: Market
  readonly pricebook: Pricebook
  readonly now: number
  readonly funds: Funds
  /** Seeds the sampled runs; the server's is the spec's hash, so the same spec gives the same bands. */
  readonly seed: string
}

export type EstimateJson = Record<string, unknown>

/**
 * What every kind's estimator returns (the Job's here; the Sandbox's and the Function's build theirs with the helpers
 * of this module): `status.estimate` and why a real create would be refused now.
 */
export interface KindEstimate {
  /** `status.estimate`. */
  readonly estimate: EstimateJson
  /** Why a real create would fail now (empty: it would be admitted), with the Budget that refused where one did. */
  readonly blocking: ReadonlyArray<Blocking>
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

/** What a real create would be refused with now (spec: Create semantics 3), with amounts and a fix. */
export const blockingReasonsOf = (
  spec: { readonly maxCostUSD?: string | undefined },
  holdMicro: bigint,
  funds: Funds
): ReadonlyArray<Blocking> => {
  const reasons: Array<Blocking> = []
  if (funds.arrears > 0n) reasons.push(blockedBy.arrears(funds.arrears))
  else if (holdMicro > funds.available) reasons.push(blockedBy.balance(holdMicro, funds.available))
  if (spec.maxCostUSD !== undefined && parseMicroUsd(spec.maxCostUSD) < holdMicro) {
    reasons.push(blockedBy.cap(holdMicro, spec.maxCostUSD, parseMicroUsd(spec.maxCostUSD)))
  }
  for (const room of funds.rooms) {
    if (room.room < holdMicro) reasons.push(blockedBy.budget(holdMicro, room.name, room.room))
  }
  return reasons
}

export const headerOf = (input: { readonly pricebook: Pricebook; readonly now: number }): EstimateJson => ({
  pricebookVersion: input.pricebook.version,
  validUntil: iso(input.now + estimateValidityMs)
})

/**
 * Where a long-running object's run would go now (a Sandbox's box, a Function's worker): the ranking of its placement,
 * and the best match with capacity now, else the best match when capacity frees up; or, when nothing matches, its
 * estimate, saying `unmatched`.
 */
export const placeForEstimate = (
  input: {
    readonly catalog: ReadonlyArray<Offering>
    readonly market: Market
    readonly pricebook: Pricebook
    readonly now: number
  },
  placement: { readonly request: PlacementRequest; readonly run: RunProfile },
  unmatched: string
): { readonly ranking: Ranking; readonly chosen: Candidate } | KindEstimate => {
  const ranking = rank(placement.request, input.catalog, input.market, placement.run)
  const chosen = choose(ranking, input.market) ?? ranking.kept[0]
  if (chosen !== undefined) return { ranking, chosen }
  return {
    estimate: {
      ...headerOf(input),
      warnings: [{ code: "NoMatchingOffering", message: unmatched }],
      placementPreview: { explain: explain(ranking, undefined, input.market) }
    },
    blocking: []
  }
}

/**
 * What one run on `variant` is charged at least and held first, and the object's cap (micro-USD), with their fields.
 */
export const runPricesOf = (pricebook: Pricebook, variant: Variant, maxCostUSD: string | undefined) => {
  const hold = initialHoldOf(pricebook, variant)
  const minimum = minimumChargeOf(pricebook, variant)
  return {
    hold,
    minimum,
    cap: maxCostUSD === undefined ? undefined : parseMicroUsd(maxCostUSD),
    fields: {
      rateUSDPerHour: formatMicroUsd(variant.rateMicroUsdPerHour),
      holdUSD: formatMicroUsd(hold),
      minimumChargeUSD: formatMicroUsd(minimum)
    }
  }
}

/** The placement preview of a run placed on `chosen` (never warm: an estimate does not reserve a warm host). */
export const previewOf = (ranking: Ranking, chosen: Candidate, market: Market) => ({
  offering: chosen.variant.offering.id,
  regionClass: chosen.variant.offering.regionClass,
  interruptible: chosen.variant.interruptible,
  warmReuse: false,
  explain: explain(ranking, chosen, market)
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
