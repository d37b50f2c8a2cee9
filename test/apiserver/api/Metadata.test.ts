// Object metadata over real HTTP (spec: Object envelope; kubectl-compat §4): server-owned fields (uid,
// creationTimestamp, resourceVersion, generation, managedFields), generateName, verbatim labels and annotations, the
// status subresource split, finalizers, and ownerReferences with background and orphan deletion.
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Layer } from "effect"
import { randomUUID } from "node:crypto"
import { Ids } from "../../../src/apiserver/Ids.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import {
  assertStatus,
  causeFields,
  createJob,
  createProject,
  jobBody,
  jobPath,
  jobsPath,
  mergePatch,
  rv,
  sandboxBody,
  sandboxesPath,
  waitGone
} from "./Support.ts"

describe("object metadata", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("uid and creationTimestamp are set on create and stable across updates", async () => {
    await createProject(server, "meta-uid")
    const created = await createJob(server, "meta-uid", "j")
    assert.match(created.metadata.uid, /^[0-9a-f-]{8,}$/iu)
    assert.match(created.metadata.creationTimestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/u)
    assert.strictEqual(created.metadata.namespace, "meta-uid")
    const patched = await mergePatch(server, jobPath("meta-uid", "j"), { spec: { backoffLimit: 2 } })
    assert.strictEqual(patched.status, 200, patched.text)
    const replaced = await request(server, "PUT", jobPath("meta-uid", "j"), {
      body: {
        ...jobBody("j", {}, { backoffLimit: 3 }),
        metadata: { name: "j", resourceVersion: patched.body.metadata.resourceVersion, uid: created.metadata.uid }
      }
    })
    assert.strictEqual(replaced.status, 200, replaced.text)
    const read = await request(server, "GET", jobPath("meta-uid", "j"))
    for (const object of [patched.body, replaced.body, read.body]) {
      assert.strictEqual(object.metadata.uid, created.metadata.uid)
      assert.strictEqual(object.metadata.creationTimestamp, created.metadata.creationTimestamp)
    }
    assert.strictEqual(read.body.spec.backoffLimit, 3)
  })

  it("a client cannot set uid or creationTimestamp on create", async () => {
    await createProject(server, "meta-owned")
    const created = await createJob(server, "meta-owned", "j", {
      uid: "client-chosen",
      creationTimestamp: "2001-01-01T00:00:00Z",
      resourceVersion: "999999",
      generation: 7
    })
    assert.notStrictEqual(created.metadata.uid, "client-chosen")
    assert.notStrictEqual(created.metadata.creationTimestamp, "2001-01-01T00:00:00Z")
    assert.notStrictEqual(created.metadata.resourceVersion, "999999")
    assert.strictEqual(created.metadata.generation, 1)
  })

  it("resourceVersion strictly increases across writes of different objects and kinds (one counter)", async () => {
    await createProject(server, "meta-rv-a")
    await createProject(server, "meta-rv-b")
    const writes = [
      () => createJob(server, "meta-rv-a", "one"),
      () => createJob(server, "meta-rv-b", "two"),
      async () => (await request(server, "POST", sandboxesPath("meta-rv-a"), { body: sandboxBody("three") })).body,
      async () => (await mergePatch(server, jobPath("meta-rv-a", "one"), { metadata: { labels: { x: "1" } } })).body,
      async () => (await mergePatch(server, jobPath("meta-rv-b", "two"), { spec: { backoffLimit: 5 } })).body,
      async () =>
        (await request(server, "POST", "/apis/nodus.dev/v1/budgets", {
          body: {
            apiVersion: "nodus.dev/v1",
            kind: "Budget",
            metadata: { name: "meta-rv-budget" },
            spec: { amountUSD: "10", period: "Monthly" }
          }
        })).body
    ]
    const versions: Array<number> = []
    for (const write of writes) versions.push(rv(await write()))
    assert.strictEqual(versions.length, writes.length)
    for (let index = 1; index < versions.length; index++) {
      assert.isAbove(versions[index]!, versions[index - 1]!, `resourceVersions ${versions.join(", ")}`)
    }
  })

  it("generation: 1 on create, +1 on a spec change, unchanged on label-only and status writes", async () => {
    await createProject(server, "meta-gen")
    const path = jobPath("meta-gen", "j")
    const steps: ReadonlyArray<
      { readonly what: string; readonly write: () => Promise<any>; readonly generation: number }
    > = [
      { what: "create", write: () => createJob(server, "meta-gen", "j", {}, { completions: 4 }), generation: 1 },
      {
        what: "spec change",
        write: async () => (await mergePatch(server, path, { spec: { backoffLimit: 2 } })).body,
        generation: 2
      },
      {
        what: "label only",
        write: async () => (await mergePatch(server, path, { metadata: { labels: { team: "a" } } })).body,
        generation: 2
      },
      {
        what: "annotation only",
        write: async () => (await mergePatch(server, path, { metadata: { annotations: { note: "n" } } })).body,
        generation: 2
      },
      {
        what: "status patch",
        write: async () => (await mergePatch(server, `${path}/status`, { status: { phase: "Running" } })).body,
        generation: 2
      },
      {
        what: "second spec change",
        write: async () => (await mergePatch(server, path, { spec: { parallelism: 2 } })).body,
        generation: 3
      }
    ]
    let previous = 0
    for (const step of steps) {
      const object = await step.write()
      assert.strictEqual(object?.metadata?.generation, step.generation, `${step.what}: ${JSON.stringify(object)}`)
      assert.isAbove(rv(object), previous, `${step.what} must write`)
      previous = rv(object)
    }
    const read = await request(server, "GET", path)
    assert.strictEqual(read.body.metadata.generation, 3)
    assert.strictEqual(read.body.status.phase, "Running")
  })

  it("generateName yields the prefix plus five characters", async () => {
    await createProject(server, "meta-gen-name")
    const names = new Set<string>()
    for (let index = 0; index < 3; index++) {
      const reply = await request(server, "POST", jobsPath("meta-gen-name"), {
        body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { generateName: "train-" }, spec: { image: "x" } }
      })
      assert.strictEqual(reply.status, 201, reply.text)
      assert.match(reply.body.metadata.name, /^train-[a-z0-9]{5}$/u)
      assert.strictEqual(reply.body.metadata.generateName, "train-")
      const read = await request(server, "GET", jobPath("meta-gen-name", reply.body.metadata.name))
      assert.strictEqual(read.status, 200, read.text)
      names.add(reply.body.metadata.name)
    }
    assert.strictEqual(names.size, 3)
  })

  it("a create without name or generateName is Invalid on metadata.name", async () => {
    await createProject(server, "meta-no-name")
    const reply = await request(server, "POST", jobsPath("meta-no-name"), {
      body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: {}, spec: { image: "x" } }
    })
    const body = assertStatus(server, reply, 422, "Invalid")
    assert.include(causeFields(body), "metadata.name")
  })

  it("labels and annotations are kept verbatim", async () => {
    await createProject(server, "meta-verbatim")
    const labels = { "app.kubernetes.io/name": "trainer", team: "a", empty: "", "x.y_z-1": "A.b_c-9" }
    const annotations = {
      multiline: "line one\nline two\n\ttabbed\n",
      json: JSON.stringify({ nested: { list: [1, 2, 3], text: "quote \" and backslash \\" } }),
      unicode: "héllo wörld ✓ 日本語 🚀",
      "kubectl.kubernetes.io/last-applied-configuration": `${JSON.stringify(jobBody("j"))}\n`,
      spaces: "  leading and trailing  ",
      empty: ""
    }
    const created = await createJob(server, "meta-verbatim", "j", { labels, annotations })
    const read = await request(server, "GET", jobPath("meta-verbatim", "j"))
    const listed = await request(server, "GET", jobsPath("meta-verbatim"))
    assert.strictEqual(listed.body.items.length, 1)
    for (const object of [created, read.body, listed.body.items[0]]) {
      assert.deepStrictEqual(object.metadata.labels, labels)
      assert.deepStrictEqual(object.metadata.annotations, annotations)
    }
  })

  it("status sent on create or on PUT of the main resource is ignored", async () => {
    await createProject(server, "meta-status-main")
    const path = jobPath("meta-status-main", "j")
    const created = await request(server, "POST", jobsPath("meta-status-main"), {
      body: { ...jobBody("j"), status: { phase: "Succeeded" } }
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.isUndefined(created.body.status?.phase, created.text)
    assert.isUndefined((await request(server, "GET", path)).body.status?.phase)
    const written = await mergePatch(server, `${path}/status`, { status: { phase: "Running" } })
    assert.strictEqual(written.status, 200, written.text)
    const replaced = await request(server, "PUT", path, {
      body: {
        ...jobBody("j", { resourceVersion: written.body.metadata.resourceVersion }, { backoffLimit: 3 }),
        status: { phase: "Failed" }
      }
    })
    assert.strictEqual(replaced.status, 200, replaced.text)
    assert.strictEqual(replaced.body.spec.backoffLimit, 3)
    assert.strictEqual(replaced.body.status.phase, "Running")
    const patched = await mergePatch(server, path, { status: { phase: "Failed" } })
    assert.strictEqual(patched.status, 200, patched.text)
    assert.strictEqual(patched.body.status.phase, "Running")
    assert.strictEqual((await request(server, "GET", path)).body.status.phase, "Running")
  })

  it("spec sent to /status is ignored", async () => {
    await createProject(server, "meta-status-spec")
    const path = jobPath("meta-status-spec", "j")
    const created = await createJob(server, "meta-status-spec", "j")
    const put = await request(server, "PUT", `${path}/status`, {
      body: {
        ...jobBody("j", { resourceVersion: created.metadata.resourceVersion, labels: { sneaky: "yes" } }, {
          image: "evil"
        }),
        status: { phase: "Running" }
      }
    })
    assert.strictEqual(put.status, 200, put.text)
    assert.strictEqual(put.body.status.phase, "Running")
    const patched = await mergePatch(server, `${path}/status`, {
      spec: { image: "evil-too" },
      status: { message: "hello" }
    })
    assert.strictEqual(patched.status, 200, patched.text)
    const read = await request(server, "GET", path)
    assert.strictEqual(read.body.spec.image, "python:3.12")
    assert.isUndefined(read.body.metadata.labels?.["sneaky"])
    assert.strictEqual(read.body.metadata.generation, 1)
    assert.deepStrictEqual(read.body.status, { phase: "Running", message: "hello" })
  })

  it("status is written through /status with PUT and merge PATCH, and read through GET /status", async () => {
    await createProject(server, "meta-status-write")
    const path = jobPath("meta-status-write", "j")
    const created = await createJob(server, "meta-status-write", "j")
    const put = await request(server, "PUT", `${path}/status`, {
      body: {
        ...jobBody("j", { resourceVersion: created.metadata.resourceVersion }),
        status: { phase: "Running", active: 1 }
      }
    })
    assert.strictEqual(put.status, 200, put.text)
    assert.deepStrictEqual(put.body.status, { phase: "Running", active: 1 })
    assert.isAbove(rv(put.body), rv(created))
    const patched = await mergePatch(server, `${path}/status`, {
      status: { active: null, succeeded: 1, phase: "Succeeded" }
    })
    assert.strictEqual(patched.status, 200, patched.text)
    assert.deepStrictEqual(patched.body.status, { phase: "Succeeded", succeeded: 1 })
    const read = await request(server, "GET", `${path}/status`)
    assert.strictEqual(read.status, 200, read.text)
    assert.deepStrictEqual(read.body.status, { phase: "Succeeded", succeeded: 1 })
    assert.strictEqual(read.body.metadata.name, "j")
  })

  it("status.observedGeneration is left alone by the server", async () => {
    await createProject(server, "meta-observed")
    const path = jobPath("meta-observed", "j")
    await createJob(server, "meta-observed", "j")
    const status = await mergePatch(server, `${path}/status`, { status: { observedGeneration: 1, phase: "Running" } })
    assert.strictEqual(status.status, 200, status.text)
    const changed = await mergePatch(server, path, { spec: { backoffLimit: 2 } })
    assert.strictEqual(changed.status, 200, changed.text)
    assert.strictEqual(changed.body.metadata.generation, 2)
    assert.strictEqual(changed.body.status.observedGeneration, 1)
    const read = await request(server, "GET", path)
    assert.strictEqual(read.body.status.observedGeneration, 1)
  })

  it("finalizers: DELETE marks the object, new finalizers are refused, removing the last one removes it", async () => {
    await createProject(server, "meta-finalizers")
    const path = jobPath("meta-finalizers", "held")
    await createJob(server, "meta-finalizers", "held", { finalizers: ["example.com/hold"] })
    const deleted = await request(server, "DELETE", path)
    assert.strictEqual(deleted.status, 200, deleted.text)
    assert.isString(deleted.body.metadata.deletionTimestamp, deleted.text)
    const read = await request(server, "GET", path)
    assert.strictEqual(read.status, 200, read.text)
    assert.strictEqual(read.body.metadata.deletionTimestamp, deleted.body.metadata.deletionTimestamp)
    assert.deepStrictEqual(read.body.metadata.finalizers, ["example.com/hold"])
    const again = await request(server, "DELETE", path)
    assert.strictEqual(again.status, 200, again.text)
    assert.strictEqual(again.body.metadata.deletionTimestamp, deleted.body.metadata.deletionTimestamp)
    const added = await mergePatch(server, path, {
      metadata: { finalizers: ["example.com/hold", "example.com/another"] }
    })
    const addedBody = assertStatus(server, added, 422, "Invalid")
    assert.include(causeFields(addedBody), "metadata.finalizers")
    assert.deepStrictEqual((await request(server, "GET", path)).body.metadata.finalizers, ["example.com/hold"])
    const released = await mergePatch(server, path, { metadata: { finalizers: null } })
    assert.strictEqual(released.status, 200, released.text)
    assert.strictEqual((await request(server, "GET", path)).status, 404)
  })

  it("one of two finalizers removed keeps the object until the other goes", async () => {
    await createProject(server, "meta-two-finalizers")
    const path = jobPath("meta-two-finalizers", "held")
    await createJob(server, "meta-two-finalizers", "held", { finalizers: ["example.com/a", "example.com/b"] })
    assert.strictEqual((await request(server, "DELETE", path)).status, 200)
    const first = await mergePatch(server, path, { metadata: { finalizers: ["example.com/b"] } })
    assert.strictEqual(first.status, 200, first.text)
    const read = await request(server, "GET", path)
    assert.strictEqual(read.status, 200, read.text)
    assert.deepStrictEqual(read.body.metadata.finalizers, ["example.com/b"])
    assert.strictEqual((await mergePatch(server, path, { metadata: { finalizers: [] } })).status, 200)
    assert.strictEqual((await request(server, "GET", path)).status, 404)
  })

  const ownerReference = (owner: any) => ({
    apiVersion: "nodus.dev/v1",
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid
  })

  it("deleting an owner deletes its dependents in the background", async () => {
    await createProject(server, "meta-gc")
    const owner = await createJob(server, "meta-gc", "owner")
    const dependent = await request(server, "POST", sandboxesPath("meta-gc"), {
      body: sandboxBody("dependent", { ownerReferences: [ownerReference(owner)] })
    })
    assert.strictEqual(dependent.status, 201, dependent.text)
    assert.deepStrictEqual(dependent.body.metadata.ownerReferences, [ownerReference(owner)])
    const grandchild = await createJob(server, "meta-gc", "grandchild", {
      ownerReferences: [ownerReference(dependent.body)]
    })
    assert.strictEqual(grandchild.metadata.ownerReferences[0].uid, dependent.body.metadata.uid)
    const bystander = await createJob(server, "meta-gc", "bystander")
    assert.strictEqual((await request(server, "DELETE", jobPath("meta-gc", "owner"))).status, 200)
    await waitGone(server, `${sandboxesPath("meta-gc")}/dependent`)
    await waitGone(server, jobPath("meta-gc", "grandchild"))
    const still = await request(server, "GET", jobPath("meta-gc", "bystander"))
    assert.strictEqual(still.status, 200, still.text)
    assert.strictEqual(still.body.metadata.uid, bystander.metadata.uid)
  })

  it("an object with two owners survives until both are gone", async () => {
    await createProject(server, "meta-gc-two")
    const first = await createJob(server, "meta-gc-two", "first")
    const second = await createJob(server, "meta-gc-two", "second")
    await createJob(server, "meta-gc-two", "shared", {
      ownerReferences: [ownerReference(first), ownerReference(second)]
    })
    // A dependent of the first owner alone shows when the collector has handled the first deletion.
    await createJob(server, "meta-gc-two", "marker", { ownerReferences: [ownerReference(first)] })
    assert.strictEqual((await request(server, "DELETE", jobPath("meta-gc-two", "first"))).status, 200)
    await waitGone(server, jobPath("meta-gc-two", "marker"))
    const shared = await request(server, "GET", jobPath("meta-gc-two", "shared"))
    assert.strictEqual(shared.status, 200, shared.text)
    assert.isUndefined(shared.body.metadata.deletionTimestamp)
    assert.strictEqual((await request(server, "DELETE", jobPath("meta-gc-two", "second"))).status, 200)
    await waitGone(server, jobPath("meta-gc-two", "shared"))
  })

  it("propagationPolicy Orphan keeps the dependent and strips its ownerReference", async () => {
    await createProject(server, "meta-orphan")
    const owner = await createJob(server, "meta-orphan", "owner")
    const other = await createJob(server, "meta-orphan", "other")
    await createJob(server, "meta-orphan", "dependent", {
      ownerReferences: [ownerReference(owner)],
      labels: { keep: "me" }
    })
    await createJob(server, "meta-orphan", "co-owned", {
      ownerReferences: [ownerReference(owner), ownerReference(other)]
    })
    const deleted = await request(server, "DELETE", jobPath("meta-orphan", "owner"), {
      body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Orphan" }
    })
    assert.strictEqual(deleted.status, 200, deleted.text)
    assert.strictEqual((await request(server, "GET", jobPath("meta-orphan", "owner"))).status, 404)
    const dependent = await request(server, "GET", jobPath("meta-orphan", "dependent"))
    assert.strictEqual(dependent.status, 200, dependent.text)
    assert.isUndefined(dependent.body.metadata.ownerReferences, dependent.text)
    assert.deepStrictEqual(dependent.body.metadata.labels, { keep: "me" })
    const coOwned = await request(server, "GET", jobPath("meta-orphan", "co-owned"))
    assert.deepStrictEqual(coOwned.body.metadata.ownerReferences, [ownerReference(other)])
    // The collector, had it acted on the orphaned dependents, would have removed them by the time it removes this one.
    assert.strictEqual((await request(server, "DELETE", jobPath("meta-orphan", "other"))).status, 200)
    await waitGone(server, jobPath("meta-orphan", "co-owned"))
    assert.strictEqual((await request(server, "GET", jobPath("meta-orphan", "dependent"))).status, 200)
  })

  it("an unsupported propagationPolicy is a BadRequest", async () => {
    await createProject(server, "meta-policy")
    await createJob(server, "meta-policy", "j")
    const reply = await request(server, "DELETE", jobPath("meta-policy", "j"), {
      body: { propagationPolicy: "Sideways" }
    })
    assertStatus(server, reply, 400, "BadRequest")
    assert.strictEqual((await request(server, "GET", jobPath("meta-policy", "j"))).status, 200)
  })

  it("managedFields carry an Update entry per fieldManager with the fields each set", async () => {
    await createProject(server, "meta-managed")
    const created = await request(server, "POST", `${jobsPath("meta-managed")}?fieldManager=alice`, {
      body: jobBody("j", { labels: { team: "a" } })
    })
    assert.strictEqual(created.status, 201, created.text)
    const patched = await mergePatch(server, `${jobPath("meta-managed", "j")}?fieldManager=bob`, {
      spec: { backoffLimit: 3 }
    })
    assert.strictEqual(patched.status, 200, patched.text)
    const entries = (await request(server, "GET", jobPath("meta-managed", "j"))).body.metadata
      .managedFields as ReadonlyArray<any>
    assert.isArray(entries)
    const byManager = new Map(entries.map((entry) => [entry.manager, entry]))
    assert.deepStrictEqual([...byManager.keys()].sort(), ["alice", "bob"])
    for (const entry of entries) {
      assert.strictEqual(entry.operation, "Update")
      assert.strictEqual(entry.apiVersion, "nodus.dev/v1")
      assert.strictEqual(entry.fieldsType, "FieldsV1")
      assert.match(entry.time, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/u)
    }
    const alice = byManager.get("alice").fieldsV1
    assert.deepStrictEqual(alice["f:spec"]?.["f:image"], {}, JSON.stringify(alice))
    assert.deepStrictEqual(alice["f:metadata"]?.["f:labels"]?.["f:team"], {}, JSON.stringify(alice))
    assert.isUndefined(alice["f:spec"]?.["f:backoffLimit"])
    const bob = byManager.get("bob").fieldsV1
    assert.deepStrictEqual(bob["f:spec"]?.["f:backoffLimit"], {}, JSON.stringify(bob))
    assert.isUndefined(bob["f:spec"]?.["f:image"])
    assert.isUndefined(bob["f:metadata"])
  })
})

describe("generateName when the name drawn is taken", () => {
  // The suffixes the server draws, in order: the second create draws the first one's again, then a free one.
  const suffixes = ["zzzzz", "zzzzz", "zzzzz", "bbbbb"]
  let drawn = 0
  let server: TestServer

  beforeAll(async () => {
    const ids = Layer.succeed(
      Ids,
      Ids.of({
        uid: () => randomUUID(),
        nameSuffix: () => suffixes[Math.min(drawn++, suffixes.length - 1)]!,
        secret: () => "secret"
      })
    )
    server = await startTestServer({ ids })
  })
  afterAll(() => server.stop())

  it("draws another name, as Kubernetes does, instead of answering AlreadyExists", async () => {
    await createProject(server, "meta-gen-taken")
    const body = { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { generateName: "train-" }, spec: { image: "x" } }
    const first = await request(server, "POST", jobsPath("meta-gen-taken"), { body })
    assert.strictEqual(first.status, 201, first.text)
    const second = await request(server, "POST", jobsPath("meta-gen-taken"), { body })
    assert.strictEqual(second.status, 201, second.text)
    assert.deepStrictEqual([first.body.metadata.name, second.body.metadata.name], ["train-zzzzz", "train-bbbbb"])
    // A name the client chose is not drawn again: taken, it is AlreadyExists.
    const named = await request(server, "POST", jobsPath("meta-gen-taken"), {
      body: { ...body, metadata: { name: "train-bbbbb" } }
    })
    assertStatus(server, named, 409, "AlreadyExists")
  })
})
