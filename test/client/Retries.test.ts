/**
 * The TypeScript client's retries, and the error classes a test server cannot be made to answer on demand, against a
 * scripted HTTP stub that records every request (test/clients/Python.ts, shared with the Python client's tests): Status
 * bodies rendered by the server's own Respond.ts (SpendCheckUnavailableError, CapacityUnavailableError,
 * AssetInUseError), no answer (APIConnectionError, APITimeoutError), finite retries that honour a bounded Retry-After,
 * and one Idempotency-Key per create kept across its retries (spec: Client library errors; docs/clients.md, "Retries").
 * Also `remote` and `map` over a scripted result route (calls end as the script says: no Function machine runs them
 * yet).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { errorCodes } from "../../src/core/meta/ErrorCodes.ts"
import { APIConnectionError, APITimeoutError, Client, type ClientOptions, errorClasses, NodusClient, NodusError, RemoteError } from "../../src/client/index.ts"
import { collect, failure } from "./Support.ts"
import { recordedStatus, type Stub, startStub, statusAnswer, type StubAnswer } from "../clients/Python.ts"

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
const created = { status: 201, body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j", namespace: "p", uid: "u-1" } } }
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
      const error = new errorClasses[info.clientError]({ message: code, statusCode: info.httpStatus, code, payload: undefined, requestId: undefined })
      assert.strictEqual(error._tag, info.clientError, code)
      assert.isTrue(error instanceof NodusError)
    }
  })
})

describe("client errors from recorded Status bodies", () => {
  it("SpendCheckUnavailableError: 503 PaymentVerificationUnavailable, after its retries", async () => {
    const recorded = recordedStatus("PaymentVerificationUnavailable", "the payment provider did not answer", { retryAfterSeconds: 0 })
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
    const nodus = await serve((index) => index === 0 ? statusAnswer(recordedStatus("AdmissionsPaused", "paused", { retryAfterSeconds: 1 })) : ok)
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
    const dated = await serve(() => statusAnswer(recordedStatus("TooManyRequests", "slow down"), { "retry-after": new Date(Date.now() + 3_600_000).toUTCString() }))
    assert.strictEqual((await failure(dated.get("jobs", "p", "j")))._tag, "RateLimitError")
    assert.strictEqual(stub!.seen.length, 1)
  })

  it("does not retry what a retry cannot fix (422 Invalid)", async () => {
    const invalid = recordedStatus("Invalid", "jobs.nodus.dev \"j\" is invalid")
    const nodus = await serve(() => statusAnswer(invalid))
    assertRecorded(await failure(nodus.create("jobs", "p", { kind: "Job", metadata: { name: "j" } })), "ValidationError", invalid)
    assert.strictEqual(stub!.seen.length, 1)
  })
})

describe("Idempotency-Key", () => {
  it("a create keeps one key across its retries (a refusal, a dropped connection); the next create gets another", async () => {
    const inProgress = recordedStatus("RequestInProgress", "a request with this key is in progress", { retryAfterSeconds: 0 })
    const script: ReadonlyArray<StubAnswer> = [statusAnswer(inProgress), "drop", statusAnswer(paused), created]
    const nodus = await serve((index) => script[index % 4]!)
    const body = { kind: "Job", metadata: { name: "j" }, spec: { image: "python:3.12" } }
    assert.deepStrictEqual([(await nodus.create("jobs", "p", body))["metadata"].uid, (await nodus.create("jobs", "p", body))["metadata"].uid], ["u-1", "u-1"])
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
    const made = await Effect.runPromise(program.pipe(Effect.provide(Client.layer({ baseUrl: stub.url, token: "nds_stub", env: {} }))))
    assert.strictEqual(made["metadata"].uid, "u-1")
    const keys = stub.seen.map((seen) => seen.headers["idempotency-key"])
    assert.strictEqual(keys.length, 2)
    assert.strictEqual(keys[0], keys[1])
  })

  it("reads and deletes carry none", async () => {
    const nodus = await serve(() => ok)
    await nodus.get("jobs", "p", "j")
    await nodus.delete("jobs", "p", "j")
    assert.deepStrictEqual(stub!.seen.map((seen) => [seen.method, seen.headers["idempotency-key"]]), [["GET", undefined], ["DELETE", undefined]])
  })
})

describe("remote and map over a scripted result route", () => {
  /**
   * Creates calls named `call-<mapIndex>` and answers each result long poll with the call ended: Succeeded with twice
   * its first argument, or Failed for the argument "boom". The result of `call-0` is held until `call-1`'s has been
   * answered (in the same map), so a map that yields as calls end yields 1 before 0. A map batch
   * (`POST …/functions/{name}/map`) creates `call-<startIndex + i>` for its input i; the first `failBatches` batch
   * requests are answered 503 Unavailable (retryable) before they are served. Every POST is recorded in `posts`.
   */
  const posts: Array<{ readonly path: string; readonly key: string | undefined; readonly body: any }> = []
  const functionStub = async (failBatches = 0) => {
    posts.length = 0
    let failures = failBatches
    const inputs = new Map<string, ReadonlyArray<unknown>>()
    const answered = new Set<string>()
    const held: Array<() => void> = []
    const json = (response: ServerResponse, status: number, body: unknown) => {
      response.writeHead(status, { "content-type": "application/json" })
      response.end(JSON.stringify(body))
    }
    const handle = (request: IncomingMessage, response: ServerResponse, text: string) => {
      const url = new URL(request.url ?? "/", "http://stub")
      const argsOf = (payload: { inline: string }) => JSON.parse(Buffer.from(payload.inline, "base64").toString("utf8")).args
      if (request.method === "POST" && url.pathname.endsWith("/map")) {
        const batch = JSON.parse(text)
        posts.push({ path: url.pathname, key: request.headers["idempotency-key"] as string | undefined, body: batch })
        if (failures-- > 0) return json(response, 503, recordedStatus("Unavailable", "the store is unavailable", { retryAfterSeconds: 0 }).body)
        if (batch.startIndex === 0) answered.clear()
        const items = batch.inputs.map((payload: { inline: string }, index: number) => {
          const name = `call-${batch.startIndex + index}`
          inputs.set(name, argsOf(payload))
          return { kind: "FunctionCall", metadata: { name, namespace: "p" }, spec: { function: "double", input: payload, mapId: batch.mapId, mapIndex: batch.startIndex + index } }
        })
        return json(response, 201, { apiVersion: "nodus.dev/v1", kind: "FunctionCallList", metadata: { resourceVersion: "1" }, items })
      }
      if (request.method === "POST") {
        const body = JSON.parse(text)
        const name = `call-${body.spec.mapIndex ?? inputs.size}`
        inputs.set(name, argsOf(body.spec.input))
        return json(response, 201, { ...body, metadata: { name, namespace: "p" } })
      }
      const name = url.pathname.split("/").at(-2)!
      const arg = inputs.get(name)?.[0]
      const answer = () => {
        answered.add(name)
        json(response, 200, arg === "boom"
          ? { kind: "FunctionCall", metadata: { name }, status: { phase: "Failed", error: { type: "ValueError", message: "boom", traceback: "Traceback: …" } } }
          : { kind: "FunctionCall", metadata: { name }, status: { phase: "Succeeded", result: { encoding: "JSON", inline: Buffer.from(JSON.stringify(Number(arg) * 2)).toString("base64") } } })
        if (name === "call-1") for (const release of held.splice(0)) release()
      }
      if (name === "call-0" && !answered.has("call-1") && inputs.has("call-1")) held.push(answer)
      else answer()
    }
    const server = createServer((request, response) => {
      let text = ""
      request.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
      request.on("end", () => handle(request, response, text))
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    client = new NodusClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: "nds_stub", env: {} })
    stub = {
      url: "",
      seen: [],
      close: () => {
        server.closeAllConnections()
        return new Promise((resolve) => server.close(() => resolve()))
      }
    }
    return client.function("p", "double")
  }

  it("remote: the call's value; a Failed call is RemoteError with what the function raised", async () => {
    const double = await functionStub()
    assert.strictEqual(await double.remote([21]), 42)
    const error = await failure(double.remote(["boom"]))
    assert.instanceOf(error, RemoteError)
    assert.deepStrictEqual([error.message, (error as RemoteError).remoteType, (error as RemoteError).remoteTraceback], ["boom", "ValueError", "Traceback: …"])
  })

  it("map: results in input order; return_exceptions yields the RemoteError; unordered yields as calls end", async () => {
    const double = await functionStub()
    assert.deepStrictEqual(await collect(double.map([1, 2, 3])), [2, 4, 6])
    const mixed = await collect(double.map([1, "boom", 3], { returnExceptions: true }))
    assert.deepStrictEqual([mixed[0], mixed[1] instanceof RemoteError, mixed[2]], [2, true, 6])
    assert.strictEqual((await failure(collect(double.map([1, "boom"]))))._tag, "RemoteError")
    assert.deepStrictEqual(await collect(double.map([5, 7], { orderOutputs: false })), [14, 10])
    // Every map above was one batch request: its calls' mapId, and mapIndex from 0.
    assert.deepStrictEqual(posts.map((post) => [post.path, post.body.kind, post.body.startIndex, post.body.inputs.length]), [
      ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 3],
      ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 3],
      ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 2],
      ["/apis/nodus.dev/v1/namespaces/p/functions/double/map", "FunctionCallBatch", 0, 2]
    ])
  })

  it("map: 2,500 inputs are three batch requests of at most 1,000, one mapId, each batch's key kept across its retry", async () => {
    const double = await functionStub(1)
    const inputs = Array.from({ length: 2500 }, (_, index) => index)
    assert.deepStrictEqual(await collect(double.map(inputs)), inputs.map((value) => value * 2))
    // The first request was refused once and sent again with the same key; then one request per batch.
    assert.deepStrictEqual(posts.map((post) => [post.body.startIndex, post.body.inputs.length]), [[0, 1000], [0, 1000], [1000, 1000], [2000, 500]])
    assert.strictEqual(posts[0]!.key, posts[1]!.key)
    assert.strictEqual(new Set(posts.map((post) => post.key)).size, 3)
    assert.strictEqual(new Set(posts.map((post) => post.body.mapId)).size, 1)
  })

  it("map: a batch also ends before its body would pass 2 MiB (inline inputs are up to 64 KiB each)", async () => {
    const double = await functionStub()
    const big = "9".repeat(40_000)
    const results = await collect(double.map(Array.from({ length: 120 }, () => big)))
    assert.lengthOf(results, 120)
    assert.isAbove(posts.length, 1)
    for (const post of posts) assert.isAtMost(JSON.stringify(post.body).length, 2 * 1024 * 1024 + 1024)
    assert.deepStrictEqual(posts.map((post) => post.body.startIndex), posts.map((_, index) => posts.slice(0, index).reduce((sum, earlier) => sum + earlier.body.inputs.length, 0)))
  })
})
