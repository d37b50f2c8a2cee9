/**
 * Placement (spec: Placement, Resources): which offering variant a run of a workload takes. Two stages, so the
 * simulator can memoize the expensive one:
 *
 * 1. `rank` (static): every variant of the catalog is kept or dropped by the request's filters — GPU family or exact
 *    variant, count, per-GPU memory, interconnect, host-shape floors, regions, named offerings, maxRateUSDPerHour and
 *    the interruptible policy — and the kept ones are ordered by the profile's score of expected cost and time.
 * 2. `choose` (dynamic): the first ranked variant with capacity now.
 *
 * `explain` renders both as the explanation an Attempt and `estimate.placementPreview.explain` show: the kept
 * candidates in rank order with their expected cost, and the dropped ones grouped by the reason they were dropped.
 */
import * as Limits from "../Limits.ts"
import { formatMicroUsd, parseMicroUsd } from "../Money.ts"
import { formatDurationMs, parseQuantity } from "../Units.ts"
import { type Continuity, expectedRunMs } from "./Interruptions.ts"
import { type Offering, type Variant, variantKeyOf, variantsOf } from "./Offering.ts"

/** The spec fields placement reads (a Job's, a Workspace's, ... — structurally). */
export interface PlacementRequest {
  readonly placement?: {
    readonly interruptible?: "Never" | "Allow" | "Prefer" | undefined
    readonly maxRateUSDPerHour?: string | undefined
    readonly offerings?: ReadonlyArray<string> | undefined
    readonly profile?: "Balanced" | "Cost" | "Speed" | undefined
    readonly regions?: ReadonlyArray<string> | undefined
  } | undefined
  readonly resources?: {
    readonly cpu?: string | undefined
    readonly memory?: string | undefined
    readonly disk?: string | undefined
    readonly gpu?: {
      readonly count?: number | undefined
      readonly exact?: boolean | undefined
      readonly interconnect?: "Any" | "NVLink" | undefined
      readonly minMemory?: string | undefined
      readonly type?: ReadonlyArray<string> | undefined
    } | undefined
  } | undefined
}

/** What placement knows of the market: capacity now, and each variant's boot and interruption models. */
export interface Market {
  readonly available: (variant: Variant) => number
  readonly bootMs: (variant: Variant) => number
  /** Undefined when the variant is not interrupted (on-demand). */
  readonly meanTimeBetweenInterruptionsMs: (variant: Variant) => number | undefined
}

/** How the run is expected to go, for the expected-cost score. */
export interface RunProfile {
  readonly workMs: number
  readonly continuity: Continuity
  /** onInterruption Fail: an interruption fails the workload instead of costing a restore. */
  readonly failOnInterruption: boolean
}

/** When a workload declares no expected duration, placement scores runs of this length (nodus; docs/jobs.md). */
export const defaultExpectedWorkMs = Limits.hourMs

export interface Candidate {
  readonly variant: Variant
  readonly expectedMs: number
  readonly expectedCostMicroUsd: bigint
}

export interface Ranking {
  readonly profile: "Balanced" | "Cost" | "Speed"
  readonly interruptible: "Never" | "Allow" | "Prefer"
  readonly workMs: number
  readonly kept: ReadonlyArray<Candidate>
  readonly dropped: ReadonlyArray<{ readonly variant: Variant; readonly reason: string }>
}

// ---------------------------------------------------------------------------------------------------------------------
// Filters

const GiB = Limits.GiB

/** Spec: Resources.gpu.type — a family matches any of its variants and never another family; an exact id pins it. */
const gpuTypeMatches = (offering: Offering, types: ReadonlyArray<string>, exact: boolean): boolean => {
  const accelerator = offering.accelerator
  if (accelerator === undefined) return false
  return types.some((type) => {
    const wanted = type.toLowerCase()
    if (accelerator.variant.toLowerCase() === wanted) return true
    return !exact && accelerator.family.toLowerCase() === wanted
  })
}

/** Why the offering cannot host the request, or undefined when it can. */
const resourceMismatch = (offering: Offering, request: PlacementRequest): string | undefined => {
  const resources = request.resources
  const gpu = resources?.gpu
  const accelerator = offering.accelerator
  if (gpu === undefined) {
    if (accelerator !== undefined) return "has GPUs; the request asks for none"
  } else {
    if (accelerator === undefined) return "has no GPUs"
    const count = gpu.count ?? 1
    if (accelerator.count !== count) return `has ${accelerator.count} GPUs per host, not ${count}`
    if (gpu.type !== undefined && !gpuTypeMatches(offering, gpu.type, gpu.exact === true)) {
      return `${gpu.exact === true ? "variant" : "GPU family"} ${
        gpu.exact === true ? accelerator.variant : accelerator.family
      } is not one of ${gpu.type.join(", ")}`
    }
    const minMemory = gpu.minMemory === undefined ? undefined : parseQuantity(gpu.minMemory)
    if (minMemory !== undefined && accelerator.memoryGiB * GiB < minMemory) {
      return `${accelerator.memoryGiB}Gi per GPU is below minMemory ${gpu.minMemory}`
    }
    if (gpu.interconnect === "NVLink" && accelerator.interconnect !== "NVLink") return "GPUs are not NVLink-connected"
  }
  const cpu = resources?.cpu === undefined ? undefined : parseQuantity(resources.cpu)
  if (cpu !== undefined && offering.vcpus < cpu) return `${offering.vcpus} vCPUs is below cpu ${resources?.cpu}`
  const memory = resources?.memory === undefined ? undefined : parseQuantity(resources.memory)
  if (memory !== undefined && offering.memoryGiB * GiB < memory) {
    return `${offering.memoryGiB}Gi memory is below ${resources?.memory}`
  }
  const disk = resources?.disk === undefined ? undefined : parseQuantity(resources.disk)
  if (disk !== undefined && offering.diskGiB * GiB < disk) {
    return `${offering.diskGiB}Gi disk is below ${resources?.disk}`
  }
  return undefined
}

const placementMismatch = (variant: Variant, request: PlacementRequest, run: RunProfile): string | undefined => {
  const placement = request.placement
  const offering = variant.offering
  if (
    placement?.offerings !== undefined && placement.offerings.length > 0 && !placement.offerings.includes(offering.id)
  ) return "not in placement.offerings"
  if (
    placement?.regions !== undefined && placement.regions.length > 0 &&
    !placement.regions.includes(offering.regionClass)
  ) {
    return `region class ${offering.regionClass} is not in placement.regions`
  }
  const policy = placement?.interruptible ?? "Never"
  if (variant.interruptible && policy === "Never") return "interruptible; placement.interruptible is Never"
  if (variant.interruptible && policy === "Allow" && run.failOnInterruption) {
    return "interruptible; an interruption would fail the run (recovery.onInterruption Fail)"
  }
  if (
    placement?.maxRateUSDPerHour !== undefined &&
    variant.rateMicroUsdPerHour > parseMicroUsd(placement.maxRateUSDPerHour)
  ) {
    return `rate ${
      formatMicroUsd(variant.rateMicroUsdPerHour)
    } is above maxRateUSDPerHour ${placement.maxRateUSDPerHour}`
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------------
// Ranking

const costOf = (rateMicroUsdPerHour: bigint, ms: number): bigint =>
  (rateMicroUsdPerHour * BigInt(Math.round(ms))) / BigInt(Limits.hourMs)

const candidateOf = (variant: Variant, market: Market, run: RunProfile): Candidate => {
  const expectedMs = expectedRunMs(
    run.workMs,
    market.bootMs(variant),
    market.meanTimeBetweenInterruptionsMs(variant),
    run.continuity
  )
  return { variant, expectedMs, expectedCostMicroUsd: costOf(variant.rateMicroUsdPerHour, expectedMs) }
}

const compareBigint = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Spec: Placement.profile. Cost: lowest expected cost, then time. Speed: shortest expected time, then cost.
 * Balanced: lowest product of the two, so a variant twice as fast may cost up to twice as much (nodus; docs/jobs.md).
 * Prefer puts interruptible variants first; ties end on the offering id so the order is total.
 */
const comparator =
  (profile: Ranking["profile"], preferInterruptible: boolean) => (a: Candidate, b: Candidate): number => {
    if (preferInterruptible && a.variant.interruptible !== b.variant.interruptible) {
      return a.variant.interruptible
        ? -1
        : 1
    }
    const byCost = compareBigint(a.expectedCostMicroUsd, b.expectedCostMicroUsd)
    const byTime = a.expectedMs - b.expectedMs
    let order: number
    if (profile === "Cost") order = byCost !== 0 ? byCost : byTime
    else if (profile === "Speed") order = byTime !== 0 ? byTime : byCost
    else {
      const product = Number(a.expectedCostMicroUsd) * a.expectedMs - Number(b.expectedCostMicroUsd) * b.expectedMs
      order = product !== 0 ? product : byCost
    }
    if (order !== 0) return order
    if (a.variant.offering.id !== b.variant.offering.id) return a.variant.offering.id < b.variant.offering.id ? -1 : 1
    return a.variant.interruptible === b.variant.interruptible ? 0 : a.variant.interruptible ? 1 : -1
  }

/** Stage 1: keeps or drops every variant of the catalog and orders the kept ones. */
export const rank = (
  request: PlacementRequest,
  catalog: ReadonlyArray<Offering>,
  market: Market,
  run: RunProfile
): Ranking => {
  const kept: Array<Candidate> = []
  const dropped: Array<{ variant: Variant; reason: string }> = []
  for (const offering of catalog) {
    const shape = resourceMismatch(offering, request)
    for (const variant of variantsOf(offering)) {
      const reason = shape ?? placementMismatch(variant, request, run)
      if (reason === undefined) kept.push(candidateOf(variant, market, run))
      else dropped.push({ variant, reason })
    }
  }
  const profile = request.placement?.profile ?? "Balanced"
  const interruptible = request.placement?.interruptible ?? "Never"
  kept.sort(comparator(profile, interruptible === "Prefer"))
  return { profile, interruptible, workMs: run.workMs, kept, dropped }
}

/** Stage 2: the best-ranked candidate with capacity now, at most `ceilingMicroUsd` per hour when given. */
export const choose = (ranking: Ranking, market: Market, ceilingMicroUsd?: bigint): Candidate | undefined => {
  for (const candidate of ranking.kept) {
    if (ceilingMicroUsd !== undefined && candidate.variant.rateMicroUsdPerHour > ceilingMicroUsd) continue
    if (market.available(candidate.variant) > 0) return candidate
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------------
// Explanation

export type Explanation = {
  readonly profile: string
  readonly interruptible: string
  readonly expectedDuration: string
  readonly chosen:
    | { readonly offering: string; readonly interruptible: boolean; readonly rateUSDPerHour: string }
    | null
  readonly why: string
  readonly candidates: ReadonlyArray<{
    readonly offering: string
    readonly interruptible: boolean
    readonly rateUSDPerHour: string
    readonly expectedCostUSD: string
    readonly expectedDuration: string
    readonly verdict: "Chosen" | "Kept" | "NoCapacity"
  }>
  /** The variants filtered out, grouped by reason: how many, and the first few of them. */
  readonly dropped: ReadonlyArray<
    { readonly reason: string; readonly count: number; readonly offerings: ReadonlyArray<string> }
  >
}

/**
 * Variants an explanation names per reason they were dropped for. A CPU request drops every GPU offering of a catalog
 * of a hundred: the reason and the count say why, a few names say what; listing all of them made every estimate and
 * Attempt several kilobytes (docs/jobs.md, "Placement").
 */
export const explanationDroppedExamplesMax = 3

const whyChosen = (ranking: Ranking): string => {
  const order = ranking.profile === "Cost"
    ? "lowest expected cost"
    : ranking.profile === "Speed"
    ? "shortest expected time"
    : "best balance of expected cost and time"
  return ranking.interruptible === "Prefer" ? `interruptible first, then ${order}` : order
}

/** The scheduler's explanation (spec: Attempt placement explanation, Estimate.placementPreview.explain). */
export const explain = (ranking: Ranking, chosen: Candidate | undefined, market: Market): Explanation => {
  const groups = new Map<string, Array<string>>()
  for (const { variant, reason } of ranking.dropped) {
    const group = groups.get(reason) ?? []
    group.push(variantKeyOf(variant))
    groups.set(reason, group)
  }
  const why = chosen !== undefined
    ? `${whyChosen(ranking)} among ${ranking.kept.length} candidates with capacity or not`
    : ranking.kept.length === 0
    ? "no offering matches the request"
    : "no matching offering has capacity now"
  return {
    profile: ranking.profile,
    interruptible: ranking.interruptible,
    expectedDuration: formatDurationMs(ranking.workMs),
    chosen: chosen === undefined ? null : {
      offering: chosen.variant.offering.id,
      interruptible: chosen.variant.interruptible,
      rateUSDPerHour: formatMicroUsd(chosen.variant.rateMicroUsdPerHour)
    },
    why,
    candidates: ranking.kept.map((candidate) => ({
      offering: candidate.variant.offering.id,
      interruptible: candidate.variant.interruptible,
      rateUSDPerHour: formatMicroUsd(candidate.variant.rateMicroUsdPerHour),
      expectedCostUSD: formatMicroUsd(candidate.expectedCostMicroUsd),
      expectedDuration: formatDurationMs(Math.round(candidate.expectedMs / 1000) * 1000),
      verdict: candidate === chosen ? "Chosen" : market.available(candidate.variant) > 0 ? "Kept" : "NoCapacity"
    })),
    dropped: [...groups].map(([reason, offerings]) => ({
      reason,
      count: offerings.length,
      offerings: offerings.slice(0, explanationDroppedExamplesMax)
    }))
  }
}
