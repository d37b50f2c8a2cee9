/**
 * The TypeScript client's retries, and the error classes a test server cannot be made to answer on demand, against a
 * scripted HTTP stub that records every request (test/clients/Python.ts, shared with the Python client's tests): Status
 * bodies rendered by the server's own Respond.ts (SpendCheckUnavailableError, CapacityUnavailableError,
 * AssetInUseError), no answer (APIConnectionError, APITimeoutError), finite retries that honour a bounded Retry-After,
 * and one Idempotency-Key per create kept across its retries (spec: Client library errors; docs/clients.md, "Retries").
 * Also `remote` and `map` over a scripted Functions server (MapStub.ts): `map` follows its calls through one watch of
 * its label, resumed with a listing when the watch ends.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  APIConnectionError,
  APITimeoutError,
  Client,
  type ClientOptions,
  errorClasses,
  NodusClient,
  NodusError,
  RemoteError
} from "../../src/client/index.ts"
import { errorCodes } from "../../src/core/meta/ErrorCodes.ts"
import { recordedStatus, startStub, statusAnswer, type Stub, type StubAnswer } from "../clients/Python.ts"
import { type MapStub, type MapStubOptions, startMapStub } from "./MapStub.ts"
import { collect, failure } from "./Support.ts"

let stub: Stub | undefined
let client: NodusClient | undefined
afterEach(async () => {
  client?.close()
  client = undefined
  await stub?.close()
  stub = undefined
})

/** A stub answering request n with `answer(n)`, and a client of it that retries at most `maxRetries` times. */
const serve = async (answer: (index: number) => StubAnswer, options: ClientOptions = {}) => {
  stub = await startStub((index) => answer(index))
  client = new NodusClient({ baseUrl: stub.url, token: "nds_stub", env: {}, maxRetries: 3, ...options })
  return client
}

const ok = { status: 200, body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j", namespace: "p" } } }
const created = {
  status: 201,
  body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j", namespace: "p", uid: "u-1" } }
}
const paused = recordedStatus("AdmissionsPaused", "admissions are paused for maintenance", { retryAfterSeconds: 0 })

const assertRecorded = (error: NodusError, expected: string, recorded: ReturnType<typeof recordedStatus>) => {
  assert.strictEqual(error._tag, expected, String(error))
  assert.strictEqual(error.statusCode, recorded.status)
  assert.strictEqual(error.code, recorded.body["reason"])
  assert.strictEqual((error.payload as { reason?: string }).reason, recorded.body["reason"])
  assert.strictEqual(error.requestId, recorded.requestId)
  assert.strictEqual(error.fix, recorded.body["fix"])
}

describe("the error classes", () => {
  it("every registered code's clientError is a class whose tag is that name", () => {
    for (const [code, info] of Object.entries(errorCodes)) {
      const error = new errorClasses[info.clientError]({
        message: code,
        statusCode: info.httpStatus,
        code,
        payload: undefined,
        requestId: undefined
      })
      assert.strictEqual(error._tag, info.clientError, code)
      assert.isTrue(error instanceof NodusError)
    }
  })
})

describe("client errors from recorded Status bodies", () => {
  it("SpendCheckUnavailableError: 503 PaymentVerificationUnavailable, after its retries", async () => {
    const recorded = recordedStatus("PaymentVerificationUnavailable", "the payment provider did not answer", {
      retryAfterSeconds: 0
    })
    const nodus = await serve(() => statusAnswer(recorded), { maxRetries: 1 })
    assertRecorded(await failure(nodus.get("jobs", "p", "j")), "SpendCheckUnavailableError", recorded)
    assert.strictEqual(stub!.seen.length, 2)
  })

  it("CapacityUnavailableError: 503 AdmissionsPaused", async () => {
    const nodus = await serve(() => statusAnswer(paused), { maxRetries: 0 })
    assertRecorded(await failure(nodus.get("jobs", "p", "j")), "CapacityUnavailableError", paused)
  })

  it("AssetInUseError: 409 PoolInUse, not retried", async () => {
    const recorded = recordedStatus("PoolInUse", "pools.nodus.dev \"gpus\" still has running workloads")
    const nodus = await serve(() => statusAnswer(recorded))
    assertRecorded(await failure(nodus.delete("pools", "p", "gpus")), "AssetInUseError", recorded)
    assert.strictEqual(stub!.seen.length, 1)
  })

  it("a reply that is not a Status falls back on its HTTP status: 404 text is NotFoundError", async () => {
    const nodus = await serve(() => ({ status: 404, body: "no such route" }))
    const error = await failure(nodus.get("jobs", "p", "j"))
    assert.strictEqual(error._tag, "NotFoundError")
    assert.strictEqual(error.statusCode, 404)
    assert.isUndefined(error.code)
    assert.strictEqual(stub!.seen.length, 1)
  })
})

describe("no answer", () => {
  it("APIConnectionError when the connection drops: a GET is sent again, a command never twice", async () => {
    const nodus = await serve(() => "drop", { maxRetries: 2 })
    const get = await failure(nodus.get("jobs", "p", "j"))
    assert.strictEqual(get._tag, "APIConnectionError")
    assert.isUndefined(get.statusCode)
    assert.strictEqual(stub!.seen.length, 3)
    // A command may have run: its outcome is unknown, so it is not sent again.
    const exec = await failure(nodus.sandbox("p", "box").exec(["true"]))
    assert.strictEqual(exec._tag, "APIConnectionError")
    assert.strictEqual(stub!.seen.length, 4)
  })

  it("APITimeoutError (an APIConnectionError) when no answer comes in time", async () => {
    const nodus = await serve(() => "hang", { maxRetries: 0, timeout: 0.5 })
    const error = await failure(nodus.get("jobs", "p", "j"))
    assert.strictEqual(error._tag, "APITimeoutError")
    assert.instanceOf(error, APITimeoutError)
    assert.instanceOf(error, APIConnectionError)
    assert.strictEqual(stub!.seen.length, 1)
  })
})

describe("retries", () => {
  it("waits the Retry-After the server asks for (503 AdmissionsPaused, Retry-After: 1), then succeeds", async () => {
    const nodus = await serve((index) =>
      index === 0 ? statusAnswer(recordedStatus("AdmissionsPaused", "paused", { retryAfterSeconds: 1 })) : ok
    )
    assert.strictEqual((await nodus.get("jobs", "p", "j"))["metadata"].name, "j")
    assert.strictEqual(stub!.seen.length, 2)
  })

  it("is finite: a server that keeps refusing gets 1 + maxRetries requests, then the error", async () => {
    const nodus = await serve(() => statusAnswer(paused), { maxRetries: 3 })
    assert.strictEqual((await failure(nodus.get("jobs", "p", "j")))._tag, "CapacityUnavailableError")
    assert.strictEqual(stub!.seen.length, 4)
  })

  it("retries a 503 without a Status or a Retry-After with its own backoff, still finitely", async () => {
    const nodus = await serve(() => ({ status: 503, body: "upstream unavailable" }), { maxRetries: 1 })
    const error = await failure(nodus.get("jobs", "p", "j"))
    assert.strictEqual(error._tag, "APIError")
    assert.strictEqual(error.statusCode, 503)
    assert.strictEqual(stub!.seen.length, 2)
  })

  it("is bounded: a Retry-After beyond maxRetryWait is raised at once, not slept through", async () => {
    const limited = recordedStatus("TooManyRequests", "too many requests", { retryAfterSeconds: 3600 })
    const nodus = await serve(() => statusAnswer(limited))
    const error = await failure(nodus.get("jobs", "p", "j"))
    assertRecorded(error, "RateLimitError", limited)
    assert.strictEqual(error.retryAfter, 3600)
    assert.strictEqual(stub!.seen.length, 1)
    // An HTTP-date Retry-After is read too: one an hour away is beyond the bound just the same.
    await stub!.close()
    const dated = await serve(() =>
      statusAnswer(recordedStatus("TooManyRequests", "slow down"), {
        "retry-after": new Date(Date.now() + 3_600_000).toUTCString()
      })
    )
    assert.strictEqual((await failure(dated.get("jobs", "p", "j")))._tag, "RateLimitError")
    assert.strictEqual(stub!.seen.length, 1)
  })

  it("does not retry what a retry cannot fix (422 Invalid)", async () => {
    const invalid = recordedStatus("Invalid", "jobs.nodus.dev \"j\" is invalid")
    const nodus = await serve(() => statusAnswer(invalid))
    assertRecorded(
      await failure(nodus.create("jobs", "p", { kind: "Job", metadata: { name: "j" } })),
      "ValidationError",
      invalid
    )
    assert.strictEqual(stub!.seen.length, 1)
  })
})

describe("Idempotency-Key", () => {
  it("a create keeps one key across its retries (a refusal, a dropped connection); the next create gets another", async () => {
    const inProgress = recordedStatus("RequestInProgress", "a request with this key is in progress", {
      retryAfterSeconds: 0
    })
    const script: ReadonlyArray<StubAnswer> = [statusAnswer(inProgress), "drop", statusAnswer(paused), created]
    const nodus = await serve((index) => script[index % 4]!)
    const body = { kind: "Job", metadata: { name: "j" }, spec: { image: "python:3.12" } }
    assert.deepStrictEqual([
      (await nodus.create("jobs", "p", body))["metadata"].uid,
      (await nodus.create("jobs", "p", body))["metadata"].uid
    ], ["u-1", "u-1"])
    const keys = stub!.seen.map((seen) => seen.headers["idempotency-key"])
    assert.strictEqual(keys.length, 8)
    assert.match(String(keys[0]), /^[0-9a-f-]{36}$/u)
    assert.strictEqual(new Set(keys.slice(0, 4)).size, 1)
    assert.strictEqual(new Set(keys.slice(4)).size, 1)
    assert.notStrictEqual(keys[0], keys[4])
    assert.deepStrictEqual(stub!.seen.map((seen) => seen.method), Array(8).fill("POST"))
    assert.strictEqual(stub!.seen[0]!.url, "/apis/nodus.dev/v1/namespaces/p/jobs")
  })

  it("re-running one create's Effect (Effect.retry around it) resends the same submission key", async () => {
    stub = await startStub((index) => index === 0 ? statusAnswer(recordedStatus("Conflict", "try again")) : created)
    const program = Effect.gen(function*() {
      const nodus = yield* Client
      return yield* nodus.create("jobs", "p", { kind: "Job", metadata: { name: "j" } }).pipe(Effect.retry({ times: 1 }))
    })
    const made = await Effect.runPromise(
      program.pipe(Effect.provide(Client.layer({ baseUrl: stub.url, token: "nds_stub", env: {} })))
    )
    assert.strictEqual(made["metadata"].uid, "u-1")
    const keys = stub.seen.map((seen) => seen.headers["idempotency-key"])
    assert.strictEqual(keys.length, 2)
    assert.strictEqual(keys[0], keys[1])
  })

  it("reads and deletes carry none", async () => {
    const nodus = await serve(() => ok)
    await nodus.get("jobs", "p", "j")
    await nodus.delete("jobs", "p", "j")
    assert.deepStrictEqual(stub!.seen.map((seen) => [seen.method, seen.headers["idempotency-key"]]), [[
      "GET",
      undefined
    ], ["DELETE", undefined]])
  })
})

describe("remote and map over a scripted Functions server", () => {
  // test/client/MapStub.ts: how each input ends, and how its watches end.
  let mapStub: MapStub | undefined
  afterEach(async () => {
    await mapStub?.close()
    mapStub = undefined
  })
  const functionStub = async (options: MapStubOptions = {}) => {
    mapStub = await startMapStub(options)
    client = new NodusClient({ baseUrl: mapStub.url, token: "nds_stub", env: {} })
    return client.function("p", "double")
  }

  it("remote: the call's value; a Failed call is RemoteError with what the function raised", async () => {
    const double = await functionStub()
    assert.strictEqual(await double.remote([21]), 42)
    const error = await failure(double.remote(["boom"]))
    assert.instanceOf(error, RemoteError)
    assert.deepStrictEqual([error.message, (error as RemoteError).remoteType, (error as RemoteError).remoteTraceback], [
      "boom",
      "ValueError",
      "Traceback: …"
    ])
  })

  it("map: results in input order; return_exceptions yields the RemoteError; unordered yields as calls end", async () => {
    const double = await functionStub()
    assert.deepStrictEqual(await collect(double.map([1, 2, 3])), [2, 4, 6])
    const mixed = await collect(double.map([1, "boom", 3], { returnExceptions: true }))
    assert.deepStrictEqual([mixed[0], mixed[1] instanceof RemoteError, mixed[2]], [2, true, 6])
    assert.strictEqual((await failure(collect(double.map([1, "boom"]))))._tag, "RemoteError")
    assert.deepStrictEqual(await collect(double.map([5, 7], { orderOutputs: false })), [14, 10])
    // Every map above was one batch request: its calls' mapId, and mapIndex from 0.
    assert.deepStrictEqual(
      mapStub!.posts.map((post) => [post.path, post.body.kind, post.body.startIndex, post.body.inputs.length]),
      [
        ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 3],
        ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 3],
        ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 2],
        ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 2]
      ]
    )
  })

  it("map: 2,500 inputs are three batch requests of at most 1,000, one mapId, each batch's key kept across its retry", async () => {
    const double = await functionStub({ failBatches: 1 })
    const inputs = Array.from({ length: 2500 }, (_, index) => index)
    assert.deepStrictEqual(await collect(double.map(inputs)), inputs.map((value) => value * 2))
    // The first request was refused once and sent again with the same key; then one request per batch.
    assert.deepStrictEqual(mapStub!.posts.map((post) => [post.body.startIndex, post.body.inputs.length]), [
      [0, 1000],
      [0, 1000],
      [1000, 1000],
      [2000, 500]
    ])
    assert.strictEqual(mapStub!.posts[0]!.key, mapStub!.posts[1]!.key)
    assert.strictEqual(new Set(mapStub!.posts.map((post) => post.key)).size, 3)
    assert.strictEqual(new Set(mapStub!.posts.map((post) => post.body.mapId)).size, 1)
  })

  it("map: a batch also ends before its body would pass 2 MiB (inline inputs are up to 64 KiB each)", async () => {
    const double = await functionStub()
    const big = "9".repeat(40_000)
    const results = await collect(double.map(Array.from({ length: 120 }, () => big)))
    assert.lengthOf(results, 120)
    assert.isAbove(mapStub!.posts.length, 1)
    for (const post of mapStub!.posts) assert.isAtMost(JSON.stringify(post.body).length, 2 * 1024 * 1024 + 1024)
    assert.deepStrictEqual(
      mapStub!.posts.map((post) => post.body.startIndex),
      mapStub!.posts.map((_, index) =>
        mapStub!.posts.slice(0, index).reduce((sum, earlier) => sum + earlier.body.inputs.length, 0)
      )
    )
  })

  it("map: one watch of its label from a listing made before the first batch, no result long polls; a blob result read through the blob API", async () => {
    const double = await functionStub()
    assert.deepStrictEqual(await collect(double.map([1, "big", 3])), [2, "big!", 6])
    const mapId = mapStub!.posts[0]!.body.mapId
    const requests = mapStub!.seen.map((seen) => `${seen.method} ${decodeURIComponent(seen.url)}`)
    const list = requests.findIndex((line) =>
      line.startsWith("GET /apis/nodus.dev/v1/namespaces/p/functioncalls?") &&
      line.includes(`labelSelector=nodus.dev/map=${mapId}`) && !line.includes("watch=")
    )
    const batch = requests.findIndex((line) => line.startsWith("POST ") && line.endsWith("/map"))
    assert.isAtLeast(list, 0, requests.join("\n"))
    assert.isBelow(list, batch)
    assert.lengthOf(mapStub!.watches, 1)
    assert.strictEqual(mapStub!.watches[0]!.resourceVersion, "0")
    assert.isFalse(requests.some((line) => line.includes("/result")), requests.join("\n"))
    assert.isTrue(requests.some((line) => line.startsWith("GET /blobs/v1/sha256:")))
  })

  for (const watchEnd of ["end", "drop", "expire"] as const) {
    it(`map: watches that end mid-map (${watchEnd}) are resumed from a new listing, no result lost or given twice`, async () => {
      const double = await functionStub({ watchEvents: 7, watchEnd })
      const inputs = Array.from({ length: 60 }, (_, index) => index)
      assert.deepStrictEqual(await collect(double.map(inputs)), inputs.map((value) => value * 2))
      const unordered = await collect(double.map(inputs, { orderOutputs: false })) as Array<number>
      assert.deepStrictEqual([...unordered].sort((a, b) => a - b), inputs.map((value) => value * 2))
      // Each map's first watch ends within its 60 ADDED events: each map listed again at least once after its first.
      const lists = mapStub!.seen.filter((seen) =>
        seen.method === "GET" && seen.url.includes("labelSelector=") && !seen.url.includes("watch=")
      )
      assert.isAtLeast(lists.length, 4)
      assert.isAtLeast(mapStub!.watches.length, 2)
      assert.isTrue(mapStub!.watches.every((watch) => watch.sent <= 7))
    })
  }

  it("map: a call deleted before it ended fails the map with NotFoundError; with returnExceptions it is given in its place", async () => {
    const double = await functionStub()
    const error = await failure(collect(double.map([1, "gone", 3])))
    assert.deepStrictEqual([error._tag, error.statusCode], ["NotFoundError", 404])
    const mixed = await collect(double.map([1, "gone", "boom", 4], { returnExceptions: true }))
    assert.deepStrictEqual(mixed.map((item) => item instanceof NodusError ? item._tag : item), [
      2,
      "NotFoundError",
      "RemoteError",
      8
    ])
  })

  it("map: watches that end at once, again and again, fail the map after maxRetries resumptions (finite retries)", async () => {
    const double = await functionStub({ watchEvents: 0 })
    client!.close()
    client = new NodusClient({ baseUrl: mapStub!.url, token: "nds_stub", env: {}, maxRetries: 2, maxRetryWait: 0.01 })
    const error = await failure(collect(client.function("p", double.name).map(["never"])))
    assert.strictEqual(error._tag, "APIConnectionError")
    assert.lengthOf(mapStub!.watches, 3)
  })
})
