/**
 * A Job's estimate in the core (spec: Estimate, Create semantics 3; docs/billing.md, "Estimates"), with a stand-in
 * RunSampler whose runs are known, so every amount follows from the inputs:
 * - what the sampler is asked: the whole Job with its declared work within the bound, one index for many indexes,
 *   the bound's work for a long run that keeps its progress, the whole run for one that keeps nothing;
 * - the bands: the runs' order statistics when sampled whole, a long run extended chunk by chunk, indexes summed;
 * - the assembly: holds, placement preview, warnings and blocking reasons with the code, amounts and a fix.
 * The calibration against simulated Jobs is in test/backends/sim/RunSampler.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { currentPricebook } from "../../../src/core/billing/Pricebook.ts"
import { defaultProviderModels } from "../../../src/core/capacity/ProviderModels.ts"
import { formatMicroUsd, parseMicroUsd } from "../../../src/core/Money.ts"
import { type EstimateInput, estimateJob } from "../../../src/kinds/job/JobEstimate.ts"
import {
  estimateSamplesMin,
  type RunRequest,
  type RunSample,
  runWorkMsMax
} from "../../../src/kinds/job/JobSampling.ts"
import { catalog, hour, jobSpec, market } from "../../core/Fixtures.ts"

const now = Date.parse("2026-11-21T00:00:00Z")
const rich = { available: 10n ** 12n, arrears: 0n, rooms: [] }

const inputOf = (fields: Record<string, unknown>, overrides: Partial<EstimateInput> = {}): EstimateInput => ({
  spec: jobSpec(fields as never),
  catalog,
  models: defaultProviderModels(),
  market: market(),
  pricebook: currentPricebook,
  now,
  funds: rich,
  seed: "s",
  ...overrides
})

/**
 * A sampler whose every run costs the rate for its work (all indexes of a whole Job), plus 1 USD paid once and
 * `spreadMicro` micro-USD times the sample's index: known moments. It records what it was asked.
 */
const standIn = (spreadMicro = 0) => {
  const asked: Array<RunRequest> = []
  const sampler = (request: RunRequest): ReadonlyArray<RunSample> => {
    asked.push(request)
    const indexes = request.perIndex ? 1 : request.spec.completions
    const work = request.variant.rateMicroUsdPerHour * BigInt(request.workMs * indexes) / BigInt(hour)
    return Array.from({ length: request.samples }, (_, sample) => {
      const extra = BigInt(spreadMicro * sample)
      return {
        cost: work + 1_000_000n + extra,
        overhead: 1_000_000n + extra,
        oneOff: 1_000_000n,
        coldStartMs: 120_000 + sample
      }
    })
  }
  return { asked, sampler }
}

const costOf = (estimate: Record<string, unknown>) => {
  const band = estimate["costUSD"] as { p50: string; p90: string }
  return { p50: parseMicroUsd(band.p50), p90: parseMicroUsd(band.p90) }
}

describe("what the sampler is asked", () => {
  it("within the bound, the whole Job with its declared work; fewer samples as the work grows, never below the minimum", () => {
    const { asked, sampler } = standIn()
    estimateJob(
      inputOf({ expectedDuration: "6h", completions: 2, parallelism: 2, resources: { gpu: { type: ["A10"] } } }),
      sampler
    )
    estimateJob(inputOf({ expectedDuration: "48h", resources: { gpu: { type: ["A10"] } } }), sampler)
    assert.deepStrictEqual(asked.map(({ perIndex, workMs, samples }) => ({ perIndex, workMs, samples })), [
      { perIndex: false, workMs: 6 * hour, samples: 100 },
      { perIndex: false, workMs: 48 * hour, samples: estimateSamplesMin }
    ])
  })

  it("past the bound, one index for the bound's work when the run keeps its progress, the whole run when it keeps nothing", () => {
    const { asked, sampler } = standIn()
    estimateJob(
      inputOf({
        expectedDuration: "100000h",
        completions: 10000,
        parallelism: 256,
        resources: { gpu: { type: ["A10"] } }
      }),
      sampler
    )
    estimateJob(
      inputOf({
        expectedDuration: "1000h",
        resources: { gpu: { type: ["A10"] } },
        recovery: { continuity: "Ephemeral" }
      }),
      sampler
    )
    estimateJob(
      inputOf({
        expectedDuration: "1000h",
        resources: { gpu: { type: ["A10"] } },
        recovery: { onInterruption: "Fail" }
      }),
      sampler
    )
    assert.deepStrictEqual(asked.map(({ perIndex, workMs }) => ({ perIndex, workMs })), [
      { perIndex: true, workMs: runWorkMsMax },
      { perIndex: true, workMs: 1000 * hour },
      { perIndex: true, workMs: 1000 * hour }
    ])
  })

  it("more indexes than a whole Job simulates, or more work than the bound, one index at a time", () => {
    const { asked, sampler } = standIn()
    estimateJob(inputOf({ expectedDuration: "10m", completions: 5, resources: { gpu: { type: ["A10"] } } }), sampler)
    estimateJob(inputOf({ expectedDuration: "20h", completions: 3, resources: { gpu: { type: ["A10"] } } }), sampler)
    assert.deepStrictEqual(asked.map(({ perIndex }) => perIndex), [true, true])
  })
})

describe("the bands", () => {
  const a10Hour = 750_000n

  it("of runs sampled whole are their order statistics", () => {
    const { sampler } = standIn(1_000_000)
    const { estimate } = estimateJob(
      inputOf({ expectedDuration: "1h", resources: { gpu: { type: ["A10"] } } }),
      sampler
    )
    // 200 runs of 0.75 + 1 + k USD, k = 0..199: the median k = 99, p90's rank 187 (k = 186).
    assert.deepStrictEqual(costOf(estimate), { p50: a10Hour + 100_000_000n, p90: a10Hour + 187_000_000n })
  })

  it("of a long run are its first chunk plus the steady chunks, exactly when the runs do not vary", () => {
    const { sampler } = standIn()
    const { estimate } = estimateJob(
      inputOf({ expectedDuration: "100000h", resources: { gpu: { type: ["A10"] } } }),
      sampler
    )
    // The first 48h pay the 1 USD once; the other 99,952 hours are steady chunks at the rate.
    const total = a10Hour * 100_000n + 1_000_000n
    assert.deepStrictEqual(costOf(estimate), { p50: total, p90: total })
    assert.deepStrictEqual(estimate["overheadUSD"], { p50: "1", p90: "1" })
  })

  it("of many indexes are the sum of the indexes, and the spread of the runs widens p90 beyond p50", () => {
    const { sampler } = standIn()
    const { estimate } = estimateJob(
      inputOf({ expectedDuration: "1h", completions: 10000, parallelism: 256, resources: { gpu: { type: ["A10"] } } }),
      sampler
    )
    const total = (a10Hour + 1_000_000n) * 10_000n
    assert.deepStrictEqual(costOf(estimate), { p50: total, p90: total })
    const spread = costOf(
      estimateJob(
        inputOf({
          expectedDuration: "1h",
          completions: 10000,
          parallelism: 256,
          resources: { gpu: { type: ["A10"] } }
        }),
        standIn(10_000).sampler
      ).estimate
    )
    assert.isTrue(spread.p90 > spread.p50, `${formatMicroUsd(spread.p90)} > ${formatMicroUsd(spread.p50)}`)
  })

  it("startup.cold is the sampled first boots; startup.warm the model's warm start", () => {
    const { estimate } = estimateJob(
      inputOf({ expectedDuration: "1h", resources: { gpu: { type: ["A10"] } } }),
      standIn().sampler
    )
    assert.deepStrictEqual(estimate["startup"], { cold: { p50: "2m", p90: "2m" }, warm: { p50: "5s", p90: "5s" } })
  })
})

describe("the assembly", () => {
  it("the same input gives the same estimate; blocking reasons carry the code, amounts and a fix", () => {
    const input = inputOf({ expectedDuration: "1h", resources: { gpu: { type: ["A10"] } }, maxCostUSD: "0.10" }, {
      funds: { available: 200_000n, arrears: 0n, rooms: [] }
    })
    const first = estimateJob(input, standIn(1_000_000).sampler)
    assert.deepStrictEqual(estimateJob(input, standIn(1_000_000).sampler), first)
    const reasons = first.estimate["blockingReasons"] as Array<{ code: string; message: string; fix: string }>
    assert.deepStrictEqual(reasons.map((reason) => reason.code), ["InsufficientCredits", "BudgetExceeded"])
    assert.deepStrictEqual(first.blocking.map((reason) => reason.code), ["InsufficientCredits", "BudgetExceeded"])
    assert.include(reasons[1]!.fix, "maxCostUSD")
    assert.strictEqual(first.estimate["pricebookVersion"], currentPricebook.version)
    assert.strictEqual(first.estimate["validUntil"], "2026-11-21T00:15:00.000Z")
  })

  it("holds: the first hold, and one per slot that starts at once", () => {
    const { estimate } = estimateJob(
      inputOf({ expectedDuration: "1h", completions: 6, parallelism: 4, resources: { gpu: { type: ["A10"] } } }),
      standIn().sampler
    )
    assert.strictEqual(
      parseMicroUsd(estimate["concurrentHoldUSD"] as string),
      4n * parseMicroUsd(estimate["holdUSD"] as string)
    )
    assert.strictEqual(estimate["rateUSDPerHour"], "0.75")
    assert.deepStrictEqual((estimate["warnings"] as Array<{ code: string }>).map((warning) => warning.code), [
      "ColdStart"
    ])
  })

  it("no matching offering: NoMatchingOffering, no bands, nothing blocks, nothing sampled", () => {
    const { asked, sampler } = standIn()
    const result = estimateJob(
      inputOf({ resources: { gpu: { type: ["B200"] } } }, { funds: { available: 0n, arrears: 0n, rooms: [] } }),
      sampler
    )
    assert.deepStrictEqual((result.estimate["warnings"] as Array<{ code: string }>).map((warning) => warning.code), [
      "NoMatchingOffering"
    ])
    assert.isUndefined(result.estimate["costUSD"])
    assert.deepStrictEqual(result.blocking, [])
    assert.strictEqual(asked.length, 0)
  })
})
