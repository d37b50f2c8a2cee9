/**
 * Trace workloads and fidelity (docs/simulator.md, "Trace workloads", "Fidelity"): the Alibaba GPU v2023 pods replayed
 * as Jobs on its node list, and the figures that say how closely a replay follows its trace — the spot replay's
 * preemption instants against the trace file's drops, the Alibaba replay's queueing delays against the recorded ones.
 * The figures are computed from the trace and the run: checked here against what the test reads from the files itself,
 * and against runs made up to miss.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import {
  ExposureLog,
  ksDistance,
  preemptionFidelity,
  queueDelayFidelity,
  traceDrops
} from "../../../src/backends/sim/Fidelity.ts"
import { runScenario, scenarioProblems } from "../../../src/backends/sim/Run.ts"
import { decodeScenario, parseScenario } from "../../../src/backends/sim/Scenario.ts"
import { fleetOfNodes, loadNodes, loadPods, parsePods } from "../../../src/data/AlibabaGpuTrace.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"

const root = join(import.meta.dirname, "..", "..", "..")
const data = join(root, "scenarios", "data", "alibaba-gpu-v2023")
const catalog = loadCatalog()
const scenarioFile = (name: string) =>
  JSON.parse(readFileSync(join(root, "scenarios", name), "utf8")) as Record<string, unknown>

describe("the Alibaba GPU v2023 trace", () => {
  it("reads every pod and node of the copied files, and names the line of a malformed row", () => {
    const pods = loadPods(join(data, "openb_pod_list_default.csv"))
    const nodes = loadNodes(join(data, "openb_node_list_gpu_node.csv"))
    assert.strictEqual(pods.length, 8152)
    assert.strictEqual(nodes.length, 1213)
    assert.strictEqual(nodes.reduce((sum, node) => sum + node.gpus, 0), 6212)
    assert.deepStrictEqual(pods[1], {
      name: "openb-pod-0001",
      cpuMilli: 6000,
      memoryMiB: 12288,
      gpus: 1,
      gpuMilli: 460,
      qos: "LS",
      phase: "Running",
      creation: 427061,
      deletion: 12902960,
      scheduled: 427061
    })
    assert.strictEqual(pods.filter((pod) => pod.scheduled === undefined).length, 897)
    const header =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
    assert.throws(
      () => parsePods(`${header}\np,1,2,one,1000,,LS,Running,0,1,0\n`, "x.csv"),
      /x\.csv:2: num_gpu "one" is not a whole number/u
    )
  })

  it("carves the node list into hosts keeping every GPU once", () => {
    const nodes = loadNodes(join(data, "openb_node_list_gpu_node.csv"))
    const hosts = fleetOfNodes(nodes, { 8: 44, 4: 15, 2: 16 })
    assert.deepStrictEqual({ 2: hosts[2], 4: hosts[4], 8: hosts[8] }, { 2: 16, 4: 15, 8: 44 })
    assert.strictEqual(hosts[1] + 2 * hosts[2] + 4 * hosts[4] + 8 * hosts[8], 6212)
    // More whole nodes asked for than there are: all of them, no more.
    assert.strictEqual(fleetOfNodes(nodes, { 4: 10_000 })[4], nodes.filter((node) => node.gpus === 4).length)
  })
})

describe("alibaba-gpu-replay.json", () => {
  const file = scenarioFile("alibaba-gpu-replay.json")
  const scenario = decodeScenario(file)
  const run = () => runScenario(scenario, { catalog })

  it("replays every GPU pod of its window as a Job created at the pod's recorded instant, with its recorded outcome", () => {
    const summary = run()
    assert.deepStrictEqual(summary.violations, [])
    const from = 2780 * 3600
    const pods = loadPods(join(data, "openb_pod_list_default.csv")).filter((pod) =>
      pod.gpus > 0 && pod.creation >= from
    )
    assert.strictEqual(summary.totals.jobs, pods.length)
    const start = Date.parse(scenario.start)
    const rows = new Map(summary.jobs!.map((job) => [job.name, job]))
    for (const pod of pods) {
      const row = rows.get(`openb/${pod.name}`)
      assert.isDefined(row, pod.name)
      assert.strictEqual(Date.parse(row!.createdAt), start + (pod.creation - from) * 1000, pod.name)
      // Never placed in the trace: cancelled at its deletion. Failed: exits 1, not retried. The rest succeed.
      const expected = pod.scheduled === undefined ? "Cancelled" : pod.phase === "Failed" ? "Failed" : "Succeeded"
      assert.strictEqual(row!.phase, expected, pod.name)
    }
    assert.strictEqual(summary.cost!.byClass["openb"]!.objects, pods.length)
  })

  it("compares the simulated queueing delay with the recorded one, computed from the trace, the same for the same seed", () => {
    const first = run()
    const second = run()
    assert.strictEqual(second.traceHash, first.traceHash)
    assert.deepStrictEqual(second.fidelity, first.fidelity)
    const figures = first.fidelity!.queueDelay!
    // The recorded side, read from the file here.
    const recorded = loadPods(join(data, "openb_pod_list_default.csv"))
      .filter((pod) => pod.gpus > 0 && pod.creation >= 2780 * 3600 && pod.scheduled !== undefined)
      .map((pod) => pod.scheduled! - pod.creation)
    assert.strictEqual(figures.pods + figures.notLaunched, recorded.length)
    assert.strictEqual(figures.notLaunched, 0)
    assert.closeTo(figures.recordedMean, recorded.reduce((sum, value) => sum + value, 0) / recorded.length, 0.001)
    assert.isAtLeast(figures.ks, 0)
    assert.isAtMost(figures.ks, 1)
    assert.closeTo(figures.meanError, figures.simulatedMean - figures.recordedMean, 0.002)
    assert.isAbove(figures.leftOut.length, 0)
  })

  it("names the field of a trace file that does not exist and of a pod size without an offering", () => {
    const workload = (file["traceWorkloads"] as Array<Record<string, unknown>>)[0]!
    const offerings = { ...(workload["offerings"] as Record<string, string>) }
    delete offerings["8"]
    const bad = decodeScenario({
      ...file,
      traceWorkloads: [{
        ...workload,
        pods: "alibaba-gpu-v2023/nosuch.csv",
        offerings: { ...offerings, "3": "a100-40gb-1x-us-94f673a8" }
      }]
    })
    const problems = scenarioProblems(bad, catalog).map((problem) => `${problem.field}: ${problem.message}`)
    assert.include(problems, "traceWorkloads[0].pods: no file alibaba-gpu-v2023/nosuch.csv under scenarios/data/")
    assert.include(problems, "traceWorkloads[0].offerings[3]: a GPU count of a pod: 1, 2, 4 or 8")
    assert.include(problems, "traceWorkloads[0].offerings: no offering for pods asking for 8 GPUs")
    assert.deepStrictEqual(scenarioProblems(scenario, catalog), [])
  })

  it("a variant's fleet patch changes the hosts: fewer one-GPU hosts than the pods hold at once make them queue", () => {
    const parsed = parseScenario({
      ...file,
      fleet: { ...(file["fleet"] as object), capacity: { "a100-40gb-1x-us-94f673a8": 16 } }
    })
    assert.isTrue(parsed.ok)
    if (!parsed.ok) return
    const tight = runScenario(parsed.scenario, { catalog, perJob: false })
    const roomy = run()
    assert.deepStrictEqual(tight.violations, [])
    assert.isAbove(tight.fidelity!.queueDelay!.simulatedMean, roomy.fidelity!.queueDelay!.simulatedMean)
  })
})

describe("fidelity figures", () => {
  it("the trace's drops are read from its samples, replayed from the epoch, seams included", () => {
    // Ticks of 1 s: 1 1 0 0 1 0 | 1 1 0 0 1 0 | ... — drops at ticks 2 and 5 of every pass; the seam (0 then 1) is not
    // one.
    assert.deepStrictEqual(traceDrops([1, 1, 0, 0, 1, 0], 1000, 0, 12_000), [2000, 5000, 8000, 11_000])
    // A trace that starts at 0 after ending above it drops at every seam after the first pass.
    assert.deepStrictEqual(traceDrops([0, 1, 1], 1000, 0, 7000), [3000, 6000])
  })

  it("counts the instants a host was running at, and those at which every running host was preempted then", () => {
    const trace = { name: "t", samples: [1, 1, 0, 0, 1, 0], gapMs: 1000 }
    const exposures = [
      { bootedAt: 0, until: undefined, preemptedAt: 2000 }, // preempted at the drop at 2000
      { bootedAt: 3000, until: 4000, preemptedAt: undefined }, // ended before the drop at 5000
      { bootedAt: 4500, until: undefined, preemptedAt: 5000 }, // preempted at 5000
      { bootedAt: 7000, until: 11_500, preemptedAt: undefined } // running through 8000 and 11000, never preempted
    ]
    const figures = preemptionFidelity("v/interruptible", trace, exposures, 0, 12_000)
    assert.deepStrictEqual(figures, {
      variant: "v/interruptible",
      trace: "t",
      dropsInRun: 4,
      instants: 4,
      reproduced: 2,
      preemptions: 2,
      offTrace: 0
    })
    // A run that made it would have been preempted at 8000: one more reproduced, and one preemption moved by a
    // millisecond is off the trace, and its instant is no longer reproduced.
    const fixed = [...exposures.slice(0, 3), { bootedAt: 7000, until: undefined, preemptedAt: 8000 }]
    assert.include(preemptionFidelity("v", trace, fixed, 0, 12_000), { instants: 3, reproduced: 3, offTrace: 0 })
    const moved = [{ ...exposures[0]!, preemptedAt: 2001 }, ...fixed.slice(1)]
    assert.include(preemptionFidelity("v", trace, moved, 0, 12_000), {
      instants: 3,
      reproduced: 2,
      preemptions: 3,
      offTrace: 1
    })
  })

  it("spot-trace-replay reproduces every preemption instant of its traces, as counted from the trace files", () => {
    const scenario = decodeScenario(scenarioFile("spot-trace-replay.json"))
    const summary = runScenario(scenario, { catalog, perJob: false })
    const figures = summary.fidelity!.preemptions!
    assert.deepStrictEqual(figures.map((entry) => entry.variant), [
      "v100-sxm-16gb-4x-us-99c937f7/interruptible",
      "v100-sxm-32gb-8x-us-87e52b4b/interruptible"
    ])
    const start = Date.parse(summary.virtualStart)
    const end = Date.parse(summary.virtualEnd)
    for (const entry of figures) {
      // The drops in the run, counted here from the raw file.
      const raw = JSON.parse(
        readFileSync(
          join(root, "scenarios", "data", "spot-traces", "preemption", "1-node", `${entry.trace}.json`),
          "utf8"
        )
      ) as { metadata: { gap_seconds: number }; data: Array<number> }
      const gap = raw.metadata.gap_seconds * 1000
      let drops = 0
      for (let tick = Math.ceil(start / gap); tick * gap <= end; tick++) {
        if (raw.data[tick % raw.data.length] === 0 && raw.data[(tick - 1) % raw.data.length]! > 0) drops++
      }
      assert.strictEqual(entry.dropsInRun, drops, entry.variant)
      assert.isAbove(entry.instants, 0, entry.variant)
      assert.strictEqual(entry.reproduced, entry.instants, entry.variant)
      assert.strictEqual(entry.offTrace, 0, entry.variant)
    }
    assert.strictEqual(figures.reduce((sum, entry) => sum + entry.preemptions, 0), summary.totals.preemptions)
  })

  it("the Kolmogorov–Smirnov distance and the mean error", () => {
    assert.strictEqual(ksDistance([1, 2, 3], [3, 2, 1]), 0)
    assert.strictEqual(ksDistance([0, 0, 0], [1, 2, 3]), 1)
    assert.strictEqual(ksDistance([1, 2], [2, 3]), 0.5)
    const figures = queueDelayFidelity([{ recorded: 10, simulated: 0 }, { recorded: 0, simulated: 0 }, {
      recorded: 5,
      simulated: undefined
    }], [])
    assert.include(figures, {
      pods: 2,
      notLaunched: 1,
      recordedMean: 5,
      simulatedMean: 0,
      meanError: -5,
      meanAbsoluteError: 5,
      ks: 0.5
    })
  })
})

describe("ExposureLog", () => {
  it("gives back what it was given, in order, past its first growth, runs never preempted or never stopped included", () => {
    const log = new ExposureLog()
    const given = Array.from({ length: 2500 }, (_, index) => ({
      bootedAt: 1_767_225_600_000 + index * 977,
      until: index % 3 === 0 ? undefined : 1_767_225_600_000 + index * 977 + 60_000,
      preemptedAt: index % 3 === 0 && index % 2 === 0 ? 1_767_225_600_000 + index * 977 + 1 : undefined
    }))
    for (const exposure of given) log.add(exposure)
    assert.deepStrictEqual(log.exposures(), given)
    assert.deepStrictEqual(new ExposureLog().exposures(), [])
  })
})
