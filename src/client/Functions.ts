/**
 * Calling a Function (spec: Function, FunctionCall; docs/clients.md, "Functions"), as the Python client does:
 * `spawn` creates a FunctionCall, `remote` waits for its result, `map` makes one call per input, sent in batches of up
 * to 1,000 through `POST …/functions/{name}/map` (docs/functions.md, "Map batches"): one request per batch, all its
 * calls created or none, with one Idempotency-Key kept across the batch's retries. A map reads its calls' ends from one
 * watch of its label `<group>/map=<mapId>` (spec: Generic operations, `watch=true`), not a long poll per call
 * (docs/clients.md, "Waiting for a result").
 *
 * The input is JSON `{"args": [...], "kwargs": {...}}`, inline (base64) up to 64 KiB, else uploaded as a blob the call
 * names. This client sends no `<group>/python` annotation: it is no Python interpreter, and JSON payloads do not
 * depend on one (the server checks the minor only of a caller that states it). `get` long-polls the result route
 * `GET …/functioncalls/{name}/result?timeout=<duration>` (docs/functions.md), which answers the call once it ended or
 * when the wait passed.
 */
import { type Cause, Clock, Effect, Queue, Random, Stream } from "effect"
import {
  APIConnectionError,
  APITimeoutError,
  type ClientError,
  noAnswer,
  NotFoundError,
  RemoteError
} from "./Errors.ts"
import type { NodusObject, ResourceCalls } from "./ResourceCalls.ts"
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
/**
 * How long one watch of a map asks the server to keep it open, in seconds; then it is listed and watched again. With
 * bookmarks (every 30 s by default) a watch that stays silent for `watchIdleMs` is taken for lost.
 */
const watchSeconds = 300
const watchIdleMs = 90_000

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
  readonly spawn: (
    args?: ReadonlyArray<unknown>,
    kwargs?: Readonly<Record<string, unknown>>
  ) => Effect.Effect<FunctionCallHandle, ClientError>
  /** Calls the Function and waits for its return value (RemoteError if it raised). */
  readonly remote: (
    args?: ReadonlyArray<unknown>,
    kwargs?: Readonly<Record<string, unknown>>
  ) => Effect.Effect<unknown, ClientError | RemoteError>
  /** One call per input, created in batches of up to 1,000; their results as a stream. */
  readonly map: (inputs: Iterable<unknown>, options?: MapOptions) => Stream.Stream<unknown, ClientError | RemoteError>
}

const ended = new Set(["Succeeded", "Failed", "Cancelled"])

const duration = (seconds: number) => Number.isInteger(seconds) ? `${seconds}s` : `${Math.round(seconds * 1000)}ms`

/** A stored payload's value: JSON inline (base64) or in a blob. */
const decode = (client: ResourceCalls, payload: { encoding?: string; inline?: string; blob?: string } | undefined) =>
  Effect.gen(function*() {
    if (payload === undefined || payload === null) return undefined
    if ((payload.encoding ?? "JSON") !== "JSON") {
      return yield* Effect.die(new Error(`this client reads JSON results only (got ${payload.encoding})`))
    }
    const raw = payload.inline !== undefined
      ? Buffer.from(payload.inline, "base64")
      : yield* client.readBlob(payload.blob ?? "")
    return JSON.parse(Buffer.from(raw).toString("utf8")) as unknown
  })

/**
 * An ended call's outcome (phase Succeeded, Failed or Cancelled): its value, or RemoteError; undefined while it runs.
 */
const outcomeOf = (
  client: ResourceCalls,
  call: NodusObject | undefined
): Effect.Effect<unknown, ClientError | RemoteError> | undefined => {
  const status = call?.["status"] ?? {}
  if (status.phase === "Succeeded") return decode(client, status.result)
  if (status.phase === "Failed" || status.phase === "Cancelled") {
    const error = status.error ?? {}
    return Effect.fail(
      new RemoteError({
        message: error.message ?? status.message ?? `the call ${String(status.phase).toLowerCase()}`,
        statusCode: undefined,
        code: undefined,
        payload: call,
        requestId: undefined,
        remoteType: error.type,
        remoteTraceback: error.traceback
      })
    )
  }
  return undefined
}

export const functionCall = (client: ResourceCalls, project: string, name: string): FunctionCallHandle => {
  const object = () => client.get("functioncalls", project, name)
  return {
    project,
    name,
    object,
    done: () => Effect.map(object(), (call) => ended.has(call["status"]?.phase)),
    cancel: () => client.patch("functioncalls", project, name, { spec: { state: "Cancelled" } }),
    get: (timeout) =>
      Effect.gen(function*() {
        const start = yield* Clock.currentTimeMillis
        const deadline = timeout === undefined ? undefined : start + timeout * 1000
        const path = `${client.path("functioncalls", project, name)}/result`
        while (true) {
          const now = yield* Clock.currentTimeMillis
          const left = deadline === undefined
            ? pollSeconds
            : Math.max(0, Math.min(pollSeconds, Math.floor((deadline - now) / 1000)))
          const call: NodusObject | undefined = responseJson(
            yield* client.request("GET", path, { query: { timeout: duration(left) }, timeoutMs: (left + 30) * 1000 })
          )
          const outcome = outcomeOf(client, call)
          if (outcome !== undefined) return yield* outcome
          if (deadline !== undefined && (yield* Clock.currentTimeMillis) >= deadline) {
            return yield* Effect.fail(noAnswer(APITimeoutError, `FunctionCall ${name} did not end within ${timeout}s`))
          }
        }
      })
  }
}

/** Inputs cut into batches in order: at most `mapBatch` each, and at most `mapBatchBytes` of JSON (one always fits). */
export const mapBatches = <A>(
  inputs: ReadonlyArray<A>,
  sizeOf: (input: A) => number
): ReadonlyArray<ReadonlyArray<A>> => {
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

/** A listing of a map's calls: as they are now, and the resourceVersion to watch from. */
interface Listed {
  readonly items: ReadonlyArray<NodusObject>
  readonly resourceVersion: string
}

/** A call of a map as its batch's answer named it: its index, and the resourceVersion it was answered at. */
interface Known {
  readonly index: number
  readonly version: number
}

/** A map call's end: its value, or the error it is given as (with returnExceptions) or fails the map with. */
type Outcome = { readonly value: unknown } | { readonly error: RemoteError | NotFoundError }

/**
 * Follows the calls of map `mapId` (`total` inputs, indexes 0 … total-1) through one watch of the label
 * `<group>/map=<mapId>` and offers their results to `out`, in input order (orderOutputs, by mapIndex) or as they end.
 * `list` is the first listing (made before any batch is sent); `created` is told each batch's answer; `follow(listed)`
 * watches from the listing's version until every call has given its result.
 *
 * A watch that ends (timeoutSeconds, a dropped connection, 410 Expired) is resumed with a new listing and a watch from
 * its version, as client-go's reflector does (docs/api-machinery.md, "Lists and watches"): the listing catches up on
 * what ended meanwhile; an index gives its result once, however often its end is seen. Watches that end with no event
 * count as retries, at most `maxRetries` in a row (spec: Errors, "Client retries are finite"). A call gone before it
 * ended (a DELETED event, or missing from a listing made after it was created) is NotFoundError, as `get` would say.
 */
const followMap = (
  client: ResourceCalls,
  project: string,
  mapId: string,
  total: number,
  options: MapOptions,
  out: Queue.Queue<unknown, ClientError | RemoteError | Cause.Done>
) => {
  const collection = client.path("functioncalls", project)
  const labelSelector = `${client.config.group}/map=${mapId}`
  const ordered = options.orderOutputs !== false
  /** Indexes whose result is decided (given, held for order, or being read). */
  const settled = new Set<number>()
  /** Ended calls waiting for an earlier index (in order). */
  const held = new Map<number, Outcome>()
  let next = 0
  let given = 0
  /** The calls the batch answers named: their index and the resourceVersion they were answered at. */
  const answered = new Map<string, Known>()
  /** The last listing: a call created at or before its version and missing from it was deleted. */
  let lastList = { version: 0, names: new Set<string>() }

  const versionOf = (call: NodusObject) => {
    const version = Number(call["metadata"]?.resourceVersion)
    return Number.isFinite(version) ? version : Number.POSITIVE_INFINITY
  }
  const indexOf = (call: NodusObject | undefined): number | undefined => {
    const spec = call?.["spec"]
    const index = spec?.mapIndex
    return spec?.mapId === mapId && Number.isInteger(index) && index >= 0 && index < total ? index : undefined
  }
  const deleted = (call: NodusObject | undefined, name: string): Outcome => ({
    error: new NotFoundError({
      message: `FunctionCall ${name} was deleted before it ended`,
      statusCode: 404,
      code: "NotFound",
      payload: call,
      requestId: undefined
    })
  })
  /** Gives what may be given now; the error the map fails with, if one came (without returnExceptions). */
  const give = (outcome: Outcome): RemoteError | NotFoundError | undefined => {
    given++
    if ("value" in outcome) Queue.offerUnsafe(out, outcome.value)
    else if (options.returnExceptions === true) Queue.offerUnsafe(out, outcome.error)
    else return outcome.error
    return undefined
  }
  /** Decides an index once (later sightings of its end are dropped); offers are synchronous, so order holds. */
  const settle = (index: number, outcome: Effect.Effect<Outcome, ClientError>) =>
    Effect.suspend(() => {
      if (settled.has(index)) return Effect.void
      settled.add(index)
      return Effect.flatMap(outcome, (decided) => {
        let failed: RemoteError | NotFoundError | undefined
        if (!ordered) {
          failed = give(decided)
        } else {
          held.set(index, decided)
          while (failed === undefined && held.has(next)) {
            const first = held.get(next)!
            held.delete(next)
            next++
            failed = give(first)
          }
        }
        return failed === undefined ? Effect.void : Effect.fail(failed)
      })
    })
  /** A call as a watch event or a listing shows it: decided once it ended, or once it is `gone` unended. */
  const observe = (call: NodusObject, gone: boolean) => {
    const index = indexOf(call)
    if (index === undefined || settled.has(index)) return Effect.void
    const ending = outcomeOf(client, call)
    if (ending !== undefined) {
      return settle(
        index,
        ending.pipe(
          Effect.map((value): Outcome => ({ value })),
          Effect.catchTag("RemoteError", (error) => Effect.succeed<Outcome>({ error }))
        )
      )
    }
    return gone ? settle(index, Effect.succeed(deleted(call, String(call["metadata"]?.name)))) : Effect.void
  }
  /** Known calls missing from the last listing though created before it: deleted (their DELETED came before it). */
  const missing = (calls: Iterable<readonly [string, Known]>) =>
    Effect.forEach(
      calls,
      ([name, known]) =>
        known.version <= lastList.version && !lastList.names.has(name)
          ? settle(known.index, Effect.succeed(deleted(undefined, name)))
          : Effect.void,
      { discard: true }
    )

  /** Every call of the map, page by page, and the first page's resourceVersion (which every page reports). */
  const list: Effect.Effect<Listed, ClientError> = Effect.gen(function*() {
    const items: Array<NodusObject> = []
    let token: string | undefined
    let resourceVersion: string | undefined
    do {
      const page = responseJson(
        yield* client.request("GET", collection, { query: { labelSelector, limit: 500, continue: token } })
      ) as NodusObject
      items.push(...(page["items"] ?? []))
      resourceVersion ??= page["metadata"]?.resourceVersion
      token = page["metadata"]?.continue || undefined
    } while (token !== undefined)
    return { items, resourceVersion: resourceVersion ?? "0" }
  })

  /** One batch's answer: the calls it created (a replayed batch answers them as they are now). */
  const created = (startIndex: number, count: number, calls: ReadonlyArray<NodusObject>) =>
    Effect.gen(function*() {
      const found = new Set<number>()
      const named: Array<readonly [string, Known]> = []
      for (const call of calls) {
        const index = indexOf(call)
        if (index === undefined) continue
        found.add(index)
        const known = { index, version: versionOf(call) }
        answered.set(String(call["metadata"]?.name), known)
        named.push([String(call["metadata"]?.name), known])
        yield* observe(call, false)
      }
      yield* missing(named)
      // A batch is created whole: an index its (replayed) answer lacks was deleted since.
      for (let index = startIndex; index < startIndex + count; index++) {
        if (!found.has(index)) yield* settle(index, Effect.succeed(deleted(undefined, `${mapId}[${index}]`)))
      }
    })

  /** One watch from `version`: its events observed until it ends, an ERROR event ends it, or every result is given. */
  const watchOnce = (version: string, seen: () => void) =>
    Effect.gen(function*() {
      const reply = yield* client.stream("GET", collection, {
        query: {
          watch: "true",
          labelSelector,
          resourceVersion: version,
          allowWatchBookmarks: "true",
          timeoutSeconds: watchSeconds
        },
        timeoutMs: watchIdleMs
      })
      const handle = (line: string) =>
        Effect.suspend(() => {
          let event: { type?: string; object?: NodusObject }
          try {
            event = JSON.parse(line)
          } catch {
            return Effect.fail(noAnswer(APIConnectionError, `the watch of map ${mapId} sent a line that is not JSON`))
          }
          // An ERROR (410 Expired: the version left the change log, or this watcher fell behind) ends the watch.
          if (event.type === "ERROR") return Effect.succeed(true)
          seen()
          if (event.object === undefined || event.type === "BOOKMARK") return Effect.succeed(false)
          return Effect.as(observe(event.object, event.type === "DELETED"), false)
        })
      // A broken connection ends the watch (it is resumed); what fails the map (a call's error, a blob read) fails it.
      let broke: APIConnectionError | undefined
      // Ended, the watch is read no further: the Stream's end closes its connection.
      yield* reply.body.pipe(
        Stream.catchTag("APIConnectionError", (error) =>
          Stream.suspend(() => {
            broke = error
            return Stream.empty
          })),
        Stream.decodeText,
        Stream.splitLines,
        Stream.filter((line) => line.trim() !== ""),
        Stream.mapEffect(handle),
        Stream.takeUntil((stop) => stop || given >= total),
        Stream.runDrain
      )
      return broke
    })

  const follow = (first: Listed) =>
    Effect.gen(function*() {
      let version = first.resourceVersion
      lastList = { version: Number(version), names: new Set(first.items.map((call) => String(call["metadata"]?.name))) }
      for (const call of first.items) yield* observe(call, false)
      let fruitless = 0
      while (given < total) {
        let events = 0
        // Opening the watch has the transport's retries; failing that fails the map. What ends it later is resumed.
        const broke = yield* watchOnce(version, () => events++)
        if (given >= total) return
        if (events > 0) {
          fruitless = 0
        } else {
          if (++fruitless > client.config.maxRetries) {
            return yield* Effect.fail(
              broke ??
                noAnswer(
                  APIConnectionError,
                  `the watch of map ${mapId} ended ${fruitless} times in a row without an event`
                )
            )
          }
          yield* Effect.sleep(
            Math.min(client.config.maxRetryWaitMs, 500 * 2 ** (fruitless - 1)) * (0.5 + (yield* Random.next) / 2)
          )
        }
        const listed = yield* list
        lastList = {
          version: Number(listed.resourceVersion),
          names: new Set(listed.items.map((call) => String(call["metadata"]?.name)))
        }
        for (const call of listed.items) yield* observe(call, false)
        yield* missing(answered)
        version = listed.resourceVersion
      }
    })

  return { list, created, follow }
}

export const functionHandle = (client: ResourceCalls, project: string, name: string): FunctionHandle => {
  const input = (
    args: ReadonlyArray<unknown>,
    kwargs: Readonly<Record<string, unknown>>
  ): Effect.Effect<{ readonly encoding: string; readonly inline?: string; readonly blob?: string }, ClientError> => {
    const raw = Buffer.from(JSON.stringify({ args, kwargs }))
    const encoded = raw.toString("base64")
    return encoded.length <= inlineMax
      ? Effect.succeed({ encoding: "JSON", inline: encoded })
      : Effect.map(client.uploadBlob(raw, project), (blob) => ({ encoding: "JSON", blob }))
  }
  const call = (
    args: ReadonlyArray<unknown>,
    kwargs: Readonly<Record<string, unknown>>,
    extra: Record<string, unknown> = {}
  ) =>
    Effect.gen(function*() {
      const spec = { function: name, input: yield* input(args, kwargs), ...extra }
      const created = yield* client.create("functioncalls", project, {
        kind: "FunctionCall",
        metadata: { generateName: `${name}-` },
        spec
      })
      return functionCall(client, project, created["metadata"].name as string)
    })
  const spawn = (args: ReadonlyArray<unknown> = [], kwargs: Readonly<Record<string, unknown>> = {}) =>
    call(args, kwargs)
  /** One batch of a map, created in one request: its calls as created, in input order. */
  const sendBatch = (mapId: string, startIndex: number, payloads: ReadonlyArray<unknown>) =>
    Effect.suspend(() => {
      // Made once per batch and kept across the transport's retries: a retried batch is never created twice.
      const idempotencyKey = crypto.randomUUID()
      const body = {
        apiVersion: `${client.config.group}/v1`,
        kind: "FunctionCallBatch",
        mapId,
        startIndex,
        inputs: payloads
      }
      return Effect.map(
        client.request("POST", `${client.path("functions", project, name)}/map`, { json: body, idempotencyKey }),
        (response) => (responseJson(response) as NodusObject | undefined)?.["items"] as ReadonlyArray<NodusObject> ?? []
      )
    })
  const map = (inputs: Iterable<unknown>, options: MapOptions = {}) => {
    const mapId = crypto.randomUUID().replaceAll("-", "").slice(0, 16)
    const argsOf = (item: unknown) => (options.spread === true ? [...(item as Iterable<unknown>)] : [item])
    return Stream.callback<unknown, ClientError | RemoteError>((out) =>
      Effect.gen(function*() {
        const payloads = yield* Effect.forEach([...inputs], (item) => input(argsOf(item), {}), {
          concurrency: uploadConcurrency
        })
        const follower = followMap(client, project, mapId, payloads.length, options, out)
        if (payloads.length > 0) {
          // Listed before the first batch is sent: the watch starts from this version, so no call's end can be missed.
          const first = yield* follower.list
          const create = Effect.gen(function*() {
            let startIndex = 0
            for (const batch of mapBatches(payloads, (payload) => JSON.stringify(payload).length)) {
              yield* follower.created(startIndex, batch.length, yield* sendBatch(mapId, startIndex, batch))
              startIndex += batch.length
            }
          })
          yield* Effect.all([create, follower.follow(first)], { concurrency: 2, discard: true })
        }
        yield* Queue.end(out)
      })
    )
  }
  return {
    project,
    name,
    spawn,
    remote: (args, kwargs) => Effect.flatMap(spawn(args, kwargs), (handle) => handle.get()),
    map
  }
}
