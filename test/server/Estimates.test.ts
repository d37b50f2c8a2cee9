/**
 * The estimate hook of creates (spec: Create semantics): whatever the Estimates service answers appears as
 * `status.estimate` on dry runs and real creates, and the dry-run ETag binds the payload, not the estimate.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Estimates } from "../../src/server/Estimates.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

let calls = 0
// A stand-in estimator whose answer changes on every call, as prices and validUntil will.
const counting = Layer.succeed(Estimates, Estimates.of({
  estimate: (ref, object) => Effect.sync(() => Option.some({ kind: ref.info.kind, name: object.metadata.name, call: ++calls }))
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
