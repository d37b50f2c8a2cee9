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
export const llmTraceFiles = { code: "AzureLLMInferenceTrace_code.csv", conv: "AzureLLMInferenceTrace_conv.csv" } as const

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
}

const header = "TIMESTAMP,ContextTokens,GeneratedTokens"
const row = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?,(\d+),(\d+)$/u

/** Epoch milliseconds of a trace timestamp, read as UTC (the trace names no zone; only differences are used). */
const epochMsOf = (match: RegExpExecArray): number => {
  const [, year, month, day, hour, minute, second, fraction] = match
  const ms = Number(((fraction ?? "") + "000").slice(0, 3))
  return Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), ms)
}

/** Parses the trace's CSV text; a malformed row is an error naming its line (the files are copied unchanged). */
export const parseLlmTrace = (text: string): ReadonlyArray<LlmRequest> => {
  const lines = text.split(/\r?\n/u)
  if (lines[0] !== header) throw new Error(`not an Azure LLM inference trace: the first line is not "${header}"`)
  const requests: Array<LlmRequest> = []
  let first: number | undefined
  for (let index = 1; index < lines.length; index++) {
    const line = lines[index]!
    if (line === "") continue
    const match = row.exec(line)
    if (match === null) throw new Error(`line ${index + 1}: not "TIMESTAMP,ContextTokens,GeneratedTokens": ${JSON.stringify(line.slice(0, 80))}`)
    const at = epochMsOf(match)
    first ??= at
    if (at < first + (requests.at(-1)?.offsetMs ?? 0)) throw new Error(`line ${index + 1}: out of time order`)
    requests.push({ offsetMs: at - first, contextTokens: Number(match[8]), generatedTokens: Number(match[9]) })
  }
  return requests
}

/** Reads one of the repository's two traces, or a file of the same format. */
export const loadLlmTrace = (trace: LlmTraceName | { readonly file: string }): ReadonlyArray<LlmRequest> =>
  parseLlmTrace(readFileSync(typeof trace === "string" ? join(llmTraceDataDir, llmTraceFiles[trace]) : trace.file, "utf8"))

/** A request's service time under the model (module doc). */
export const serviceTimeMs = (request: LlmRequest, model: ServiceModel = defaultServiceModel): number =>
  Math.max(1, Math.ceil(1000 * (request.contextTokens / model.prefillTokensPerSecond + request.generatedTokens / model.decodeTokensPerSecond)))

/** The requests of the first `minutes` (all without it) as arrivals, with their service times. */
export const arrivalsOf = (requests: ReadonlyArray<LlmRequest>, options: { readonly minutes?: number; readonly model?: ServiceModel } = {}): ReadonlyArray<Arrival> => {
  const end = options.minutes === undefined ? Number.POSITIVE_INFINITY : options.minutes * 60_000
  const arrivals: Array<Arrival> = []
  for (const request of requests) {
    if (request.offsetMs >= end) break
    arrivals.push({ at: request.offsetMs, durationMs: serviceTimeMs(request, options.model) })
  }
  return arrivals
}
