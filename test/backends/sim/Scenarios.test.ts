/**
 * The repository's scenarios (scenarios/*.json) and `nodus sim`: every file decodes strictly and runs with no checker
 * violation; a scenario and a seed give a byte-identical trace run after run, another seed another trace; the command
 * writes the summary and exits 0, and a malformed file exits 2 naming the field.
 *
 * A scenario too big for a unit test (the platform benchmark's 10^6 Jobs) runs its first `arrivalsInTests` arrivals:
 * the same fleet, mix and faults, over a shorter stretch.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { runScenario, scenarioProblems, type Summary } from "../../../src/backends/sim/Run.ts"
import { parseScenario, type Scenario } from "../../../src/backends/sim/Scenario.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"

const root = join(import.meta.dirname, "..", "..", "..")
const scenariosDir = join(root, "scenarios")
const node = join(root, "node_modules", ".bin", "node")
const cli = join(root, "bin", "nodus.js")
const catalog = loadCatalog()

const arrivalsInTests = 1500

const files = readdirSync(scenariosDir).filter((name) => name.endsWith(".json")).sort()

const load = (file: string): Scenario => {
  const parsed = parseScenario(JSON.parse(readFileSync(join(scenariosDir, file), "utf8")))
  if (!parsed.ok) {
    throw new Error(`${file}: ${parsed.problems.map((problem) => `${problem.field}: ${problem.message}`).join("; ")}`)
  }
  return parsed.scenario
}

/** The scenario, cut to `arrivalsInTests` arrivals when it has more. */
const small = (scenario: Scenario): Scenario => {
  const count = Math.min(scenario.arrivals.count ?? Number.POSITIVE_INFINITY, arrivalsInTests)
  return { ...scenario, arrivals: { ...scenario.arrivals, count } }
}

/** Fails with the first line where two traces part. */
const assertSameTrace = (a: Summary, b: Summary) => {
  const left = a.trace ?? []
  const right = b.trace ?? []
  for (let line = 0; line < Math.max(left.length, right.length); line++) {
    if (left[line] !== right[line]) {
      assert.fail(
        `the traces part at line ${line + 1}:\n  first:  ${left[line] ?? "(ended)"}\n  second: ${
          right[line] ?? "(ended)"
        }`
      )
    }
  }
  assert.strictEqual(a.traceHash, b.traceHash)
  assert.strictEqual(a.traceLines, left.length)
}

const run = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      node,
      [cli, ...args],
      { cwd: root, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  })

describe("scenarios/*.json", () => {
  it("has the example scenarios", () => {
    assert.includeMembers(files, ["bench-platform.json", "mixed-fleet.json", "spot-trace-replay.json"])
  })

  for (const file of files) {
    it(`${file} decodes, names only what exists, and runs with no checker violation`, () => {
      const scenario = load(file)
      assert.deepStrictEqual(scenarioProblems(scenario, catalog), [])
      const summary = runScenario(small(scenario), { catalog, check: true })
      assert.deepStrictEqual(summary.violations, [])
      assert.isAbove(summary.totals.jobs, 0)
      assert.strictEqual(summary.jobs?.length, summary.totals.jobs)
      assert.strictEqual(
        Object.values(summary.totals.byPhase).reduce((sum, jobs) => sum + jobs, 0),
        summary.totals.jobs
      )
    })
  }

  it("spot-trace-replay preempts from the trace: interruptible V100 hosts are lost and every Job still ends", () => {
    const summary = runScenario(load("spot-trace-replay.json"), { catalog, check: true, keepTrace: true })
    assert.isAbove(summary.totals.preemptions, 0)
    assert.isAbove(summary.totals.checkpoints, 0)
    const launches = (summary.trace ?? []).filter((line) => line.includes(" Launch "))
    assert.isTrue(launches.some((line) => line.includes("/interruptible")))
    assert.isTrue(launches.some((line) => / media\/render-\d+ Launch .* v100-sxm-16gb-4x-us-99c937f7$/u.test(line)))
  })
})

/**
 * The trace hash of every example scenario, pinned: a refactoring of the machine, billing or the simulator's loop must
 * leave the runs byte-identical. A change that means to move them updates a hash here and says why in its commit. Each
 * runs cut as the test above cuts it (`small`: only the platform benchmark is longer).
 */
const pinnedTraceHashes: Readonly<Record<string, string>> = {
  // Moved when every scenario came to be billed (issue 17): billing wakes a Job when its run's host is released, so at
  // one freed A10 host on day 5 the Job whose host it was looks before the queue does and takes it (as in the server).
  "mixed-fleet.json": "5b03464534086ef407af7ef2fa791f9d973e6e53d3ffca4f680a131d5bd703d2",
  "spot-trace-replay.json": "4cae2b177ceb232ba81db44f165ff229ac40042ffcc24084293f56b963185003",
  "funding-runs-out.json": "ee19e4b09b0195f296cf546b4eb8b98939a0dd9c211c3648eb1638e56e4b1266",
  "agent-sandboxes.json": "31ff9e898a981e230155d13e347fb48cb7fdfa61cbac26b8562eb60852c374a4",
  "alibaba-gpu-replay.json": "861a747001c0fc8c7531dfbae46c65f2e743f2f5d3f41d1ed42dbaad92e0a32e",
  // Its first `arrivalsInTests` arrivals (the full 10^6 is the benchmark's, too big for a unit test).
  "bench-platform.json": "9a508cda91a21d11fe193915c565af1c68fbc0bc3e34ce0de8eb13e633cd5f0d",
  "webhook-outage.json": "872bd1092ceecf29a4acde1e704504d9b6dafbe14fbc159b8a9be20d00d05c19",
  // Functions and their calls in the headless simulator (issue 30).
  "functions.json": "1bee33a333917016b56f50b1005479cd6c9b63b5ea9b309366c871fc0d8fb398"
}

describe("determinism", () => {
  it("pins every scenario's trace hash", () => {
    assert.sameMembers(Object.keys(pinnedTraceHashes), files)
  })

  for (const [file, hash] of Object.entries(pinnedTraceHashes)) {
    it(`${file} runs to its pinned trace hash`, () => {
      assert.strictEqual(runScenario(small(load(file)), { catalog }).traceHash, hash)
    })
  }

  for (const file of ["mixed-fleet.json", "spot-trace-replay.json"]) {
    it(`${file}: the same seed gives the byte-identical trace; another seed another`, () => {
      const scenario = load(file)
      const first = runScenario(scenario, { catalog, keepTrace: true })
      const second = runScenario(scenario, { catalog, keepTrace: true })
      assertSameTrace(first, second)
      assert.deepStrictEqual(second.totals, first.totals)
      assert.deepStrictEqual(second.jobs, first.jobs)
      const other = runScenario(scenario, { catalog, seed: `${scenario.seed}-other` })
      assert.notStrictEqual(other.traceHash, first.traceHash)
      assert.strictEqual(other.seed, `${scenario.seed}-other`)
    })
  }

  it("skipping the capacity looks that cannot change a waiting Job changes nothing, in a long drought too", () => {
    const base = load("mixed-fleet.json")
    const drought: Scenario = {
      ...base,
      fleet: { ...base.fleet, hostsPerVariant: 2, capacity: { "cpu-4x-16gb-us-af7a8673": 3 } },
      faults: {
        ...base.faults,
        droughts: [{ at: "24h", for: "24h", capacityFactor: 0.3 }, { at: "96h", for: "12h", capacityFactor: 0.5 }],
        suspendRate: 0.2,
        cancelRate: 0.1
      }
    }
    for (const scenario of [base, drought]) {
      const skipping = runScenario(scenario, { catalog, keepTrace: true })
      const stepping = runScenario(scenario, { catalog, keepTrace: true, stepEveryLook: true })
      assertSameTrace(skipping, stepping)
      assert.deepStrictEqual(skipping.jobs, stepping.jobs)
      assert.deepStrictEqual(skipping.violations, [])
      assert.strictEqual(stepping.totals.skippedSteps, 0)
      assert.strictEqual(
        skipping.totals.controllerSteps + skipping.totals.skippedSteps,
        stepping.totals.controllerSteps
      )
      if (scenario === drought) assert.isAbove(skipping.totals.skippedSteps, 1000)
    }
  })

  it("the checkers and the per-Job rows do not change the run", () => {
    const scenario = load("mixed-fleet.json")
    const checked = runScenario(scenario, { catalog, check: true, perJob: true })
    const bare = runScenario(scenario, { catalog, check: false, perJob: false })
    assert.strictEqual(bare.traceHash, checked.traceHash)
    assert.deepStrictEqual(bare.totals, checked.totals)
    assert.isUndefined(bare.jobs)
  })
})

describe("nodus sim", () => {
  it("runs a scenario file, writes the JSON summary to --out and one line to stderr", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "nodus-sim-")), "summary.json")
    const result = await run(["sim", "scenarios/mixed-fleet.json", "--out", out])
    assert.strictEqual(result.code, 0, result.stderr)
    assert.strictEqual(result.stdout, "")
    const summary = JSON.parse(readFileSync(out, "utf8")) as Summary
    const expected = runScenario(load("mixed-fleet.json"), { catalog })
    assert.strictEqual(summary.traceHash, expected.traceHash)
    assert.deepStrictEqual(summary.totals, expected.totals)
    assert.deepStrictEqual(summary.violations, [])
    assert.strictEqual(summary.jobs?.length, expected.totals.jobs)
    assert.match(
      result.stderr,
      new RegExp(
        `^mixed-fleet \\(seed "mixed-fleet-1"\\): ${expected.totals.jobs} jobs .* trace ${
          expected.traceHash.slice(0, 16)
        } .* engine events \\([\\d,]+/s\\)\\n$`,
        "u"
      )
    )
  })

  it("takes a bare name, --seed, --no-check and --per-job=false, and prints to stdout", async () => {
    const result = await run(["sim", "spot-trace-replay", "--seed", "other", "--no-check", "--per-job=false"])
    assert.strictEqual(result.code, 0, result.stderr)
    const summary = JSON.parse(result.stdout) as Summary
    assert.strictEqual(summary.seed, "other")
    assert.isUndefined(summary.jobs)
    assert.strictEqual(
      summary.traceHash,
      runScenario(load("spot-trace-replay.json"), { catalog, seed: "other", check: false, perJob: false }).traceHash
    )
  })

  it("exits 2 on a malformed scenario, naming every bad field, without a stack trace", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nodus-sim-"))
    const bad = JSON.parse(readFileSync(join(scenariosDir, "mixed-fleet.json"), "utf8"))
    bad.arrivals.meanInterarrival = 20
    bad.workloads[1].oomRate = 2
    bad.workloads[2].job.parallelism = "four"
    bad.fleet.hostsPerVarient = 3
    const file = join(dir, "bad.json")
    writeFileSync(file, JSON.stringify(bad))
    const result = await run(["sim", file])
    assert.strictEqual(result.code, 2)
    assert.strictEqual(result.stdout, "")
    for (
      const field of [
        "arrivals.meanInterarrival",
        "workloads[1].oomRate",
        "workloads[2].job.parallelism",
        "fleet.hostsPerVarient"
      ]
    ) {
      assert.include(result.stderr, `  ${field}: `)
    }
    assert.notMatch(result.stderr, /^\s+at /mu)
    writeFileSync(file, "{\"name\": ")
    const notJson = await run(["sim", file])
    assert.strictEqual(notJson.code, 2)
    assert.include(notJson.stderr, "not JSON")
    const missing = await run(["sim", "no-such-scenario"])
    assert.strictEqual(missing.code, 2)
    assert.include(missing.stderr, "no scenario \"no-such-scenario\"")
  })

  it("exits 2 on an offering or a spot trace that does not exist", async () => {
    const dir = mkdtempSync(join(tmpdir(), "nodus-sim-"))
    const bad = JSON.parse(readFileSync(join(scenariosDir, "spot-trace-replay.json"), "utf8"))
    bad.fleet.offerings[1] = "v100-nowhere"
    bad.providers.interruptible.preemptionTrace = "preemption/1-node/nowhere.json"
    const file = join(dir, "bad.json")
    writeFileSync(file, JSON.stringify(bad))
    const result = await run(["sim", file])
    assert.strictEqual(result.code, 2)
    assert.include(result.stderr, "fleet.offerings[1]: no offering \"v100-nowhere\"")
    assert.include(result.stderr, "providers.interruptible.preemptionTrace: no spot trace")
  })
})
