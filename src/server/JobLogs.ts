/**
 * The logs of runs on live hosts (docs/live.md, "Logs"), kept by the server as agents ship them: one file per run,
 * `<dir>/<owner uid>/<attempt>.log`, appended in order, scrubbed of the run's secret values. A run's logs go when its
 * owner is forgotten (the object deleted, its ttl included).
 */
import { Effect, Stream } from "effect"
import { appendFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs"
import { open } from "node:fs/promises"
import { join } from "node:path"
import { StringDecoder } from "node:string_decoder"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { LogRequest } from "../runtime/WorkloadFiles.ts"

/** How often a followed log is looked at for new text. */
const followPollMs = 200
/** A tail reads at most the last 8 MiB of a log (tailLines of a longer one shows what those hold). */
const tailWindowBytes = 8 * 1024 * 1024
const chunkBytes = 64 * 1024

export interface RunState {
  /** Whether the run may still write (a followed log ends once it has ended and all its text is read). */
  readonly ended: (owner: string, attempt: string) => boolean
}

export const makeJobLogs = (dir: string, runs: RunState) => {
  const fileOf = (owner: string, attempt: string) => join(dir, owner, `${attempt}.log`)

  /** Text in order, once each (the capacity driver acknowledges what it passed on). */
  const append = (owner: string, attempt: string, text: string) => {
    mkdirSync(join(dir, owner), { recursive: true })
    appendFileSync(fileOf(owner, attempt), text)
  }

  const forget = (owner: string) => rmSync(join(dir, owner), { recursive: true, force: true })

  /** The attempt of the request: the run number given, or the latest run of the index with a log. */
  const attemptOf = (object: ResourceObject, request: LogRequest): string | undefined => {
    const prefix = `${object.metadata.name}-${request.index}-`
    if (request.attempt !== undefined) return `${prefix}${request.attempt}`
    const owned = join(dir, object.metadata.uid)
    if (!existsSync(owned)) return undefined
    const numbers = readdirSync(owned)
      .filter((file) => file.startsWith(prefix) && file.endsWith(".log"))
      .map((file) => Number(file.slice(prefix.length, -".log".length)))
      .filter(Number.isInteger)
    return numbers.length === 0 ? undefined : `${prefix}${Math.max(...numbers)}`
  }

  const log = (object: ResourceObject, request: LogRequest): Effect.Effect<Stream.Stream<string>, ApiError> =>
    Effect.suspend(() => {
      const attempt = attemptOf(object, request)
      const file = attempt === undefined ? undefined : fileOf(object.metadata.uid, attempt)
      if (
        attempt === undefined || file === undefined || (!existsSync(file) && runs.ended(object.metadata.uid, attempt))
      ) {
        return Effect.fail(
          new ApiError({
            code: "NotFound",
            message: `Job "${object.metadata.name}" has no log for index ${request.index}${
              request.attempt === undefined ? "" : ` run ${request.attempt}`
            } yet`,
            fix:
              "A log exists once a run of the index started on a live host; list the Job's Attempts for its runs (kubectl get attempts)."
          })
        )
      }
      const iterable = textOf(file, request, () => runs.ended(object.metadata.uid, attempt))
      return Effect.succeed(
        Stream.fromAsyncIterable(iterable, (error) => error).pipe(Stream.catchCause(() => Stream.empty))
      )
    })

  return { append, forget, log }
}

/** The log's text: its tail or all of it, then (following) what is appended until the run ends. */
async function* textOf(file: string, request: LogRequest, ended: () => boolean): AsyncGenerator<string> {
  let offset = 0
  if (request.tailLines !== undefined) {
    const { text, size } = await tailOf(file, request.tailLines)
    if (text.length > 0) yield text
    offset = size
  }
  // A character cut at the end of a chunk is completed by the next one.
  const decoder = new StringDecoder("utf8")
  for (;;) {
    const done = ended()
    const bytes = await readFrom(file, offset)
    if (bytes.length > 0) {
      offset += bytes.length
      const text = decoder.write(bytes)
      if (text.length > 0) yield text
      continue
    }
    if (!request.follow || done) return
    await new Promise((resolve) => setTimeout(resolve, followPollMs))
  }
}

const readFrom = async (file: string, offset: number): Promise<Buffer> => {
  if (!existsSync(file)) return Buffer.alloc(0)
  const handle = await open(file, "r")
  try {
    const buffer = Buffer.alloc(chunkBytes)
    const { bytesRead } = await handle.read(buffer, 0, chunkBytes, offset)
    return buffer.subarray(0, bytesRead)
  } finally {
    await handle.close()
  }
}

const tailOf = async (file: string, lines: number): Promise<{ readonly text: string; readonly size: number }> => {
  if (!existsSync(file)) return { text: "", size: 0 }
  const size = statSync(file).size
  const start = Math.max(0, size - tailWindowBytes)
  const handle = await open(file, "r")
  try {
    const buffer = Buffer.alloc(size - start)
    await handle.read(buffer, 0, buffer.length, start)
    const all = buffer.toString("utf8").split("\n")
    const closed = all.at(-1) === "" ? all.slice(0, -1) : all
    const kept = lines === 0 ? [] : closed.slice(-lines)
    return { text: kept.length === 0 ? "" : `${kept.join("\n")}\n`, size }
  } finally {
    await handle.close()
  }
}
