/**
 * A Pool's demand forecast (spec: Pool, `spec.predict {enabled, horizon}` and `status.forecast {generatedTime, horizon,
 * peakDemandGPUs {p50, p90}, shortfallTime}`; docs/simulator.md, "Forecast"), from an hourly history of GPU demand.
 *
 * Demand in an hour is the most GPUs requested at once during it by work that is running or waiting (a pod, a Job:
 * from its creation to its end): capacity has to meet the peak of an hour, not its mean, for nothing to wait.
 *
 * The model is seasonal empirical quantiles, trend-free: hour h of the future is forecast by the hours of the same hour
 * of day (h mod 24, counted on the hour numbers the caller gives) in the last `windowHours` of history (default 14
 * days: 14 samples per hour of day, and recent enough to follow a level that drifts slowly). Its p50 and p90 are those
 * samples' nearest-rank quantiles: always a demand that was observed, so a flat history forecasts exactly its level.
 * What it leaves out, on purpose: trend (the future is assumed to look like the window), the day of the week (two weeks
 * give two samples per hour of the week, too few for a p90), and anything known about work not yet submitted.
 *
 * From the hourly quantiles: `peakDemandGPUs` is the largest hourly p50 and the largest hourly p90 over the horizon
 * (the peak of the quantiles, not a quantile of the peak, which would be higher: the same quantity the backtest
 * scores), and the shortfall is the first hour whose p90 exceeds the Pool's GPUs. Pure: times and data come in.
 */

export const hourMs = 3_600_000

/**
 * One piece of work's demand: `milliGpus` thousandths of a GPU from `startMs` (created) to `endMs` (ended, excluded).
 */
export interface DemandInterval {
  readonly startMs: number
  readonly endMs: number
  readonly milliGpus: number
}

/**
 * Hourly demand from intervals: for each hour [fromMs + k·1h, fromMs + (k+1)·1h) before `toMs`, the most GPUs requested
 * at once in it (with what was already running or waiting at its start). Sums are whole thousandths, so the order of
 * the intervals changes nothing; an interval that ends where it starts requests nothing.
 */
export const hourlyPeakDemand = (
  intervals: ReadonlyArray<DemandInterval>,
  fromMs: number,
  toMs: number
): ReadonlyArray<number> => {
  const hours = Math.max(0, Math.ceil((toMs - fromMs) / hourMs))
  // Ends before starts at one instant: work that hands over its GPUs at t and work that takes them at t do not overlap.
  const changes: Array<readonly [number, number]> = []
  for (const interval of intervals) {
    if (interval.endMs <= interval.startMs || interval.milliGpus <= 0) continue
    changes.push([interval.startMs, interval.milliGpus], [interval.endMs, -interval.milliGpus])
  }
  changes.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  const peaks = new Array<number>(hours).fill(0)
  let current = 0
  let next = 0
  for (let hour = 0; hour < hours; hour++) {
    const start = fromMs + hour * hourMs
    const end = start + hourMs
    // The hour opens with everything up to its first instant applied: work that ended exactly then is gone.
    while (next < changes.length && changes[next]![0] <= start) current += changes[next++]![1]
    let peak = current
    while (next < changes.length && changes[next]![0] < end) {
      current += changes[next++]![1]
      peak = Math.max(peak, current)
    }
    peaks[hour] = peak / 1000
  }
  return peaks
}

/**
 * Where a history's busy part begins: the start of the hour of the interval whose start is the `share` quantile of all
 * starts (default 1%). A trace that trickles in for months before its real load (the Alibaba GPU trace: 1% of its pods
 * over its first 115 days) would otherwise fill the forecast's window and the backtest's first half with an idle
 * cluster; the intervals before it still count in the demand from there on.
 */
export const busyFromMs = (intervals: ReadonlyArray<DemandInterval>, share = 0.01): number => {
  const starts = intervals.map((interval) => interval.startMs).sort((a, b) => a - b)
  if (starts.length === 0) return 0
  const at = starts[Math.min(starts.length - 1, Math.floor(share * starts.length))]!
  return Math.floor(at / hourMs) * hourMs
}

/** The nearest-rank quantile: the smallest sample with at least `p` of the samples at or under it. */
export const quantile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!

export interface ForecastOptions {
  /** Hours ahead (spec: predict.horizon, 24h to 720h). */
  readonly horizonHours: number
  /** The Pool's GPUs; without it there is no shortfall to find. */
  readonly capacityGpus?: number | undefined
  /** The hour number of `history[0]` (e.g. hours since the epoch), which fixes the hour of day; default 0. */
  readonly firstHour?: number | undefined
  /** How much recent history the model reads (default 336: 14 days). */
  readonly windowHours?: number | undefined
}

export const defaultWindowHours = 14 * 24
const season = 24

export interface HourQuantiles {
  readonly p50: number
  readonly p90: number
}

export interface DemandForecast {
  readonly horizonHours: number
  /** The hours of history the model read. */
  readonly windowHours: number
  /** Each hour of the horizon, from the hour after the history's last. */
  readonly hours: ReadonlyArray<HourQuantiles>
  /** The largest hourly p50 and p90 over the horizon (GPUs, fractions where GPUs are shared). */
  readonly peakDemandGPUs: HourQuantiles
  /** Hours after the history's end of the first hour whose p90 exceeds the capacity (0: the first forecast hour). */
  readonly shortfallHour: number | undefined
}

/**
 * Per hour of day, the p50 and p90 of the window's hours of that hour of day (all of the window where one has none).
 */
const seasonalQuantiles = (
  history: ReadonlyArray<number>,
  firstHour: number,
  windowHours: number
): ReadonlyArray<HourQuantiles> => {
  const from = Math.max(0, history.length - windowHours)
  const buckets = Array.from({ length: season }, () => new Array<number>())
  for (let index = from; index < history.length; index++) buckets[mod(firstHour + index, season)]!.push(history[index]!)
  const everything = history.slice(from).sort((a, b) => a - b)
  return buckets.map((bucket) => {
    const sorted = bucket.length === 0 ? everything : bucket.sort((a, b) => a - b)
    return { p50: quantile(sorted, 0.5), p90: quantile(sorted, 0.9) }
  })
}

const mod = (value: number, by: number) => ((value % by) + by) % by

/** The forecast of the `horizonHours` after `history` (at least one hour of it). */
export const forecastDemand = (history: ReadonlyArray<number>, options: ForecastOptions): DemandForecast => {
  if (history.length === 0) throw new Error("a forecast needs at least one hour of history")
  const firstHour = options.firstHour ?? 0
  const windowHours = Math.min(history.length, options.windowHours ?? defaultWindowHours)
  const bySeason = seasonalQuantiles(history, firstHour, windowHours)
  const hours = Array.from(
    { length: options.horizonHours },
    (_, ahead) => bySeason[mod(firstHour + history.length + ahead, season)]!
  )
  const capacity = options.capacityGpus
  const shortfall = capacity === undefined ? -1 : hours.findIndex((hour) => hour.p90 > capacity)
  return {
    horizonHours: options.horizonHours,
    windowHours,
    hours,
    peakDemandGPUs: {
      p50: hours.reduce((peak, hour) => Math.max(peak, hour.p50), 0),
      p90: hours.reduce((peak, hour) => Math.max(peak, hour.p90), 0)
    },
    shortfallHour: shortfall < 0 ? undefined : shortfall
  }
}

/** Hours of a test whose demand fell at or under the forecast's p50 and p90. */
export interface Coverage {
  readonly hours: number
  readonly underP50: number
  readonly underP90: number
  /** underP50 / hours and underP90 / hours (0 with no hours). */
  readonly p50: number
  readonly p90: number
}

export interface Backtest {
  /** The hours fitted first (the history's first half) and the hours tested (the rest). */
  readonly fitHours: number
  readonly testHours: number
  /** One fit on the first half, every hour of the second half forecast from it. */
  readonly fixed: Coverage
  /** As a Pool would run: refitted every `horizonHours` on all the history before, forecasting the next horizon. */
  readonly rolling: Coverage
}

const coverageOf = (hours: number, underP50: number, underP90: number): Coverage => ({
  hours,
  underP50,
  underP90,
  p50: hours === 0 ? 0 : underP50 / hours,
  p90: hours === 0 ? 0 : underP90 / hours
})

/** Scores the forecast against the history's second half (needs two hours of history at least). */
export const backtest = (history: ReadonlyArray<number>, options: Omit<ForecastOptions, "capacityGpus">): Backtest => {
  const fitHours = Math.floor(history.length / 2)
  if (fitHours === 0) throw new Error("a backtest needs at least two hours of history")
  const testHours = history.length - fitHours
  const score = (originStep: number) => {
    let underP50 = 0
    let underP90 = 0
    for (let origin = fitHours; origin < history.length; origin += originStep) {
      const ahead = Math.min(originStep, history.length - origin)
      const forecast = forecastDemand(history.slice(0, origin), { ...options, horizonHours: ahead })
      for (let hour = 0; hour < ahead; hour++) {
        const actual = history[origin + hour]!
        if (actual <= forecast.hours[hour]!.p50) underP50++
        if (actual <= forecast.hours[hour]!.p90) underP90++
      }
    }
    return coverageOf(testHours, underP50, underP90)
  }
  return { fitHours, testHours, fixed: score(testHours), rolling: score(Math.max(1, options.horizonHours)) }
}

/**
 * The forecast as `status.forecast` (spec: Pool): whole GPUs (rounded up: a shared GPU still takes a GPU of the
 * Pool), the horizon as the spec writes durations, the shortfall as an instant. `historyEndMs` is the end of the
 * history's last hour.
 */
export const poolStatusForecast = (
  forecast: DemandForecast,
  times: { readonly generatedMs: number; readonly historyEndMs: number }
): {
  readonly generatedTime: string
  readonly horizon: string
  readonly peakDemandGPUs: { readonly p50: number; readonly p90: number }
  readonly shortfallTime?: string
} => ({
  generatedTime: new Date(times.generatedMs).toISOString(),
  horizon: `${forecast.horizonHours}h`,
  peakDemandGPUs: { p50: Math.ceil(forecast.peakDemandGPUs.p50), p90: Math.ceil(forecast.peakDemandGPUs.p90) },
  ...(forecast.shortfallHour === undefined
    ? {}
    : { shortfallTime: new Date(times.historyEndMs + forecast.shortfallHour * hourMs).toISOString() })
})
