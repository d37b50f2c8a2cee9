/**
 * What a host has, measured by its agent (docs/live.md, "The node agent"): vCPUs, memory, the disk under the agent's
 * data directory, and NVIDIA GPUs as `nvidia-smi` lists them (none when it is absent or fails: a host without the
 * driver has no GPU the agent could give a program), each with the device node a run given it sees (docs/live.md,
 * "GPUs").
 */
import { execFileSync } from "node:child_process"
import { readFileSync, statfsSync } from "node:fs"
import { availableParallelism, hostname, totalmem } from "node:os"
import { join } from "node:path"
import type { IsolationSupport } from "./Isolation.ts"
import type { Hello, HostCapacity } from "./Protocol.ts"

/** The agent's version, as Node objects show it. */
export const agentVersion = "nodus-agent/1"

/** A GPU of this host: what the server is told (model, memory), and the device node a run that is given it sees. */
export interface HostGpu {
  readonly model: string
  readonly memoryMiB: number
  readonly device: string
}

/** What `detectGpus` asks nvidia-smi, one GPU per line. */
export const nvidiaSmiQuery = ["--query-gpu=index,name,memory.total,pci.bus_id", "--format=csv,noheader,nounits"]

/**
 * nvidia-smi's answer to `nvidiaSmiQuery`: `index, name, memory.total (MiB), pci.bus_id` per line. The device node of
 * a GPU is /dev/nvidia<minor>, where the minor number is the driver's (`minorOf`, read under /proc/driver/nvidia); it
 * is usually the index, which stands in when the driver does not say.
 */
export const parseNvidiaSmi = (
  output: string,
  minorOf: (busId: string) => number | undefined = () => undefined
): ReadonlyArray<HostGpu> =>
  output.split("\n").map((line) => line.trim()).filter((line) => line.length > 0).flatMap((line) => {
    const fields = line.split(",").map((field) => field.trim())
    if (fields.length < 4) return []
    const index = Number(fields[0])
    const busId = fields[fields.length - 1]!
    const memoryMiB = Number(fields[fields.length - 2])
    // A model name with a comma in it keeps it.
    const model = fields.slice(1, -2).join(", ")
    if (!Number.isInteger(index) || index < 0 || model.length === 0 || !Number.isFinite(memoryMiB)) return []
    return [{ model, memoryMiB, device: `/dev/nvidia${minorOf(busId) ?? index}` }]
  })

/**
 * The driver's minor number of the GPU at a PCI bus id, from /proc/driver/nvidia/gpus/<bus id>/information ("Device
 * Minor: N"). nvidia-smi writes the domain with 8 digits (00000000:18:00.0), the driver's directory with 4.
 */
export const driverMinor = (procGpus: string) => (busId: string): number | undefined => {
  const [domain = "", rest = ""] = busId.toLowerCase().split(/:(.*)/su)
  try {
    const information = readFileSync(join(procGpus, `${domain.slice(-4)}:${rest}`, "information"), "utf8")
    const minor = /^Device Minor:\s*(\d+)\s*$/mu.exec(information)?.[1]
    return minor === undefined ? undefined : Number(minor)
  } catch {
    return undefined
  }
}

/** This host's NVIDIA GPUs; none when nvidia-smi is absent or fails (no driver, no GPU a program could use). */
export const detectGpus = (nvidiaSmi = "nvidia-smi", procGpus = "/proc/driver/nvidia/gpus"): ReadonlyArray<HostGpu> => {
  try {
    const output = execFileSync(nvidiaSmi, nvidiaSmiQuery, {
      encoding: "utf8",
      timeout: 10_000,
      stdio: ["ignore", "pipe", "ignore"]
    })
    return parseNvidiaSmi(output, driverMinor(procGpus))
  } catch {
    return []
  }
}

export const measureHost = (dataDir: string, gpus: ReadonlyArray<HostGpu>): HostCapacity => {
  const disk = statfsSync(dataDir)
  return {
    cpus: availableParallelism(),
    memoryBytes: totalmem(),
    diskBytes: Number(disk.bavail) * Number(disk.bsize),
    gpus: gpus.map(({ model, memoryMiB }) => ({ model, memoryMiB }))
  }
}

/** An agent's hello: this host measured now (its GPUs as `detectGpus` found them), and what it can do for isolation. */
export const helloOf = (
  node: string,
  dataDir: string,
  isolation: IsolationSupport,
  gpus: ReadonlyArray<HostGpu>
): Hello => ({
  node,
  hostname: hostname(),
  agentVersion,
  capacity: measureHost(dataDir, gpus),
  isolation: {
    bubblewrap: isolation.bwrap !== undefined,
    memoryLimits: isolation.memoryLimits !== "none",
    problems: isolation.problems
  }
})
