/**
 * The Alibaba GenAI serving trace v2026 (scenarios/data/alibaba-genai-v2026-requests/README.md: GenTD26's request
 * file, stable-diffusion serving with LoRA adapters) as FunctionCall arrivals. Unlike the Azure LLM trace
 * (LlmTrace.ts), it records each request's service time and outcome, so nothing is modelled:
 *
 * - `at`: `gmt_create` (whole seconds, read as UTC) in milliseconds after the file's first request;
 * - `durationMs`: `exec_time_seconds` × 1000, at least 1 ms (a call of 0 s still runs on a worker);
 * - `raises`: 1 for `predict_status` FAILED (the call raises once: with no retries it ends Failed `RemoteError`),
 *   none for SUCCEED;
 * - PENDING and PROCESSING rows (30 and 3 in the file) are skipped, and counted: PENDING ones never ran
 *   (`exec_time_seconds` 0, no parameters), PROCESSING ones were still running when the trace was cut (the file's last
 *   seconds, and one on 2024-12-05), so neither has a service time or an outcome to replay.
 *
 * Rows of the same second keep the file's order (the replay creates a second's calls in that order). A malformed row
 * is an error naming its line; the file is copied unchanged, so none is expected.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { type Arrival, csvDataLines, endOfMinutes, traceTimeMs } from "./LlmTrace.ts"

/** The repository's copy of the request file. */
export const genAiTraceFile = fileURLToPath(
  new URL("../../scenarios/data/alibaba-genai-v2026-requests/lora_request_trace.csv", import.meta.url)
)

const header =
  "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora"
const columns = header.split(",").length
const statuses = ["SUCCEED", "FAILED", "PENDING", "PROCESSING"] as const
export type GenAiStatus = (typeof statuses)[number]

/** One request of the trace, as far as the replay reads it. */
export interface GenAiRequest {
  /** Milliseconds after the file's first request. */
  readonly offsetMs: number
  readonly status: GenAiStatus
  /** `exec_time_seconds` in whole milliseconds (the file writes whole seconds as `32.0`). */
  readonly execMs: number
  /** `predict_type`: TXT_2_IMG, IMG_2_IMG or INPAINTING. */
  readonly type: string
}

const seconds = /^\d{1,7}(?:\.\d{1,6})?$/u

/** Parses the request file's CSV text (no quoted fields: none of its columns holds a comma). */
export const parseGenAiTrace = (text: string): ReadonlyArray<GenAiRequest> => {
  const requests: Array<GenAiRequest> = []
  let first: number | undefined
  for (const { line, text: data } of csvDataLines(text, header, "the Alibaba GenAI request trace")) {
    const fields = data.split(",")
    if (fields.length !== columns) {
      throw new Error(`line ${line}: ${fields.length} fields, not ${columns}: ${JSON.stringify(data.slice(0, 80))}`)
    }
    const at = traceTimeMs(fields[0]!)
    if (at === undefined) throw new Error(`line ${line}: gmt_create is not a time: ${JSON.stringify(fields[0])}`)
    const status = statuses.find((known) => known === fields[2])
    if (status === undefined) {
      throw new Error(`line ${line}: predict_status is not one of ${statuses.join(", ")}: ${JSON.stringify(fields[2])}`)
    }
    if (!seconds.test(fields[3]!)) {
      throw new Error(`line ${line}: exec_time_seconds is not a number of seconds: ${JSON.stringify(fields[3])}`)
    }
    first ??= at
    if (at < first + (requests.at(-1)?.offsetMs ?? 0)) throw new Error(`line ${line}: out of time order`)
    requests.push({ offsetMs: at - first, status, execMs: Math.round(Number(fields[3]) * 1000), type: fields[1]! })
  }
  return requests
}

/** Reads the repository's copy, or a file of the same format. */
export const loadGenAiTrace = (file: string = genAiTraceFile): ReadonlyArray<GenAiRequest> =>
  parseGenAiTrace(readFileSync(file, "utf8"))

export interface GenAiArrivals {
  readonly arrivals: ReadonlyArray<Arrival>
  /** Rows of the window not replayed, by status (PENDING, PROCESSING: module doc). */
  readonly skipped: Readonly<Partial<Record<GenAiStatus, number>>>
}

/** The requests of the first `minutes` (all without it) as arrivals with their recorded service times and outcomes. */
export const genAiArrivalsOf = (
  requests: ReadonlyArray<GenAiRequest>,
  options: { readonly minutes?: number } = {}
): GenAiArrivals => {
  const end = endOfMinutes(options.minutes)
  const arrivals: Array<Arrival> = []
  const skipped: Partial<Record<GenAiStatus, number>> = {}
  for (const request of requests) {
    if (request.offsetMs >= end) break
    if (request.status === "PENDING" || request.status === "PROCESSING") {
      skipped[request.status] = (skipped[request.status] ?? 0) + 1
      continue
    }
    arrivals.push({
      at: request.offsetMs,
      durationMs: Math.max(1, request.execMs),
      ...(request.status === "FAILED" ? { raises: 1 } : {})
    })
  }
  return { arrivals, skipped }
}
