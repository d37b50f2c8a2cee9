/**
 * The Alibaba GPU cluster trace v2023 ("openb"; scenarios/data/alibaba-gpu-v2023/README.md: research use, cite the
 * USENIX ATC '23 FGD paper) read as pods and nodes, and the fleet its node list gives the simulator.
 *
 * The simulator gives every program a whole host of an offering with exactly the GPUs it asks for, and a trace node
 * runs several pods at once. `fleetOfNodes` carves the node list into such hosts, keeping every GPU once: the first
 * `whole[k]` nodes with exactly k GPUs (k = 2, 4, 8; in the list's order) stay whole as k-GPU hosts, and every other
 * node's GPUs are one-GPU hosts. A replay keeps as many whole nodes of each size as it has pods asking for that many
 * GPUs, so a multi-GPU pod never waits for a whole node the carving took apart (docs/simulator.md, "Trace workloads").
 *
 * Parsing is pure; `loadPods` and `loadNodes` read files.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type { DemandInterval } from "../core/capacity/Forecast.ts"

/** The repository's copy of the trace (its README: source, terms, citation). */
export const alibabaGpuDataDir = fileURLToPath(new URL("../../scenarios/data/alibaba-gpu-v2023/", import.meta.url))
export const alibabaPodsFile = "openb_pod_list_default.csv"
export const alibabaNodesFile = "openb_node_list_gpu_node.csv"

export interface TracePod {
  readonly name: string
  readonly cpuMilli: number
  readonly memoryMiB: number
  /** GPUs asked for: 0, 1, 2, 4 or 8. */
  readonly gpus: number
  /** The share of one GPU a GPU-sharing pod asks for, in 1/1000 (1000: whole GPUs). */
  readonly gpuMilli: number
  readonly qos: string
  /** The last phase the trace saw: Running, Failed, Pending (deleted before it was placed) or Succeeded. */
  readonly phase: string
  /** Seconds from the trace's start. */
  readonly creation: number
  readonly deletion: number
  /** Undefined for a pod deleted before it was placed. */
  readonly scheduled: number | undefined
}

export interface TraceNode {
  readonly name: string
  readonly cpuMilli: number
  readonly memoryMiB: number
  readonly gpus: number
  readonly model: string
}

const podHeader =
  "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
const nodeHeader = "sn,cpu_milli,memory_mib,gpu,model"

/**
 * The rows of a CSV file of the trace (no quoting: the files have none), each handed to `read` with a reader of
 * whole numbers that names the line and field of a malformed one. The files are copied unchanged, so any problem is
 * an error.
 */
const rowsOf = <T>(
  text: string,
  source: string,
  header: string,
  read: (cells: ReadonlyArray<string>, integer: (field: string, text: string) => number) => T
): ReadonlyArray<T> => {
  const rows = text.split(/\r?\n/u).filter((line) => line !== "")
  if (rows[0] !== header) throw new Error(`${source}:1: the header is not ${header}`)
  const width = header.split(",").length
  return rows.slice(1).map((row, index) => {
    const line = index + 2
    const cells = row.split(",")
    if (cells.length !== width) throw new Error(`${source}:${line}: ${cells.length} fields, not ${width}`)
    return read(cells, (field, value) => {
      if (!/^\d+$/u.test(value)) {
        throw new Error(`${source}:${line}: ${field} ${JSON.stringify(value)} is not a whole number`)
      }
      return Number(value)
    })
  })
}

/** Parses a pod list's CSV text. */
export const parsePods = (text: string, source = "pods"): ReadonlyArray<TracePod> =>
  rowsOf(text, source, podHeader, (cells, integer) => {
    const [name, cpu, memory, gpus, gpuMilli, , qos, phase, creation, deletion, scheduled] = cells as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string
    ]
    return {
      name,
      cpuMilli: integer("cpu_milli", cpu),
      memoryMiB: integer("memory_mib", memory),
      gpus: integer("num_gpu", gpus),
      gpuMilli: integer("gpu_milli", gpuMilli),
      qos,
      phase,
      creation: integer("creation_time", creation),
      deletion: integer("deletion_time", deletion),
      scheduled: scheduled === "" ? undefined : integer("scheduled_time", scheduled)
    }
  })

/** Parses a node list's CSV text. */
export const parseNodes = (text: string, source = "nodes"): ReadonlyArray<TraceNode> =>
  rowsOf(text, source, nodeHeader, (cells, integer) => {
    const [name, cpu, memory, gpus, model] = cells as [string, string, string, string, string]
    return {
      name,
      cpuMilli: integer("cpu_milli", cpu),
      memoryMiB: integer("memory_mib", memory),
      gpus: integer("gpu", gpus),
      model
    }
  })

export const loadPods = (path: string): ReadonlyArray<TracePod> => parsePods(readFileSync(path, "utf8"), path)
export const loadNodes = (path: string): ReadonlyArray<TraceNode> => parseNodes(readFileSync(path, "utf8"), path)

// The Pool forecast's reading of the trace (src/cli/Forecast.ts; docs/simulator.md, "Forecast").

export type AlibabaPod = TracePod

/** The default pod list, or a pod list of its format at `path`. */
export const loadAlibabaPods = (path: string = `${alibabaGpuDataDir}${alibabaPodsFile}`): ReadonlyArray<AlibabaPod> =>
  loadPods(path)

/** The GPUs of the trace's GPU node list (6,212). */
export const alibabaClusterGpus = (path: string = `${alibabaGpuDataDir}${alibabaNodesFile}`): number =>
  loadNodes(path).reduce((sum, node) => sum + node.gpus, 0)

/** A pod's demand over its recorded life, creation to deletion (waiting and running): its GPUs in thousandths. */
export const demandOf = (pod: AlibabaPod): DemandInterval => ({
  startMs: pod.creation * 1000,
  endMs: pod.deletion * 1000,
  milliGpus: pod.gpus * pod.gpuMilli
})

/** The host sizes the fleet is carved into: a pod asking for k GPUs takes one k-GPU host. */
export const hostSizes = [1, 2, 4, 8] as const
export type HostSize = (typeof hostSizes)[number]

/** The GPUs a pod takes in the replay: what it asks for, a GPU-sharing pod (a share of one GPU) a whole one. */
export const hostSizeOf = (pod: TracePod): HostSize | undefined => {
  if (pod.gpus === 0) return undefined
  return (hostSizes as ReadonlyArray<number>).includes(pod.gpus) ? (pod.gpus as HostSize) : undefined
}

/** Hosts by size (module doc): `whole[k]` nodes of exactly k GPUs stay whole, every other GPU is a one-GPU host. */
export const fleetOfNodes = (
  nodes: ReadonlyArray<TraceNode>,
  whole: Readonly<Partial<Record<HostSize, number>>>
): Record<HostSize, number> => {
  const hosts: Record<HostSize, number> = { 1: 0, 2: 0, 4: 0, 8: 0 }
  const kept: Record<HostSize, number> = { 1: 0, 2: 0, 4: 0, 8: 0 }
  for (const node of nodes) {
    const size = node.gpus as HostSize
    if (size !== 1 && (hostSizes as ReadonlyArray<number>).includes(size) && kept[size] < (whole[size] ?? 0)) {
      kept[size]++
      hosts[size]++
    } else hosts[1] += node.gpus
  }
  return hosts
}
