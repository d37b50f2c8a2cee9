/**
 * The parts of a live program every kind reads the same way from its spec (spec: EnvVar, Network, Resources): env
 * entries with their Secret references left for the driver to resolve, the egress policy with presets expanded, and
 * the bounds of its box. JobProgram.ts and SandboxProgram.ts build their kinds' programs from them.
 */
import type { ProgramEnv, WorkloadProgram } from "../core/capacity/Capacity.ts"
import { egressPresets } from "../core/capacity/EgressPresets.ts"
import * as Limits from "../core/Limits.ts"
import { parseQuantity } from "../core/Units.ts"

/** A workload that names no egress policy gets no network (docs/live.md, "Network"): what it needs, it asks for. */
export const defaultEgress = "Deny"

interface EnvEntry {
  readonly name: string
  readonly value?: string | undefined
  readonly valueFrom?:
    | { readonly secretKeyRef?: { readonly name: string; readonly key: string } | undefined }
    | undefined
}

/** env as written: literals, and Secret keys resolved when the program starts (never stored). */
export const programEnvOf = (env: ReadonlyArray<EnvEntry> | undefined): ReadonlyArray<ProgramEnv> =>
  (env ?? []).map((entry): ProgramEnv => {
    const ref = entry.valueFrom?.secretKeyRef
    return ref === undefined
      ? { name: entry.name, value: entry.value ?? "" }
      : { name: entry.name, secret: ref.name, key: ref.key }
  })

interface NetworkSpec {
  readonly egress?: {
    readonly policy?: "Deny" | "AllowList" | "Open" | undefined
    readonly allow?: ReadonlyArray<string> | undefined
    readonly presets?: ReadonlyArray<string> | undefined
  } | undefined
}

/** The egress of a program: its policy, the names AllowList reaches (presets expanded), and presets nobody knows. */
export const egressOf = (
  network: NetworkSpec | undefined
): Pick<WorkloadProgram, "egress" | "allow" | "unknownPresets"> => {
  const presets = network?.egress?.presets ?? []
  return {
    egress: network?.egress?.policy ?? defaultEgress,
    allow: [...(network?.egress?.allow ?? []), ...presets.flatMap((preset) => egressPresets[preset] ?? [])],
    unknownPresets: presets.filter((preset) => egressPresets[preset] === undefined)
  }
}

interface ResourcesSpec {
  readonly cpu?: string | undefined
  readonly memory?: string | undefined
  readonly disk?: string | undefined
  readonly gpu?: { readonly count?: number | undefined } | undefined
}

/**
 * What bounds the program's box (docs/isolation.md, "Bounds"): its memory (the floor it asks for, enforced as a limit
 * where the kernel allows; unset, a share per vCPU and GPU of what it asks), its processes (per vCPU) and its writable
 * disk (the disk floor it asks for, or the default). Nothing a box does is unbounded.
 */
export const boxBoundsOf = (
  resources: ResourcesSpec | undefined
): Pick<WorkloadProgram, "memoryBytes" | "pidsMax" | "diskBytes"> => {
  const cpus = Math.max(1, Math.ceil(quantityOf(resources?.cpu) ?? 1))
  const gpus = resources?.gpu === undefined ? 0 : resources.gpu.count ?? 1
  const memory = quantityOf(resources?.memory)
  const disk = quantityOf(resources?.disk)
  return {
    memoryBytes: memory ?? cpus * Limits.boxMemoryBytesPerCpu + gpus * Limits.boxMemoryBytesPerGpu,
    pidsMax: cpus * Limits.boxPidsPerCpu,
    diskBytes: Math.max(Limits.boxDiskBytesMin, disk ?? Limits.boxDiskBytesDefault)
  }
}

const quantityOf = (text: string | undefined): number | undefined => {
  const value = text === undefined ? undefined : parseQuantity(text)
  return value === undefined ? undefined : Math.round(value)
}
