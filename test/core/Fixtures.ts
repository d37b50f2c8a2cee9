/**
 * Small, readable inputs for the pure core's table tests: a synthetic catalog, a market whose capacity a row sets,
 * Job specs admitted by the Job schema itself, and attempt facts built from a few fields.
 */
import { Schema } from "effect"
import type { AttemptFacts } from "../../src/core/capacity/Capacity.ts"
import { type Accelerator, type Offering, type Variant, variantKeyOf } from "../../src/core/capacity/Offering.ts"
import { type Market, rank, type Ranking } from "../../src/core/capacity/Placement.ts"
import type { JsonObject } from "../../src/core/Json.ts"
import type { JobObservation } from "../../src/kinds/job/JobMachine.ts"
import { runProfileOf } from "../../src/kinds/job/JobMachine.ts"
import { JobSpec, type JobSpecType, type JobStatusType, normalizeJob } from "../../src/kinds/job/JobSchema.ts"

export const T0 = Date.parse("2026-03-01T00:00:00.000Z")
export const minute = 60_000
export const hour = 60 * minute

const gpu = (
  family: string,
  variant: string,
  count: number,
  memoryGiB: number,
  interconnect: Accelerator["interconnect"]
): Accelerator => ({ family, variant, count, memoryGiB, interconnect })

const offering = (
  id: string,
  accelerator: Accelerator | undefined,
  regionClass: string,
  onDemand: bigint | undefined,
  interruptible: bigint | undefined,
  shape = { vcpus: 208, memoryGiB: 1800, diskGiB: 4000 }
): Offering => ({
  id,
  provider: "test",
  instanceType: id,
  accelerator,
  ...shape,
  regionClass,
  regions: [`${regionClass}-1`],
  onDemandMicroUsdPerHour: onDemand,
  interruptibleMicroUsdPerHour: interruptible
})

/** Rates in micro-USD per hour. */
export const catalog: ReadonlyArray<Offering> = [
  offering("h100-sxm-8x-us", gpu("H100", "H100-SXM-80GB", 8, 80, "NVLink"), "us", 24_000_000n, 10_000_000n),
  offering("h100-pcie-1x-us", gpu("H100", "H100-PCIe-80GB", 1, 80, "PCIe"), "us", 2_490_000n, undefined, {
    vcpus: 26,
    memoryGiB: 200,
    diskGiB: 1000
  }),
  offering("h100-sxm-1x-eu", gpu("H100", "H100-SXM-80GB", 1, 80, "NVLink"), "eu", 3_290_000n, undefined, {
    vcpus: 26,
    memoryGiB: 225,
    diskGiB: 1000
  }),
  offering("a100-sxm-8x-us", gpu("A100", "A100-SXM-40GB", 8, 40, "NVLink"), "us", 14_000_000n, 5_000_000n),
  offering("a10-1x-us", gpu("A10", "A10-24GB", 1, 24, "PCIe"), "us", 750_000n, undefined, {
    vcpus: 30,
    memoryGiB: 200,
    diskGiB: 1400
  }),
  offering("cpu-4x-us", undefined, "us", 200_000n, undefined, { vcpus: 4, memoryGiB: 16, diskGiB: 256 }),
  offering("cpu-32x-us", undefined, "us", 1_600_000n, 400_000n, { vcpus: 32, memoryGiB: 128, diskGiB: 512 })
]

export const byId = (id: string): Offering => catalog.find((entry) => entry.id === id)!

export const variant = (id: string, interruptible = false): Variant => {
  const entry = byId(id)
  const rate = interruptible ? entry.interruptibleMicroUsdPerHour : entry.onDemandMicroUsdPerHour
  return { offering: entry, interruptible, rateMicroUsdPerHour: rate! }
}

/** A market with `hosts` of every variant unless `capacity` names a variant key (`id` or `id/interruptible`). */
export const market = (
  options: { hosts?: number; capacity?: Record<string, number>; mtbiMs?: number; bootMs?: number } = {}
): Market => ({
  available: (v) => options.capacity?.[variantKeyOf(v)] ?? options.hosts ?? 4,
  bootMs: () => options.bootMs ?? 2 * minute,
  meanTimeBetweenInterruptionsMs: (v) => (v.interruptible ? options.mtbiMs ?? 6 * hour : undefined)
})

export const jobSpec = (fields: JsonObject = {}): JobSpecType =>
  Schema.decodeUnknownSync(JobSpec)(normalizeJob({ image: "python:3.12", ...fields }))

export const rankingOf = (spec: JobSpecType, on: Market = market()): Ranking =>
  rank(spec, catalog, on, runProfileOf(spec))

export const observation = (
  spec: JobSpecType,
  status: JobStatusType = {},
  attempts: ReadonlyArray<AttemptFacts> = []
): JobObservation => ({
  name: "train",
  namespace: "demo",
  uid: "uid-1",
  generation: 1,
  spec,
  status,
  attempts
})

/** An attempt of index 0, number 1, on the A10 offering, requested at T0 and running since T0 + 2m unless told. */
export const attempt = (fields: Partial<AttemptFacts> = {}): AttemptFacts => ({
  name: `train-${fields.index ?? 0}-${fields.number ?? 1}`,
  index: 0,
  number: 1,
  variant: variant("a10-1x-us"),
  warmReuse: false,
  recovery: false,
  restoreFromSeq: undefined,
  requestedAt: T0,
  bootedAt: T0 + 2 * minute,
  endedAt: undefined,
  stoppingAt: undefined,
  releasedAt: undefined,
  phase: "Running",
  outcome: undefined,
  checkpoint: undefined,
  checkpointFailures: 0,
  suspend: undefined,
  progressUnits: undefined,
  ...fields
})

export const ended = (outcome: AttemptFacts["outcome"], at: number, fields: Partial<AttemptFacts> = {}): AttemptFacts =>
  attempt({ phase: "Ended", outcome, endedAt: at, stoppingAt: at, releasedAt: at, ...fields })
