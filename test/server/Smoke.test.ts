import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

describe("smoke", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("creates a project and a job", async () => {
    const ns = await request(server, "POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "demo" } } })
    assert.strictEqual(ns.status, 201, ns.text)
    const job = await request(server, "POST", "/apis/nodus.dev/v1/namespaces/demo/jobs", { body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "j1" }, spec: { image: "x" } } })
    assert.strictEqual(job.status, 201, job.text)
    assert.strictEqual(job.body.metadata.generation, 1)
  })
})
