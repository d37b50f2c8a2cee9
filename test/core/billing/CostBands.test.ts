/**
 * Cost bands in integer micro-USD (docs/billing.md, "Estimates"): the integer square root, the order-statistic band
 * of sampled runs, the moments of a run extended by steady chunks and of a sum of indexes, and the normal band with
 * its skew correction and its upper confidence bound.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import {
  ceilDiv,
  chunkedRunEstimate,
  isqrtCeil,
  normalBand,
  orderStatisticBand,
  sumOf
} from "../../../src/core/billing/CostBands.ts"

const usd = (amount: number): bigint => BigInt(Math.round(amount * 1_000_000))

describe("integer arithmetic", () => {
  it("isqrtCeil is the least root whose square reaches the value", () => {
    for (
      const [value, root] of [[0n, 0n], [1n, 1n], [2n, 2n], [4n, 2n], [5n, 3n], [10n ** 24n, 10n ** 12n], [
        10n ** 24n + 1n,
        10n ** 12n + 1n
      ]] as const
    ) assert.strictEqual(isqrtCeil(value), root, `√${value}`)
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 40n }), (value) => {
        const root = isqrtCeil(value)
        return root * root >= value && (root === 0n || (root - 1n) * (root - 1n) < value)
      }),
      { seed: 20261126 }
    )
  })

  it("ceilDiv rounds up for either sign", () => {
    assert.deepStrictEqual([ceilDiv(7n, 2n), ceilDiv(8n, 2n), ceilDiv(-7n, 2n), ceilDiv(0n, 3n)], [4n, 4n, -3n, 0n])
  })
})

describe("the order-statistic band", () => {
  it("is the median, and for p90 the rank n·0.9 + 1.645·√(n·0.09) of the sorted values", () => {
    // 200 runs: rank ⌈(180 + 1.645·√18)/200 · 200⌉ = 187, the value 187.
    const values = Array.from({ length: 200 }, (_, index) => BigInt(200 - index))
    assert.deepStrictEqual(orderStatisticBand(values, 200), { p50: 100n, p90: 187n })
  })
})

describe("moments of runs and sums", () => {
  it("with no extra work, a run's moments are the sampled runs' own", () => {
    const values = [1, 2, 3, 4, 5].map(usd)
    const estimate = chunkedRunEstimate(values, values, 0, 60_000)
    assert.strictEqual(estimate.mean, usd(3))
    // Sample variance 2.5 USD², symmetric (no third moment); the mean's variance is 2.5/5.
    assert.strictEqual(estimate.variance, 2_500_000_000_000n)
    assert.strictEqual(estimate.thirdMoment, 0n)
    assert.strictEqual(estimate.meanVariance, 500_000_000_000n)
  })

  it("a run extended by two steady chunks adds their means and variances to the first chunk's", () => {
    const first = [10, 12, 14].map(usd)
    const steady = [9, 11, 13].map(usd)
    const estimate = chunkedRunEstimate(first, steady, 2 * 3_600_000, 3_600_000)
    assert.strictEqual(estimate.mean, usd(12 + 2 * 11))
    assert.strictEqual(estimate.variance, 3n * 4_000_000_000_000n)
    // Each sample's total is 12 + 2·… = 3·first − 2: its spread is 3 × the first's, its variance 9 × 4 USD² over 3
    // runs.
    assert.strictEqual(estimate.meanVariance, 12_000_000_000_000n)
  })

  it("a fraction of a chunk counts as its share", () => {
    const values = [10, 20, 30].map(usd)
    assert.strictEqual(chunkedRunEstimate(values, values, 1_800_000, 3_600_000).mean, usd(20 * 1.5))
  })

  it("the sum of indexes multiplies the moments, and the mean's error by the count squared", () => {
    const part = { mean: 5n, variance: 7n, thirdMoment: 11n, meanVariance: 13n, varianceVariance: 17n }
    assert.deepStrictEqual(sumOf(part, 4), {
      mean: 20n,
      variance: 28n,
      thirdMoment: 44n,
      meanVariance: 208n,
      varianceVariance: 272n
    })
  })
})

describe("the normal band", () => {
  const exact = {
    mean: usd(1000),
    variance: usd(100) * usd(100),
    thirdMoment: 0n,
    meanVariance: 0n,
    varianceVariance: 0n
  }

  it("of a cost known exactly: p50 the mean, p90 the mean plus 1.2816 σ rounded up", () => {
    assert.deepStrictEqual(normalBand(exact), { p50: usd(1000), p90: usd(1000) + usd(128.16) })
  })

  it("with no spread at all: p90 is p50", () => {
    assert.deepStrictEqual(normalBand({ ...exact, variance: 0n }), { p50: usd(1000), p90: usd(1000) })
  })

  it("a right skew lowers the median and raises the 90th percentile (Cornish–Fisher)", () => {
    // γ = 1: κ₃ = σ³; the median moves by −σ/6, the 90th percentile by (1.2816² − 1)·σ/6.
    const skewed = normalBand({ ...exact, thirdMoment: usd(100) * usd(100) * usd(100) })
    assert.strictEqual(skewed.p50, usd(1000) - ceilDiv(usd(100), 6n))
    assert.strictEqual(skewed.p90, usd(1000) + usd(128.16) + ceilDiv(usd(100) * 64_249_856n, 600_000_000n))
  })

  it("an uncertain mean or σ widens p90 by 1.645 standard errors, added together", () => {
    const band = normalBand({
      ...exact,
      meanVariance: usd(10) * usd(10),
      varianceVariance: 4n * exact.variance * usd(5) * usd(5)
    })
    // SE = 10 + 1.2816 × 5 = 16.408 USD; 1.645 × SE = 26.99116 USD.
    assert.strictEqual(band.p90, usd(1000) + usd(128.16) + usd(26.99116))
  })

  it("p90 is never below p50, and p50 never below zero", () => {
    fc.assert(
      fc.property(
        fc.array(fc.bigInt({ min: 0n, max: 10n ** 12n }), { minLength: 3, maxLength: 40 }),
        fc.nat(100),
        (values, chunks) => {
          const band = normalBand(sumOf(chunkedRunEstimate(values, values, chunks * 60_000, 60_000), 1 + (chunks % 7)))
          return band.p50 >= 0n && band.p90 >= band.p50
        }
      ),
      { seed: 20261126 }
    )
  })
})
