/**
 * What every kind's estimate is made of (spec: Estimate; docs/billing.md, "Estimates"): what it reads now, what it
 * returns, and the parts the Job's, the Sandbox's and the Function's estimators share — the header, the placement, a
 * run's prices, the preview and what would block a real create. Pure.
 */
import { blockedBy, type Blocking, initialHoldOf, type Room } from "../core/billing/Billing.ts"
import { minimumChargeOf, type Pricebook } from "../core/billing/Pricebook.ts"
import type { Offering, Variant } from "../core/capacity/Offering.ts"
import {
  type Candidate,
  choose,
  explain,
  type Market,
  type PlacementRequest,
  rank,
  type Ranking,
  type RunProfile
} from "../core/capacity/Placement.ts"
import type { ProviderModel } from "../core/capacity/ProviderModels.ts"
import * as Limits from "../core/Limits.ts"
import { formatMicroUsd, parseMicroUsd } from "../core/Money.ts"
import { iso } from "../core/StatusText.ts"

/** How long the prices of an estimate stay current (spec: Estimate.validUntil). */
export const estimateValidityMs = 15 * Limits.minuteMs

export interface Funds {
  readonly available: bigint
  readonly arrears: bigint
  readonly rooms: ReadonlyArray<Room>
}

/** What every kind's estimate reads now, whatever its spec. */
export interface EstimateBase {
  readonly catalog: ReadonlyArray<Offering>
  /** Provider models per variant (the fleet's: boots, failures, interruptions). */
  readonly models: (variant: Variant) => ProviderModel
  /** Capacity now, for the placement preview. */
  readonly market: Market
  readonly pricebook: Pricebook
  readonly now: number
  readonly funds: Funds
}

export type EstimateJson = Record<string, unknown>

/**
 * What every kind's estimator returns (the Job's, the Sandbox's and the Function's, each built with the helpers of
 * this module): `status.estimate` and why a real create would be refused now.
 */
export interface KindEstimate {
  /** `status.estimate`. */
  readonly estimate: EstimateJson
  /** Why a real create would fail now (empty: it would be admitted), with the Budget that refused where one did. */
  readonly blocking: ReadonlyArray<Blocking>
}

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
