/**
 * The estimate of a Function (spec: Estimate; docs/kinds/Function.md, "Estimate"): where its workers would be placed
 * now, a worker's rate and first hold, the holds of the warm workers that start at once, what would block a real
 * create, and a cost band. What a Function costs depends on its calls, which no spec says, so the band is two named
 * cases for an hour of service rather than sampled runs: p50 is its `minWorkers` kept warm for the hour (its floor),
 * p90 `maxWorkers` busy for the hour (its ceiling), neither above maxCostUSD. Pure, and cheap enough for every dry run.
 */
import { chargeFor } from "../../core/billing/Pricebook.ts"
import * as Limits from "../../core/Limits.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { formatDurationMs } from "../../core/Units.ts"
import {
  blockingReasonsOf,
  type EstimateBase,
  headerOf,
  type KindEstimate,
  placeForEstimate,
  previewOf,
  runPricesOf
} from "../Estimate.ts"
import { functionMachine } from "./FunctionMachine.ts"
import type { FunctionSpecType } from "./FunctionSchema.ts"

export type FunctionEstimateInput = EstimateBase & { readonly spec: FunctionSpecType }

export const estimateFunction = (input: FunctionEstimateInput): KindEstimate => {
  const { spec, pricebook, market } = input
  const placed = placeForEstimate(
    input,
    functionMachine.placementOf(spec),
    "No offering matches the resources; no worker would start, and calls would wait Queued until capacity that matches joins."
  )
  if ("estimate" in placed) return placed
  const { ranking, chosen } = placed
  const variant = chosen.variant
  const { hold, minimum, cap, fields } = runPricesOf(pricebook, variant, spec.maxCostUSD)
  const warm = spec.scaling.minWorkers ?? 0
  const hourOf = (workers: number) => {
    if (workers === 0) return "0"
    const charge = chargeFor(variant.rateMicroUsdPerHour, Limits.hourMs) * BigInt(workers)
    const floor = minimum * BigInt(workers)
    const atLeast = charge > floor ? charge : floor
    return formatMicroUsd(cap !== undefined && cap < atLeast ? cap : atLeast)
  }
  // Warm workers start at create, so their holds must fit now; a Function scaled to zero holds nothing until a call.
  const concurrentHold = hold * BigInt(warm)
  const blocking = warm === 0 ? [] : blockingReasonsOf(spec, concurrentHold, input.funds)
  const model = input.models(variant)
  const warnings = [{
    code: "UsageDependent",
    message:
      `The cost depends on the calls: p50 is an hour of minWorkers (${warm}) kept warm, p90 an hour of maxWorkers (${spec.scaling.maxWorkers}) busy.`
  }]
  if (warm === 0) {
    warnings.push({
      code: "ColdStart",
      message: "minWorkers is 0: a call with no worker waits for one to start (see startup.cold)."
    })
  }
  if (market.available(variant) <= 0) {
    warnings.push({
      code: "NoCapacityNow",
      message: "No matching capacity is free now; workers would wait for it (Pending)."
    })
  }
  return {
    estimate: {
      ...headerOf(input),
      ...fields,
      concurrentHoldUSD: formatMicroUsd(concurrentHold),
      costUSD: { p50: hourOf(warm), p90: hourOf(spec.scaling.maxWorkers) },
      startup: { cold: { p50: formatDurationMs(model.bootMedianMs), p90: formatDurationMs(model.bootMedianMs) } },
      placementPreview: previewOf(ranking, chosen, market),
      warnings,
      ...(blocking.length === 0
        ? {}
        : { blockingReasons: blocking.map(({ code, message, fix }) => ({ code, message, fix })) })
    },
    blocking
  }
}
