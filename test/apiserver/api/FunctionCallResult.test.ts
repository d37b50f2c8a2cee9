// A FunctionCall's result, long-polled (src/kinds/function/http/FunctionCallResult.ts; docs/functions.md): the call is
// answered as soon as it ends — here its status is written by hand, as the machine will write it — or as it is when
// the wait is over; a call deleted while waited on is NotFound; the wait is bounded and checked.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, v1 } from "./Support.ts"

const project = "fn-result"
const callsPath = `${v1}/namespaces/${project}/functioncalls`
const resultPath = (name: string, timeout?: string) =>
  `${callsPath}/${name}/result${timeout === undefined ? "" : `?timeout=${timeout}`}`

describe("FunctionCall result long poll", () => {
  let server: TestServer
  let calls = 0

  const createCall = async () => {
    const name = `call-${++calls}`
    const reply = await request(server, "POST", callsPath, {
      body: { apiVersion: "nodus.dev/v1", kind: "FunctionCall", metadata: { name }, spec: { function: "embed" } }
    })
    assert.strictEqual(reply.status, 201, reply.text)
    return name
  }
  const finish = (name: string, status: Record<string, unknown>) =>
    request(server, "PATCH", `${callsPath}/${name}/status`, {
      body: { status },
      contentType: "application/merge-patch+json"
    })

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    const fn = await request(server, "POST", `${v1}/namespaces/${project}/functions`, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Function",
        metadata: { name: "embed" },
        spec: { image: "python:3.12-slim", code: { module: "app", qualname: "embed" } }
      }
    })
    assert.strictEqual(fn.status, 201, fn.text)
  })
  afterAll(() => server.stop())

  it("answers as soon as the call ends, with its result", async () => {
    const name = await createCall()
    const waiting = request(server, "GET", resultPath(name, "50s"))
    // The end is written after the poll began: only a wait that saw it can answer Succeeded.
    await new Promise((resolve) => setTimeout(resolve, 200))
    const written = await finish(name, {
      phase: "Succeeded",
      result: { encoding: "JSON", inline: Buffer.from("42").toString("base64") }
    })
    assert.strictEqual(written.status, 200, written.text)
    const reply = await waiting
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.kind, "FunctionCall")
    assert.strictEqual(reply.body.status.phase, "Succeeded")
    assert.strictEqual(Buffer.from(reply.body.status.result.inline, "base64").toString(), "42")
    // Once ended it answers at once.
    assert.strictEqual((await request(server, "GET", resultPath(name, "60s"))).body.status.phase, "Succeeded")
  })

  it("a change that does not end the call keeps the poll waiting; a failure ends it", async () => {
    const name = await createCall()
    const waiting = request(server, "GET", resultPath(name, "50s"))
    await new Promise((resolve) => setTimeout(resolve, 200))
    await finish(name, { phase: "Running" })
    await new Promise((resolve) => setTimeout(resolve, 200))
    await finish(name, {
      phase: "Failed",
      reason: "RemoteError",
      error: { type: "ValueError", message: "bad input", traceback: "..." }
    })
    const reply = await waiting
    assert.strictEqual(reply.body.status.phase, "Failed")
    assert.strictEqual(reply.body.status.error.type, "ValueError")
  })

  it("answers the call as it is when the wait is over", async () => {
    const name = await createCall()
    const immediate = await request(server, "GET", resultPath(name, "0s"))
    assert.strictEqual(immediate.status, 200)
    assert.isUndefined(immediate.body.status?.phase)
    const waited = await request(server, "GET", resultPath(name, "1s"))
    assert.strictEqual(waited.status, 200)
    assert.isUndefined(waited.body.status?.phase)
  })

  it("a call deleted while waited on is NotFound", async () => {
    const name = await createCall()
    const waiting = request(server, "GET", resultPath(name, "50s"))
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.strictEqual((await request(server, "DELETE", `${callsPath}/${name}`)).status, 200)
    assertStatus(server, await waiting, 404, "NotFound")
  })

  it("the wait is a duration of at most 60s; only FunctionCalls have a result", async () => {
    const name = await createCall()
    for (const timeout of ["2m", "soon", "-1s"]) {
      const reply = await request(server, "GET", resultPath(name, timeout))
      assert.strictEqual(assertStatus(server, reply, 400, "BadRequest").details.causes[0].field, "timeout")
    }
    assertStatus(
      server,
      await request(server, "GET", `${v1}/namespaces/${project}/functions/embed/result`),
      405,
      "MethodNotAllowed"
    )
    assertStatus(server, await request(server, "POST", resultPath(name)), 405, "MethodNotAllowed")
  })
})
