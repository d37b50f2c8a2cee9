/**
 * A Sandbox's estimate (kinds/sandbox/SandboxEstimate.ts): its rate and hold, its two named cost cases, what blocks.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { currentPricebook } from "../../../src/core/billing/Pricebook.ts"
import { defaultProviderModels } from "../../../src/core/capacity/ProviderModels.ts"
import { parseMicroUsd } from "../../../src/core/Money.ts"
import { estimateSandbox } from "../../../src/kinds/sandbox/SandboxEstimate.ts"
import { SandboxSpec } from "../../../src/kinds/sandbox/SandboxSchema.ts"
import { catalog, market, T0 } from "../../core/Fixtures.ts"

const spec = (fields: Record<string, unknown> = {}) =>
  Schema.decodeUnknownSync(SandboxSpec)({ image: "tools", resources: { cpu: "2" }, ...fields })
const rich = { available: 1_000_000_000n, arrears: 0n, rooms: [] }
const estimate = (fields: Record<string, unknown> = {}, funds = rich) =>
  estimateSandbox({
    spec: spec(fields),
    catalog,
    models: defaultProviderModels(),
    market: market(),
    pricebook: currentPricebook,
    now: T0,
    funds
  })

describe("a Sandbox's estimate", () => {
  it("prices one start left idle (p50) and the whole maxLifetime (p90) at the placed rate", () => {
    const { estimate: shown, blocking } = estimate({ lifecycle: { idleTimeout: "30m", maxLifetime: "10h" } })
    const rate = parseMicroUsd(shown["rateUSDPerHour"] as string)
    const band = shown["costUSD"] as { p50: string; p90: string }
    expect(parseMicroUsd(band.p50)).toBe(
      rate / 2n > parseMicroUsd(shown["minimumChargeUSD"] as string)
        ? rate / 2n
        : parseMicroUsd(shown["minimumChargeUSD"] as string)
    )
    expect(parseMicroUsd(band.p90)).toBe(rate * 10n)
    expect(blocking).toEqual([])
    expect((shown["warnings"] as ReadonlyArray<{ code: string }>).map((warning) => warning.code)).toContain(
      "UsageDependent"
    )
    expect((shown["placementPreview"] as { offering: string }).offering).toBeDefined()
  })

  it("never shows more than maxCostUSD, and says a cap below the first hold blocks the create", () => {
    const { estimate: shown, blocking } = estimate({ maxCostUSD: "0.000001", lifecycle: { maxLifetime: "720h" } })
    expect((shown["costUSD"] as { p90: string }).p90).toBe("0.000001")
    expect(blocking.map((reason) => reason.code)).toEqual(["BudgetExceeded"])
    expect(blocking[0]!.message).toContain("spec.maxCostUSD is 0.000001")
  })

  it("says what a short balance blocks", () => {
    const { blocking } = estimate({}, { available: 0n, arrears: 0n, rooms: [] })
    expect(blocking.map((reason) => reason.code)).toEqual(["InsufficientCredits"])
  })
})
