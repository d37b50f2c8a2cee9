// Client mistakes answer 4xx with a cause and store nothing; no answer fails after its commit (hardening issue, items
// 7–9, 14, 15). Each case here was a 500 or a 503 found by probing a server on PostgreSQL; this suite runs on the
// embedded PGlite, which refuses the same inputs PostgreSQL does (NUL bytes in text, numbers beyond bigint).
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Layer } from "effect"
import * as SqlStore from "../../../src/store/SqlStore.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import {
  assertStatus,
  causeFields,
  createJob,
  createProject,
  jobBody,
  jobPath,
  jobsPath,
  namesOf,
  rawRequest,
  v1
} from "./Support.ts"

const project = "mistakes"

let server: TestServer

beforeAll(async () => {
  server = await startTestServer({ store: Layer.fresh(SqlStore.layerPglite(undefined)) })
  await createProject(server, project)
  await createJob(server, project, "existing")
  await request(server, "POST", `${v1}/namespaces/${project}/serviceaccounts`, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "ServiceAccount",
      metadata: { name: "robot" },
      spec: { scopes: ["jobs:read"] }
    }
  })
}, 60_000)

afterAll(() => server?.stop())

const jobNames = async (): Promise<ReadonlyArray<string>> => namesOf(await request(server, "GET", jobsPath(project)))

describe("an unknown field beside a failed rule is 422 with causes, never 500 (item 7)", () => {
  for (const plural of ["jobs", "workspaces", "images"]) {
    it(plural, async () => {
      const reply = await request(server, "POST", `${v1}/namespaces/${project}/${plural}`, {
        body: { metadata: { name: "m2" }, spec: { a: 1 } }
      })
      const body = assertStatus(server, reply, 422, "Invalid")
      assert.isAbove(causeFields(body).length, 0)
    })
  }

  it("a JSON patch that copies the whole object into spec", async () => {
    const reply = await request(server, "PATCH", jobPath(project, "existing"), {
      raw: JSON.stringify([{ op: "copy", path: "/spec", from: "" }]),
      contentType: "application/json-patch+json"
    })
    assert.include([400, 422], reply.status, reply.text)
    assertStatus(server, reply, reply.status, reply.status === 400 ? "BadRequest" : "Invalid")
  })
})

describe("an answer never fails after its commit (item 8)", () => {
  it("a non-Latin-1 unknown field is warned about in an encoded header, and the create answers 201", async () => {
    const reply = await request(server, "POST", jobsPath(project), { body: jobBody("unicode-key", {}, { "中": true }) })
    assert.strictEqual(reply.status, 201, reply.text)
    assert.strictEqual(reply.body.metadata.name, "unicode-key")
    assert.isString(reply.headers.get("x-request-id"))
    const warning = reply.headers.get("warning") ?? ""
    assert.include(warning, "299 - ")
    assert.include(warning, "\\u4e2d", "the field name is escaped, not dropped")
  })

  it("a retried generateName create with an Idempotency-Key makes one Job", async () => {
    const before = await jobNames()
    const body = { ...jobBody(""), metadata: { generateName: "retry-" }, spec: { image: "python:3.12", "中": 1 } }
    const send = () =>
      request(server, "POST", jobsPath(project), { body, headers: { "idempotency-key": "retry-unicode" } })
    const first = await send()
    assert.strictEqual(first.status, 201, first.text)
    const second = await send()
    assert.strictEqual(second.status, 201, second.text)
    assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(second.body.metadata.name, first.body.metadata.name)
    assert.strictEqual((await jobNames()).length, before.length + 1)
  })
})

describe("client errors are 400 or 422 with a cause, never 5xx, and store nothing (item 9)", () => {
  const cases: ReadonlyArray<{ readonly name: string; readonly path: string; readonly field: string }> = [
    { name: "limit beyond any integer", path: `${jobsPath(project)}?limit=99999999999999999999`, field: "limit" },
    {
      name: "negative timeoutSeconds",
      path: `${jobsPath(project)}?watch=1&timeoutSeconds=-5`,
      field: "timeoutSeconds"
    },
    {
      name: "timeoutSeconds beyond any timer",
      path: `${jobsPath(project)}?watch=1&timeoutSeconds=99999999999999`,
      field: "timeoutSeconds"
    },
    { name: "a NUL byte in the project", path: `${v1}/namespaces/%00/jobs`, field: "metadata.namespace" },
    { name: "a NUL byte in a name", path: `${jobsPath(project)}/a%00b`, field: "metadata.name" },
    {
      name: "a NUL byte in a label selector",
      path: `${jobsPath(project)}?labelSelector=a%3Db%00`,
      field: "labelSelector"
    },
    {
      name: "a NUL byte in a field selector",
      path: `${jobsPath(project)}?fieldSelector=metadata.name%3D%00`,
      field: "fieldSelector"
    }
  ]
  for (const testCase of cases) {
    it(testCase.name, async () => {
      const reply = await request(server, "GET", testCase.path)
      const body = assertStatus(server, reply, 400, "BadRequest")
      assert.include(causeFields(body), testCase.field)
    })
  }

  it("a NUL character in a body string", async () => {
    const before = await jobNames()
    const reply = await request(server, "POST", jobsPath(project), {
      body: jobBody("nul", { labels: { a: "b" } }, { command: ["x\u0000y"] })
    })
    const body = assertStatus(server, reply, 400, "BadRequest")
    assert.include(causeFields(body), "spec.command[0]")
    assert.deepStrictEqual(await jobNames(), before)
  })

  for (const seconds of [1e300, 9_000_000_000_000]) {
    it(`a token expiring in ${seconds} s is refused before a key is stored`, async () => {
      const reply = await request(server, "POST", `${v1}/namespaces/${project}/serviceaccounts/robot/tokens`, {
        body: { spec: { expirationSeconds: seconds } }
      })
      const body = assertStatus(server, reply, 422, "Invalid")
      assert.include(causeFields(body), "spec.expirationSeconds")
      assert.notInclude(reply.text, "nds_")
    })
  }

  it("a merge patch nested 10,000 deep", async () => {
    const deep = `${"{\"a\":".repeat(10_000)}1${"}".repeat(10_000)}`
    const reply = await request(server, "PATCH", jobPath(project, "existing"), {
      raw: `{"metadata":{"annotations":${deep}}}`,
      contentType: "application/merge-patch+json"
    })
    const body = assertStatus(server, reply, 400, "BadRequest")
    assert.isAbove(causeFields(body).length, 0)
    const after = await request(server, "GET", jobPath(project, "existing"))
    assert.strictEqual(after.body.metadata.generation, 1)
  })
})

describe("links and retries do not depend on request headers a client controls (items 14, 15)", () => {
  it("the docs link is built from the server's address, not the Host header", async () => {
    const reply = await rawRequest(server, jobPath(project, "absent"), [["Host", "evil.example"], [
      "Authorization",
      `Bearer ${server.token}`
    ]])
    assert.strictEqual(reply.status, 404, reply.text)
    assert.notInclude(reply.text, "evil.example")
    assert.strictEqual(JSON.parse(reply.text).docs, `${server.url}/docs/errors/NotFound`)
  })

  it("a retry whose User-Agent changed is the same logical request", async () => {
    const send = (agent: string) =>
      request(server, "POST", jobsPath(project), {
        body: jobBody("agent-retry"),
        headers: { "idempotency-key": "agent-retry", "user-agent": agent }
      })
    const first = await send("client/1.0")
    assert.strictEqual(first.status, 201, first.text)
    const second = await send("other-client/2.0")
    assert.strictEqual(second.status, 201, second.text)
    assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
  })

  it("an explicit fieldManager still belongs to the request", async () => {
    const send = (manager: string) =>
      request(server, "POST", `${jobsPath(project)}?fieldManager=${manager}`, {
        body: jobBody("manager-retry"),
        headers: { "idempotency-key": "manager-retry" }
      })
    assert.strictEqual((await send("one")).status, 201)
    assertStatus(server, await send("two"), 409, "IdempotencyKeyReused")
  })
})

describe("resources no offering could ever hold are refused at admission (issue 29, item 14)", () => {
  it("a memory floor above the largest offering is 422 at spec.resources.memory, naming the largest and a fix; the largest itself is admitted", async () => {
    const reply = await request(server, "POST", jobsPath(project), {
      body: jobBody("huge", {}, { command: ["true"], resources: { memory: "99999999999999999999Ei" } })
    })
    const body = assertStatus(server, reply, 422, "Invalid")
    assert.deepStrictEqual(causeFields(body), ["spec.resources.memory"])
    const largest = /the largest available has (\d+Gi) memory/u.exec(body.details.causes[0].message)?.[1]
    assert.isString(largest, body.message)
    assert.include(body.fix, `spec.resources.memory at most "${largest}"`)
    assert.notInclude(await jobNames(), "huge")
    // Exactly the largest fits (an offering holds it); a GiB more is refused the same way.
    const fits = await request(server, "POST", jobsPath(project), {
      body: jobBody("largest", {}, { command: ["true"], resources: { memory: largest } })
    })
    assert.strictEqual(fits.status, 201, fits.text)
    const over = await request(server, "POST", jobsPath(project), {
      body: jobBody("over", {}, { command: ["true"], resources: { memory: `${Number.parseInt(largest!, 10) + 1}Gi` } })
    })
    assert.deepStrictEqual(causeFields(assertStatus(server, over, 422, "Invalid")), ["spec.resources.memory"])
  })

  it("a Sandbox's cpu and disk floors are held to the largest offering too", async () => {
    const reply = await request(server, "POST", `${v1}/namespaces/${project}/sandboxes`, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Sandbox",
        metadata: { name: "wide" },
        spec: { image: "ubuntu:24.04", resources: { cpu: "100000", disk: "1Ei", memory: "1Gi" } }
      }
    })
    const body = assertStatus(server, reply, 422, "Invalid")
    assert.deepStrictEqual(causeFields(body), ["spec.resources.cpu", "spec.resources.disk"])
    assert.match(body.details.causes[0].message, /largest available has \d+ vCPUs/u)
  })
})
