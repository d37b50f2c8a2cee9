/**
 * Every scenario run is billed (docs/simulator.md, "Cost"): the summary's `cost` is the ledger's charges, by segment,
 * per Job policy and class and for the Sandboxes, and adds up — the groups to the Jobs' total, the segments to each
 * total, the Jobs and Sandboxes to everything the ledger charged (a scenario with a `billing` block shows that sum).
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { CostGroup, SegmentCost } from "../../../src/backends/sim/Costs.ts"
import { runScenario } from "../../../src/backends/sim/Run.ts"
import { parseScenario, type Scenario } from "../../../src/backends/sim/Scenario.ts"
import { segments } from "../../../src/core/billing/Ledger.ts"
import { parseMicroUsd } from "../../../src/core/Money.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"

const catalog = loadCatalog()
const load = (file: string): Scenario => {
  const parsed = parseScenario(
    JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "..", "scenarios", file), "utf8"))
  )
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems))
  return parsed.scenario
}

const micro = (cost: SegmentCost) => parseMicroUsd(cost.totalUSD)
const sumOf = (groups: Readonly<Record<string, CostGroup>>) =>
  Object.values(groups).reduce((sum, group) => sum + micro(group), 0n)
const assertSegmentsAddUp = (cost: SegmentCost, what: string) =>
  assert.strictEqual(
    segments.reduce((sum, segment) => sum + parseMicroUsd(cost.bySegment[segment]), 0n),
    micro(cost),
    `${what}: segments`
  )

describe("the cost of a scenario run", () => {
  it("a scenario without a billing block is billed with the current pricebook: per policy, per class, by segment, covered", () => {
    const summary = runScenario(load("spot-trace-replay.json"), { catalog, perJob: false, check: false })
    const cost = summary.cost!
    assert.strictEqual(summary.billing, undefined)
    assert.strictEqual(cost.pricebook, "nodus-2026-11.1")
    assert.strictEqual(cost.jobs.objects, summary.totals.jobs)
    assert.isTrue(micro(cost.jobs) > 0n)
    assert.strictEqual(micro(cost.total), micro(cost.jobs))
    assert.strictEqual(sumOf(cost.byPolicy), micro(cost.jobs))
    assert.strictEqual(sumOf(cost.byClass), micro(cost.jobs))
    assert.deepStrictEqual(Object.keys(cost.byClass), ["finetune", "pretrain", "render", "sweep"])
    assert.includeMembers(Object.keys(cost.byPolicy), [
      "interruptible=Prefer continuity=Checkpointed profile=Balanced",
      "interruptible=Allow continuity=Ephemeral profile=Cost"
    ])
    assertSegmentsAddUp(cost.total, "total")
    for (const [name, group] of Object.entries({ ...cost.byPolicy, ...cost.byClass })) assertSegmentsAddUp(group, name)
    // Preempted interruptible runs replace themselves (Restore) and failed boots are nodus's (covered, never posted).
    assert.isTrue(parseMicroUsd(cost.total.bySegment.Restore) > 0n)
    assert.isTrue(cost.total.covered.seconds > 0 && parseMicroUsd(cost.total.covered.usd) > 0n)
  })

  it("with a billing block, the Jobs' and the Sandboxes' costs are what the ledger charged", () => {
    for (const file of ["agent-sandboxes.json", "funding-runs-out.json"]) {
      const summary = runScenario(load(file), { catalog, check: false })
      const cost = summary.cost!
      assert.strictEqual(micro(cost.total), parseMicroUsd(summary.billing!.charged), file)
      assert.strictEqual(
        micro(cost.total),
        micro(cost.jobs) + (cost.sandboxes === undefined ? 0n : micro(cost.sandboxes)),
        file
      )
      if (summary.sandboxes !== undefined) {
        assert.strictEqual(micro(cost.sandboxes!), parseMicroUsd(summary.sandboxes.totals.costUSD!))
        assert.strictEqual(cost.sandboxes!.objects, summary.sandboxes.totals.sandboxes)
      }
    }
  })

  it("bill: false leaves an unbilled scenario unbilled (the platform benchmark), and its trace as billed here", () => {
    const scenario = load("spot-trace-replay.json")
    const unbilled = runScenario(scenario, { catalog, perJob: false, check: false, bill: false })
    assert.strictEqual(unbilled.cost, undefined)
    assert.strictEqual(unbilled.traceHash, runScenario(scenario, { catalog, perJob: false, check: false }).traceHash)
  })
})
