/**
 * The price bound of a consented create (spec: Create semantics 2; docs/billing.md, "Price consent"): the estimated
 * rate plus 10 %, rounded down to the micro-USD, and the placement ceiling a bound Job is decoded with.
 */
import * as fc from "fast-check"
import { assert, describe, it } from "vitest"
import {
  boundedSpec,
  priceBoundAnnotation,
  priceBoundIn,
  priceBoundOf,
  withPriceBoundAnnotation
} from "../../../src/core/billing/PriceBound.ts"
import type { JsonObject } from "../../../src/core/Json.ts"
import { admitJobSpec } from "../../../src/kinds/job/JobAdmission.ts"

describe("priceBoundOf", () => {
  it("is the rate plus 10 %, rounded down to the micro-USD", () => {
    const rows: ReadonlyArray<readonly [bigint, bigint]> = [
      [2_490_000n, 2_739_000n],
      [0n, 0n],
      [1n, 1n], // 1.1 micro-USD rounds down to 1
      [9n, 9n], // 9.9 rounds down to 9
      [10n, 11n],
      [123_194_960n, 135_514_456n]
    ]
    for (const [rate, bound] of rows) assert.strictEqual(priceBoundOf(rate), bound, `rate ${rate}`)
  })

  it("never exceeds 110 % of the rate, and is the largest micro-USD amount that does not", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 15n }), (rate) => {
        const bound = priceBoundOf(rate)
        assert.isTrue(bound * 10n <= rate * 11n)
        assert.isTrue((bound + 1n) * 10n > rate * 11n)
        assert.isTrue(bound >= rate)
      }),
      { numRuns: 2_000 }
    )
  })
})

describe("the bound annotation", () => {
  const key = priceBoundAnnotation("nodus.dev")

  it("is read back as written, and a value that is no amount is no bound", () => {
    assert.strictEqual(key, "nodus.dev/price-bound-usd-per-hour")
    assert.strictEqual(
      priceBoundIn(withPriceBoundAnnotation({ team: "a" }, "nodus.dev", 2_739_000n), "nodus.dev"),
      2_739_000n
    )
    assert.deepStrictEqual(withPriceBoundAnnotation({ team: "a" }, "nodus.dev", 2_739_000n), {
      team: "a",
      [key]: "2.739"
    })
    assert.deepStrictEqual(withPriceBoundAnnotation({ team: "a", [key]: "9" }, "nodus.dev", undefined), { team: "a" })
    assert.isUndefined(priceBoundIn(undefined, "nodus.dev"))
    assert.isUndefined(priceBoundIn({ [key]: "cheap" }, "nodus.dev"))
    // Another API group's annotation is not this server's.
    assert.isUndefined(priceBoundIn({ [key]: "1" }, "example.com"))
  })
})

describe("boundedSpec", () => {
  const spec = (placement: JsonObject) => admitJobSpec({ image: "a", placement })

  it("tightens maxRateUSDPerHour to the lower of the declared one and the bound", () => {
    assert.strictEqual(boundedSpec(spec({}), 2_739_000n).placement.maxRateUSDPerHour, "2.739")
    assert.strictEqual(boundedSpec(spec({ maxRateUSDPerHour: "5" }), 2_739_000n).placement.maxRateUSDPerHour, "2.739")
    assert.strictEqual(boundedSpec(spec({ maxRateUSDPerHour: "1.5" }), 2_739_000n).placement.maxRateUSDPerHour, "1.5")
    const unbound = spec({ regions: ["us"] })
    assert.strictEqual(boundedSpec(unbound, undefined), unbound)
    assert.deepStrictEqual(boundedSpec(unbound, 1_000_000n).placement.regions, ["us"])
  })
})
