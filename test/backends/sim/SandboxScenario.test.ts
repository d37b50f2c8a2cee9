/**
 * Agent sessions on Sandboxes in scenarios (docs/simulator.md, "Sandbox sessions"): scenarios/agent-sandboxes.json
 * runs to the same trace with the same seed and prices its Sandboxes; a session's idle stop comes exactly idleTimeout
 * after its last command ends, a background command included; a Sandbox spec the schema refuses names its field.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { runScenario } from "../../../src/backends/sim/Run.ts"
import { parseScenario, type Scenario } from "../../../src/backends/sim/Scenario.ts"
import { parseMicroUsd } from "../../../src/core/Money.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"

const catalog = loadCatalog()
const file = join(import.meta.dirname, "..", "..", "..", "scenarios", "agent-sandboxes.json")
const json = () => JSON.parse(readFileSync(file, "utf8"))

const load = (input: unknown): Scenario => {
  const parsed = parseScenario(input)
  if (!parsed.ok) throw new Error(parsed.problems.map((problem) => `${problem.field}: ${problem.message}`).join("; "))
  return parsed.scenario
}

const minute = 60_000

describe("scenarios/agent-sandboxes.json", () => {
  it("gives the same trace with the same seed, another with another, and a non-zero Sandbox cost", () => {
    const scenario = load(json())
    const first = runScenario(scenario, { catalog, check: true })
    const second = runScenario(scenario, { catalog, check: true })
    assert.strictEqual(second.traceHash, first.traceHash)
    assert.deepStrictEqual(second.sandboxes, first.sandboxes)
    assert.deepStrictEqual(first.violations, [])
    assert.notStrictEqual(runScenario(scenario, { catalog, seed: "agent-sandboxes-2" }).traceHash, first.traceHash)
    const sandboxes = first.sandboxes!
    assert.strictEqual(sandboxes.totals.sandboxes, 9)
    assert.isTrue(parseMicroUsd(sandboxes.totals.costUSD!) > 0n)
    for (const row of sandboxes.sandboxes) assert.isTrue(parseMicroUsd(row.costUSD!) > 0n, row.name)
    // The ledger charged the Sandboxes and the Jobs, nothing else.
    const charged = parseMicroUsd(first.billing!.charged)
    const jobs = (first.jobs ?? []).reduce((sum, job) => sum + parseMicroUsd(job.costUSD ?? "0"), 0n)
    assert.strictEqual(parseMicroUsd(sandboxes.totals.costUSD!) + jobs, charged)
    // Coders think past their idle timeout: stopped, asked to start again, stopped by idleTimeout at the end.
    const coders = sandboxes.sandboxes.filter((row) => row.name.startsWith("agents/coder-"))
    assert.lengthOf(coders, 6)
    for (const coder of coders) {
      assert.isAtLeast(coder.idleStops, 2, coder.name)
      assert.strictEqual(coder.startRequests, coder.idleStops - 1, coder.name)
      assert.strictEqual(coder.starts, coder.idleStops, coder.name)
      assert.strictEqual(coder.commands, 7)
    }
    // Reviewers delete theirs: one start each, never idle-stopped.
    for (const reviewer of sandboxes.sandboxes.filter((row) => row.name.startsWith("agents/reviewer-"))) {
      assert.deepInclude(reviewer, { starts: 1, idleStops: 0, commands: 3 })
      assert.isDefined(reviewer.deletedAt)
    }
  })

  it("a session's idle stop comes idleTimeout after its last command ends, a background command's end included", () => {
    const input = json()
    const coder = input.sandboxes[0]
    input.sandboxes = [{
      ...coder,
      count: 1,
      thinkMedian: "0s",
      script: [
        { command: ["git", "clone", "."], duration: "20s" },
        { command: ["python", "-m", "http.server"], duration: "10m", background: true },
        { command: ["pytest"], duration: "1m" }
      ]
    }]
    const summary = runScenario(load(input), { catalog, check: true, keepTrace: true })
    const row = summary.sandboxes!.sandboxes[0]!
    const at = (phase: string) => Date.parse(row.phases.find((entry) => entry.phase === phase)!.at)
    const running = at("Running")
    // git 20 s; the server in the background for 10 m from then, pytest for 1 m beside it; idle 5 m after the server.
    assert.strictEqual(at("Stopping"), running + 20_000 + 10 * minute + 5 * minute)
    assert.strictEqual(row.stopReason, "IdleTimeout")
    assert.strictEqual(row.idleStops, 1)
    assert.isTrue(
      (summary.trace ?? []).some((line) =>
        line === `${running + 20_000} sandbox:agents/coder-1 Exec cmd-2 python 600000ms background ok`
      )
    )
  })

  it("a Sandbox spec the schema refuses is a problem at its field path", () => {
    const input = json()
    input.sandboxes[0].sandbox.lifecycle.idleTimeout = "10s"
    const parsed = parseScenario(input)
    assert.isFalse(parsed.ok)
    if (!parsed.ok) {
      assert.include(parsed.problems.map((problem) => problem.field), "sandboxes[0].sandbox.lifecycle.idleTimeout")
    }
  })
})
