/**
 * A customer's own host as placement sees it (spec: Pool; docs/billing.md, "Pool hosts"): every Node of a Pool sells
 * its own offerings — one for CPU work, and one per GPU count (1, 2, 4, 8) it can give — so placement's filters (GPU
 * family, count, memory, host shape) apply to it as to any offering. A Node runs several programs at once: one per
 * vCPU, and GPU work takes its GPUs besides.
 *
 * The Pool rate is nodus's fee for running work on a customer's host (the host itself is the customer's): per vCPU-hour
 * and per GPU-hour of the offering, billed per second (Pricebook: provider `pool`).
 */
import type { Offering } from "./Offering.ts"

export const poolProvider = "pool"
/** $0.002 per vCPU-hour of the host. */
export const poolMicroUsdPerVcpuHour = 2_000n
/** $0.05 per GPU-hour. */
export const poolMicroUsdPerGpuHour = 50_000n
/** The region class every Pool offering is in: a customer's host is in no provider region (Placement.regions). */
export const poolRegionClass = "pool"

export interface NodeShape {
  readonly pool: string
  readonly node: string
  readonly cpus: number
  readonly memoryBytes: number
  readonly diskBytes: number
  readonly gpus: ReadonlyArray<{ readonly model: string; readonly memoryMiB: number }>
}

const GiB = 1024 ** 3
const gpuCounts = [1, 2, 4, 8] as const

/** The offering of a Node for CPU work: `<node>`. */
export const nodeOfferingId = (node: string) => node

/** The GPU family of an nvidia-smi model name ("NVIDIA H100 80GB HBM3" → H100). */
export const gpuFamilyOf = (model: string): string => {
  const words = model.replace(/^NVIDIA\s+/iu, "").split(/\s+/u)
  return (words.find((word) => /\d/u.test(word)) ?? words[0] ?? model).replace(/-.*$/u, "").toUpperCase()
}

/** The offerings of one Node: its CPU offering, and one per GPU count up to its GPUs (of its first model). */
export const nodeOfferings = (shape: NodeShape): ReadonlyArray<Offering> => {
  const base = {
    provider: poolProvider,
    instanceType: shape.node,
    vcpus: shape.cpus,
    memoryGiB: Math.floor(shape.memoryBytes / GiB),
    diskGiB: Math.floor(shape.diskBytes / GiB),
    regionClass: poolRegionClass,
    regions: [shape.pool],
    interruptibleMicroUsdPerHour: undefined
  }
  const cpuRate = BigInt(shape.cpus) * poolMicroUsdPerVcpuHour
  const offerings: Array<Offering> = [{
    ...base,
    id: nodeOfferingId(shape.node),
    accelerator: undefined,
    onDemandMicroUsdPerHour: cpuRate
  }]
  const first = shape.gpus[0]
  if (first === undefined) return offerings
  const same = shape.gpus.filter((gpu) => gpu.model === first.model).length
  for (const count of gpuCounts) {
    if (count > same) break
    offerings.push({
      ...base,
      id: `${shape.node}-gpu${count}`,
      accelerator: {
        family: gpuFamilyOf(first.model),
        variant: first.model.replace(/\s+/gu, "-"),
        count,
        memoryGiB: Math.floor(first.memoryMiB / 1024),
        interconnect: "PCIe"
      },
      onDemandMicroUsdPerHour: cpuRate + BigInt(count) * poolMicroUsdPerGpuHour
    })
  }
  return offerings
}
