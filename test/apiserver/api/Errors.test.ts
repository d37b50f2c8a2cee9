// Error answers over real HTTP (spec: Errors; kubectl-compat §4): every failure is a Status body whose code is the
// HTTP status, whose reason is a registered code with a docs page served by this server, with a fix and the request
// id of the x-request-id header, and never a stack trace. One table covers routing, media types, body limits,
// availability by kind (405), authentication and admission.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { type Reply, request, type RequestOptions, startTestServer, type TestServer } from "../../support/TestServer.ts"
import {
  assertNoStackTrace,
  assertStatus,
  causeFields,
  createProject,
  jobBody,
  jobPath,
  jobsPath,
  v1
} from "./Support.ts"

const project = "errors"

interface Case {
  readonly name: string
  readonly method: string
  readonly path: string
  readonly options?: RequestOptions
  readonly status: number
  readonly reason: string
  /** A cause field the body must name, or a prefix of one (ending in "."/"["). */
  readonly causeField?: string
  readonly causePrefix?: string
}

const threeMiB = 3 * 1024 * 1024

const cases: ReadonlyArray<Case> = [
  { name: "unknown route", method: "GET", path: "/no/such/route", status: 404, reason: "NotFound" },
  { name: "unknown kind", method: "GET", path: `${v1}/namespaces/demo/widgets`, status: 404, reason: "NotFound" },
  {
    name: "unknown kind, item",
    method: "GET",
    path: `${v1}/namespaces/demo/widgets/w`,
    status: 404,
    reason: "NotFound"
  },
  {
    name: "v1 kind under v1beta1",
    method: "GET",
    path: `/apis/nodus.dev/v1beta1/namespaces/${project}/jobs`,
    status: 404,
    reason: "NotFound"
  },
  {
    name: "v1beta1 kind under v1",
    method: "GET",
    path: `${v1}/namespaces/${project}/trainingjobs`,
    status: 404,
    reason: "NotFound"
  },
  {
    name: "unknown group",
    method: "GET",
    path: `/apis/other.dev/v1/namespaces/${project}/jobs`,
    status: 404,
    reason: "NotFound"
  },
  { name: "missing object", method: "GET", path: jobPath(project, "absent"), status: 404, reason: "NotFound" },
  {
    name: "malformed JSON",
    method: "POST",
    path: jobsPath(project),
    options: { raw: "{\"metadata\": {" },
    status: 400,
    reason: "BadRequest"
  },
  {
    name: "body larger than 3 MiB",
    method: "POST",
    path: jobsPath(project),
    options: { raw: `{"x":"${"a".repeat(threeMiB)}"}` },
    status: 413,
    reason: "RequestEntityTooLarge"
  },
  {
    name: "text/plain create",
    method: "POST",
    path: jobsPath(project),
    options: { raw: JSON.stringify(jobBody("plain")), contentType: "text/plain" },
    status: 415,
    reason: "UnsupportedMediaType"
  },
  {
    name: "strategic merge patch",
    method: "PATCH",
    path: jobPath(project, "existing"),
    options: { body: { spec: { image: "x" } }, contentType: "application/strategic-merge-patch+json" },
    status: 415,
    reason: "UnsupportedMediaType"
  },
  {
    name: "PUT on attempts",
    method: "PUT",
    path: `${v1}/namespaces/${project}/attempts/a`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "PATCH on attempts",
    method: "PATCH",
    path: `${v1}/namespaces/${project}/attempts/a`,
    options: { body: {}, contentType: "application/merge-patch+json" },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "POST on attempts",
    method: "POST",
    path: `${v1}/namespaces/${project}/attempts`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "DELETE on attempts",
    method: "DELETE",
    path: `${v1}/namespaces/${project}/attempts/a`,
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "POST on creditgrants",
    method: "POST",
    path: `${v1}/creditgrants`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "DELETE on creditgrants",
    method: "DELETE",
    path: `${v1}/creditgrants/g`,
    status: 405,
    reason: "MethodNotAllowed"
  },
  { name: "DELETE on offerings", method: "DELETE", path: `${v1}/offerings/o`, status: 405, reason: "MethodNotAllowed" },
  {
    name: "POST on offerings",
    method: "POST",
    path: `${v1}/offerings`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "PUT on topups",
    method: "PUT",
    path: `${v1}/topups/t`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  { name: "DELETE on topups", method: "DELETE", path: `${v1}/topups/t`, status: 405, reason: "MethodNotAllowed" },
  {
    name: "POST on models",
    method: "POST",
    path: `${v1}/namespaces/${project}/models`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "PUT on enrollmenttokens",
    method: "PUT",
    path: `${v1}/namespaces/${project}/enrollmenttokens/t`,
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "POST on an item",
    method: "POST",
    path: jobPath(project, "existing"),
    options: { body: {} },
    status: 405,
    reason: "MethodNotAllowed"
  },
  {
    name: "no token",
    method: "GET",
    path: jobsPath(project),
    options: { token: null },
    status: 401,
    reason: "Unauthorized"
  },
  {
    name: "unknown token",
    method: "GET",
    path: jobsPath(project),
    options: { token: "nds_not-a-key-0000000000000000000000000000000" },
    status: 401,
    reason: "Unauthorized"
  },
  {
    name: "not a Bearer header",
    method: "GET",
    path: jobsPath(project),
    options: { token: null, headers: { authorization: "Basic YWRtaW46YWRtaW4=" } },
    status: 401,
    reason: "Unauthorized"
  },
  {
    name: "body is an array",
    method: "POST",
    path: jobsPath(project),
    options: { raw: "[]" },
    status: 400,
    reason: "BadRequest"
  },
  {
    name: "body is a string",
    method: "POST",
    path: jobsPath(project),
    options: { raw: "\"x\"" },
    status: 400,
    reason: "BadRequest"
  },
  {
    name: "body is a number",
    method: "POST",
    path: jobsPath(project),
    options: { raw: "42" },
    status: 400,
    reason: "BadRequest"
  },
  {
    name: "apiVersion does not match the URL",
    method: "POST",
    path: jobsPath(project),
    options: { body: { ...jobBody("wrong-version"), apiVersion: "nodus.dev/v1beta1" } },
    status: 400,
    reason: "BadRequest"
  },
  {
    name: "kind does not match the URL",
    method: "POST",
    path: jobsPath(project),
    options: { body: { ...jobBody("wrong-kind"), kind: "Sandbox" } },
    status: 400,
    reason: "BadRequest"
  },
  {
    name: "Job without spec",
    method: "POST",
    path: jobsPath(project),
    options: { body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "no-spec" } } },
    status: 422,
    reason: "Invalid",
    causeField: "spec"
  },
  {
    name: "invalid name",
    method: "POST",
    path: jobsPath(project),
    options: { body: jobBody("Bad_Name") },
    status: 422,
    reason: "Invalid",
    causeField: "metadata.name"
  },
  {
    name: "invalid label key",
    method: "POST",
    path: jobsPath(project),
    options: { body: jobBody("bad-label", { labels: { "bad key!": "v" } }) },
    status: 422,
    reason: "Invalid",
    causePrefix: "metadata.labels"
  },
  {
    name: "invalid label value",
    method: "POST",
    path: jobsPath(project),
    options: { body: jobBody("bad-label-value", { labels: { team: "not a value!" } }) },
    status: 422,
    reason: "Invalid",
    causePrefix: "metadata.labels"
  },
  {
    name: "existing name",
    method: "POST",
    path: jobsPath(project),
    options: { body: jobBody("existing") },
    status: 409,
    reason: "AlreadyExists"
  },
  {
    name: "create in a missing project",
    method: "POST",
    path: jobsPath("errors-missing"),
    options: { body: jobBody("orphan") },
    status: 404,
    reason: "NotFound"
  }
]

describe("error answers", () => {
  let server: TestServer
  const seen = new Map<string, Reply>()

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, project)
    const existing = await request(server, "POST", jobsPath(project), { body: jobBody("existing") })
    assert.strictEqual(existing.status, 201, existing.text)
  })
  afterAll(() => server.stop())

  for (const testCase of cases) {
    it(`${testCase.name}: ${testCase.method} → ${testCase.status} ${testCase.reason}`, async () => {
      const reply = await request(server, testCase.method, testCase.path, testCase.options)
      const body = assertStatus(server, reply, testCase.status, testCase.reason)
      if (testCase.causeField !== undefined) assert.include(causeFields(body), testCase.causeField, reply.text)
      if (testCase.causePrefix !== undefined) {
        const fields = causeFields(body)
        assert.isTrue(
          fields.some((field) => field.startsWith(testCase.causePrefix!)),
          `no cause under ${testCase.causePrefix}: ${reply.text}`
        )
      }
      seen.set(testCase.reason, reply)
    })
  }

  it("NotFound and AlreadyExists name the object as kubectl expects (details name, group, plural kind)", async () => {
    const missing = assertStatus(server, await request(server, "GET", jobPath(project, "absent")), 404, "NotFound")
    assert.strictEqual(missing.message, `jobs.nodus.dev "absent" not found; fix: ${missing.fix}`)
    assert.deepInclude(missing.details, { name: "absent", group: "nodus.dev", kind: "jobs" })
    const exists = assertStatus(
      server,
      await request(server, "POST", jobsPath(project), { body: jobBody("existing") }),
      409,
      "AlreadyExists"
    )
    assert.strictEqual(exists.message, `jobs.nodus.dev "existing" already exists; fix: ${exists.fix}`)
    assert.deepInclude(exists.details, { name: "existing", group: "nodus.dev", kind: "jobs" })
  })

  it("Invalid on create names the object from the body, as Kubernetes does", async () => {
    const reply = await request(server, "POST", jobsPath(project), {
      body: jobBody("too-parallel", {}, { parallelism: 3 })
    })
    const invalid = assertStatus(server, reply, 422, "Invalid")
    assert.strictEqual(
      invalid.message,
      `Job.nodus.dev "too-parallel" is invalid: spec.parallelism: Invalid value: 3: must be at most completions (1); fix: ${invalid.fix}`
    )
    assert.deepInclude(invalid.details, { name: "too-parallel", group: "nodus.dev", kind: "jobs" })
  })

  it("a body over 3 MiB sent without Content-Length (chunked) is RequestEntityTooLarge too", async () => {
    const chunk = new TextEncoder().encode("a".repeat(64 * 1024))
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      pull: (controller) => {
        if (sent === 0) controller.enqueue(new TextEncoder().encode("{\"x\":\""))
        if (sent > threeMiB) {
          controller.enqueue(new TextEncoder().encode("\"}"))
          controller.close()
          return
        }
        sent += chunk.byteLength
        controller.enqueue(chunk)
      }
    })
    const response = await fetch(`${server.url}${jobsPath(project)}`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body,
      duplex: "half"
    } as RequestInit)
    const text = await response.text()
    assertStatus(
      server,
      { status: response.status, headers: response.headers, text, body: JSON.parse(text) },
      413,
      "RequestEntityTooLarge"
    )
  })

  it("a create that failed leaves nothing behind", async () => {
    const list = await request(server, "GET", jobsPath(project))
    assert.strictEqual(list.status, 200, list.text)
    assert.deepStrictEqual(list.body.items.map((item: any) => item.metadata.name), ["existing"])
  })

  it("each error's docs URL is an HTML page on this server naming the code", async () => {
    // Fill in codes whose case may not have run first (e.g. when a single case is selected).
    for (const testCase of cases) {
      if (seen.has(testCase.reason)) continue
      seen.set(testCase.reason, await request(server, testCase.method, testCase.path, testCase.options))
    }
    const reasons = [...new Set(cases.map((testCase) => testCase.reason))]
    assert.isAbove(reasons.length, 5)
    for (const reason of reasons) {
      const docs = seen.get(reason)!.body.docs as string
      assert.strictEqual(docs, `${server.url}/docs/errors/${reason}`)
      const page = await fetch(docs)
      const html = await page.text()
      assert.strictEqual(page.status, 200, `${docs}: ${html}`)
      assert.match(page.headers.get("content-type") ?? "", /^text\/html/u)
      assert.match(html, /^<!doctype html>/iu)
      assert.include(html, `<h1>${reason}</h1>`)
      assertNoStackTrace(html)
    }
  })

  it("a docs page of an unknown code is a NotFound Status", async () => {
    const reply = await request(server, "GET", "/docs/errors/NoSuchCode", { token: null })
    assertStatus(server, reply, 404, "NotFound")
  })

  it("request ids differ between requests", async () => {
    const first = await request(server, "GET", "/no/such/route")
    const second = await request(server, "GET", "/no/such/route")
    assertStatus(server, first, 404, "NotFound")
    assertStatus(server, second, 404, "NotFound")
    assert.notStrictEqual(first.body.requestId, second.body.requestId)
  })

  it("a successful answer carries an x-request-id too", async () => {
    const reply = await request(server, "GET", jobPath(project, "existing"))
    assert.strictEqual(reply.status, 200, reply.text)
    assert.isAbove((reply.headers.get("x-request-id") ?? "").length, 0)
  })
})
