/**
 * The estimate of a Sandbox (spec: Estimate; docs/kinds/Sandbox.md, "Estimate"): where its box would be placed now,
 * its rate and first hold, what would block a real create, and a cost band. What a Sandbox costs depends on how long
 * it is driven, which no spec says, so the band is two named cases rather than sampled runs: p50 is one start left
 * alone until its idleTimeout stops it, p90 the box running its whole maxLifetime (each at least the minimum charge,
 * and neither above maxCostUSD). Pure, and cheap enough for every dry run and create.
 */
import { chargeFor } from "../../core/billing/Pricebook.ts"
import { formatMicroUsd } from "../../core/Money.ts"
import { durationMs } from "../../core/StatusText.ts"
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
import { sandboxMachine } from "./SandboxMachine.ts"
import type { SandboxSpecType } from "./SandboxSchema.ts"

export type SandboxEstimateInput = EstimateBase & { readonly spec: SandboxSpecType }

export const estimateSandbox = (input: SandboxEstimateInput): KindEstimate => {
  const { spec, pricebook, market } = input
  const placed = placeForEstimate(
    input,
    sandboxMachine.placementOf(spec),
    "No offering matches the resources; the Sandbox would stay Pending until capacity that matches joins."
  )
  if ("estimate" in placed) return placed
  const { ranking, chosen } = placed
  const variant = chosen.variant
  const { hold, minimum, cap, fields } = runPricesOf(pricebook, variant, spec.maxCostUSD)
  const costOf = (ms: number) => {
    const charge = chargeFor(variant.rateMicroUsdPerHour, ms)
    const atLeast = charge > minimum ? charge : minimum
    return formatMicroUsd(cap !== undefined && cap < atLeast ? cap : atLeast)
  }
  const lifetimeMs = durationMs(spec.lifecycle.maxLifetime, 0)
  const idleMs = durationMs(spec.lifecycle.idleTimeout, 0)
  const model = input.models(variant)
  const blocking = blockingReasonsOf(spec, hold, input.funds)
  const warnings = [{
    code: "UsageDependent",
    message:
      `The cost depends on how long the Sandbox runs: p50 is one start left idle until idleTimeout ${spec.lifecycle.idleTimeout}, p90 its whole maxLifetime ${spec.lifecycle.maxLifetime}.`
  }]
  if (market.available(variant) <= 0) {
    warnings.push({
      code: "NoCapacityNow",
      message: "No matching capacity is free now; the Sandbox would wait for it (Pending)."
    })
  }
  return {
    estimate: {
      ...headerOf(input),
      ...fields,
      costUSD: { p50: costOf(idleMs === 0 ? lifetimeMs : Math.min(idleMs, lifetimeMs)), p90: costOf(lifetimeMs) },
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
