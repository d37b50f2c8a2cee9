/**
 * `nodus replay-functions`: replays serving load — the Azure LLM inference trace of 2023 (or a file of its format), or
 * the Alibaba GenAI serving trace v2026 (`--trace genai`: recorded service times, failed requests raise) — as
 * FunctionCalls on a Function under the simulator (server/FunctionReplay.ts; docs/functions.md, "Replaying serving
 * load"), under one scaling policy or several, and prints a row per policy: the same arrivals each time, with what
 * each saves against the first. Exit codes: 0 every replay ran, 1 a replay failed, 2 bad usage or a bad trace file.
 */
import { Effect } from "effect"
import { parseMicroUsd } from "../core/Money.ts"
import { parseDurationMs } from "../core/Units.ts"
import { genAiArrivalsOf, loadGenAiTrace } from "../data/GenAiTrace.ts"
import { type Arrival, arrivalsOf, defaultServiceModel, llmTraceFiles, loadLlmTrace } from "../data/LlmTrace.ts"
import { replay, type ReplayPolicy, type ReplaySummary } from "../server/FunctionReplay.ts"
import { parseLongFlags, UsageError } from "./Flags.ts"

export const replayUsage = `Usage: nodus replay-functions [flags]

Replays the arrivals of a serving trace as FunctionCalls on a Function under the simulator and prints, per
scaling policy, the calls' queue waits and latencies, the workers and what the ledger charged. A flag given a list
(--concurrency 1,4,16) compares policies: one row per combination, the same arrivals, savings against the first.

Flags:
  --trace code|conv|genai|<file>
                             the Azure LLM inference trace 2023 (code or conv service), a CSV of its format, or
                             the Alibaba GenAI serving trace v2026 (genai) (code)
  --minutes N|all            replay the trace's first N minutes (10; genai 360)
  --min-workers N[,N…]       scaling.minWorkers (0)
  --max-workers N[,N…]       scaling.maxWorkers (10)
  --concurrency N[,N…]       scaling.targetConcurrency (1)
  --scaledown D[,D…]         scaling.scaledownWindow, a duration (60s)
  --gpu TYPE                 each worker's GPU, one of it (H100)
  --prefill N                prompt tokens per second of a call (${defaultServiceModel.prefillTokensPerSecond}; not for genai)
  --decode N                 generated tokens per second of a call (${defaultServiceModel.decodeTokensPerSecond}; not for genai)
  --seed S                   the simulator's seed
  --json                     print the summaries as JSON instead of a table

Service time of an Azure request = ContextTokens / prefill + GeneratedTokens / decode (an assumption: the trace has no
durations). A genai request runs its recorded exec_time_seconds; a FAILED one raises (its call ends Failed), PENDING
and PROCESSING ones (never run, or cut off by the trace's end) are skipped. Exit status: 0 every replay ran, 1 a replay failed, 2 bad usage or trace file.
`

interface ReplayFlags {
  readonly trace: string
  readonly minutes: number | undefined
  readonly policies: ReadonlyArray<ReplayPolicy>
  readonly gpu: string
  readonly prefill: number
  readonly decode: number
  readonly seed: string | undefined
  readonly json: boolean
}

const flagsWithValue = new Set([
  "trace",
  "minutes",
  "min-workers",
  "max-workers",
  "concurrency",
  "scaledown",
  "gpu",
  "prefill",
  "decode",
  "seed"
])

const wholeNumber = (flag: string, text: string, min: number): number => {
  if (!/^[0-9]{1,7}$/u.test(text) || Number(text) < min) {
    throw new UsageError(`--${flag} takes whole numbers from ${min}, not ${JSON.stringify(text)}`)
  }
  return Number(text)
}

const listOf = <A>(flag: string, text: string, parse: (item: string) => A): ReadonlyArray<A> => {
  const items = text.split(",")
  if (items.some((item) => item === "")) throw new UsageError(`--${flag}: an empty item in ${JSON.stringify(text)}`)
  return items.map(parse)
}

const parseFlags = (args: ReadonlyArray<string>): ReplayFlags | "help" => {
  const flags = parseLongFlags(args, flagsWithValue)
  if (flags === "help") return "help"
  const { values, json } = flags
  const trace = values["trace"] ?? "code"
  if (trace === "genai" && (values["prefill"] !== undefined || values["decode"] !== undefined)) {
    throw new UsageError("--prefill and --decode model the Azure traces' service times; genai's are recorded")
  }
  const minutes = values["minutes"] === "all"
    ? undefined
    : wholeNumber("minutes", values["minutes"] ?? (trace === "genai" ? "360" : "10"), 1)
  const mins = listOf("min-workers", values["min-workers"] ?? "0", (item) => wholeNumber("min-workers", item, 0))
  const maxes = listOf("max-workers", values["max-workers"] ?? "10", (item) => wholeNumber("max-workers", item, 1))
  const concurrencies = listOf(
    "concurrency",
    values["concurrency"] ?? "1",
    (item) => wholeNumber("concurrency", item, 1)
  )
  const windows = listOf("scaledown", values["scaledown"] ?? "60s", (item) => {
    if (parseDurationMs(item) === undefined) {
      throw new UsageError(`--scaledown takes durations such as 60s or 5m, not ${JSON.stringify(item)}`)
    }
    return item
  })
  const policies: Array<ReplayPolicy> = []
  for (const minWorkers of mins) {
    for (const maxWorkers of maxes) {
      if (minWorkers > maxWorkers) {
        throw new UsageError(`--min-workers ${minWorkers} is above --max-workers ${maxWorkers}`)
      }
      for (const targetConcurrency of concurrencies) {
        for (const scaledownWindow of windows) {
          policies.push({ minWorkers, maxWorkers, targetConcurrency, scaledownWindow })
        }
      }
    }
  }
  return {
    trace,
    minutes,
    policies,
    gpu: values["gpu"] ?? "H100",
    prefill: wholeNumber("prefill", values["prefill"] ?? String(defaultServiceModel.prefillTokensPerSecond), 1),
    decode: wholeNumber("decode", values["decode"] ?? String(defaultServiceModel.decodeTokensPerSecond), 1),
    seed: values["seed"],
    json
  }
}

const seconds = (ms: number) => (ms / 1000).toFixed(ms < 10_000 ? 2 : 1)

/** Savings against the first row's cost, in percent to one decimal (integer arithmetic on micro-dollars). */
export const savingsOf = (first: string, cost: string): string => {
  const base = parseMicroUsd(first)
  if (base === 0n) return "-"
  const tenths = ((base - parseMicroUsd(cost)) * 1000n) / base
  const sign = tenths < 0n ? "-" : ""
  const magnitude = tenths < 0n ? -tenths : tenths
  return `${sign}${magnitude / 10n}.${magnitude % 10n}%`
}

const policyText = (policy: ReplayPolicy) =>
  `min ${policy.minWorkers} max ${policy.maxWorkers} conc ${policy.targetConcurrency} down ${policy.scaledownWindow}`

/** The rows as a table for humans. */
export const table = (summaries: ReadonlyArray<ReplaySummary>): string => {
  const header = [
    "policy",
    "calls",
    "ok",
    "failed",
    "wait p50",
    "p90",
    "p99",
    "max",
    "latency p50",
    "p99",
    "peak",
    "launched",
    "worker-h",
    "cost USD",
    "per 1k calls",
    "saves"
  ]
  const rows = summaries.map((summary) => [
    policyText(summary.policy),
    String(summary.calls),
    String(summary.succeeded),
    String(summary.failed + Object.values(summary.other).reduce((sum, count) => sum + count, 0)),
    `${seconds(summary.queueWaitMs.p50)}s`,
    `${seconds(summary.queueWaitMs.p90)}s`,
    `${seconds(summary.queueWaitMs.p99)}s`,
    `${seconds(summary.queueWaitMs.max)}s`,
    `${seconds(summary.latencyMs.p50)}s`,
    `${seconds(summary.latencyMs.p99)}s`,
    String(summary.workers.peak),
    String(summary.workers.launched),
    (summary.workers.workerSeconds / 3600).toFixed(2),
    summary.costUSD,
    summary.costPer1000CallsUSD,
    summary === summaries[0] ? "-" : savingsOf(summaries[0]!.costUSD, summary.costUSD)
  ])
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, column) => column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)).join("  ")
  return [line(header), ...rows.map(line)].join("\n") + "\n"
}

/** The arrivals to replay, and a line saying what they are. */
const arrivalsFor = (flags: ReplayFlags): { readonly arrivals: ReadonlyArray<Arrival>; readonly what: string } => {
  const window = flags.minutes === undefined ? "all" : `the first ${flags.minutes} minutes`
  if (flags.trace === "genai") {
    const { arrivals, skipped } = genAiArrivalsOf(
      loadGenAiTrace(),
      flags.minutes === undefined ? {} : { minutes: flags.minutes }
    )
    const failed = arrivals.filter((arrival) => (arrival.raises ?? 0) > 0).length
    const left = Object.entries(skipped).map(([status, count]) => `${count} ${status}`).join(", ")
    return {
      arrivals,
      what: `${window} of the Alibaba GenAI trace; ${failed} recorded FAILED, which raise${
        left === "" ? "" : `; skipped ${left}`
      }`
    }
  }
  const requests = flags.trace === "code" || flags.trace === "conv"
    ? loadLlmTrace(flags.trace)
    : loadLlmTrace({ file: flags.trace })
  const arrivals = arrivalsOf(requests, {
    ...(flags.minutes === undefined ? {} : { minutes: flags.minutes }),
    model: { prefillTokensPerSecond: flags.prefill, decodeTokensPerSecond: flags.decode }
  })
  return { arrivals, what: `${window} of ${flags.trace in llmTraceFiles ? `the ${flags.trace} trace` : flags.trace}` }
}

/** Runs the command; answers its exit code. */
export const replayFunctions = async (args: ReadonlyArray<string>): Promise<number> => {
  let flags: ReplayFlags | "help"
  let source: { readonly arrivals: ReadonlyArray<Arrival>; readonly what: string }
  try {
    flags = parseFlags(args)
    if (flags === "help") {
      process.stdout.write(replayUsage)
      return 0
    }
    source = arrivalsFor(flags)
  } catch (error) {
    process.stderr.write(`nodus replay-functions: ${error instanceof Error ? error.message : String(error)}\n`)
    if (error instanceof UsageError) process.stderr.write(`\n${replayUsage}`)
    return 2
  }
  const { arrivals, what } = source
  process.stderr.write(
    `replaying ${arrivals.length} calls (${what}) under ${flags.policies.length} ${
      flags.policies.length === 1 ? "policy" : "policies"
    }\n`
  )
  const summaries: Array<ReplaySummary> = []
  for (const policy of flags.policies) {
    const began = performance.now()
    const outcome = await Effect.runPromise(Effect.result(replay(arrivals, {
      policy,
      resources: { gpu: { type: [flags.gpu], count: 1 } },
      ...(flags.seed === undefined ? {} : { seed: flags.seed })
    })))
    if (outcome._tag === "Failure") {
      process.stderr.write(`nodus replay-functions: ${policyText(policy)}: ${outcome.failure.message}\n`)
      return 1
    }
    summaries.push(outcome.success)
    // Wall time goes to stderr: the summary itself is the same on every run.
    process.stderr.write(`  ${policyText(policy)}: replayed in ${((performance.now() - began) / 1000).toFixed(1)} s\n`)
  }
  process.stdout.write(flags.json ? `${JSON.stringify(summaries, null, 2)}\n` : table(summaries))
  return 0
}
