/**
 * The estimate hook of creates (spec: Create semantics): whatever the Estimates service answers appears as
 * `status.estimate` on dry runs and real creates, and the dry-run ETag binds the payload, not the estimate. Then the
 * real estimator (docs/billing.md, "Estimates"): a Job's dry run carries the pricebook, the holds, the bands, the
 * startup and the placement preview; a create the estimate says would fail is refused with the code, the amounts and
 * a fix, while its dry run lists the blocking reasons.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Estimates } from "../../src/runtime/Estimates.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

let calls = 0
// A stand-in estimator whose answer changes on every call, as prices and validUntil will.
const counting = Layer.succeed(Estimates, Estimates.of({
  estimate: (ref, object) => Effect.sync(() => Option.some({ estimate: { kind: ref.info.kind, name: object.metadata.name, call: ++calls }, blocking: [] }))
}))

describe("estimates on create", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ estimates: counting })
    await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: "est" } } })
  })
  afterAll(() => server.stop())

  const job = { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j" }, spec: { image: "a" } }

  it("a dry run and a real create both carry status.estimate, and the dry-run ETag binds the create", async () => {
    const dry = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs?dryRun=All", { body: job })
    assert.strictEqual(dry.status, 201, dry.text)
    assert.deepStrictEqual({ kind: dry.body.status.estimate.kind, name: dry.body.status.estimate.name }, { kind: "Job", name: "j" })
    const etag = dry.headers.get("etag")!
    assert.match(etag, /^"dryrun\./u)
    const created = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", { body: job, headers: { "if-match": etag } })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.status.estimate.kind, "Job")
    assert.notStrictEqual(created.body.status.estimate.call, dry.body.status.estimate.call)
    const other = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", { body: { ...job, metadata: { name: "k" } }, headers: { "if-match": etag } })
    assert.strictEqual(other.status, 412, other.text)
    assert.strictEqual(other.body.reason, "PreconditionFailed")
  })
})

describe("the Job estimator", () => {
  let server: TestServer
  let broke: TestServer
  beforeAll(async () => {
    server = await startTestServer()
    broke = await startTestServer({ starterCreditsMicro: 0n })
    for (const target of [server, broke]) await request(target, "POST", "/api/v1/namespaces", { body: { metadata: { name: "est" } } })
  })
  afterAll(async () => {
    await server.stop()
    await broke.stop()
  })

  const job = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: { name },
    spec: { image: "ghcr.io/acme/train:1", resources: { gpu: { type: ["H100"], count: 8 } }, expectedDuration: "6h", ...spec }
  })

  it("a dry run carries every estimate field, and a create with the starter credits is admitted", async () => {
    const dry = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs?dryRun=All", { body: job("train", { completions: 2, parallelism: 2 }) })
    assert.strictEqual(dry.status, 201, dry.text)
    const estimate = dry.body.status.estimate
    assert.strictEqual(estimate.pricebookVersion, "nodus-2026-11.1")
    assert.match(estimate.rateUSDPerHour, /^[0-9]+(\.[0-9]+)?$/u)
    assert.strictEqual(Number(estimate.concurrentHoldUSD), 2 * Number(estimate.holdUSD))
    assert.isAtMost(Number(estimate.costUSD.p50), Number(estimate.costUSD.p90))
    // Two 6-hour indexes cost at least twelve hours at the rate.
    assert.isAtLeast(Number(estimate.costUSD.p50), 12 * Number(estimate.rateUSDPerHour))
    assert.isDefined(estimate.startup.cold.p50)
    assert.isString(estimate.placementPreview.offering)
    assert.isDefined(estimate.placementPreview.explain)
    assert.isUndefined(estimate.blockingReasons)
    const created = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", { body: job("train", { completions: 2, parallelism: 2 }) })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.status.estimate.costUSD.p50, estimate.costUSD.p50)
  })

  it("a hold above maxCostUSD: the dry run lists BudgetExceeded, the create is refused with it", async () => {
    const capped = job("capped", { maxCostUSD: "1.00" })
    const dry = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs?dryRun=All", { body: capped })
    assert.strictEqual(dry.status, 201, dry.text)
    assert.deepStrictEqual(dry.body.status.estimate.blockingReasons.map((reason: { code: string }) => reason.code), ["BudgetExceeded"])
    const refused = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", { body: capped })
    assert.strictEqual(refused.body.kind, "Status", refused.text)
    assert.strictEqual(refused.body.reason, "BudgetExceeded")
    assert.include(refused.body.message, "spec.maxCostUSD is 1.00")
    assert.include(refused.body.fix, "maxCostUSD")
    const absent = await request(server, "GET", "/apis/nodus.dev/v1/namespaces/est/jobs/capped")
    assert.strictEqual(absent.status, 404)
  })

  it("no credits: InsufficientCredits with the amounts (a production database starts at zero)", async () => {
    const refused = await request(broke, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", { body: job("train", {}) })
    assert.strictEqual(refused.body.reason, "InsufficientCredits", refused.text)
    assert.strictEqual(refused.status, 402)
    assert.include(refused.body.message, "the available balance is 0 USD")
  })
})
