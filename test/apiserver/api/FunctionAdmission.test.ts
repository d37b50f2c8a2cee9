// The server's admission of Functions and FunctionCalls (src/runtime/FunctionAdmission.ts; spec: Function,
// FunctionCall; docs/kinds/FunctionCall.md): a call to a Function that does not exist is 404 FunctionNotFound, its
// timeout is at most the Function's and defaults to it, a caller on another Python minor is Invalid, a class Function's
// call names one of its methods, and `sha256:`
// references must name a blob the project may read (docs/blobs.md).
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, v1 } from "./Support.ts"

const project = "fn-admission"
const other = "fn-admission-other"
const functionsPath = (namespace: string) => `${v1}/namespaces/${namespace}/functions`
const callsPath = (namespace: string) => `${v1}/namespaces/${namespace}/functioncalls`

const code = new TextEncoder().encode("def embed(text):\n    return len(text)\n")
const codeBlob = `sha256:${createHash("sha256").update(code).digest("hex")}`

const functionBody = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Function",
  metadata: { name },
  spec: {
    image: "python:3.12-slim",
    python: "3.12",
    code: { module: "app", qualname: "embed" },
    timeout: "60s",
    ...spec
  }
})
const callBody = (name: string, spec: Record<string, unknown>, annotations?: Record<string, string>) => ({
  apiVersion: "nodus.dev/v1",
  kind: "FunctionCall",
  metadata: { name, ...(annotations === undefined ? {} : { annotations }) },
  spec
})

describe("Function and FunctionCall admission", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    await createProject(server, other)
    const uploaded = await fetch(`${server.url}/blobs/v1/${codeBlob}?project=${project}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${server.token}` },
      body: code
    })
    assert.strictEqual(uploaded.status, 201)
    const created = await request(server, "POST", functionsPath(project), {
      body: functionBody("embed", { code: { module: "app", qualname: "embed", blob: codeBlob } })
    })
    assert.strictEqual(created.status, 201, created.text)
  })
  afterAll(() => server.stop())

  it("a call to a Function that does not exist is 404 FunctionNotFound at spec.function", async () => {
    const reply = await request(server, "POST", callsPath(project), {
      body: callBody("c-missing", { function: "nope" })
    })
    const status = assertStatus(server, reply, 404, "FunctionNotFound")
    assert.strictEqual(status.details.causes[0].field, "spec.function")
    // The same name in another project is not this project's Function.
    const elsewhere = await request(server, "POST", callsPath(other), {
      body: callBody("c-other", { function: "embed" })
    })
    assertStatus(server, elsewhere, 404, "FunctionNotFound")
  })

  it("a call's timeout defaults to its Function's and may not exceed it", async () => {
    const defaulted = await request(server, "POST", callsPath(project), {
      body: callBody("c-default", { function: "embed" })
    })
    assert.strictEqual(defaulted.status, 201, defaulted.text)
    assert.strictEqual(defaulted.body.spec.timeout, "60s")
    const shorter = await request(server, "POST", callsPath(project), {
      body: callBody("c-shorter", { function: "embed", timeout: "30s" })
    })
    assert.strictEqual(shorter.status, 201, shorter.text)
    assert.strictEqual(shorter.body.spec.timeout, "30s")
    const longer = await request(server, "POST", callsPath(project), {
      body: callBody("c-longer", { function: "embed", timeout: "2m" })
    })
    const status = assertStatus(server, longer, 422, "Invalid")
    assert.strictEqual(status.details.causes[0].field, "spec.timeout")
    assert.include(status.details.causes[0].message, "60s")
  })

  it("a caller on another Python minor is Invalid; the same minor is admitted", async () => {
    const wrong = await request(server, "POST", callsPath(project), {
      body: callBody("c-py311", { function: "embed" }, { "nodus.dev/python": "3.11" })
    })
    const status = assertStatus(server, wrong, 422, "Invalid")
    assert.strictEqual(status.details.causes[0].field, "metadata.annotations[nodus.dev/python]")
    const right = await request(server, "POST", callsPath(project), {
      body: callBody("c-py312", { function: "embed" }, { "nodus.dev/python": "3.12" })
    })
    assert.strictEqual(right.status, 201, right.text)
  })

  it("a call of a class Function names one of its methods (nodus.dev/method); a call of a function names none", async () => {
    const made = await request(server, "POST", functionsPath(project), {
      body: functionBody("counter", { code: { module: "app", cls: { name: "Counter", methods: ["bump", "read"] } } })
    })
    assert.strictEqual(made.status, 201, made.text)
    const field = "metadata.annotations[nodus.dev/method]"
    const none = assertStatus(
      server,
      await request(server, "POST", callsPath(project), { body: callBody("c-cls-none", { function: "counter" }) }),
      422,
      "Invalid"
    )
    assert.strictEqual(none.details.causes[0].field, field)
    assert.include(none.details.causes[0].message, "bump, read")
    const unknown = assertStatus(
      server,
      await request(server, "POST", callsPath(project), {
        body: callBody("c-cls-bad", { function: "counter" }, { "nodus.dev/method": "reset" })
      }),
      422,
      "Invalid"
    )
    assert.include(unknown.details.causes[0].message, "\"reset\"")
    const right = await request(server, "POST", callsPath(project), {
      body: callBody("c-cls-ok", { function: "counter" }, { "nodus.dev/method": "read" })
    })
    assert.strictEqual(right.status, 201, right.text)
    const onFunction = assertStatus(
      server,
      await request(server, "POST", callsPath(project), {
        body: callBody("c-fn-method", { function: "embed" }, { "nodus.dev/method": "embed" })
      }),
      422,
      "Invalid"
    )
    assert.strictEqual(onFunction.details.causes[0].field, field)
  })

  it("sha256 references must name a blob of the project", async () => {
    const missing = `sha256:${"ab".repeat(32)}`
    const call = await request(server, "POST", callsPath(project), {
      body: callBody("c-blob", { function: "embed", input: { encoding: "Pickle", blob: missing } })
    })
    assert.strictEqual(assertStatus(server, call, 422, "Invalid").details.causes[0].field, "spec.input.blob")
    const withCode = await request(server, "POST", callsPath(project), {
      body: callBody("c-code", { function: "embed", input: { encoding: "Pickle", blob: codeBlob } })
    })
    assert.strictEqual(withCode.status, 201, withCode.text)
    // Another project did not upload the code archive: its Function may not name it.
    const foreign = await request(server, "POST", functionsPath(other), {
      body: functionBody("embed", { code: { module: "app", qualname: "embed", blob: codeBlob } })
    })
    assert.strictEqual(assertStatus(server, foreign, 422, "Invalid").details.causes[0].field, "spec.code.blob")
    // Nor may an update swap in a blob the project does not have.
    const swapped = await request(server, "PATCH", `${functionsPath(project)}/embed`, {
      body: { spec: { code: { module: "app", qualname: "embed", blob: missing } } },
      contentType: "application/merge-patch+json"
    })
    assert.strictEqual(assertStatus(server, swapped, 422, "Invalid").details.causes[0].field, "spec.code.blob")
  })
})
