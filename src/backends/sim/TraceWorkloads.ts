/**
 * Recorded traces as workload sources (docs/simulator.md, "Trace workloads"): the Alibaba GPU cluster trace v2023's
 * pods replayed as Jobs on its own node list. A pod asking for GPUs becomes a Job named after it, created at
 * `start + (creation_time − from)`, asking for `num_gpu` GPUs (a GPU-sharing pod, a share of one GPU, for one), whose
 * program works for the trace's recorded run time (`deletion_time − scheduled_time`) and exits 0, or 1 for a pod the
 * trace saw Failed (with backoffLimit 0: the trace's pods are not retried). A pod deleted before it was ever placed
 * (no `scheduled_time`) is cancelled at its deletion time, as its owner gave up then. The node list is the fleet of the
 * trace's `offerings`, carved into hosts by `fleetOfNodes`. What this leaves out is listed in `queueDelayLeftOut`.
 */
import { join } from "node:path"
import type { JsonObject } from "../../core/Json.ts"
import * as MergePatch from "../../core/meta/MergePatch.ts"
import { durationMs } from "../../core/StatusText.ts"
import {
  fleetOfNodes,
  type HostSize,
  hostSizeOf,
  hostSizes,
  loadNodes,
  loadPods,
  type TracePod
} from "../../data/AlibabaGpuTrace.ts"
import { admitJobSpec } from "../../kinds/job/JobAdmission.ts"
import { isFinalPhase } from "../../kinds/job/JobPhases.ts"
import type { JobSpecType, JobStatusType } from "../../kinds/job/JobSchema.ts"
import type { Engine } from "./Engine.ts"
import type { SimJob } from "./JobSim.ts"
import type { TraceWorkloadSettings } from "./Scenario.ts"
import type { SimKind } from "./SimObject.ts"
import type { Simulation } from "./Simulation.ts"
import { defaultWorkload } from "./Workloads.ts"

/** Trace files are named relative to this folder. */
export const scenarioDataDir = new URL("../../../scenarios/data/", import.meta.url).pathname

/** One trace workload, read: the pods it replays (in creation order) and, with a node list, the hosts per size. */
export interface TraceSource {
  readonly settings: TraceWorkloadSettings
  readonly pods: ReadonlyArray<TracePod>
  readonly hosts: Readonly<Record<HostSize, number>> | undefined
  /** The trace's second that the scenario's start stands for. */
  readonly fromSeconds: number
}

const cache = new Map<string, ReadonlyArray<TracePod>>()
const nodeCache = new Map<string, ReturnType<typeof loadNodes>>()

/** Reads a trace workload's files (each file once per process: variants and tests replay the same one). */
export const loadTraceSource = (settings: TraceWorkloadSettings): TraceSource => {
  const podsPath = join(scenarioDataDir, settings.pods)
  let all = cache.get(podsPath)
  if (all === undefined) cache.set(podsPath, all = loadPods(podsPath))
  const fromSeconds = Math.floor(durationMs(settings.from, 0) / 1000)
  // Pods already alive before the window are not replayed; their hosts are free from the start.
  const pods = all
    .filter((pod) => pod.creation >= fromSeconds && hostSizeOf(pod) !== undefined)
    .map((pod, index) => ({ pod, index }))
    .sort((a, b) => a.pod.creation - b.pod.creation || a.index - b.index)
    .map(({ pod }) => pod)
  let hosts: Record<HostSize, number> | undefined
  if (settings.nodes !== undefined) {
    const nodesPath = join(scenarioDataDir, settings.nodes)
    let nodes = nodeCache.get(nodesPath)
    if (nodes === undefined) nodeCache.set(nodesPath, nodes = loadNodes(nodesPath))
    const whole: Partial<Record<HostSize, number>> = {}
    for (const pod of pods) {
      const size = hostSizeOf(pod)!
      if (size !== 1) whole[size] = (whole[size] ?? 0) + 1
    }
    hosts = fleetOfNodes(nodes, whole)
  }
  return { settings, pods, hosts, fromSeconds }
}

/** Problems of a trace workload's references: files that do not read, sizes without an offering. */
export const traceWorkloadProblems = (
  settings: TraceWorkloadSettings,
  index: number,
  fleet: ReadonlySet<string>
): ReadonlyArray<{ readonly field: string; readonly message: string }> => {
  const problems: Array<{ field: string; message: string }> = []
  const at = `traceWorkloads[${index}]`
  const readable = (field: string, name: string, read: (path: string) => unknown) => {
    try {
      read(join(scenarioDataDir, name))
    } catch (error) {
      problems.push({
        field: `${at}.${field}`,
        message: (error as { code?: string }).code === "ENOENT"
          ? `no file ${name} under scenarios/data/`
          : (error as Error).message
      })
    }
  }
  readable("pods", settings.pods, loadPods)
  if (settings.nodes !== undefined) readable("nodes", settings.nodes, loadNodes)
  for (const [size, id] of Object.entries(settings.offerings)) {
    if (!(hostSizes as ReadonlyArray<number>).includes(Number(size)) || String(Number(size)) !== size) {
      problems.push({ field: `${at}.offerings[${size}]`, message: `a GPU count of a pod: 1, 2, 4 or 8` })
    } else if (!fleet.has(id)) {
      problems.push({
        field: `${at}.offerings[${size}]`,
        message: `${JSON.stringify(id)} is not an offering of the fleet`
      })
    }
  }
  for (const size of hostSizes) {
    if (settings.offerings[String(size)] === undefined) {
      problems.push({
        field: `${at}.offerings`,
        message: `no offering for pods asking for ${size} GPU${size === 1 ? "" : "s"}`
      })
    }
  }
  return problems
}

/**
 * The fleet's hosts the node lists give: per offering, its hosts on demand (and none interruptible: they are owned).
 */
export const traceFleetCapacity = (sources: ReadonlyArray<TraceSource>): Record<string, number> => {
  const capacity: Record<string, number> = {}
  for (const source of sources) {
    if (source.hosts === undefined) continue
    for (const size of hostSizes) {
      const id = source.settings.offerings[String(size)]!
      capacity[id] = (capacity[id] ?? 0) + source.hosts[size]
      capacity[`${id}/interruptible`] = 0
    }
  }
  return capacity
}

/** A replayed pod's queueing delay: recorded (scheduled − creation), and the Job it became. */
export interface ReplayedPod {
  readonly pod: TracePod
  readonly job: SimJob
}

/**
 * Schedules every pod of the sources as a Job (module doc), arriving before `horizonEnd`. `submitted` sees each Job as
 * it is created (cost classes, fidelity).
 */
export const replayTraces = (
  sources: ReadonlyArray<TraceSource>,
  engine: Engine,
  simulation: Simulation,
  jobs: SimKind<JobSpecType, JobStatusType>,
  start: number,
  horizonEnd: number,
  submitted: (job: SimJob, source: TraceSource, pod: TracePod, spec: JobSpecType) => void
): void => {
  for (const source of sources) {
    const { settings } = source
    const specs = new Map<HostSize, JobSpecType>()
    for (const size of hostSizes) {
      specs.set(
        size,
        admitJobSpec(
          MergePatch.apply(settings.job as JsonObject, {
            resources: { gpu: { count: size } },
            backoffLimit: 0
          }) as JsonObject
        )
      )
    }
    for (const pod of source.pods) {
      const at = start + (pod.creation - source.fromSeconds) * 1000
      if (at >= horizonEnd) break
      const spec = specs.get(hostSizeOf(pod)!)!
      const workMs = (pod.deletion - (pod.scheduled ?? pod.creation)) * 1000
      const workload = { ...defaultWorkload, durationMs: workMs, exitCode: pod.phase === "Failed" ? 1 : 0 }
      engine.at(at, () => {
        const job = simulation.submit(jobs, settings.namespace, pod.name, spec, workload)
        submitted(job, source, pod, spec)
        if (pod.scheduled !== undefined) return
        // Never placed in the trace: its owner deleted it then. Here it is cancelled then, unless it ended before.
        engine.at(start + (pod.deletion - source.fromSeconds) * 1000, () => {
          if (!job.deleted && !isFinalPhase(job.status.phase ?? "Pending")) {
            simulation.update(job, { ...job.spec, state: "Cancelled" })
          }
        })
      })
    }
  }
}
