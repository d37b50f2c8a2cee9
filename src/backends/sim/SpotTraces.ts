/**
 * Replayed spot capacity: the "Can't Be Late" (NSDI '24) availability and preemption traces
 * (scenarios/data/spot-traces) read as one availability count per tick. The simulator uses them as the interruption
 * process of an interruptible offering: an instance held while the count is above 0 is preempted when it falls to 0.
 *
 * Time is virtual milliseconds from the start of the replay. Sample i covers [i·gap, (i+1)·gap), and the trace spans
 * samples·gap. A simulation longer than the trace replays it from the start again, so every helper here reads time
 * modulo the span. At each seam the last sample is followed by the first. If the last is above 0 and the first is 0,
 * the seam is a drop too: `nextPreemptionAfter` reports it at span, 2·span, and so on. Nothing comes before time 0, so
 * time 0 itself is never a drop. Negative times read as 0.
 *
 * `loadTrace` and `listTraces` read files. Everything else is pure.
 */
import { readdirSync, readFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"

export interface SpotTrace {
  /** `<folder>/<file>` without `.json`, e.g. `aws-04-22-2023/us-west-2b_v100_1`. */
  readonly name: string
  /** Milliseconds between samples. */
  readonly gapMs: number
  /** Instances available (held) at each tick, 0 to 255. */
  readonly samples: Uint8Array
  /** Spot price in USD per hour at each tick, where the file gives prices. */
  readonly pricesPerHour?: ReadonlyArray<number>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Parses a trace file's text: `{"metadata": {"gap_seconds": G}, "data": [n0, n1, …], "prices"?: […]}`. */
export const parseTrace = (name: string, text: string): SpotTrace => {
  const fail = (why: string): never => {
    throw new Error(`spot trace ${name}: ${why}`)
  }
  const json: unknown = JSON.parse(text)
  if (!isRecord(json)) return fail("not a JSON object")
  const metadata = json["metadata"]
  const gapSeconds = isRecord(metadata) ? metadata["gap_seconds"] : undefined
  if (typeof gapSeconds !== "number" || !(gapSeconds > 0) || !Number.isFinite(gapSeconds)) {
    return fail("metadata.gap_seconds is not a positive number")
  }
  const data = json["data"]
  if (!Array.isArray(data) || data.length === 0) return fail("data is not a non-empty array")
  const samples = new Uint8Array(data.length)
  data.forEach((value: unknown, index) => {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 255) {
      fail(`data[${index}] is not an integer from 0 to 255`)
    }
    samples[index] = value as number
  })
  const trace = { name, gapMs: Math.round(gapSeconds * 1000), samples }
  const prices = json["prices"]
  if (prices === undefined) return trace
  if (
    !Array.isArray(prices) || prices.length !== data.length ||
    !prices.every((price) => typeof price === "number" && Number.isFinite(price))
  ) {
    return fail("prices is not an array of numbers as long as data")
  }
  return { ...trace, pricesPerHour: prices as ReadonlyArray<number> }
}

/** Reads one trace file. */
export const loadTrace = (path: string): SpotTrace =>
  parseTrace(`${basename(dirname(path))}/${basename(path, ".json")}`, readFileSync(path, "utf8"))

/** The trace files under `dir`, at any depth, sorted by path. */
export const listTraces = (dir: string): Array<string> =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".json"))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort()

/** The length of one pass of the trace. */
export const spanMs = (trace: SpotTrace): number => trace.samples.length * trace.gapMs

/** Instances available at `tMs`, replaying the trace from its start every span. */
export const availabilityAt = (trace: SpotTrace, tMs: number): number => {
  const offset = tMs > 0 ? tMs % spanMs(trace) : 0
  return trace.samples[Math.min(trace.samples.length - 1, Math.floor(offset / trace.gapMs))]!
}

const dropCache = new WeakMap<SpotTrace, ReadonlyArray<number>>()

/** The instants of one pass where the count falls from above 0 to 0: a held instance is preempted there. */
export const preemptionTimesMs = (trace: SpotTrace): ReadonlyArray<number> => {
  const cached = dropCache.get(trace)
  if (cached !== undefined) return cached
  const drops: Array<number> = []
  const samples = trace.samples
  for (let index = 1; index < samples.length; index++) {
    if (samples[index] === 0 && samples[index - 1]! > 0) drops.push(index * trace.gapMs)
  }
  dropCache.set(trace, drops)
  return drops
}

/** Whether the replay drops to 0 at each seam (the last sample above 0, the first 0). */
const seamDrops = (trace: SpotTrace): boolean => trace.samples[0] === 0 && trace.samples[trace.samples.length - 1]! > 0

/** The first preemption at or after `tMs` in the replay, seams included; undefined when the replay has none. */
export const nextPreemptionAfter = (trace: SpotTrace, tMs: number): number | undefined => {
  const drops = preemptionTimesMs(trace)
  const seam = seamDrops(trace)
  if (drops.length === 0 && !seam) return undefined
  const span = spanMs(trace)
  const t = tMs > 0 ? tMs : 0
  const cycle = Math.floor(t / span)
  const start = cycle * span
  const offset = t - start
  // A seam drop sits at offset 0 of every cycle after the first.
  if (seam && cycle > 0 && offset === 0) return start
  // The first drop at or after offset in this pass.
  let low = 0
  let high = drops.length
  while (low < high) {
    const middle = (low + high) >> 1
    if (drops[middle]! < offset) low = middle + 1
    else high = middle
  }
  if (low < drops.length) return start + drops[low]!
  return seam ? start + span : start + span + drops[0]!
}

/**
 * Mean time between preemptions over one pass: the span divided by the drops to 0 in it; infinite when there are
 * none. This is the rate that placement's expected-cost model charges for restarts. The seam is not counted: it comes
 * from replaying the trace, not from the data.
 */
export const meanTimeBetweenPreemptionsMs = (trace: SpotTrace): number => {
  const drops = preemptionTimesMs(trace).length
  return drops === 0 ? Number.POSITIVE_INFINITY : spanMs(trace) / drops
}
