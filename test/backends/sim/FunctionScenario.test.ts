/**
 * Functions and FunctionCalls in headless scenarios (docs/simulator.md, "Functions"): scenarios/functions.json runs to
 * the same trace with the same seed and another with another; every call ends; the Functions' cost is what the ledger
 * charged them; capping the workers makes calls wait longer; a call past its deadline fails DeadlineExceeded; a
 * Function spec the schema refuses names its field.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { runScenario } from "../../../src/backends/sim/Run.ts"
import { parseScenario, type Scenario } from "../../../src/backends/sim/Scenario.ts"
import { humanSummary } from "../../../src/cli/Sim.ts"
import { parseMicroUsd } from "../../../src/core/Money.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"

const catalog = loadCatalog()
const file = join(import.meta.dirname, "..", "..", "..", "scenarios", "functions.json")
const json = () => JSON.parse(readFileSync(file, "utf8"))

const load = (input: unknown): Scenario => {
  const parsed = parseScenario(input)
  if (!parsed.ok) throw new Error(parsed.problems.map((problem) => `${problem.field}: ${problem.message}`).join("; "))
  return parsed.scenario
}

/** The scenario with its embed Function's spec and calls patched. */
const embedWith = (
  patch: { readonly function?: Record<string, unknown>; readonly calls?: Record<string, unknown> }
): Scenario => {
  const input = json()
  const embed = input.functions[0]
  embed.function = { ...embed.function, ...patch.function }
  embed.calls = { ...embed.calls, ...patch.calls }
  return load(input)
}

const row = (summary: ReturnType<typeof runScenario>, name: string) =>
  summary.functions!.functions.find((fn) => fn.name === name)!

describe("scenarios/functions.json", () => {
  it("gives the same trace and summary with the same seed, another trace with another", () => {
    const scenario = load(json())
    const first = runScenario(scenario, { catalog, check: true })
    const second = runScenario(scenario, { catalog, check: true })
    assert.strictEqual(second.traceHash, first.traceHash)
    assert.deepStrictEqual(second.functions, first.functions)
    assert.deepStrictEqual(first.violations, [])
    const other = runScenario(scenario, { catalog, seed: "functions-2" })
    assert.notStrictEqual(other.traceHash, first.traceHash)
    assert.notDeepEqual(other.functions, first.functions)
  })

  it("ends every call, retries the tries that raised, and bills the workers on the ledger", () => {
    const summary = runScenario(load(json()), { catalog })
    const functions = summary.functions!
    assert.strictEqual(functions.totals.functions, 2)
    assert.strictEqual(functions.totals.calls, 720)
    assert.deepStrictEqual(functions.totals.byPhase, { Succeeded: 720 })
    const embed = row(summary, "apps/embed")
    const chat = row(summary, "apps/chat")
    assert.strictEqual(embed.calls, 600)
    assert.strictEqual(chat.calls, 120)
    // 5% of tries raise; maxRetries 2 retries them.
    assert.isAbove(embed.retries, 0)
    assert.strictEqual(chat.retries, 0)
    assert.isAtMost(embed.workers, 4)
    assert.isAtMost(chat.workers, 3)
    // Latencies are ordered, and a call's end-to-end time is at least its wait.
    for (const fn of [embed, chat, functions.totals]) {
      assert.isAtMost(fn.latencyMs.p50, fn.latencyMs.p95)
      assert.isAtMost(fn.latencyMs.p95, fn.latencyMs.p99)
      assert.isAtMost(fn.queueWaitMs.p50, fn.queueWaitMs.p95)
      assert.isAtMost(fn.queueWaitMs.p99, fn.latencyMs.p99)
      assert.isAbove(fn.latencyMs.p50, 0)
    }
    // Money: each Function's cost is the ledger's charge on it; with the Jobs', every charge of the run.
    const ledger = summary.billing!
    const fnCost = parseMicroUsd(embed.costUSD!) + parseMicroUsd(chat.costUSD!)
    assert.isTrue(parseMicroUsd(embed.costUSD!) > 0n && parseMicroUsd(chat.costUSD!) > 0n)
    assert.strictEqual(parseMicroUsd(functions.totals.costUSD!), fnCost)
    assert.strictEqual(summary.cost!.functions!.totalUSD, functions.totals.costUSD)
    const jobs = (summary.jobs ?? []).reduce((sum, job) => sum + parseMicroUsd(job.costUSD ?? "0"), 0n)
    assert.isAbove(summary.totals.jobs, 0)
    assert.strictEqual(fnCost + jobs, parseMicroUsd(ledger.charged))
    assert.strictEqual(summary.cost!.total.totalUSD, ledger.charged)
    // The calls' own cost (their tries at the per-call rate) is part of what the workers were charged, not more.
    assert.isTrue(parseMicroUsd(embed.callsCostUSD) > 0n)
    assert.isTrue(parseMicroUsd(embed.callsCostUSD) <= parseMicroUsd(embed.costUSD!))
    assert.strictEqual(
      parseMicroUsd(functions.totals.callsCostUSD),
      parseMicroUsd(embed.callsCostUSD) + parseMicroUsd(chat.callsCostUSD)
    )
  })

  it("capping the workers makes calls wait longer", () => {
    const free = row(runScenario(load(json()), { catalog }), "apps/embed")
    const capped = row(
      runScenario(embedWith({ function: { scaling: { maxWorkers: 1, targetConcurrency: 1 } } }), { catalog }),
      "apps/embed"
    )
    assert.strictEqual(capped.workers, 1)
    assert.deepStrictEqual(capped.byPhase, { Succeeded: 600 })
    assert.isAbove(capped.queueWaitMs.p95, free.queueWaitMs.p95)
    assert.isAbove(capped.latencyMs.p95, free.latencyMs.p95)
    assert.isAbove(capped.latencyMs.p50, free.latencyMs.p50)
  })

  it("with hosts short, the workers wait for capacity, calls wait longer, and every call still ends", () => {
    const input = json()
    const free = runScenario(load(input), { catalog }).functions!.totals
    input.fleet.hostsPerVariant = 2
    const short = runScenario(load(input), { catalog }).functions!.totals
    assert.deepStrictEqual(short.byPhase, { Succeeded: 720 })
    assert.isAtMost(short.workers, 2)
    assert.isAbove(short.queueWaitMs.p95, free.queueWaitMs.p95)
  })

  it("a call running past its deadline fails DeadlineExceeded, and its try is paid", () => {
    const summary = runScenario(
      embedWith({ function: { timeout: "1s", retries: { maxRetries: 0 } }, calls: { failureRate: 0 } }),
      { catalog }
    )
    const embed = row(summary, "apps/embed")
    assert.isAbove(embed.byPhase["Failed"] ?? 0, 0)
    assert.isAbove(embed.byPhase["Succeeded"] ?? 0, 0)
    assert.strictEqual((embed.byPhase["Failed"] ?? 0) + (embed.byPhase["Succeeded"] ?? 0), 600)
    assert.isTrue(parseMicroUsd(embed.callsCostUSD) > 0n)
  })

  it("nodus sim's line for humans gives the Functions' calls, latency and cost", () => {
    const summary = runScenario(load(json()), { catalog })
    const line = humanSummary(summary, 1000)
    const { totals } = summary.functions!
    assert.include(line, "2 functions, 720 calls (720 Succeeded) on ")
    assert.include(line, `queue wait p50/p95/p99 ${totals.queueWaitMs.p50.toLocaleString("en-US")}/`)
    assert.include(line, `${totals.costUSD} USD charged, calls ${totals.callsCostUSD} USD`)
  })

  it("a scenario without Functions has no functions summary", () => {
    const input = json()
    delete input.functions
    const summary = runScenario(load(input), { catalog })
    assert.isUndefined(summary.functions)
    assert.isUndefined(summary.cost?.functions)
  })

  it("a Function spec the schema refuses names its field", () => {
    const input = json()
    input.functions[0].function.scaling.maxWorkers = 0
    const parsed = parseScenario(input)
    assert.isFalse(parsed.ok)
    if (!parsed.ok) {
      assert.include(parsed.problems.map((problem) => problem.field), "functions[0].function.scaling.maxWorkers")
    }
  })
})
