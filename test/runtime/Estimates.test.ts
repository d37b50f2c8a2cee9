/**
 * The estimate hook of creates (spec: Create semantics): whatever the Estimates service answers appears as
 * `status.estimate` on dry runs and real creates, and the dry-run ETag binds the payload, not the estimate. Then the
 * real estimator (docs/billing.md, "Estimates"): a Job's dry run carries the pricebook, the holds, the bands, the
 * startup and the placement preview; a create the estimate says would fail is refused with the code, the amounts and
 * a fix, while its dry run lists the blocking reasons. The sampled runs are reused across Jobs of the same spec, shared
 * by concurrent requests, and not kept when sampling fails. They run on a worker thread: while eight worst-case dry
 * runs are in flight, `/version` answers before any of them; and Jobs of 100,000 hours or 10,000 indexes get sane
 * bands.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Option } from "effect"
import { simRunSampler } from "../../src/backends/sim/RunSampler.ts"
import { sampledPartOf } from "../../src/kinds/job/JobSampling.ts"
import { Estimates } from "../../src/runtime/Estimates.ts"
import { EstimateSampler, EstimateSamplerError } from "../../src/runtime/EstimateSampler.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

let calls = 0
// A stand-in estimator whose answer changes on every call, as prices and validUntil will.
const counting = Layer.succeed(
  Estimates,
  Estimates.of({
    estimate: (ref, object) =>
      Effect.sync(() =>
        Option.some({ estimate: { kind: ref.info.kind, name: object.metadata.name, call: ++calls }, blocking: [] })
      )
  })
)

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
    assert.deepStrictEqual({ kind: dry.body.status.estimate.kind, name: dry.body.status.estimate.name }, {
      kind: "Job",
      name: "j"
    })
    const etag = dry.headers.get("etag")!
    assert.match(etag, /^"dryrun\./u)
    const created = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", {
      body: job,
      headers: { "if-match": etag }
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.status.estimate.kind, "Job")
    assert.notStrictEqual(created.body.status.estimate.call, dry.body.status.estimate.call)
    const other = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", {
      body: { ...job, metadata: { name: "k" } },
      headers: { "if-match": etag }
    })
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
    for (const target of [server, broke]) {
      await request(target, "POST", "/api/v1/namespaces", { body: { metadata: { name: "est" } } })
    }
  })
  afterAll(async () => {
    await server.stop()
    await broke.stop()
  })

  const job = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: { name },
    spec: {
      image: "ghcr.io/acme/train:1",
      resources: { gpu: { type: ["H100"], count: 8 } },
      expectedDuration: "6h",
      ...spec
    }
  })

  it("a dry run carries every estimate field, and a create with the starter credits is admitted", async () => {
    const dry = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs?dryRun=All", {
      body: job("train", { completions: 2, parallelism: 2 })
    })
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
    const created = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", {
      body: job("train", { completions: 2, parallelism: 2 })
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.status.estimate.costUSD.p50, estimate.costUSD.p50)
  })

  it("a hold above maxCostUSD: the dry run lists BudgetExceeded, the create is refused with it", async () => {
    const capped = job("capped", { maxCostUSD: "1.00" })
    const dry = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs?dryRun=All", { body: capped })
    assert.strictEqual(dry.status, 201, dry.text)
    assert.deepStrictEqual(dry.body.status.estimate.blockingReasons.map((reason: { code: string }) => reason.code), [
      "BudgetExceeded"
    ])
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

const jobOf = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: { name },
  spec: { image: "ghcr.io/acme/train:1", resources: { gpu: { type: ["A10"] } }, expectedDuration: "2h", ...spec }
})

const dryRun = (server: TestServer, body: unknown) =>
  request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs?dryRun=All", { body })

describe("the sampled runs are reused", () => {
  // The simulator's sampler in process, behind a gate the test opens, counting what it samples.
  let sampled: Array<string> = []
  let gate: Deferred.Deferred<void> | undefined
  let failNext = false
  const sampler = Layer.succeed(
    EstimateSampler,
    EstimateSampler.of({
      sample: (request) =>
        Effect.gen(function*() {
          sampled.push(request.seed)
          if (gate !== undefined) yield* Deferred.await(gate)
          if (failNext) {
            failNext = false
            return yield* new EstimateSamplerError({ message: "the test failed this sampling" })
          }
          return sampledPartOf(request, simRunSampler)
        })
    })
  )
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ estimates: Estimates.layer().pipe(Layer.provide(sampler)) })
    await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: "est" } } })
  })
  afterAll(() => server.stop())

  it("Jobs of one spec (other names and labels) sample once; another spec samples again", async () => {
    sampled = []
    const first = await dryRun(server, jobOf("a", { completions: 3 }))
    const second = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/est/jobs", {
      body: { ...jobOf("b", { completions: 3 }), metadata: { name: "b", labels: { sweep: "7" } } }
    })
    assert.strictEqual(second.status, 201, second.text)
    assert.deepStrictEqual(second.body.status.estimate.costUSD, first.body.status.estimate.costUSD)
    assert.strictEqual(sampled.length, 1)
    const other = await dryRun(server, jobOf("c", { completions: 4 }))
    assert.isDefined(other.body.status.estimate.costUSD)
    assert.strictEqual(sampled.length, 2)
  })

  it("concurrent requests for one spec share one sampling", async () => {
    sampled = []
    gate = Effect.runSync(Deferred.make<void>())
    const replies = Array.from(
      { length: 4 },
      (_, index) => dryRun(server, jobOf(`d${index}`, { expectedDuration: "3h" }))
    )
    while (sampled.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    Effect.runSync(Deferred.succeed(gate, undefined))
    gate = undefined
    const bands = (await Promise.all(replies)).map((reply) => reply.body.status.estimate.costUSD)
    assert.strictEqual(sampled.length, 1)
    for (const band of bands) assert.deepStrictEqual(band, bands[0])
  })

  it("a failed sampling is not kept: that object goes out without an estimate, the next request samples again", async () => {
    sampled = []
    failNext = true
    const failed = await dryRun(server, jobOf("e", { expectedDuration: "4h" }))
    assert.strictEqual(failed.status, 201, failed.text)
    assert.isUndefined(failed.body.status?.estimate)
    const retried = await dryRun(server, jobOf("e", { expectedDuration: "4h" }))
    assert.isDefined(retried.body.status.estimate.costUSD)
    assert.strictEqual(sampled.length, 2)
  })
})

describe("estimates on the worker thread", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
    await request(server, "POST", "/api/v1/namespaces", { body: { metadata: { name: "est" } } })
  })
  afterAll(() => server.stop())

  // The worst case the issue measured: 100,000 hours, 10,000 indexes, interruptible; each a spec of its own (no cache).
  const worstCase = (index: number) =>
    jobOf(`worst-${index}`, {
      expectedDuration: "100000h",
      completions: 10000,
      parallelism: 256,
      resources: { gpu: { type: ["H100"], count: 8 } },
      placement: { interruptible: "Prefer" },
      env: [{ name: "RUN", value: String(index) }]
    })

  it("while eight worst-case dry runs are in flight, /version answers before any of them", async () => {
    let finished = 0
    const dryRuns = Array.from({ length: 8 }, (_, index) =>
      dryRun(server, worstCase(index)).then((reply) => {
        finished++
        return reply
      }))
    const version = await request(server, "GET", "/version")
    const finishedBeforeVersion = finished
    assert.strictEqual(version.status, 200, version.text)
    assert.strictEqual(finishedBeforeVersion, 0, "no dry run had answered when /version did")
    for (const reply of await Promise.all(dryRuns)) {
      assert.strictEqual(reply.status, 201, reply.text)
      assert.isDefined(reply.body.status.estimate.costUSD)
    }
  })

  /** p50 and p90 of the cost, and p50 over the rate times the work (docs/billing.md, "Estimates": 1 to 1.1 here). */
  const costOf = (estimate: { costUSD: { p50: string; p90: string }; rateUSDPerHour: string }, hours: number) => ({
    p50: Number(estimate.costUSD.p50),
    p90: Number(estimate.costUSD.p90),
    ofRateTimesWork: Number(estimate.costUSD.p50) / (Number(estimate.rateUSDPerHour) * hours)
  })

  for (
    const [name, spec, hours] of [
      ["a 100,000-hour Job", { expectedDuration: "100000h" }, 100_000],
      ["a Job of 10,000 one-hour indexes", { expectedDuration: "1h", completions: 10000, parallelism: 256 }, 10_000]
    ] as const
  ) {
    it(`${name} gets a sane estimate: bands, p90 ≥ p50, p50 about the rate times the work`, async () => {
      const reply = await dryRun(server, jobOf("sane", spec))
      assert.strictEqual(reply.status, 201, reply.text)
      const cost = costOf(reply.body.status.estimate, hours)
      assert.isAtLeast(cost.p90, cost.p50)
      assert.isAtLeast(cost.ofRateTimesWork, 1, JSON.stringify(reply.body.status.estimate.costUSD))
      assert.isAtMost(cost.ofRateTimesWork, 1.1, JSON.stringify(reply.body.status.estimate.costUSD))
      assert.isDefined(reply.body.status.estimate.overheadUSD.p90)
      assert.isDefined(reply.body.status.estimate.startup.cold.p50)
    })
  }
})
