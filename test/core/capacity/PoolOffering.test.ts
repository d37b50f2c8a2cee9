/** A Node's offerings (core/capacity/PoolOffering.ts) and what nvidia-smi says (backends/live/HostFacts.ts). */
import { describe, expect, it } from "vitest"
import {
  gpuFamilyOf,
  nodeOfferings,
  poolMicroUsdPerGpuHour,
  poolMicroUsdPerVcpuHour
} from "../../../src/core/capacity/PoolOffering.ts"

const GiB = 1024 ** 3

describe("a Node's offerings", () => {
  it("are one for CPU work at the Pool rate per vCPU", () => {
    const [cpu, ...rest] = nodeOfferings({
      pool: "edge",
      node: "n1",
      cpus: 16,
      memoryBytes: 64 * GiB,
      diskBytes: 500 * GiB,
      gpus: []
    })
    expect(rest).toEqual([])
    expect(cpu).toMatchObject({
      id: "n1",
      provider: "pool",
      vcpus: 16,
      memoryGiB: 64,
      diskGiB: 500,
      accelerator: undefined,
      regionClass: "pool"
    })
    expect(cpu!.onDemandMicroUsdPerHour).toBe(16n * poolMicroUsdPerVcpuHour)
    expect(cpu!.interruptibleMicroUsdPerHour).toBeUndefined()
  })

  it("add one per GPU count up to the GPUs of its first model, priced per GPU", () => {
    const gpus = Array.from({ length: 4 }, () => ({ model: "NVIDIA H100 80GB HBM3", memoryMiB: 81_559 }))
    const offerings = nodeOfferings({
      pool: "edge",
      node: "g1",
      cpus: 32,
      memoryBytes: 256 * GiB,
      diskBytes: GiB,
      gpus
    })
    expect(offerings.map((offering) => offering.id)).toEqual(["g1", "g1-gpu1", "g1-gpu2", "g1-gpu4"])
    const four = offerings[3]!
    expect(four.accelerator).toEqual({
      family: "H100",
      variant: "NVIDIA-H100-80GB-HBM3",
      count: 4,
      memoryGiB: 79,
      interconnect: "PCIe"
    })
    expect(four.onDemandMicroUsdPerHour).toBe(32n * poolMicroUsdPerVcpuHour + 4n * poolMicroUsdPerGpuHour)
  })
})

describe("GPU families", () => {
  it.each([
    ["NVIDIA H100 80GB HBM3", "H100"],
    ["NVIDIA A100-SXM4-80GB", "A100"],
    ["Tesla V100-SXM2-16GB", "V100"],
    ["NVIDIA GeForce RTX 4090", "4090"],
    ["NVIDIA L4", "L4"]
  ])("%s is %s", (model, family) => expect(gpuFamilyOf(model)).toBe(family))
})
