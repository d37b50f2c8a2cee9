/** The bounds of a live box from its kind's resources (src/kinds/ProgramParts.ts, docs/isolation.md "Bounds"). */
import { describe, expect, it } from "vitest"
import * as Limits from "../../src/core/Limits.ts"
import { boxBoundsOf } from "../../src/kinds/ProgramParts.ts"

describe("boxBoundsOf", () => {
  it("bounds a box that names no resources by one vCPU's defaults", () => {
    expect(boxBoundsOf(undefined)).toEqual({
      memoryBytes: Limits.boxMemoryBytesPerCpu,
      pidsMax: Limits.boxPidsPerCpu,
      diskBytes: Limits.boxDiskBytesDefault
    })
  })

  it("keeps the floors the resources name", () => {
    expect(boxBoundsOf({ memory: "512Mi", disk: "2Gi" })).toMatchObject({
      memoryBytes: 512 * Limits.MiB,
      diskBytes: 2 * Limits.GiB
    })
  })

  it("scales memory and processes with the vCPUs asked (a fraction counts as one) and memory with the GPUs", () => {
    expect(boxBoundsOf({ cpu: "2500m" })).toMatchObject({
      memoryBytes: 3 * Limits.boxMemoryBytesPerCpu,
      pidsMax: 3 * Limits.boxPidsPerCpu
    })
    expect(boxBoundsOf({ cpu: "250m" })).toMatchObject({
      memoryBytes: Limits.boxMemoryBytesPerCpu,
      pidsMax: Limits.boxPidsPerCpu
    })
    expect(boxBoundsOf({ gpu: { count: 2 } }).memoryBytes).toBe(
      Limits.boxMemoryBytesPerCpu + 2 * Limits.boxMemoryBytesPerGpu
    )
  })

  it("gives a disk floor too small for a filesystem the smallest quota", () => {
    expect(boxBoundsOf({ disk: "1Ki" }).diskBytes).toBe(Limits.boxDiskBytesMin)
  })
})
