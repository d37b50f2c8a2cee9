/**
 * Calling a Function (spec: Function, FunctionCall; docs/clients.md, "Functions"), as the Python client does:
 * `spawn` creates a FunctionCall, `remote` waits for its result, `map` makes one call per input, sent in batches of up
 * to 1,000 through `POST …/functions/{name}/map` (docs/functions.md, "Map batches"): one request per batch, all its
 * calls created or none, with one Idempotency-Key kept across the batch's retries.
 *
 * The input is JSON `{"args": [...], "kwargs": {...}}`, inline (base64) up to 64 KiB, else uploaded as a blob the call
 * names. This client sends no `<group>/python` annotation: it is no Python interpreter, and JSON payloads do not
 * depend on one (the server checks the minor only of a caller that states it). `get` long-polls the result route
 * `GET …/functioncalls/{name}/result?timeout=<duration>` (docs/functions.md), which answers the call once it ended or
 * when the wait passed.
 */
import { Clock, Effect, Stream } from "effect"
import type { ClientShape, NodusObject } from "./Client.ts"
import { APITimeoutError, type ClientError, noAnswer, RemoteError } from "./Errors.ts"
import { responseJson } from "./Transport.ts"

/** The most calls one map sends per batch (spec: FunctionCallBatchTooLarge above it). */
export const mapBatch = 1000
/** A JSON input larger than this (base64) goes as a blob (spec: inline payloads are at most 64 KiB). */
export const inlineMax = 64 * 1024
/** How long one long poll of a result asks the server to hold it, in seconds. */
const pollSeconds = 55
/**
 * The most JSON one map batch request carries: the server reads at most 3 MiB of a body, and 1,000 inline inputs of
 * up to 64 KiB would be far more, so a batch also ends before it would pass this.
 */
export const mapBatchBytes = 2 * 1024 * 1024
/** Blob uploads in flight at once while a map encodes its inputs. */
const uploadConcurrency = 8
/** Results waited for at once by a map (each a long poll on its own connection). */
const resultConcurrency = 64

export interface MapOptions {
  /** Results in input order (default), or as calls end. */
  readonly orderOutputs?: boolean
  /** A failed call's RemoteError is given as its result instead of failing the map. */
  readonly returnExceptions?: boolean
  /** Each input is an array of positional arguments (as a Python tuple is spread), not one argument. */
  readonly spread?: boolean
}

/** A handle on one FunctionCall. */
export interface FunctionCallHandle {
  readonly project: string
  readonly name: string
  /** The stored FunctionCall. */
  readonly object: () => Effect.Effect<NodusObject, ClientError>
  /** Whether it ended (Succeeded, Failed or Cancelled). */
  readonly done: () => Effect.Effect<boolean, ClientError>
  readonly cancel: () => Effect.Effect<NodusObject, ClientError>
  /** Waits (long polls) until the call ends, its value; RemoteError if it failed, APITimeoutError past `timeout` s. */
  readonly get: (timeout?: number) => Effect.Effect<unknown, ClientError | RemoteError>
}

/** A Function of a project, to call. */
export interface FunctionHandle {
  readonly project: string
  readonly name: string
  /** Creates a FunctionCall with these arguments (JSON) and returns its handle at once. */
  readonly spawn: (args?: ReadonlyArray<unknown>, kwargs?: Readonly<Record<string, unknown>>) => Effect.Effect<FunctionCallHandle, ClientError>
  /** Calls the Function and waits for its return value (RemoteError if it raised). */
  readonly remote: (args?: ReadonlyArray<unknown>, kwargs?: Readonly<Record<string, unknown>>) => Effect.Effect<unknown, ClientError | RemoteError>
  /** One call per input, created in batches of up to 1,000; their results as a stream. */
  readonly map: (inputs: Iterable<unknown>, options?: MapOptions) => Stream.Stream<unknown, ClientError | RemoteError>
}

const ended = new Set(["Succeeded", "Failed", "Cancelled"])

const duration = (seconds: number) => Number.isInteger(seconds) ? `${seconds}s` : `${Math.round(seconds * 1000)}ms`

export const functionCall = (client: ClientShape, project: string, name: string): FunctionCallHandle => {
  const decode = (payload: { encoding?: string; inline?: string; blob?: string } | undefined) => Effect.gen(function*() {
    if (payload === undefined || payload === null) return undefined
    if ((payload.encoding ?? "JSON") !== "JSON") return yield* Effect.die(new Error(`this client reads JSON results only (got ${payload.encoding})`))
    const raw = payload.inline !== undefined ? Buffer.from(payload.inline, "base64") : yield* client.readBlob(payload.blob ?? "")
    return JSON.parse(Buffer.from(raw).toString("utf8")) as unknown
  })
  const object = () => client.get("functioncalls", project, name)
  return {
    project,
    name,
    object,
    done: () => Effect.map(object(), (call) => ended.has(call["status"]?.phase)),
    cancel: () => client.patch("functioncalls", project, name, { spec: { state: "Cancelled" } }),
    get: (timeout) => Effect.gen(function*() {
      const start = yield* Clock.currentTimeMillis
      const deadline = timeout === undefined ? undefined : start + timeout * 1000
      const path = `${client.path("functioncalls", project, name)}/result`
      while (true) {
        const now = yield* Clock.currentTimeMillis
        const left = deadline === undefined ? pollSeconds : Math.max(0, Math.min(pollSeconds, Math.floor((deadline - now) / 1000)))
        const call: NodusObject | undefined = responseJson(yield* client.request("GET", path, { query: { timeout: duration(left) }, timeoutMs: (left + 30) * 1000 }))
        const status = call?.["status"] ?? {}
        if (status.phase === "Succeeded") return yield* decode(status.result)
        if (status.phase === "Failed" || status.phase === "Cancelled") {
          const error = status.error ?? {}
          return yield* Effect.fail(new RemoteError({
            message: error.message ?? status.message ?? `the call ${String(status.phase).toLowerCase()}`,
            statusCode: undefined,
            code: undefined,
            payload: call,
            requestId: undefined,
            remoteType: error.type,
            remoteTraceback: error.traceback
          }))
        }
        if (deadline !== undefined && (yield* Clock.currentTimeMillis) >= deadline) {
          return yield* Effect.fail(noAnswer(APITimeoutError, `FunctionCall ${name} did not end within ${timeout}s`))
        }
      }
    })
  }
}

/** Inputs cut into batches in order: at most `mapBatch` each, and at most `mapBatchBytes` of JSON (one always fits). */
export const mapBatches = <A>(inputs: ReadonlyArray<A>, sizeOf: (input: A) => number): ReadonlyArray<ReadonlyArray<A>> => {
  const batches: Array<Array<A>> = []
  let bytes = 0
  for (const input of inputs) {
    const size = sizeOf(input) + 1
    const last = batches.at(-1)
    if (last === undefined || last.length === mapBatch || bytes + size > mapBatchBytes) {
      batches.push([input])
      bytes = size
    } else {
      last.push(input)
      bytes += size
    }
  }
  return batches
}

export const functionHandle = (client: ClientShape, project: string, name: string): FunctionHandle => {
  const input = (args: ReadonlyArray<unknown>, kwargs: Readonly<Record<string, unknown>>): Effect.Effect<{ readonly encoding: string; readonly inline?: string; readonly blob?: string }, ClientError> => {
    const raw = Buffer.from(JSON.stringify({ args, kwargs }))
    const encoded = raw.toString("base64")
    return encoded.length <= inlineMax
      ? Effect.succeed({ encoding: "JSON", inline: encoded })
      : Effect.map(client.uploadBlob(raw, project), (blob) => ({ encoding: "JSON", blob }))
  }
  const call = (args: ReadonlyArray<unknown>, kwargs: Readonly<Record<string, unknown>>, extra: Record<string, unknown> = {}) =>
    Effect.gen(function*() {
      const spec = { function: name, input: yield* input(args, kwargs), ...extra }
      const created = yield* client.create("functioncalls", project, { kind: "FunctionCall", metadata: { generateName: `${name}-` }, spec })
      return functionCall(client, project, created["metadata"].name as string)
    })
  const spawn = (args: ReadonlyArray<unknown> = [], kwargs: Readonly<Record<string, unknown>> = {}) => call(args, kwargs)
  /** One batch of a map, created in one request: its calls' handles, in input order. */
  const sendBatch = (mapId: string, startIndex: number, payloads: ReadonlyArray<unknown>) =>
    Effect.suspend(() => {
      // Made once per batch and kept across the transport's retries: a retried batch is never created twice.
      const idempotencyKey = crypto.randomUUID()
      const body = { apiVersion: `${client.config.group}/v1`, kind: "FunctionCallBatch", mapId, startIndex, inputs: payloads }
      return Effect.map(client.request("POST", `${client.path("functions", project, name)}/map`, { json: body, idempotencyKey }), (response) =>
        ((responseJson(response) as NodusObject | undefined)?.["items"] as ReadonlyArray<NodusObject> ?? []).map((created) => functionCall(client, project, created["metadata"].name as string)))
    })
  const map = (inputs: Iterable<unknown>, options: MapOptions = {}) => {
    const mapId = crypto.randomUUID().replaceAll("-", "").slice(0, 16)
    const argsOf = (item: unknown) => (options.spread === true ? [...(item as Iterable<unknown>)] : [item])
    const calls = Effect.gen(function*() {
      const payloads = yield* Effect.forEach([...inputs], (item) => input(argsOf(item), {}), { concurrency: uploadConcurrency })
      const handles: Array<FunctionCallHandle> = []
      let startIndex = 0
      for (const batch of mapBatches(payloads, (payload) => JSON.stringify(payload).length)) {
        handles.push(...yield* sendBatch(mapId, startIndex, batch))
        startIndex += batch.length
      }
      return handles
    })
    const result = (handle: FunctionCallHandle) => options.returnExceptions === true
      ? handle.get().pipe(Effect.catchTag("RemoteError", (error) => Effect.succeed<unknown>(error)))
      : handle.get()
    // Every call is created before any result is awaited, as the Python client does: the calls run meanwhile.
    return Stream.unwrap(Effect.map(calls, (handles) =>
      Stream.fromIterable(handles).pipe(Stream.mapEffect(result, { concurrency: resultConcurrency, unordered: options.orderOutputs === false }))))
  }
  return {
    project,
    name,
    spawn,
    remote: (args, kwargs) => Effect.flatMap(spawn(args, kwargs), (handle) => handle.get()),
    map
  }
}
