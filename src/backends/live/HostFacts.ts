/**
 * What a host has, measured by its agent (docs/live.md, "The node agent"): vCPUs, memory, the disk under the agent's
 * data directory, and NVIDIA GPUs as `nvidia-smi` lists them (none when it is absent or fails: a host without the
 * driver has no GPU the agent could give a program).
 */
import { execFileSync } from "node:child_process"
import { availableParallelism, hostname, totalmem } from "node:os"
import { statfsSync } from "node:fs"
import type { IsolationSupport } from "./Isolation.ts"
import type { Hello, HostCapacity } from "./Protocol.ts"

/** The agent's version, as Node objects show it. */
export const agentVersion = "nodus-agent/1"

/** One GPU per line: `name, memory.total` in MiB (nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits). */
export const parseNvidiaSmi = (output: string): HostCapacity["gpus"] =>
  output.split("\n").map((line) => line.trim()).filter((line) => line.length > 0).flatMap((line) => {
    const comma = line.lastIndexOf(",")
    if (comma < 0) return []
    const model = line.slice(0, comma).trim()
    const memoryMiB = Number(line.slice(comma + 1).trim())
    return model.length > 0 && Number.isFinite(memoryMiB) ? [{ model, memoryMiB }] : []
  })

export const detectGpus = (nvidiaSmi = "nvidia-smi"): HostCapacity["gpus"] => {
  try {
    const output = execFileSync(nvidiaSmi, ["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] })
    return parseNvidiaSmi(output)
  } catch {
    return []
  }
}

export const measureHost = (dataDir: string): HostCapacity => {
  const disk = statfsSync(dataDir)
  return { cpus: availableParallelism(), memoryBytes: totalmem(), diskBytes: Number(disk.bavail) * Number(disk.bsize), gpus: detectGpus() }
}

/** An agent's hello: this host measured now, and what it can do for isolation. */
export const helloOf = (node: string, dataDir: string, isolation: IsolationSupport): Hello => ({
  node,
  hostname: hostname(),
  agentVersion,
  capacity: measureHost(dataDir),
  isolation: { bubblewrap: isolation.bwrap !== undefined, memoryLimits: isolation.memoryLimits !== "none", problems: isolation.problems }
})
