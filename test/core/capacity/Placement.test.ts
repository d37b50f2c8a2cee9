/**
 * Placement (spec: Placement, Resources): one filter or ranking rule per test over a small synthetic catalog, and
 * the explanation an Attempt shows.
 */
import { describe, expect, it } from "vitest"
import { choose, explain, explanationDroppedExamplesMax } from "../../../src/core/capacity/Placement.ts"
import { hour, jobSpec, market, minute, rankingOf } from "../Fixtures.ts"

const kept = (fields: Parameters<typeof jobSpec>[0], on = market()) =>
  rankingOf(jobSpec(fields), on).kept.map((candidate) =>
    `${candidate.variant.offering.id}${candidate.variant.interruptible ? "/i" : ""}`
  )

const droppedReason = (fields: Parameters<typeof jobSpec>[0], key: string) => {
  const ranking = rankingOf(jobSpec(fields))
  return ranking.dropped.find((entry) =>
    `${entry.variant.offering.id}${entry.variant.interruptible ? "/i" : ""}` === key
  )?.reason
}

describe("filters", () => {
  it("a GPU family matches every variant of it and never another family", () => {
    expect(kept({ resources: { gpu: { type: ["H100"] } } }).sort()).toEqual(["h100-pcie-1x-us", "h100-sxm-1x-eu"])
    expect(droppedReason({ resources: { gpu: { type: ["H100"] } } }, "a10-1x-us")).toBe(
      "GPU family A10 is not one of H100"
    )
  })

  it("exact pins the variant; an exact id also works without exact", () => {
    expect(kept({ resources: { gpu: { type: ["H100-SXM-80GB"], exact: true } } })).toEqual(["h100-sxm-1x-eu"])
    expect(kept({ resources: { gpu: { type: ["H100-PCIe-80GB"] } } })).toEqual(["h100-pcie-1x-us"])
    expect(kept({ resources: { gpu: { type: ["H100"], exact: true } } })).toEqual([])
  })

  it("matches the GPU count per host", () => {
    expect(kept({ resources: { gpu: { type: ["H100"], count: 8 } } })).toEqual(["h100-sxm-8x-us"])
    expect(droppedReason({ resources: { gpu: { type: ["H100"], count: 8 } } }, "h100-pcie-1x-us")).toBe(
      "has 1 GPUs per host, not 8"
    )
  })

  it("applies minMemory per GPU and the NVLink interconnect", () => {
    expect(kept({ resources: { gpu: { type: ["A100", "H100"], count: 8, minMemory: "80Gi" } } })).toEqual([
      "h100-sxm-8x-us"
    ])
    expect(kept({ resources: { gpu: { type: ["H100"], interconnect: "NVLink" } } })).toEqual(["h100-sxm-1x-eu"])
  })

  it("applies host-shape floors (cpu, memory, disk) and keeps CPU work off GPU hosts", () => {
    expect(kept({ resources: { cpu: "8" } })).toEqual(["cpu-32x-us"])
    expect(kept({ resources: { memory: "64Gi" } })).toEqual(["cpu-32x-us"])
    expect(kept({ resources: { disk: "300Gi" } })).toEqual(["cpu-32x-us"])
    expect(droppedReason({}, "a10-1x-us")).toBe("has GPUs; the request asks for none")
  })

  it("keeps only the named region classes and offerings", () => {
    expect(kept({ resources: { gpu: { type: ["H100"] } }, placement: { regions: ["eu"] } })).toEqual(["h100-sxm-1x-eu"])
    expect(kept({ resources: { gpu: { type: ["H100"] } }, placement: { offerings: ["h100-pcie-1x-us"] } })).toEqual([
      "h100-pcie-1x-us"
    ])
  })

  it("drops variants above maxRateUSDPerHour, exactly at the micro-USD", () => {
    expect(kept({ resources: { gpu: { type: ["H100"] } }, placement: { maxRateUSDPerHour: "2.49" } })).toEqual([
      "h100-pcie-1x-us"
    ])
    expect(kept({ resources: { gpu: { type: ["H100"] } }, placement: { maxRateUSDPerHour: "2.489999" } })).toEqual([])
  })
})

describe("interruptible policy (spec: Placement.interruptible)", () => {
  const eight = { resources: { gpu: { type: ["A100", "H100"], count: 8 } } }

  it("Never (the default) drops interruptible variants", () => {
    expect(kept(eight)).toEqual(["a100-sxm-8x-us", "h100-sxm-8x-us"])
    expect(droppedReason(eight, "a100-sxm-8x-us/i")).toBe("interruptible; placement.interruptible is Never")
  })

  it("Prefer ranks interruptible variants first", () => {
    expect(kept({ ...eight, placement: { interruptible: "Prefer", profile: "Cost" } })).toEqual([
      "a100-sxm-8x-us/i",
      "h100-sxm-8x-us/i",
      "a100-sxm-8x-us",
      "h100-sxm-8x-us"
    ])
  })

  it("Allow decides by expected cost, preemption losses included", () => {
    const allow = { ...eight, expectedDuration: "4h", placement: { interruptible: "Allow", profile: "Cost" } }
    // Rare preemptions: the interruptible A100 at 5/h beats the on-demand one at 14/h.
    expect(kept(allow, market({ mtbiMs: 24 * hour }))[0]).toBe("a100-sxm-8x-us/i")
    // An Ephemeral run loses half its work per preemption; preempted every 10 minutes it never gets cheaper.
    const ephemeral = { ...allow, recovery: { continuity: "Ephemeral" } }
    expect(kept(ephemeral, market({ mtbiMs: 10 * minute }))[0]).toBe("a100-sxm-8x-us")
  })

  it("Allow drops interruptible variants when an interruption would fail the run", () => {
    const fields = { ...eight, placement: { interruptible: "Allow" }, recovery: { onInterruption: "Fail" } }
    expect(droppedReason(fields, "a100-sxm-8x-us/i")).toBe(
      "interruptible; an interruption would fail the run (recovery.onInterruption Fail)"
    )
  })
})

describe("profiles and choice", () => {
  const any = { resources: { gpu: { type: ["H100"] } } }

  it("Cost orders by expected cost, Speed by expected time", () => {
    const slowBoot = market({ bootMs: 2 * minute })
    expect(kept({ ...any, placement: { profile: "Cost" } }, slowBoot)).toEqual(["h100-pcie-1x-us", "h100-sxm-1x-eu"])
    const fastEu = {
      ...slowBoot,
      bootMs: (
        variant: { offering: { id: string } }
      ) => (variant.offering.id === "h100-sxm-1x-eu" ? 10_000 : 20 * minute)
    }
    expect(kept({ ...any, placement: { profile: "Speed" } }, fastEu)).toEqual(["h100-sxm-1x-eu", "h100-pcie-1x-us"])
  })

  it("choose takes the best-ranked candidate with capacity, under an optional rate ceiling", () => {
    const on = market({ capacity: { "h100-pcie-1x-us": 0 } })
    const ranking = rankingOf(jobSpec({ ...any, placement: { profile: "Cost" } }), on)
    expect(choose(ranking, on)?.variant.offering.id).toBe("h100-sxm-1x-eu")
    expect(choose(ranking, market(), 3_000_000n)?.variant.offering.id).toBe("h100-pcie-1x-us")
    expect(choose(ranking, on, 3_000_000n)).toBeUndefined()
  })

  it("explains the choice: kept candidates with verdicts and dropped ones grouped by reason", () => {
    const on = market({ capacity: { "h100-pcie-1x-us": 0 } })
    const ranking = rankingOf(jobSpec({ ...any, placement: { profile: "Cost" } }), on)
    const explanation = explain(ranking, choose(ranking, on), on)
    expect(explanation.chosen).toEqual({ offering: "h100-sxm-1x-eu", interruptible: false, rateUSDPerHour: "3.29" })
    expect(explanation.candidates.map((candidate) => [candidate.offering, candidate.verdict])).toEqual([[
      "h100-pcie-1x-us",
      "NoCapacity"
    ], ["h100-sxm-1x-eu", "Chosen"]])
    // One hour of work plus a 2 minute boot at 3.29/h.
    expect(explanation.candidates[1]?.expectedCostUSD).toBe("3.399666")
    // A reason names how many variants it dropped and the first few of them (explanationDroppedExamplesMax).
    const count = explanation.dropped.find((group) => group.reason === "has 8 GPUs per host, not 1")
    expect(count?.count).toBe(4)
    expect(count?.offerings).toEqual(
      ["h100-sxm-8x-us", "h100-sxm-8x-us/interruptible", "a100-sxm-8x-us"].slice(0, explanationDroppedExamplesMax)
    )
    expect(explanation.dropped.find((group) => group.reason === "GPU family A10 is not one of H100")).toEqual({
      reason: "GPU family A10 is not one of H100",
      count: 1,
      offerings: ["a10-1x-us"]
    })
    expect(JSON.parse(JSON.stringify(explanation))).toEqual(explanation)
  })
})
