/**
 * The Python client's retries and the error classes a test server cannot be made to answer on demand, against a
 * scripted HTTP stub that records every request: Status bodies rendered by the server's own Respond.ts
 * (SpendCheckUnavailableError, CapacityUnavailableError, AssetInUseError), no answer (APIConnectionError,
 * APITimeoutError), finite retries that honour a bounded Retry-After, and one Idempotency-Key per create kept across
 * its retries (spec: Client library errors; docs/clients.md, "Retries").
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { py, recordedStatus, startStub, statusAnswer, type Stub, type StubAnswer } from "./Python.ts"

let stub: Stub | undefined
afterEach(async () => {
  await stub?.close()
  stub = undefined
})

const serve = async (answer: (index: number) => StubAnswer) => {
  stub = await startStub((index) => answer(index))
  return { NODUS_URL: stub.url, NODUS_TOKEN: "nds_stub" }
}

const ok = { status: 200, body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j", namespace: "p" } } }
const created = {
  status: 201,
  body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j", namespace: "p", uid: "u-1" } }
}

const paused = recordedStatus("AdmissionsPaused", "admissions are paused for maintenance", { retryAfterSeconds: 0 })

/** A client that retries at most `retries` times, then `call` (Python, on `c`) reported. */
const attempt = (call: string, retries = 3, extra = "") =>
  `c = nodus.Client(max_retries=${retries}${extra})\nreport(lambda: ${call})`

const assertRecorded = (report: any, error: string, recorded: ReturnType<typeof recordedStatus>) => {
  assert.strictEqual(report.error, error, JSON.stringify(report))
  assert.include(report.bases, "NodusError")
  assert.strictEqual(report.status_code, recorded.status)
  assert.strictEqual(report.code, recorded.body["reason"])
  assert.strictEqual(report.payload_reason, recorded.body["reason"])
  assert.strictEqual(report.request_id, recorded.requestId)
  assert.strictEqual(report.fix, recorded.body["fix"])
  // The Status message ends with the fix for kubectl; the error's message is the message alone.
  assert.include(String(recorded.body["message"]), `; fix: ${recorded.body["fix"]}`)
  assert.notInclude(report.message, "; fix: ")
}

describe("client errors from recorded Status bodies", () => {
  it("SpendCheckUnavailableError: 503 PaymentVerificationUnavailable, after its retries", async () => {
    const recorded = recordedStatus("PaymentVerificationUnavailable", "the payment provider did not answer", {
      retryAfterSeconds: 0
    })
    const env = await serve(() => statusAnswer(recorded))
    assertRecorded(await py(attempt(`c.get("jobs", "p", "j")`, 1), env), "SpendCheckUnavailableError", recorded)
    assert.strictEqual(stub!.seen.length, 2)
  })

  it("CapacityUnavailableError: 503 AdmissionsPaused", async () => {
    const env = await serve(() => statusAnswer(paused))
    assertRecorded(await py(attempt(`c.get("jobs", "p", "j")`, 0), env), "CapacityUnavailableError", paused)
  })

  it("AssetInUseError: 409 PoolInUse, not retried", async () => {
    const recorded = recordedStatus("PoolInUse", "pools.nodus.dev \"gpus\" still has running workloads")
    const env = await serve(() => statusAnswer(recorded))
    assertRecorded(await py(attempt(`c.delete("pools", "p", "gpus")`), env), "AssetInUseError", recorded)
    assert.strictEqual(stub!.seen.length, 1)
  })

  it("a reply that is not a Status falls back on its HTTP status: 404 text is NotFoundError", async () => {
    const env = await serve(() => ({ status: 404, body: "no such route" }))
    const report = await py(attempt(`c.get("jobs", "p", "j")`), env)
    assert.strictEqual(report.error, "NotFoundError")
    assert.strictEqual(report.status_code, 404)
    assert.isNull(report.code)
    assert.strictEqual(stub!.seen.length, 1)
  })
})

describe("no answer", () => {
  it("APIConnectionError when the connection drops: a GET is sent again, a command never twice", async () => {
    const env = await serve(() => "drop")
    const get = await py(attempt(`c.get("jobs", "p", "j")`, 2), env)
    assert.strictEqual(get.error, "APIConnectionError")
    assert.include(get.bases, "NodusError")
    assert.isNull(get.status_code)
    assert.strictEqual(stub!.seen.length, 3)
    // A command may have run: its outcome is unknown, so it is not sent again.
    const exec = await py(attempt(`c.sandbox("p", "box").exec(["true"])`, 2), env)
    assert.strictEqual(exec.error, "APIConnectionError")
    assert.strictEqual(stub!.seen.length, 4)
  })

  it("APITimeoutError (an APIConnectionError) when no answer comes in time", async () => {
    const env = await serve(() => "hang")
    const report = await py(attempt(`c.get("jobs", "p", "j")`, 0, ", timeout=0.5"), env)
    assert.strictEqual(report.error, "APITimeoutError")
    assert.deepStrictEqual(report.bases.slice(0, 3), ["APITimeoutError", "APIConnectionError", "NodusError"])
    assert.strictEqual(stub!.seen.length, 1)
  })
})

describe("retries", () => {
  it("waits the Retry-After the server asks for, then succeeds", async () => {
    const env = await serve((index) =>
      index === 0 ? statusAnswer(recordedStatus("AdmissionsPaused", "paused", { retryAfterSeconds: 1 })) : ok
    )
    const report = await py(attempt(`c.get("jobs", "p", "j")["metadata"]["name"]`), env)
    assert.strictEqual(report.ok, "j")
    assert.strictEqual(stub!.seen.length, 2)
  })

  it("is finite: a server that keeps refusing gets 1 + max_retries requests, then the error", async () => {
    const env = await serve(() => statusAnswer(paused))
    const report = await py(attempt(`c.get("jobs", "p", "j")`, 3), env)
    assert.strictEqual(report.error, "CapacityUnavailableError")
    assert.strictEqual(stub!.seen.length, 4)
  })

  it("retries a 503 without a Status or a Retry-After with its own backoff, still finitely", async () => {
    const env = await serve(() => ({ status: 503, body: "upstream unavailable" }))
    const report = await py(attempt(`c.get("jobs", "p", "j")`, 1), env)
    assert.strictEqual(report.error, "APIError")
    assert.strictEqual(report.status_code, 503)
    assert.strictEqual(stub!.seen.length, 2)
  })

  it("is bounded: a Retry-After beyond max_retry_wait is raised at once, not slept through", async () => {
    const limited = recordedStatus("TooManyRequests", "too many requests", { retryAfterSeconds: 3600 })
    const env = await serve(() => statusAnswer(limited))
    const report = await py(attempt(`c.get("jobs", "p", "j")`, 3), env)
    assertRecorded(report, "RateLimitError", limited)
    assert.strictEqual(report.retry_after, 3600)
    assert.strictEqual(stub!.seen.length, 1)
    // An HTTP-date Retry-After is read too: one an hour away is beyond the bound just the same.
    await stub!.close()
    const env2 = await serve(() =>
      statusAnswer(recordedStatus("TooManyRequests", "slow down"), {
        "retry-after": new Date(Date.now() + 3_600_000).toUTCString()
      })
    )
    assert.strictEqual((await py(attempt(`c.get("jobs", "p", "j")`, 3), env2)).error, "RateLimitError")
    assert.strictEqual(stub!.seen.length, 1)
  })

  it("does not retry what a retry cannot fix (422 Invalid)", async () => {
    const invalid = recordedStatus("Invalid", "jobs.nodus.dev \"j\" is invalid")
    const env = await serve(() => statusAnswer(invalid))
    assertRecorded(
      await py(attempt(`c.create("jobs", "p", {"kind": "Job", "metadata": {"name": "j"}})`), env),
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
    const env = await serve((index) => script[index % 4]!)
    const report = await py(
      `
c = nodus.Client(max_retries=3)
body = {"kind": "Job", "metadata": {"name": "j"}, "spec": {"image": "python:3.12"}}
report(lambda: [c.create("jobs", "p", body)["metadata"]["uid"], c.create("jobs", "p", body)["metadata"]["uid"]])
`,
      env
    )
    assert.deepStrictEqual(report.ok, ["u-1", "u-1"])
    const keys = stub!.seen.map((seen) => seen.headers["idempotency-key"])
    assert.strictEqual(keys.length, 8)
    assert.match(String(keys[0]), /^[0-9a-f-]{36}$/u)
    assert.deepStrictEqual(new Set(keys.slice(0, 4)).size, 1)
    assert.deepStrictEqual(new Set(keys.slice(4)).size, 1)
    assert.notStrictEqual(keys[0], keys[4])
    assert.deepStrictEqual(stub!.seen.map((seen) => seen.method), Array(8).fill("POST"))
    assert.strictEqual(stub!.seen[0]!.url, "/apis/nodus.dev/v1/namespaces/p/jobs")
  })

  it("reads and deletes carry none", async () => {
    const env = await serve(() => ok)
    await py(attempt(`[c.get("jobs", "p", "j"), c.delete("jobs", "p", "j")]`), env)
    assert.deepStrictEqual(stub!.seen.map((seen) => [seen.method, seen.headers["idempotency-key"]]), [[
      "GET",
      undefined
    ], ["DELETE", undefined]])
  })
})
