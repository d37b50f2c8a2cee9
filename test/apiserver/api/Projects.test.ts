// Projects (Kubernetes Namespaces at /api/v1/namespaces) over real HTTP (spec: a project is the namespace segment;
// kubectl-compat §2): create, read and list; NotFound for content of a missing project; and deletion, which empties
// the project in the background, refuses new content while it terminates, and waits for finalizers.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import {
  assertStatus,
  createJob,
  createProject,
  jobBody,
  jobPath,
  jobsPath,
  mergePatch,
  namesOf,
  sandboxBody,
  sandboxesPath,
  v1,
  waitGone
} from "./Support.ts"

const namespacePath = (name: string): string => `/api/v1/namespaces/${name}`

describe("projects", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("POST a Namespace → 201 Active; GET and list show it", async () => {
    const created = await request(server, "POST", "/api/v1/namespaces", {
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "proj-create", labels: { team: "a" } } }
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.apiVersion, "v1")
    assert.strictEqual(created.body.kind, "Namespace")
    assert.strictEqual(created.body.status.phase, "Active")
    assert.isUndefined(created.body.metadata.namespace)
    assert.isString(created.body.metadata.uid)
    const read = await request(server, "GET", namespacePath("proj-create"))
    assert.strictEqual(read.status, 200, read.text)
    assert.strictEqual(read.body.status.phase, "Active")
    assert.strictEqual(read.body.metadata.uid, created.body.metadata.uid)
    assert.deepStrictEqual(read.body.metadata.labels, { team: "a" })
    const list = await request(server, "GET", "/api/v1/namespaces")
    assert.strictEqual(list.body.kind, "NamespaceList")
    assert.strictEqual(list.body.apiVersion, "v1")
    assert.include(namesOf(list), "proj-create")
    const selected = await request(server, "GET", "/api/v1/namespaces?labelSelector=team%3Da")
    assert.deepStrictEqual(namesOf(selected), ["proj-create"])
  })

  it("a second project with the same name is AlreadyExists", async () => {
    await createProject(server, "proj-twice")
    const again = await request(server, "POST", "/api/v1/namespaces", {
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "proj-twice" } }
    })
    assertStatus(server, again, 409, "AlreadyExists")
  })

  const invalidProjects: ReadonlyArray<
    { readonly name: string; readonly body: unknown; readonly status: number; readonly reason: string }
  > = [
    {
      name: "an invalid name",
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "Not_Valid" } },
      status: 422,
      reason: "Invalid"
    },
    { name: "no name", body: { apiVersion: "v1", kind: "Namespace", metadata: {} }, status: 422, reason: "Invalid" },
    {
      name: "another kind",
      body: { apiVersion: "v1", kind: "Pod", metadata: { name: "pod" } },
      status: 400,
      reason: "BadRequest"
    }
  ]
  for (const testCase of invalidProjects) {
    it(`a Namespace with ${testCase.name} is refused with ${testCase.status}`, async () => {
      assertStatus(
        server,
        await request(server, "POST", "/api/v1/namespaces", { body: testCase.body }),
        testCase.status,
        testCase.reason
      )
    })
  }

  it("a missing project is NotFound on GET", async () => {
    const body = assertStatus(server, await request(server, "GET", namespacePath("proj-absent")), 404, "NotFound")
    assert.include(body.message, "proj-absent")
  })

  it("creating an object in a missing project is NotFound naming the project", async () => {
    const reply = await request(server, "POST", jobsPath("proj-missing"), { body: jobBody("j") })
    const body = assertStatus(server, reply, 404, "NotFound")
    assert.include(body.message, "proj-missing")
    assert.strictEqual(body.details?.name, "proj-missing")
  })

  it("deleting a project deletes everything in it", async () => {
    await createProject(server, "proj-delete")
    await createProject(server, "proj-neighbour")
    for (const name of ["one", "two", "three"]) await createJob(server, "proj-delete", name)
    const sandbox = await request(server, "POST", sandboxesPath("proj-delete"), { body: sandboxBody("box") })
    assert.strictEqual(sandbox.status, 201, sandbox.text)
    await createJob(server, "proj-neighbour", "stays")
    const deleted = await request(server, "DELETE", namespacePath("proj-delete"))
    assert.strictEqual(deleted.status, 200, deleted.text)
    assert.isString(deleted.body.metadata.deletionTimestamp)
    assert.strictEqual(deleted.body.status.phase, "Terminating")
    await waitGone(server, namespacePath("proj-delete"))
    for (const plural of ["jobs", "sandboxes"]) {
      const left = await request(server, "GET", `${v1}/${plural}?fieldSelector=metadata.namespace%3Dproj-delete`)
      assert.deepStrictEqual(namesOf(left), [], `${plural} left in the deleted project`)
    }
    assert.strictEqual((await request(server, "GET", jobPath("proj-delete", "one"))).status, 404)
    assertStatus(server, await request(server, "GET", jobsPath("proj-delete")), 404, "NotFound")
    assert.strictEqual((await request(server, "GET", jobPath("proj-neighbour", "stays"))).status, 200)
    assert.strictEqual((await request(server, "GET", namespacePath("proj-neighbour"))).status, 200)
  })

  it("a terminating project refuses new content and goes once its last finalizer is removed", async () => {
    await createProject(server, "proj-linger")
    await createJob(server, "proj-linger", "held", { finalizers: ["example.com/hold"] })
    await createJob(server, "proj-linger", "free")
    const deleted = await request(server, "DELETE", namespacePath("proj-linger"))
    assert.strictEqual(deleted.status, 200, deleted.text)
    // The controller marks the held job and removes the free one; the project waits for the finalizer.
    await waitGone(server, jobPath("proj-linger", "free"))
    const held = await eventually(
      "held job marked for deletion",
      () => request(server, "GET", jobPath("proj-linger", "held")),
      { until: (reply) => reply.body?.metadata?.deletionTimestamp !== undefined }
    )
    assert.strictEqual(held.status, 200, held.text)
    const lingering = await request(server, "GET", namespacePath("proj-linger"))
    assert.strictEqual(lingering.status, 200, lingering.text)
    assert.strictEqual(lingering.body.status.phase, "Terminating")
    assert.isString(lingering.body.metadata.deletionTimestamp)
    const refused = await request(server, "POST", jobsPath("proj-linger"), { body: jobBody("late") })
    const body = assertStatus(server, refused, 403, "Forbidden")
    assert.include(body.message, "proj-linger")
    const refusedSandbox = await request(server, "POST", sandboxesPath("proj-linger"), {
      body: sandboxBody("late-box")
    })
    assertStatus(server, refusedSandbox, 403, "Forbidden")
    assert.strictEqual((await request(server, "GET", jobPath("proj-linger", "late"))).status, 404)
    const released = await mergePatch(server, jobPath("proj-linger", "held"), { metadata: { finalizers: null } })
    assert.strictEqual(released.status, 200, released.text)
    await waitGone(server, jobPath("proj-linger", "held"))
    await waitGone(server, namespacePath("proj-linger"))
    // Once it is gone, the name is free again.
    await createProject(server, "proj-linger")
    assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("proj-linger"))), [])
  })

  it("deleting a terminating project again changes nothing", async () => {
    await createProject(server, "proj-twice-deleted")
    await createJob(server, "proj-twice-deleted", "held", { finalizers: ["example.com/hold"] })
    const first = await request(server, "DELETE", namespacePath("proj-twice-deleted"))
    assert.strictEqual(first.status, 200, first.text)
    const second = await request(server, "DELETE", namespacePath("proj-twice-deleted"))
    assert.strictEqual(second.status, 200, second.text)
    assert.strictEqual(second.body.metadata.deletionTimestamp, first.body.metadata.deletionTimestamp)
    await eventually(
      "held job marked",
      () => request(server, "GET", jobPath("proj-twice-deleted", "held")),
      { until: (reply) => reply.body?.metadata?.deletionTimestamp !== undefined }
    )
    assert.strictEqual(
      (await mergePatch(server, jobPath("proj-twice-deleted", "held"), { metadata: { finalizers: [] } })).status,
      200
    )
    await waitGone(server, namespacePath("proj-twice-deleted"))
  })
})
