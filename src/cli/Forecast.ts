/**
 * `nodus forecast` (docs/simulator.md, "Forecast"): a Pool's demand forecast (spec: Pool, `status.forecast`) from a GPU
 * trace's recorded history — the Alibaba GPU v2023 pods, or a pod list of its format — and its backtest on the trace's
 * second half. Demand comes straight from the pods' recorded lives (creation to deletion: running plus waiting), not
 * from a replay through the simulator: the trace already holds what its cluster's queue did, and a replay would put
 * the simulator's queue on a fleet of other GPUs in its place. Exit codes: 0 printed, 2 bad usage or a bad trace file.
 */
import {
  type Backtest,
  backtest,
  busyFromMs,
  defaultWindowHours,
  type DemandForecast,
  forecastDemand,
  hourlyPeakDemand,
  hourMs,
  poolStatusForecast,
  quantile
} from "../core/capacity/Forecast.ts"
import * as Limits from "../core/Limits.ts"
import { parseDurationMs } from "../core/Units.ts"
import { alibabaClusterGpus, type AlibabaPod, demandOf, loadAlibabaPods } from "../data/AlibabaGpuTrace.ts"
import { parseLongFlags, UsageError } from "./Flags.ts"

export const forecastUsage = `Usage: nodus forecast [flags]

Forecasts a Pool's GPU demand (spec: Pool, status.forecast) from a GPU trace's history and backtests the model on the
trace's second half. Demand in an hour is the most GPUs requested at once in it by pods running or waiting. The model:
per hour of day, the p50 and p90 of the same hour of day over the window, trend-free (docs/simulator.md, "Forecast").

Flags:
  --trace alibaba|<file>  the Alibaba GPU v2023 pod list (alibaba), or a CSV of its format
  --horizon D             how far ahead, whole hours from 24h to 720h (168h)
  --window D              the recent history the model reads, whole hours from 24h (${defaultWindowHours}h)
  --capacity-gpus N       the Pool's GPUs (alibaba: the trace's GPU nodes; a file: none, so no shortfall)
  --start T               the RFC 3339 instant of the trace's second 0 (1970-01-01T00:00:00Z: the trace has none)
  --json                  print JSON instead of text

Exit status: 0 printed, 2 bad usage or trace file.
`

interface ForecastFlags {
  readonly trace: string
  readonly horizonHours: number
  readonly windowHours: number
  readonly capacityGpus: number | undefined
  readonly startMs: number
  readonly json: boolean
}

const flagsWithValue = new Set(["trace", "horizon", "window", "capacity-gpus", "start"])

const wholeHours = (flag: string, text: string, minimumMs: number, maximumMs: number): number => {
  const ms = parseDurationMs(text)
  if (ms === undefined || ms % hourMs !== 0 || ms < minimumMs || ms > maximumMs) {
    const upTo = maximumMs === Number.POSITIVE_INFINITY ? "" : ` to ${maximumMs / hourMs}h`
    throw new UsageError(`--${flag} takes whole hours from ${minimumMs / hourMs}h${upTo}, not ${JSON.stringify(text)}`)
  }
  return ms / hourMs
}

const parseFlags = (args: ReadonlyArray<string>): ForecastFlags | "help" => {
  const flags = parseLongFlags(args, flagsWithValue)
  if (flags === "help") return "help"
  const { values, json } = flags
  const capacity = values["capacity-gpus"]
  if (capacity !== undefined && !/^[0-9]{1,9}$/u.test(capacity)) {
    throw new UsageError(`--capacity-gpus takes a whole number, not ${JSON.stringify(capacity)}`)
  }
  const start = values["start"] ?? "1970-01-01T00:00:00Z"
  const startMs = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/u.test(start)
    ? Date.parse(start)
    : Number.NaN
  if (Number.isNaN(startMs)) {
    throw new UsageError(`--start takes an RFC 3339 instant such as 2023-01-01T00:00:00Z, not ${JSON.stringify(start)}`)
  }
  return {
    trace: values["trace"] ?? "alibaba",
    // Spec: Pool, predict.horizon "24h to 720h".
    horizonHours: wholeHours(
      "horizon",
      values["horizon"] ?? Limits.poolPredictHorizonDefault,
      Limits.poolPredictHorizonMsMin,
      Limits.poolPredictHorizonMsMax
    ),
    windowHours: wholeHours(
      "window",
      values["window"] ?? `${defaultWindowHours}h`,
      24 * hourMs,
      Number.POSITIVE_INFINITY
    ),
    capacityGpus: capacity === undefined ? undefined : Number(capacity),
    startMs,
    json
  }
}

/** What the command computes; `--json` prints it as it is. */
export interface ForecastReport {
  readonly trace: { readonly name: string; readonly pods: number; readonly gpuPods: number }
  readonly history: {
    /** Trace milliseconds of the history's first hour (the busy part's start) and its length. */
    readonly fromMs: number
    readonly hours: number
    /** The hourly demand's own spread over the history (GPUs). */
    readonly demandGPUs: { readonly p50: number; readonly p90: number; readonly max: number }
  }
  readonly capacityGpus: number | undefined
  readonly forecast: Omit<DemandForecast, "hours">
  /** `forecast` as a Pool's status.forecast, made at the history's end. */
  readonly status: ReturnType<typeof poolStatusForecast>
  readonly backtest: Backtest
}

/** The forecast and backtest of pods' demand (pure but for what the flags name). */
export const forecastPods = (
  pods: ReadonlyArray<AlibabaPod>,
  settings: {
    readonly name: string
    readonly horizonHours: number
    readonly windowHours: number
    readonly capacityGpus: number | undefined
    readonly startMs: number
  }
): ForecastReport => {
  const intervals = pods.map(demandOf).filter((interval) => interval.milliGpus > 0)
  if (intervals.length === 0) throw new UsageError(`${settings.name}: no pod requests a GPU`)
  const fromMs = busyFromMs(intervals)
  const toMs = Math.ceil(Math.max(...intervals.map((interval) => interval.endMs)) / hourMs) * hourMs
  const history = hourlyPeakDemand(intervals, fromMs, toMs)
  if (history.length < 2) throw new UsageError(`${settings.name}: under two hours of demand to forecast from`)
  // Hour numbers on the epoch when --start anchors the trace, so the hour of day is a real one.
  const firstHour = Math.floor((settings.startMs + fromMs) / hourMs)
  const options = { horizonHours: settings.horizonHours, windowHours: settings.windowHours, firstHour }
  const { hours: _hours, ...forecast } = forecastDemand(history, { ...options, capacityGpus: settings.capacityGpus })
  const sorted = [...history].sort((a, b) => a - b)
  const historyEndMs = settings.startMs + toMs
  return {
    trace: { name: settings.name, pods: pods.length, gpuPods: intervals.length },
    history: {
      fromMs,
      hours: history.length,
      demandGPUs: { p50: quantile(sorted, 0.5), p90: quantile(sorted, 0.9), max: sorted.at(-1)! }
    },
    capacityGpus: settings.capacityGpus,
    forecast,
    status: poolStatusForecast({ ...forecast, hours: [] }, { generatedMs: historyEndMs, historyEndMs }),
    backtest: backtest(history, options)
  }
}

const gpus = (value: number) => value.toFixed(1)
const percent = (share: number) => `${(share * 100).toFixed(1)}%`

/** The report for humans. */
export const text = (report: ForecastReport): string => {
  const { backtest: test, forecast, history } = report
  const coverage = (label: string, covered: Backtest["fixed"]) =>
    `  ${label}: at or under p90 ${covered.underP90}/${covered.hours} hours (${
      percent(covered.p90)
    }), at or under p50 ${covered.underP50}/${covered.hours} (${percent(covered.p50)})`
  const shortfall = report.capacityGpus === undefined
    ? "no capacity given (--capacity-gpus): no shortfall computed"
    : forecast.shortfallHour === undefined
    ? `capacity ${report.capacityGpus} GPUs: no shortfall within the horizon`
    : `capacity ${report.capacityGpus} GPUs: shortfall ${forecast.shortfallHour} h after the history's end (${report.status.shortfallTime})`
  return [
    `trace: ${report.trace.name}: ${report.trace.pods} pods, ${report.trace.gpuPods} requesting GPUs`,
    `history: ${history.hours} hours from trace second ${
      history.fromMs / 1000
    } (the busy part: 99% of the pods are created after it)`,
    `  demand per hour (most GPUs requested at once by running + waiting pods): p50 ${
      gpus(history.demandGPUs.p50)
    }, p90 ${gpus(history.demandGPUs.p90)}, max ${gpus(history.demandGPUs.max)}`,
    `forecast, next ${forecast.horizonHours} h (per hour of day, p50 and p90 of the last ${forecast.windowHours} h; trend-free):`,
    `  peakDemandGPUs p50 ${gpus(forecast.peakDemandGPUs.p50)}, p90 ${
      gpus(forecast.peakDemandGPUs.p90)
    } (status.forecast, whole GPUs: ${report.status.peakDemandGPUs.p50}, ${report.status.peakDemandGPUs.p90})`,
    `  ${shortfall}`,
    `backtest: fitted on the first ${test.fitHours} h, scored on the ${test.testHours} h after:`,
    coverage("one fit, whole second half", test.fixed),
    coverage(`refitted every ${forecast.horizonHours} h`, test.rolling),
    ""
  ].join("\n")
}

/** Runs the command; answers its exit code. */
export const forecast = (args: ReadonlyArray<string>): number => {
  try {
    const flags = parseFlags(args)
    if (flags === "help") {
      process.stdout.write(forecastUsage)
      return 0
    }
    const alibaba = flags.trace === "alibaba"
    const pods = alibaba ? loadAlibabaPods() : loadAlibabaPods(flags.trace)
    const report = forecastPods(pods, {
      name: alibaba ? "alibaba-gpu-v2023 (openb_pod_list_default.csv)" : flags.trace,
      horizonHours: flags.horizonHours,
      windowHours: flags.windowHours,
      capacityGpus: flags.capacityGpus ?? (alibaba ? alibabaClusterGpus() : undefined),
      startMs: flags.startMs
    })
    process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : text(report))
    return 0
  } catch (error) {
    process.stderr.write(`nodus forecast: ${error instanceof Error ? error.message : String(error)}\n`)
    if (error instanceof UsageError) process.stderr.write(`\n${forecastUsage}`)
    return 2
  }
}
