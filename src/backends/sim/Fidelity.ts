/**
 * How closely a replay follows its trace (docs/simulator.md, "Fidelity"), computed from the trace's data and the run's
 * attempts, never from the simulator's own bookkeeping of what it meant to do:
 *
 * - **Preemptions**: the instants at which a spot trace drops to 0 are read from its samples here, on their own (the
 *   replay repeats the trace every span, time read from the epoch; a drop is a tick at 0 after a tick above 0). An
 *   instant counts when a host of the trace's variant was running then (booted, not yet stopping or ended). It is
 *   reproduced when every such host was preempted at that very millisecond. Preemptions at any other instant are
 *   counted too (`offTrace`).
 * - **Queueing delay**: each replayed pod's simulated delay (its Job's creation to its first launch) against the
 *   recorded one (`scheduled_time − creation_time`): the mean error and the two-sample Kolmogorov–Smirnov distance
 *   between the two distributions.
 *
 * Pure.
 */
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"

/** A run of a trace-driven variant, as preemptions see it. */
export interface Exposure {
  readonly bootedAt: number
  /** When it stopped running for another reason than a preemption (stop asked, exit, node lost); undefined: never. */
  readonly until: number | undefined
  /** When it was preempted, if it was. */
  readonly preemptedAt: number | undefined
}

/** What an attempt's facts say of its exposure to preemptions; undefined when it never ran. */
export const exposureOf = (facts: AttemptFacts): Exposure | undefined => {
  if (facts.bootedAt === undefined) return undefined
  const preempted = facts.outcome?.type === "Preempted"
  return {
    bootedAt: facts.bootedAt,
    until: preempted ? undefined : facts.stoppingAt ?? facts.endedAt,
    preemptedAt: preempted ? facts.endedAt : undefined
  }
}

/**
 * The exposures of a run, kept as numbers in one growing array (three per exposure, NaN for none) rather than as an
 * object each: a month of the platform benchmark keeps half a million of them until its summary, and the garbage
 * collector walks what objects there are at every full collection.
 */
export class ExposureLog {
  private values = new Float64Array(3 * 1024)
  private size = 0

  add(exposure: Exposure): void {
    if (3 * (this.size + 1) > this.values.length) {
      const grown = new Float64Array(2 * this.values.length)
      grown.set(this.values)
      this.values = grown
    }
    const at = 3 * this.size++
    this.values[at] = exposure.bootedAt
    this.values[at + 1] = exposure.until ?? Number.NaN
    this.values[at + 2] = exposure.preemptedAt ?? Number.NaN
  }

  /** The exposures in the order they were added. */
  exposures(): Array<Exposure> {
    const out = new Array<Exposure>(this.size)
    for (let index = 0; index < this.size; index++) {
      const until = this.values[3 * index + 1]!
      const preemptedAt = this.values[3 * index + 2]!
      out[index] = {
        bootedAt: this.values[3 * index]!,
        until: Number.isNaN(until) ? undefined : until,
        preemptedAt: Number.isNaN(preemptedAt) ? undefined : preemptedAt
      }
    }
    return out
  }
}

export interface PreemptionFidelity {
  /** The variant (`<offering>/interruptible`) and its trace (`<folder>/<file>`). */
  readonly variant: string
  readonly trace: string
  /** Drops to 0 of the trace within the run. */
  readonly dropsInRun: number
  /** Of those, the instants at which a host of the variant was running: the ones a replay must reproduce. */
  readonly instants: number
  /** Instants at which every running host was preempted at that millisecond. */
  readonly reproduced: number
  /** Preemptions in the run, and those at an instant that is not a drop of the trace. */
  readonly preemptions: number
  readonly offTrace: number
}

/** The instants in [from, to] at which a trace of `samples` every `gapMs`, replayed from the epoch, drops to 0. */
export const traceDrops = (samples: ArrayLike<number>, gapMs: number, from: number, to: number): Array<number> => {
  const drops: Array<number> = []
  const n = samples.length
  // Tick j covers [j·gap, (j+1)·gap) and reads sample j mod n; tick 0 has nothing before it.
  for (let tick = Math.max(1, Math.ceil(from / gapMs)); tick * gapMs <= to; tick++) {
    if (samples[tick % n] === 0 && samples[(tick - 1) % n]! > 0) drops.push(tick * gapMs)
  }
  return drops
}

export const preemptionFidelity = (
  variant: string,
  trace: { readonly name: string; readonly samples: ArrayLike<number>; readonly gapMs: number },
  exposures: ReadonlyArray<Exposure>,
  from: number,
  to: number
): PreemptionFidelity => {
  const drops = traceDrops(trace.samples, trace.gapMs, from, to)
  const dropSet = new Set(drops)
  // Per drop: the runs running then, and those preempted at it. Each run covers the drops from its boot to its end.
  const running = new Array<number>(drops.length).fill(0)
  const preempted = new Array<number>(drops.length).fill(0)
  for (const exposure of exposures) {
    let low = 0
    let high = drops.length
    while (low < high) {
      const middle = (low + high) >> 1
      if (drops[middle]! < exposure.bootedAt) low = middle + 1
      else high = middle
    }
    for (let index = low; index < drops.length; index++) {
      const at = drops[index]!
      const stillRunning = exposure.preemptedAt !== undefined
        ? exposure.preemptedAt >= at
        : exposure.until === undefined || exposure.until > at
      if (!stillRunning) break
      running[index]!++
      if (exposure.preemptedAt === at) preempted[index]!++
    }
  }
  let instants = 0
  let reproduced = 0
  for (let index = 0; index < drops.length; index++) {
    if (running[index] === 0) continue
    instants++
    if (preempted[index] === running[index]) reproduced++
  }
  const preemptions = exposures.filter((exposure) => exposure.preemptedAt !== undefined)
  return {
    variant,
    trace: trace.name,
    dropsInRun: drops.length,
    instants,
    reproduced,
    preemptions: preemptions.length,
    offTrace: preemptions.filter((exposure) => !dropSet.has(exposure.preemptedAt!)).length
  }
}

/** The two-sample Kolmogorov–Smirnov distance: the largest gap between the two empirical distribution functions. */
export const ksDistance = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  if (a.length === 0 || b.length === 0) return a.length === b.length ? 0 : 1
  const x = [...a].sort((p, q) => p - q)
  const y = [...b].sort((p, q) => p - q)
  let i = 0
  let j = 0
  let distance = 0
  while (i < x.length && j < y.length) {
    // Step past every sample equal to the smallest value left, in both, before comparing the functions.
    const value = Math.min(x[i]!, y[j]!)
    while (i < x.length && x[i] === value) i++
    while (j < y.length && y[j] === value) j++
    distance = Math.max(distance, Math.abs(i / x.length - j / y.length))
  }
  return distance
}

export interface QueueDelayFidelity {
  /** Replayed pods with a recorded delay whose Job launched; those that never launched are left out of the figures. */
  readonly pods: number
  readonly notLaunched: number
  /** Seconds. */
  readonly recordedMean: number
  readonly simulatedMean: number
  /** Mean of (simulated − recorded), seconds: negative when the replay waits less. */
  readonly meanError: number
  readonly meanAbsoluteError: number
  readonly ks: number
  /** p50 / p90 / p99 of each, seconds. */
  readonly recorded: { readonly p50: number; readonly p90: number; readonly p99: number }
  readonly simulated: { readonly p50: number; readonly p90: number; readonly p99: number }
  /** Each side at every percentile, p0 to p100 (101 values; empty: no pod), for a chart. */
  readonly curves: { readonly recorded: ReadonlyArray<number>; readonly simulated: ReadonlyArray<number> }
  /** What the replay leaves out (TraceWorkloads.ts). */
  readonly leftOut: ReadonlyArray<string>
}

const nearestRank = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? 0

const round = (value: number, digits = 3): number => Number(value.toFixed(digits))

/** The figures from pairs of (recorded, simulated) seconds; `simulated` undefined: the Job never launched. */
export const queueDelayFidelity = (
  pairs: ReadonlyArray<{ readonly recorded: number; readonly simulated: number | undefined }>,
  leftOut: ReadonlyArray<string>
): QueueDelayFidelity => {
  const launched = pairs.filter((pair): pair is { recorded: number; simulated: number } => pair.simulated !== undefined)
  const recorded = launched.map((pair) => pair.recorded).sort((a, b) => a - b)
  const simulated = launched.map((pair) => pair.simulated).sort((a, b) => a - b)
  const mean = (
    values: ReadonlyArray<number>
  ) => (values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length)
  const quantiles = (sorted: ReadonlyArray<number>) => ({
    p50: nearestRank(sorted, 0.5),
    p90: nearestRank(sorted, 0.9),
    p99: nearestRank(sorted, 0.99)
  })
  const curve = (
    sorted: ReadonlyArray<number>
  ) => (sorted.length === 0 ? [] : Array.from({ length: 101 }, (_, p) => nearestRank(sorted, p / 100)))
  return {
    pods: launched.length,
    notLaunched: pairs.length - launched.length,
    recordedMean: round(mean(recorded)),
    simulatedMean: round(mean(simulated)),
    meanError: round(mean(launched.map((pair) => pair.simulated - pair.recorded))),
    meanAbsoluteError: round(mean(launched.map((pair) => Math.abs(pair.simulated - pair.recorded)))),
    ks: round(ksDistance(recorded, simulated), 4),
    recorded: quantiles(recorded),
    simulated: quantiles(simulated),
    curves: { recorded: curve(recorded), simulated: curve(simulated) },
    leftOut
  }
}

/**
 * A run's fidelity figures (Run.ts `Summary.fidelity`): per spot-trace-driven variant, and over the trace workloads.
 */
export interface Fidelity {
  readonly preemptions?: ReadonlyArray<PreemptionFidelity>
  readonly queueDelay?: QueueDelayFidelity
}

/** One line for humans: `60 of 60, 58 of 58 preemption instants reproduced; queueing delay ... KS 0.693`. */
export const fidelityText = (fidelity: Fidelity): string => {
  const parts: Array<string> = []
  const preemptions = fidelity.preemptions ?? []
  if (preemptions.length > 0) {
    const offTrace = preemptions.reduce((sum, entry) => sum + entry.offTrace, 0)
    parts.push(
      `${
        preemptions.map((entry) => `${entry.reproduced} of ${entry.instants}`).join(", ")
      } preemption instants reproduced${offTrace > 0 ? `, ${offTrace} preemptions off the trace` : ""}`
    )
  }
  const delay = fidelity.queueDelay
  if (delay !== undefined) {
    parts.push(
      `queueing delay against the trace: mean ${delay.simulatedMean.toFixed(1)} s simulated, ${
        delay.recordedMean.toFixed(1)
      } s recorded (mean error ${delay.meanError.toFixed(1)} s), KS distance ${
        delay.ks.toFixed(3)
      } over ${delay.pods} pods`
    )
  }
  return parts.join("; ")
}

/** What the Alibaba replay leaves out (docs/simulator.md, "Fidelity"): why its queueing delays are not the trace's. */
export const alibabaLeftOut: ReadonlyArray<string> = [
  "The rest of the cluster: the pod list is a sample of the cluster's pods, so the load the recorded pods queued behind is not replayed (the replayed pods alone never fill the node list).",
  "The Kubernetes scheduler's own time (its queue, filtering and scoring, binding): the simulator launches a Job at the instant it reconciles it.",
  "GPU sharing and packing: a pod asking for a share of a GPU takes a whole one, each host runs one pod, and CPU and memory requests are not placed.",
  "GPU models and type constraints: every GPU is priced as the catalog offering of its pod's size; the node's model is not kept.",
  "Pods created before the replayed window, and CPU-only pods, are not replayed; Failed pods are not retried, and a pod the trace last saw Running ends at its deletion time as if it succeeded."
]
