/**
 * The Azure LLM inference trace of 2023 (scenarios/data/azure-llm-inference-2023/README.md: Splitwise, CC-BY 4.0) as
 * FunctionCall arrivals: each request's arrival, relative to the trace's first, and a service time from its tokens.
 *
 * The trace has no durations (its README says so), so a request's service time is a model, stated here and in
 * docs/functions.md ("Replaying serving load"): prefill reads the context at `prefillTokensPerSecond`, then decode
 * writes the generated tokens at `decodeTokensPerSecond`, one after the other,
 *
 *   durationMs = ceil(1000 × (ContextTokens / prefill + GeneratedTokens / decode)), at least 1 ms.
 *
 * The defaults are assumptions, not measurements: an 8B-parameter model in 16-bit weights on one H100 80GB serving
 * one request at a time, about 10,000 prompt tokens per second of prefill and 100 tokens per second of decode. Whole
 * milliseconds and no randomness: the same rows give the same arrivals on every machine.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's copy of the trace. */
export const llmTraceDataDir = fileURLToPath(new URL("../../scenarios/data/azure-llm-inference-2023/", import.meta.url))

/** The two services the trace holds. */
export const llmTraceFiles = {
  code: "AzureLLMInferenceTrace_code.csv",
  conv: "AzureLLMInferenceTrace_conv.csv"
} as const

export type LlmTraceName = keyof typeof llmTraceFiles

/** One request of the trace. */
export interface LlmRequest {
  /** Milliseconds after the trace's first request (whole, rounded down from the trace's 100 ns digits). */
  readonly offsetMs: number
  readonly contextTokens: number
  readonly generatedTokens: number
}

/** The token-throughput model of a request's service time. */
export interface ServiceModel {
  readonly prefillTokensPerSecond: number
  readonly decodeTokensPerSecond: number
}

/** nodus's assumption (module doc): an 8B model on one H100 80GB, one request at a time. */
export const defaultServiceModel: ServiceModel = { prefillTokensPerSecond: 10_000, decodeTokensPerSecond: 100 }

/** A call to replay: when it arrives (ms after the first) and how long it runs. */
export interface Arrival {
  readonly at: number
  readonly durationMs: number
  /** Tries of the call that raise before one returns (`sim.nodus.dev/call-raises`); none without it. */
  readonly raises?: number
}

const timestamp = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/u

/**
 * Epoch milliseconds of a trace timestamp `YYYY-MM-DD HH:MM:SS[.fraction]`, read as UTC (the traces name no zone; only
 * differences are used), the fraction cut to the millisecond; undefined for any other text. Shared with GenAiTrace.ts.
 */
export const traceTimeMs = (text: string): number | undefined => {
  const match = timestamp.exec(text)
  if (match === null) return undefined
  const [, year, month, day, hour, minute, second, fraction] = match
  const ms = Number(((fraction ?? "") + "000").slice(0, 3))
  return Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), ms)
}

/**
 * The data lines of a trace's CSV text, each with its 1-based line number (blank lines skipped), once its first line
 * is `header`; else an error saying the text is not `what`. Shared with GenAiTrace.ts.
 */
export const csvDataLines = (
  text: string,
  header: string,
  what: string
): ReadonlyArray<{ readonly line: number; readonly text: string }> => {
  const lines = text.split(/\r?\n/u)
  if (lines[0] !== header) throw new Error(`not ${what}: the first line is not "${header}"`)
  const data: Array<{ line: number; text: string }> = []
  for (let index = 1; index < lines.length; index++) {
    if (lines[index] !== "") data.push({ line: index + 1, text: lines[index]! })
  }
  return data
}

/** The end (exclusive, ms after the first arrival) of a trace's first `minutes`; all of it without them. */
export const endOfMinutes = (minutes: number | undefined): number =>
  minutes === undefined ? Number.POSITIVE_INFINITY : minutes * 60_000

const header = "TIMESTAMP,ContextTokens,GeneratedTokens"
const row = /^([^,]*),(\d+),(\d+)$/u

/** Parses the trace's CSV text; a malformed row is an error naming its line (the files are copied unchanged). */
export const parseLlmTrace = (text: string): ReadonlyArray<LlmRequest> => {
  const requests: Array<LlmRequest> = []
  let first: number | undefined
  for (const { line, text: data } of csvDataLines(text, header, "an Azure LLM inference trace")) {
    const match = row.exec(data)
    const at = match === null ? undefined : traceTimeMs(match[1]!)
    if (match === null || at === undefined) {
      throw new Error(
        `line ${line}: not "TIMESTAMP,ContextTokens,GeneratedTokens": ${JSON.stringify(data.slice(0, 80))}`
      )
    }
    first ??= at
    if (at < first + (requests.at(-1)?.offsetMs ?? 0)) throw new Error(`line ${line}: out of time order`)
    requests.push({ offsetMs: at - first, contextTokens: Number(match[2]), generatedTokens: Number(match[3]) })
  }
  return requests
}

/** Reads one of the repository's two traces, or a file of the same format. */
export const loadLlmTrace = (trace: LlmTraceName | { readonly file: string }): ReadonlyArray<LlmRequest> =>
  parseLlmTrace(
    readFileSync(typeof trace === "string" ? join(llmTraceDataDir, llmTraceFiles[trace]) : trace.file, "utf8")
  )

/** A request's service time under the model (module doc). */
export const serviceTimeMs = (request: LlmRequest, model: ServiceModel = defaultServiceModel): number =>
  Math.max(
    1,
    Math.ceil(
      1000 *
        (request.contextTokens / model.prefillTokensPerSecond + request.generatedTokens / model.decodeTokensPerSecond)
    )
  )

/** The requests of the first `minutes` (all without it) as arrivals, with their service times. */
export const arrivalsOf = (
  requests: ReadonlyArray<LlmRequest>,
  options: { readonly minutes?: number; readonly model?: ServiceModel } = {}
): ReadonlyArray<Arrival> => {
  const end = endOfMinutes(options.minutes)
  const arrivals: Array<Arrival> = []
  for (const request of requests) {
    if (request.offsetMs >= end) break
    arrivals.push({ at: request.offsetMs, durationMs: serviceTimeMs(request, options.model) })
  }
  return arrivals
}
