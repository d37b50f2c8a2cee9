// Authentication and scopes over real HTTP (spec: Authentication; src/apiserver/Auth.ts): ServiceAccount keys issued
// through …/serviceaccounts/{name}/tokens act with the account's scopes inside its own project only; nobody grants a
// scope they lack; unknown scopes are refused; status writes need admin; deleting the account revokes its keys; and
// key lifetimes have a minimum.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../../support/Eventually.ts"
import { type Reply, request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import {
  assertStatus,
  causeFields,
  createJob,
  createProject,
  jobBody,
  jobPath,
  jobsPath,
  mergePatch,
  namesOf,
  openWatch,
  rawRequest,
  sandboxBody,
  sandboxesPath,
  summary,
  v1
} from "./Support.ts"

const p1 = "auth-p1"
const p2 = "auth-p2"

const accountsPath = (project: string): string => `${v1}/namespaces/${project}/serviceaccounts`
const tokensPath = (project: string, name: string): string => `${accountsPath(project)}/${name}/tokens`

const accountBody = (name: string, scopes: ReadonlyArray<string>) => ({
  apiVersion: "nodus.dev/v1",
  kind: "ServiceAccount",
  metadata: { name },
  spec: { scopes }
})

describe("authentication and scopes", () => {
  let server: TestServer
  const tokens = new Map<string, string>()

  const createAccount = async (project: string, name: string, scopes: ReadonlyArray<string>): Promise<void> => {
    const reply = await request(server, "POST", accountsPath(project), { body: accountBody(name, scopes) })
    assert.strictEqual(reply.status, 201, reply.text)
  }

  const issue = async (project: string, name: string, body: unknown = {}): Promise<Reply> =>
    request(server, "POST", tokensPath(project, name), { body })

  const tokenOf = async (project: string, name: string): Promise<string> => {
    const reply = await issue(project, name)
    assert.strictEqual(reply.status, 201, reply.text)
    assert.strictEqual(reply.body.kind, "TokenRequest")
    const token = reply.body.status?.token
    assert.isString(token, reply.text)
    assert.isTrue(token.startsWith("nds_"), token)
    return token
  }

  const as = (name: string) => {
    const token = tokens.get(name)
    assert.isString(token, `no token for ${name}`)
    return token!
  }

  beforeAll(async () => {
    server = await startTestServer()
    await createProject(server, p1)
    await createProject(server, p2)
    await createJob(server, p1, "in-p1")
    await createJob(server, p2, "in-p2")
    const box = await request(server, "POST", sandboxesPath(p1), { body: sandboxBody("box") })
    assert.strictEqual(box.status, 201, box.text)
    await createAccount(p1, "reader", ["jobs:read"])
    await createAccount(p1, "writer", ["jobs:write", "sandboxes:read"])
    await createAccount(p1, "account-admin", ["serviceaccounts:write"])
    for (const name of ["reader", "writer", "account-admin"]) tokens.set(name, await tokenOf(p1, name))
  })
  afterAll(() => server.stop())

  it("issued keys differ and are shown once in status.token", async () => {
    const first = await issue(p1, "reader")
    const second = await issue(p1, "reader")
    assert.strictEqual(first.status, 201, first.text)
    assert.strictEqual(second.status, 201, second.text)
    assert.notStrictEqual(first.body.status.token, second.body.status.token)
    const account = await request(server, "GET", `${accountsPath(p1)}/reader`)
    assert.notInclude(account.text, first.body.status.token)
  })

  interface Access {
    readonly who: string
    readonly what: string
    readonly method: string
    readonly path: string
    readonly body?: unknown
    readonly status: number
    readonly reason?: string
  }

  const table: ReadonlyArray<Access> = [
    { who: "reader", what: "list jobs in its project", method: "GET", path: jobsPath(p1), status: 200 },
    { who: "reader", what: "read a job in its project", method: "GET", path: jobPath(p1, "in-p1"), status: 200 },
    {
      who: "reader",
      what: "create a job in its project",
      method: "POST",
      path: jobsPath(p1),
      body: jobBody("by-reader"),
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "reader",
      what: "delete a job in its project",
      method: "DELETE",
      path: jobPath(p1, "in-p1"),
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "reader",
      what: "list jobs in another project",
      method: "GET",
      path: jobsPath(p2),
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "reader",
      what: "read a job in another project",
      method: "GET",
      path: jobPath(p2, "in-p2"),
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "reader",
      what: "list budgets (cluster)",
      method: "GET",
      path: `${v1}/budgets`,
      status: 403,
      reason: "Forbidden"
    },
    { who: "reader", what: "list sandboxes", method: "GET", path: sandboxesPath(p1), status: 403, reason: "Forbidden" },
    { who: "reader", what: "read its own project", method: "GET", path: `/api/v1/namespaces/${p1}`, status: 200 },
    {
      who: "reader",
      what: "read another project",
      method: "GET",
      path: `/api/v1/namespaces/${p2}`,
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "reader",
      what: "create a project",
      method: "POST",
      path: "/api/v1/namespaces",
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "auth-by-reader" } },
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "reader",
      what: "delete its own project",
      method: "DELETE",
      path: `/api/v1/namespaces/${p1}`,
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "writer",
      what: "create a job in its project",
      method: "POST",
      path: jobsPath(p1),
      body: jobBody("by-writer"),
      status: 201
    },
    {
      who: "writer",
      what: "create a job in another project",
      method: "POST",
      path: jobsPath(p2),
      body: jobBody("by-writer"),
      status: 403,
      reason: "Forbidden"
    },
    { who: "writer", what: "list sandboxes", method: "GET", path: sandboxesPath(p1), status: 200 },
    { who: "writer", what: "read a sandbox", method: "GET", path: `${sandboxesPath(p1)}/box`, status: 200 },
    {
      who: "writer",
      what: "create a sandbox",
      method: "POST",
      path: sandboxesPath(p1),
      body: sandboxBody("by-writer"),
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "writer",
      what: "create a service account",
      method: "POST",
      path: accountsPath(p1),
      body: accountBody("by-writer", ["admin"]),
      status: 403,
      reason: "Forbidden"
    },
    {
      who: "writer",
      what: "issue a key for another account",
      method: "POST",
      path: tokensPath(p1, "reader"),
      body: {},
      status: 403,
      reason: "Forbidden"
    }
  ]

  for (const access of table) {
    it(`${access.who} may${access.status < 400 ? "" : " not"} ${access.what} (${access.status})`, async () => {
      const reply = await request(server, access.method, access.path, {
        token: as(access.who),
        ...(access.body === undefined ? {} : { body: access.body })
      })
      if (access.reason === undefined) assert.strictEqual(reply.status, access.status, reply.text)
      else assertStatus(server, reply, access.status, access.reason)
    })
  }

  it("the reader's all-projects job list holds only its project's jobs", async () => {
    const reply = await request(server, "GET", `${v1}/jobs`, { token: as("reader") })
    assert.strictEqual(reply.status, 200, reply.text)
    const items = reply.body.items as ReadonlyArray<any>
    assert.isAbove(items.length, 0)
    assert.include(namesOf(reply), "in-p1")
    for (const item of items) assert.strictEqual(item.metadata.namespace, p1)
    // The admin sees both projects in the same list.
    const admin = await request(server, "GET", `${v1}/jobs`)
    const namespaces = new Set((admin.body.items as ReadonlyArray<any>).map((item) => item.metadata.namespace))
    assert.isTrue(namespaces.has(p1) && namespaces.has(p2))
  })

  it("the reader's project list holds only its own project", async () => {
    const reply = await request(server, "GET", "/api/v1/namespaces", { token: as("reader") })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.deepStrictEqual(namesOf(reply), [p1])
  })

  it("the reader's watch of projects streams only its own project, new projects included (hardening item 4)", async () => {
    // A project of its own, so that deleting it gives the watch an event of its project to wait for.
    await createProject(server, "auth-watched")
    await createAccount("auth-watched", "watcher", ["jobs:read"])
    const watcher = await openWatch(server, "/api/v1/namespaces?watch=1", {
      token: await tokenOf("auth-watched", "watcher")
    })
    try {
      assert.deepStrictEqual(summary(await watcher.next(1)), ["ADDED auth-watched"])
      await createProject(server, "auth-p3")
      assert.strictEqual((await request(server, "DELETE", "/api/v1/namespaces/auth-watched")).status, 200)
      // The next event is its own project's deletion: p3's creation never reached this watch.
      assert.deepStrictEqual(summary(await watcher.next(1)), ["MODIFIED auth-watched"])
    } finally {
      await watcher.close()
    }
    const narrowed = await request(server, "GET", `/api/v1/namespaces?fieldSelector=metadata.name%3D${p2}`, {
      token: as("reader")
    })
    assert.deepStrictEqual(namesOf(narrowed), [], "a selector cannot widen the narrowing")
  })

  it("a project-bound key with every write scope cannot write org-level objects (hardening item 5)", async () => {
    await createAccount(p1, "org-writer", ["*:write", "billing:write"])
    const token = await tokenOf(p1, "org-writer")
    const budget = {
      apiVersion: "nodus.dev/v1",
      kind: "Budget",
      metadata: { name: "starve-p2" },
      spec: { amountUSD: "0.01", period: "Monthly", selector: { projects: [p2] } }
    }
    assertStatus(server, await request(server, "POST", `${v1}/budgets`, { body: budget, token }), 403, "Forbidden")
    const own = { ...budget, metadata: { name: "own-p1" }, spec: { ...budget.spec, selector: { projects: [p1] } } }
    assertStatus(server, await request(server, "POST", `${v1}/budgets`, { body: own, token }), 403, "Forbidden")
    const endpoint = {
      apiVersion: "nodus.dev/v1",
      kind: "WebhookEndpoint",
      metadata: { name: "spy" },
      spec: { url: "https://hooks.example.com/in", projects: [p2] }
    }
    assertStatus(
      server,
      await request(server, "POST", `${v1}/webhookendpoints`, { body: endpoint, token }),
      403,
      "Forbidden"
    )
    assert.deepStrictEqual(namesOf(await request(server, "GET", `${v1}/budgets`)), [])
    assert.deepStrictEqual(namesOf(await request(server, "GET", `${v1}/webhookendpoints`)), [])
    // The admin's Job in p2 is not capped by anything the key tried.
    assert.strictEqual((await request(server, "POST", jobsPath(p2), { body: jobBody("after-budget") })).status, 201)
    // Reading them stays possible with the scope.
    assert.strictEqual((await request(server, "GET", `${v1}/budgets`, { token })).status, 200)
  })

  it("/ and /openapi/v2 need a key; two Authorization headers are refused (hardening item 6)", async () => {
    for (const path of ["/", "/openapi/v2"]) {
      assertStatus(server, await request(server, "GET", path, { token: null }), 401, "Unauthorized")
      assert.strictEqual((await request(server, "GET", path)).status, 200)
    }
    const reply = await rawRequest(server, jobsPath(p1), [["Authorization", `Bearer ${server.token}`], [
      "Authorization",
      "Bearer nds_not-a-key"
    ]])
    assert.strictEqual(reply.status, 400, reply.text)
    assert.strictEqual(JSON.parse(reply.text).reason, "BadRequest")
    assert.include(reply.text, "Authorization")
  })

  it("the reader's watch of another project is Forbidden; of its own works", async () => {
    assertStatus(
      server,
      await request(server, "GET", `${jobsPath(p2)}?watch=true`, { token: as("reader") }),
      403,
      "Forbidden"
    )
    const controller = new AbortController()
    try {
      const response = await fetch(`${server.url}${jobsPath(p1)}?watch=true`, {
        headers: { authorization: `Bearer ${as("reader")}` },
        signal: controller.signal
      })
      assert.strictEqual(response.status, 200)
    } finally {
      controller.abort()
    }
  })

  it("an account that may write service accounts cannot grant a scope it lacks", async () => {
    const escalations: ReadonlyArray<ReadonlyArray<string>> = [["admin"], ["jobs:read"], ["*:read"]]
    for (const scopes of escalations) {
      const reply = await request(server, "POST", accountsPath(p1), {
        body: accountBody("escalated", scopes),
        token: as("account-admin")
      })
      const body = assertStatus(server, reply, 422, "Invalid")
      assert.include(causeFields(body), "spec.scopes[0]", reply.text)
    }
    assert.strictEqual((await request(server, "GET", `${accountsPath(p1)}/escalated`)).status, 404)
    const allowed = await request(server, "POST", accountsPath(p1), {
      body: accountBody("narrower", ["serviceaccounts:read"]),
      token: as("account-admin")
    })
    assert.strictEqual(allowed.status, 201, allowed.text)
    const raised = await mergePatch(server, `${accountsPath(p1)}/narrower`, {
      spec: { scopes: ["serviceaccounts:read", "admin"] }
    }, { token: as("account-admin") })
    const raisedBody = assertStatus(server, raised, 422, "Invalid")
    assert.include(causeFields(raisedBody), "spec.scopes[1]")
  })

  it("an account that may write service accounts cannot mint a key for one with scopes it lacks", async () => {
    await createAccount(p1, "powerful", ["admin"])
    const minted = await request(server, "POST", tokensPath(p1, "powerful"), { body: {}, token: as("account-admin") })
    assertStatus(server, minted, 403, "Forbidden")
    // A key for an account whose scopes it holds is fine.
    await createAccount(p1, "modest", ["serviceaccounts:read"])
    const modest = await request(server, "POST", tokensPath(p1, "modest"), { body: {}, token: as("account-admin") })
    assert.strictEqual(modest.status, 201, modest.text)
  })

  it("an unknown scope is Invalid on that entry", async () => {
    const reply = await request(server, "POST", accountsPath(p1), {
      body: accountBody("flying", ["jobs:read", "jobs:fly"])
    })
    const body = assertStatus(server, reply, 422, "Invalid")
    assert.include(causeFields(body), "spec.scopes[1]")
    const other = await request(server, "POST", accountsPath(p1), { body: accountBody("flying", ["widgets:read"]) })
    assert.include(causeFields(assertStatus(server, other, 422, "Invalid")), "spec.scopes[0]")
  })

  it("writes to /status need the admin scope", async () => {
    const created = await request(server, "POST", jobsPath(p1), { body: jobBody("status-target"), token: as("writer") })
    assert.strictEqual(created.status, 201, created.text)
    const path = `${jobPath(p1, "status-target")}/status`
    assertStatus(
      server,
      await mergePatch(server, path, { status: { phase: "Running" } }, { token: as("writer") }),
      403,
      "Forbidden"
    )
    assertStatus(
      server,
      await request(server, "PUT", path, {
        body: { ...created.body, status: { phase: "Running" } },
        token: as("writer")
      }),
      403,
      "Forbidden"
    )
    const read = await request(server, "GET", path, { token: as("writer") })
    assert.strictEqual(read.status, 200, read.text)
    assert.isUndefined(read.body.status?.phase)
    const admin = await mergePatch(server, path, { status: { phase: "Running" } })
    assert.strictEqual(admin.status, 200, admin.text)
    assert.strictEqual(admin.body.status.phase, "Running")
  })

  it("deleting the ServiceAccount revokes its key", async () => {
    await createAccount(p1, "temporary", ["jobs:read"])
    const token = await tokenOf(p1, "temporary")
    assert.strictEqual((await request(server, "GET", jobsPath(p1), { token })).status, 200)
    assert.strictEqual((await request(server, "DELETE", `${accountsPath(p1)}/temporary`)).status, 200)
    // Authentication is cached for 2 s: the key must stop working within 5 s.
    const last = await eventually(
      "revoked key refused",
      async () => (await request(server, "GET", jobsPath(p1), { token })).status,
      { until: (status) => status === 401, timeoutMs: 5_000 }
    )
    assert.strictEqual(last, 401)
    assertStatus(server, await request(server, "GET", jobsPath(p1), { token }), 401, "Unauthorized")
    // An account created again under the same name does not revive the old key.
    await createAccount(p1, "temporary", ["jobs:read"])
    assertStatus(server, await request(server, "GET", jobsPath(p1), { token }), 401, "Unauthorized")
  })

  it("a scope change applies to existing keys", async () => {
    await createAccount(p1, "changing", ["jobs:read"])
    const token = await tokenOf(p1, "changing")
    assertStatus(
      server,
      await request(server, "POST", jobsPath(p1), { body: jobBody("by-changing"), token }),
      403,
      "Forbidden"
    )
    assert.strictEqual(
      (await mergePatch(server, `${accountsPath(p1)}/changing`, { spec: { scopes: ["jobs:write"] } })).status,
      200
    )
    const created = await eventually(
      "new scope applies",
      async () => (await request(server, "POST", jobsPath(p1), { body: jobBody("by-changing"), token })).status,
      { until: (status) => status === 201, timeoutMs: 5_000 }
    )
    assert.strictEqual(created, 201)
  })

  const expirations: ReadonlyArray<{ readonly seconds: unknown; readonly status: number }> = [
    { seconds: 60, status: 422 },
    { seconds: 599, status: 422 },
    { seconds: "3600", status: 422 },
    { seconds: 600, status: 201 },
    { seconds: 86_400, status: 201 }
  ]
  for (const testCase of expirations) {
    it(`expirationSeconds ${JSON.stringify(testCase.seconds)} → ${testCase.status}`, async () => {
      const reply = await issue(p1, "reader", { spec: { expirationSeconds: testCase.seconds } })
      if (testCase.status === 422) {
        const body = assertStatus(server, reply, 422, "Invalid")
        assert.include(causeFields(body), "spec.expirationSeconds")
        return
      }
      assert.strictEqual(reply.status, 201, reply.text)
      const expires = Date.parse(reply.body.status.expirationTimestamp)
      assert.isFalse(Number.isNaN(expires), reply.text)
      const issuedAt = Date.parse(reply.headers.get("date") ?? "")
      assert.isAtLeast(expires - issuedAt, (testCase.seconds as number) * 1000 - 5_000)
      assert.isAtMost(expires - issuedAt, (testCase.seconds as number) * 1000 + 5_000)
      assert.strictEqual((await request(server, "GET", jobsPath(p1), { token: reply.body.status.token })).status, 200)
    })
  }

  it("a key for a missing ServiceAccount is NotFound", async () => {
    assertStatus(server, await issue(p1, "nobody"), 404, "NotFound")
  })

  it("tokens exist only on serviceaccounts", async () => {
    assertStatus(
      server,
      await request(server, "POST", `${jobPath(p1, "in-p1")}/tokens`, { body: {} }),
      405,
      "MethodNotAllowed"
    )
  })
})
