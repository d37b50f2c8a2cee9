// Writes over real HTTP (spec: Generic operations, Create semantics; kubectl-compat §4): optimistic concurrency with
// resourceVersion and ETag/If-Match, merge and JSON patches, server-side apply, no-op patches, dry runs and the ETag
// that binds a later create, DELETE preconditions, and server-side field validation (Strict, Warn, Ignore).
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryStore from "../../../src/store/MemoryStore.ts"
import { Store, type WriteOp } from "../../../src/store/Store.ts"
import { jobDefaults } from "../../support/KindRules.ts"
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
  namesOf,
  openWatch,
  rv,
  summary
} from "./Support.ts"

const applyPatch = (server: TestServer, path: string, body: unknown) =>
  request(server, "PATCH", path, { body, contentType: "application/apply-patch+yaml" })

const jsonPatch = (server: TestServer, path: string, operations: unknown) =>
  request(server, "PATCH", path, { body: operations, contentType: "application/json-patch+json" })

describe("writes", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  describe("replace", () => {
    it("PUT with a stale resourceVersion is a Conflict and changes nothing", async () => {
      await createProject(server, "w-stale")
      const created = await createJob(server, "w-stale", "j")
      const moved = await mergePatch(server, jobPath("w-stale", "j"), { spec: { backoffLimit: 2 } })
      assert.strictEqual(moved.status, 200, moved.text)
      assert.notStrictEqual(moved.body.metadata.resourceVersion, created.metadata.resourceVersion)
      const stale = await request(server, "PUT", jobPath("w-stale", "j"), {
        body: { ...created, spec: { image: "python:3.12", backoffLimit: 9 } }
      })
      const body = assertStatus(server, stale, 409, "Conflict")
      assert.strictEqual(body.details.name, "j")
      const read = await request(server, "GET", jobPath("w-stale", "j"))
      assert.strictEqual(read.body.spec.backoffLimit, 2)
      const fresh = await request(server, "PUT", jobPath("w-stale", "j"), {
        body: { ...moved.body, spec: { image: "python:3.12", backoffLimit: 4 } }
      })
      assert.strictEqual(fresh.status, 200, fresh.text)
      assert.strictEqual(fresh.body.spec.backoffLimit, 4)
    })

    it("PUT without a resourceVersion is Invalid", async () => {
      await createProject(server, "w-no-rv")
      await createJob(server, "w-no-rv", "j")
      const reply = await request(server, "PUT", jobPath("w-no-rv", "j"), {
        body: jobBody("j", {}, { backoffLimit: 5 })
      })
      const body = assertStatus(server, reply, 422, "Invalid")
      assert.include(causeFields(body), "metadata.resourceVersion")
      assert.isUndefined((await request(server, "GET", jobPath("w-no-rv", "j"))).body.spec.backoffLimit)
    })

    it("PUT of a missing object is NotFound", async () => {
      await createProject(server, "w-put-missing")
      const reply = await request(server, "PUT", jobPath("w-put-missing", "absent"), {
        body: jobBody("absent", { resourceVersion: "1" })
      })
      assertStatus(server, reply, 404, "NotFound")
    })

    it("PUT whose body names another object is a BadRequest", async () => {
      await createProject(server, "w-put-name")
      const created = await createJob(server, "w-put-name", "j")
      const reply = await request(server, "PUT", jobPath("w-put-name", "j"), {
        body: { ...created, metadata: { ...created.metadata, name: "other" } }
      })
      assertStatus(server, reply, 400, "BadRequest")
    })
  })

  describe("patches", () => {
    it("merge patch follows RFC 7386: null deletes a label, objects merge, other fields stay", async () => {
      await createProject(server, "w-merge")
      await createJob(
        server,
        "w-merge",
        "j",
        { labels: { keep: "1", drop: "2" }, annotations: { a: "x" }, finalizers: ["example.com/a"] },
        { command: ["a"], env: [{ name: "A", value: "1" }], completions: 4, backoffLimit: 3, timeout: "1h" }
      )
      const reply = await mergePatch(server, jobPath("w-merge", "j"), {
        metadata: {
          labels: { drop: null, added: "3" },
          annotations: { a: null },
          finalizers: ["example.com/b", "example.com/c"]
        },
        spec: { backoffLimit: null, parallelism: 2, recovery: { maxAttempts: 5 } }
      })
      assert.strictEqual(reply.status, 200, reply.text)
      const read = (await request(server, "GET", jobPath("w-merge", "j"))).body
      assert.deepStrictEqual(read.metadata.labels, { keep: "1", added: "3" })
      assert.isUndefined(read.metadata.annotations?.["a"])
      // A list is replaced whole, not merged.
      assert.deepStrictEqual(read.metadata.finalizers, ["example.com/b", "example.com/c"])
      assert.deepStrictEqual(read.spec, {
        ...jobDefaults,
        image: "python:3.12",
        command: ["a"],
        env: [{ name: "A", value: "1" }],
        completions: 4,
        parallelism: 2,
        timeout: "1h",
        recovery: { ...jobDefaults.recovery, maxAttempts: 5 }
      })
    })

    it("a merge patch pinning a stale resourceVersion is a Conflict; the current one succeeds", async () => {
      await createProject(server, "w-merge-pinned")
      const created = await createJob(server, "w-merge-pinned", "j")
      const moved = await mergePatch(server, jobPath("w-merge-pinned", "j"), { metadata: { labels: { step: "1" } } })
      assert.strictEqual(moved.status, 200, moved.text)
      const stale = await mergePatch(server, jobPath("w-merge-pinned", "j"), {
        metadata: { resourceVersion: created.metadata.resourceVersion },
        spec: { backoffLimit: 1 }
      })
      assertStatus(server, stale, 409, "Conflict")
      assert.isUndefined((await request(server, "GET", jobPath("w-merge-pinned", "j"))).body.spec.backoffLimit)
      const current = await mergePatch(server, jobPath("w-merge-pinned", "j"), {
        metadata: { resourceVersion: moved.body.metadata.resourceVersion },
        spec: { backoffLimit: 2 }
      })
      assert.strictEqual(current.status, 200, current.text)
      assert.strictEqual(current.body.spec.backoffLimit, 2)
    })

    it("a merge patch that is not an object is a BadRequest", async () => {
      await createProject(server, "w-merge-bad")
      await createJob(server, "w-merge-bad", "j")
      const reply = await mergePatch(server, jobPath("w-merge-bad", "j"), ["not", "an", "object"])
      assertStatus(server, reply, 400, "BadRequest")
    })

    it("JSON patch: add, replace and remove apply in order", async () => {
      await createProject(server, "w-json")
      await createJob(server, "w-json", "j", { labels: { gone: "soon" }, finalizers: ["example.com/a"] }, {
        completions: 4,
        backoffLimit: 1,
        timeout: "1h"
      })
      const reply = await jsonPatch(server, jobPath("w-json", "j"), [
        { op: "add", path: "/metadata/labels/team", value: "b" },
        { op: "replace", path: "/spec/backoffLimit", value: 3 },
        { op: "replace", path: "/spec/parallelism", value: 2 },
        { op: "add", path: "/metadata/finalizers/-", value: "example.com/b" },
        { op: "remove", path: "/metadata/labels/gone" },
        { op: "remove", path: "/spec/timeout" },
        { op: "test", path: "/spec/backoffLimit", value: 3 }
      ])
      assert.strictEqual(reply.status, 200, reply.text)
      assert.deepStrictEqual(reply.body.metadata.labels, { team: "b" })
      assert.strictEqual(reply.body.spec.backoffLimit, 3)
      assert.strictEqual(reply.body.spec.parallelism, 2)
      assert.isUndefined(reply.body.spec.timeout, reply.text)
      assert.deepStrictEqual(reply.body.metadata.finalizers, ["example.com/a", "example.com/b"])
      assert.strictEqual(reply.body.metadata.generation, 2)
    })

    const failingJsonPatches: ReadonlyArray<
      { readonly name: string; readonly operations: unknown; readonly status: number; readonly reason: string }
    > = [
      {
        name: "a failing test",
        operations: [{ op: "add", path: "/spec/backoffLimit", value: 5 }, {
          op: "test",
          path: "/spec/image",
          value: "python:3.13"
        }],
        status: 422,
        reason: "Invalid"
      },
      {
        name: "removing a missing member",
        operations: [{ op: "remove", path: "/spec/nothing" }],
        status: 422,
        reason: "Invalid"
      },
      {
        name: "an unknown op",
        operations: [{ op: "frobnicate", path: "/spec/image" }],
        status: 400,
        reason: "BadRequest"
      },
      { name: "not an array", operations: { op: "add", path: "/spec/x", value: 1 }, status: 400, reason: "BadRequest" }
    ]
    for (const testCase of failingJsonPatches) {
      it(`JSON patch with ${testCase.name} → ${testCase.status} and nothing changes`, async () => {
        const project = `w-json-${failingJsonPatches.indexOf(testCase)}`
        await createProject(server, project)
        const created = await createJob(server, project, "j")
        const reply = await jsonPatch(server, jobPath(project, "j"), testCase.operations)
        assertStatus(server, reply, testCase.status, testCase.reason)
        const read = await request(server, "GET", jobPath(project, "j"))
        assert.strictEqual(read.body.spec.image, "python:3.12")
        assert.isUndefined(read.body.spec.backoffLimit)
        assert.strictEqual(read.body.metadata.resourceVersion, created.metadata.resourceVersion)
      })
    }

    it("a patch of a missing object is NotFound", async () => {
      await createProject(server, "w-patch-missing")
      assertStatus(
        server,
        await mergePatch(server, jobPath("w-patch-missing", "absent"), { spec: { image: "x" } }),
        404,
        "NotFound"
      )
    })

    it("a no-op patch keeps the resourceVersion and the ETag", async () => {
      await createProject(server, "w-noop")
      const created = await request(server, "POST", jobsPath("w-noop"), {
        body: jobBody("j", { labels: { team: "a" } })
      })
      assert.strictEqual(created.status, 201, created.text)
      const noops: ReadonlyArray<unknown> = [{ spec: { image: "python:3.12" } }, {
        metadata: { labels: { team: "a" } }
      }, {}]
      for (const patch of noops) {
        const reply = await mergePatch(server, jobPath("w-noop", "j"), patch)
        assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(
          reply.body.metadata.resourceVersion,
          created.body.metadata.resourceVersion,
          JSON.stringify(patch)
        )
        assert.strictEqual(reply.headers.get("etag"), created.headers.get("etag"))
        assert.deepStrictEqual(reply.body.metadata.managedFields, created.body.metadata.managedFields)
      }
      const json = await jsonPatch(server, jobPath("w-noop", "j"), [{
        op: "replace",
        path: "/spec/image",
        value: "python:3.12"
      }])
      assert.strictEqual(json.status, 200, json.text)
      assert.strictEqual(json.body.metadata.resourceVersion, created.body.metadata.resourceVersion)
    })
  })

  describe("Job update rules", () => {
    it("changing spec.image after create is FieldImmutable at spec.image and changes nothing", async () => {
      await createProject(server, "w-immutable")
      const created = await createJob(server, "w-immutable", "j")
      const path = jobPath("w-immutable", "j")
      const patched = await mergePatch(server, path, { spec: { image: "python:3.13" } })
      const body = assertStatus(server, patched, 422, "FieldImmutable")
      assert.strictEqual(body.details.causes[0].field, "spec.image", patched.text)
      const replaced = await request(server, "PUT", path, {
        body: { ...created, spec: { ...created.spec, image: "python:3.13" } }
      })
      assert.strictEqual(
        assertStatus(server, replaced, 422, "FieldImmutable").details.causes[0].field,
        "spec.image",
        replaced.text
      )
      const read = await request(server, "GET", path)
      assert.strictEqual(read.body.spec.image, "python:3.12")
      assert.strictEqual(read.body.metadata.resourceVersion, created.metadata.resourceVersion)
      assert.strictEqual(read.body.metadata.generation, 1)
    })

    it("maxCostUSD may only be raised: lowering it is Invalid at spec.maxCostUSD, raising it succeeds", async () => {
      await createProject(server, "w-max-cost")
      const created = await createJob(server, "w-max-cost", "j", {}, { maxCostUSD: "10" })
      const path = jobPath("w-max-cost", "j")
      const lowered = await mergePatch(server, path, { spec: { maxCostUSD: "5" } })
      const body = assertStatus(server, lowered, 422, "Invalid")
      assert.include(causeFields(body), "spec.maxCostUSD")
      const unchanged = await request(server, "GET", path)
      assert.strictEqual(unchanged.body.spec.maxCostUSD, "10")
      assert.strictEqual(unchanged.body.metadata.resourceVersion, created.metadata.resourceVersion)
      const raised = await mergePatch(server, path, { spec: { maxCostUSD: "20" } })
      assert.strictEqual(raised.status, 200, raised.text)
      assert.strictEqual(raised.body.spec.maxCostUSD, "20")
      assert.strictEqual(raised.body.metadata.generation, 2)
    })

    it("a Cancelled Job stays cancelled: resuming it is Invalid at spec.state and changes nothing", async () => {
      await createProject(server, "w-cancelled")
      await createJob(server, "w-cancelled", "j")
      const path = jobPath("w-cancelled", "j")
      const cancelled = await mergePatch(server, path, { spec: { state: "Cancelled" } })
      assert.strictEqual(cancelled.status, 200, cancelled.text)
      const resumed = await mergePatch(server, path, { spec: { state: "Running" } })
      assert.deepStrictEqual(causeFields(assertStatus(server, resumed, 422, "Invalid")), ["spec.state"])
      const read = await request(server, "GET", path)
      assert.strictEqual(read.body.spec.state, "Cancelled")
      assert.strictEqual(read.body.metadata.resourceVersion, cancelled.body.metadata.resourceVersion)
    })
  })

  describe("server-side apply", () => {
    it("creates a missing object (201), updates it (200) and removes a field dropped from the applied configuration", async () => {
      await createProject(server, "w-apply")
      const path = `${jobPath("w-apply", "j")}?fieldManager=me`
      const spec = { command: ["python", "train.py"], completions: 4, parallelism: 2 }
      const first = await applyPatch(
        server,
        path,
        jobBody("j", { labels: { team: "a", tier: "gold" } }, { ...spec, timeout: "1h" })
      )
      assert.strictEqual(first.status, 201, first.text)
      assert.deepStrictEqual(first.body.spec, { ...jobDefaults, image: "python:3.12", ...spec, timeout: "1h" })
      const read = await request(server, "GET", jobPath("w-apply", "j"))
      assert.strictEqual(read.status, 200, read.text)
      const updated = await applyPatch(
        server,
        path,
        jobBody("j", { labels: { team: "b", tier: "gold" } }, { ...spec, timeout: "1h" })
      )
      assert.strictEqual(updated.status, 200, updated.text)
      assert.deepStrictEqual(updated.body.metadata.labels, { team: "b", tier: "gold" })
      assert.strictEqual(updated.body.metadata.uid, first.body.metadata.uid)
      const dropped = await applyPatch(server, path, jobBody("j", { labels: { team: "b" } }, spec))
      assert.strictEqual(dropped.status, 200, dropped.text)
      assert.deepStrictEqual(dropped.body.spec, { ...jobDefaults, image: "python:3.12", ...spec }, dropped.text)
      assert.deepStrictEqual(dropped.body.metadata.labels, { team: "b" }, dropped.text)
    })

    it("a configuration naming another object than the URL is refused, whether the object exists or not", async () => {
      await createProject(server, "w-apply-name")
      const path = `${jobPath("w-apply-name", "j")}?fieldManager=me`
      assertStatus(server, await applyPatch(server, path, jobBody("other")), 400, "BadRequest")
      assert.strictEqual((await applyPatch(server, path, jobBody("j"))).status, 201)
      const mismatch = await applyPatch(server, path, jobBody("other"))
      const status = assertStatus(server, mismatch, 400, "BadRequest")
      assert.include(status.message, "does not match the name on the URL")
      assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("w-apply-name"))), ["j"])
    })

    it("the first apply after a create by apply can drop a field", async () => {
      await createProject(server, "w-apply-drop")
      const path = `${jobPath("w-apply-drop", "j")}?fieldManager=me`
      const created = await applyPatch(server, path, jobBody("j", { labels: { team: "a" } }, { backoffLimit: 2 }))
      assert.strictEqual(created.status, 201, created.text)
      const dropped = await applyPatch(server, path, jobBody("j"))
      assert.strictEqual(dropped.status, 200, dropped.text)
      assert.isUndefined(dropped.body.spec.backoffLimit, dropped.text)
      assert.isUndefined(dropped.body.metadata.labels?.["team"], dropped.text)
      const read = await request(server, "GET", jobPath("w-apply-drop", "j"))
      assert.deepStrictEqual(read.body.spec, { ...jobDefaults, image: "python:3.12" })
    })

    it("an object created and updated by apply has one Apply entry for its manager", async () => {
      await createProject(server, "w-apply-managed")
      const path = `${jobPath("w-apply-managed", "j")}?fieldManager=me`
      const created = await applyPatch(server, path, jobBody("j", {}, { backoffLimit: 1 }))
      assert.strictEqual(created.status, 201, created.text)
      const updated = await applyPatch(server, path, jobBody("j", {}, { backoffLimit: 2 }))
      assert.strictEqual(updated.status, 200, updated.text)
      for (const object of [created.body, updated.body]) {
        const entries = (object.metadata.managedFields as ReadonlyArray<any>).filter((candidate) =>
          candidate.manager === "me"
        )
        assert.deepStrictEqual(
          entries.map((entry) => entry.operation),
          ["Apply"],
          JSON.stringify(object.metadata.managedFields)
        )
        // Exactly the fields it applied: the defaults admission added belong to no manager, as in Kubernetes.
        assert.deepStrictEqual(
          entries[0].fieldsV1["f:spec"],
          { "f:image": {}, "f:backoffLimit": {} },
          JSON.stringify(entries[0].fieldsV1)
        )
      }
    })

    it("apply keeps fields another manager set", async () => {
      await createProject(server, "w-apply-others")
      const path = `${jobPath("w-apply-others", "j")}?fieldManager=me`
      const created = await request(server, "POST", `${jobsPath("w-apply-others")}?fieldManager=me`, {
        body: jobBody("j", {}, { completions: 4 })
      })
      assert.strictEqual(created.status, 201, created.text)
      const applied = await applyPatch(server, path, jobBody("j", {}, { completions: 4, parallelism: 3 }))
      assert.strictEqual(applied.status, 200, applied.text)
      const other = await mergePatch(server, `${jobPath("w-apply-others", "j")}?fieldManager=someone`, {
        spec: { backoffLimit: 4 }
      })
      assert.strictEqual(other.status, 200, other.text)
      const again = await applyPatch(server, path, jobBody("j", {}, { completions: 4, parallelism: 3 }))
      assert.strictEqual(again.status, 200, again.text)
      assert.strictEqual(again.body.spec.backoffLimit, 4)
      assert.strictEqual(again.body.spec.parallelism, 3)
    })

    it("apply without fieldManager is a BadRequest", async () => {
      await createProject(server, "w-apply-nomanager")
      const reply = await applyPatch(server, jobPath("w-apply-nomanager", "j"), jobBody("j"))
      assertStatus(server, reply, 400, "BadRequest")
      assert.strictEqual((await request(server, "GET", jobPath("w-apply-nomanager", "j"))).status, 404)
    })
  })

  describe("ETag and If-Match", () => {
    it("the ETag header is the quoted resourceVersion on create, read, patch and replace", async () => {
      await createProject(server, "w-etag")
      const created = await request(server, "POST", jobsPath("w-etag"), { body: jobBody("j") })
      const read = await request(server, "GET", jobPath("w-etag", "j"))
      const patched = await mergePatch(server, jobPath("w-etag", "j"), { spec: { backoffLimit: 1 } })
      const replaced = await request(server, "PUT", jobPath("w-etag", "j"), {
        body: { ...patched.body, spec: { image: "python:3.12", backoffLimit: 2 } }
      })
      for (const reply of [created, read, patched, replaced]) {
        assert.isTrue(reply.status === 200 || reply.status === 201, reply.text)
        assert.strictEqual(reply.headers.get("etag"), `"${reply.body.metadata.resourceVersion}"`)
      }
      assert.notStrictEqual(patched.headers.get("etag"), created.headers.get("etag"))
      assert.notStrictEqual(replaced.headers.get("etag"), patched.headers.get("etag"))
    })

    const operations: ReadonlyArray<
      {
        readonly name: string
        readonly send: (server: TestServer, path: string, object: any, etag: string) => ReturnType<typeof request>
        readonly status: number
      }
    > = [
      {
        name: "PUT",
        send: (s, path, object, etag) =>
          request(s, "PUT", path, {
            body: { ...object, spec: { image: "python:3.12", backoffLimit: 5 } },
            headers: { "if-match": etag }
          }),
        status: 200
      },
      {
        name: "merge PATCH",
        send: (s, path, _object, etag) =>
          mergePatch(s, path, { spec: { backoffLimit: 6 } }, { headers: { "if-match": etag } }),
        status: 200
      },
      {
        name: "JSON PATCH",
        send: (s, path, _object, etag) =>
          request(s, "PATCH", path, {
            body: [{ op: "replace", path: "/spec/state", value: "Suspended" }],
            contentType: "application/json-patch+json",
            headers: { "if-match": etag }
          }),
        status: 200
      },
      {
        name: "DELETE",
        send: (s, path, _object, etag) => request(s, "DELETE", path, { headers: { "if-match": etag } }),
        status: 200
      }
    ]
    for (const operation of operations) {
      it(`If-Match on ${operation.name}: a wrong ETag is PreconditionFailed, the right one succeeds`, async () => {
        const project = `w-ifmatch-${operations.indexOf(operation)}`
        await createProject(server, project)
        const created = await request(server, "POST", jobsPath(project), { body: jobBody("j") })
        assert.strictEqual(created.status, 201, created.text)
        const path = jobPath(project, "j")
        const wrong = await operation.send(server, path, created.body, "\"12345678\"")
        assertStatus(server, wrong, 412, "PreconditionFailed")
        const unchanged = await request(server, "GET", path)
        assert.strictEqual(unchanged.status, 200)
        assert.strictEqual(unchanged.body.metadata.resourceVersion, created.body.metadata.resourceVersion)
        const right = await operation.send(server, path, created.body, created.headers.get("etag")!)
        assert.strictEqual(right.status, operation.status, right.text)
        if (operation.name === "DELETE") assert.strictEqual((await request(server, "GET", path)).status, 404)
        else assert.notDeepEqual((await request(server, "GET", path)).body.spec, created.body.spec)
      })
    }
  })

  describe("dry run", () => {
    it("dryRun=All on create answers the object but persists nothing and emits no watch event", async () => {
      await createProject(server, "w-dry")
      const list = await request(server, "GET", jobsPath("w-dry"))
      assert.strictEqual(list.status, 200, list.text)
      const watch = await openWatch(
        server,
        `${jobsPath("w-dry")}?watch=true&resourceVersion=${list.body.metadata.resourceVersion}`
      )
      try {
        const dry = await request(server, "POST", `${jobsPath("w-dry")}?dryRun=All`, { body: jobBody("dry") })
        assert.strictEqual(dry.status, 201, dry.text)
        assert.strictEqual(dry.body.metadata.name, "dry")
        assert.strictEqual(dry.body.spec.image, "python:3.12")
        assert.isString(dry.headers.get("etag"))
        assertStatus(server, await request(server, "GET", jobPath("w-dry", "dry")), 404, "NotFound")
        assert.deepStrictEqual(namesOf(await request(server, "GET", jobsPath("w-dry"))), [])
        // The first event the watch sees is the real create that follows, not the dry run.
        await createJob(server, "w-dry", "real")
        assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED real"])
      } finally {
        await watch.close()
      }
    })

    it("dryRun=All on replace, patch and delete changes nothing", async () => {
      await createProject(server, "w-dry-update")
      const created = await createJob(server, "w-dry-update", "j")
      const path = jobPath("w-dry-update", "j")
      const put = await request(server, "PUT", `${path}?dryRun=All`, {
        body: { ...created, spec: { image: "python:3.12", backoffLimit: 8 } }
      })
      assert.strictEqual(put.status, 200, put.text)
      assert.strictEqual(put.body.spec.backoffLimit, 8)
      const patched = await mergePatch(server, `${path}?dryRun=All`, { spec: { backoffLimit: 9 } })
      assert.strictEqual(patched.status, 200, patched.text)
      assert.strictEqual(patched.body.spec.backoffLimit, 9)
      const deleted = await request(server, "DELETE", `${path}?dryRun=All`)
      assert.strictEqual(deleted.status, 200, deleted.text)
      const read = await request(server, "GET", path)
      assert.strictEqual(read.status, 200, read.text)
      assert.strictEqual(read.body.spec.image, "python:3.12")
      assert.isUndefined(read.body.spec.backoffLimit)
      assert.deepStrictEqual(read.body.spec, created.spec)
      assert.strictEqual(read.body.metadata.resourceVersion, created.metadata.resourceVersion)
    })

    it("the dry run's ETag binds a create of the same body; another body is PreconditionFailed", async () => {
      await createProject(server, "w-dry-etag")
      const body = jobBody("bound", { labels: { team: "a" } }, { command: ["python", "train.py"] })
      const dry = await request(server, "POST", `${jobsPath("w-dry-etag")}?dryRun=All`, { body })
      assert.strictEqual(dry.status, 201, dry.text)
      const etag = dry.headers.get("etag")
      assert.isString(etag)
      const different = await request(server, "POST", jobsPath("w-dry-etag"), {
        body: { ...body, spec: { ...body.spec, image: "python:3.13" } },
        headers: { "if-match": etag! }
      })
      assertStatus(server, different, 412, "PreconditionFailed")
      assert.strictEqual((await request(server, "GET", jobPath("w-dry-etag", "bound"))).status, 404)
      const real = await request(server, "POST", jobsPath("w-dry-etag"), { body, headers: { "if-match": etag! } })
      assert.strictEqual(real.status, 201, real.text)
      assert.strictEqual(real.body.spec.image, "python:3.12")
    })

    const badDryRuns = ["Foo", "all", "true"]
    for (const value of badDryRuns) {
      it(`dryRun=${value} is a BadRequest and creates nothing`, async () => {
        const project = `w-dry-bad-${badDryRuns.indexOf(value)}`
        await createProject(server, project)
        const reply = await request(server, "POST", `${jobsPath(project)}?dryRun=${value}`, { body: jobBody("j") })
        assertStatus(server, reply, 400, "BadRequest")
        assert.strictEqual((await request(server, "GET", jobPath(project, "j"))).status, 404)
      })
    }
  })

  describe("DELETE preconditions", () => {
    it("a wrong uid is a Conflict; the right uid deletes", async () => {
      await createProject(server, "w-precondition")
      const created = await createJob(server, "w-precondition", "j")
      const path = jobPath("w-precondition", "j")
      const wrong = await request(server, "DELETE", path, {
        body: {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: "00000000-0000-0000-0000-000000000000" }
        }
      })
      assertStatus(server, wrong, 409, "Conflict")
      assert.strictEqual((await request(server, "GET", path)).status, 200)
      const staleVersion = await request(server, "DELETE", path, { body: { preconditions: { resourceVersion: "1" } } })
      assertStatus(server, staleVersion, 409, "Conflict")
      const right = await request(server, "DELETE", path, {
        body: { preconditions: { uid: created.metadata.uid, resourceVersion: created.metadata.resourceVersion } }
      })
      assert.strictEqual(right.status, 200, right.text)
      assert.strictEqual((await request(server, "GET", path)).status, 404)
    })

    it("a plain DELETE racing another writer is retried, not a Conflict; one pinning a resourceVersion is not", async () => {
      // A controller's status write lands between the DELETE's read and its commit, every time.
      const racing = Layer.effect(
        Store,
        Effect.map(MemoryStore.make, (store) => ({
          ...store,
          commit: (ops: ReadonlyArray<WriteOp>) => {
            const first = ops[0]
            if (first?._tag !== "Delete") return store.commit(ops)
            const bump = Effect.flatMap(Effect.orDie(store.get(first.key)), (current) => {
              if (current._tag === "None") return Effect.void
              const object = {
                ...current.value,
                metadata: { ...current.value.metadata, labels: { bumped: String(raceOnce.size) } }
              }
              return Effect.orDie(
                store.commit([{
                  _tag: "Update",
                  key: first.key,
                  object,
                  previous: current.value,
                  expectedRv: current.value.metadata.resourceVersion
                }])
              )
            })
            // The first try of each DELETE loses the race; its retry reads the newer object and wins.
            const raced = raceOnce.has(first.key.name)
            raceOnce.add(first.key.name)
            return raced ? store.commit(ops) : Effect.andThen(bump, store.commit(ops))
          }
        }))
      )
      const raceOnce = new Set<string>()
      const raced = await startTestServer({ store: racing })
      try {
        await createProject(raced, "w-race")
        await createJob(raced, "w-race", "plain")
        assert.strictEqual((await request(raced, "DELETE", jobPath("w-race", "plain"))).status, 200)
        assert.strictEqual((await request(raced, "GET", jobPath("w-race", "plain"))).status, 404)
        const pinned = await createJob(raced, "w-race", "pinned")
        const body = { preconditions: { resourceVersion: pinned.metadata.resourceVersion } }
        assertStatus(raced, await request(raced, "DELETE", jobPath("w-race", "pinned"), { body }), 409, "Conflict")
        assert.strictEqual((await request(raced, "GET", jobPath("w-race", "pinned"))).status, 200)
      } finally {
        await raced.stop()
      }
    })

    it("DELETE of a missing object is NotFound", async () => {
      await createProject(server, "w-delete-missing")
      assertStatus(server, await request(server, "DELETE", jobPath("w-delete-missing", "absent")), 404, "NotFound")
    })
  })

  describe("fieldValidation", () => {
    const withUnknown = (name: string) => ({ ...jobBody(name), foo: "bar", metadata: { name, bar: "baz" } })

    it("Strict refuses unknown fields with a BadRequest naming each", async () => {
      await createProject(server, "w-strict")
      const reply = await request(server, "POST", `${jobsPath("w-strict")}?fieldValidation=Strict`, {
        body: withUnknown("j")
      })
      const body = assertStatus(server, reply, 400, "BadRequest")
      const fields = causeFields(body)
      assert.include(fields, "foo")
      assert.include(fields, "metadata.bar")
      assert.include(body.message, "foo")
      assert.include(body.message, "metadata.bar")
      assert.strictEqual((await request(server, "GET", jobPath("w-strict", "j"))).status, 404)
    })

    const lenient: ReadonlyArray<{ readonly name: string; readonly query: string; readonly warns: boolean }> = [
      { name: "Warn", query: "?fieldValidation=Warn", warns: true },
      { name: "Ignore", query: "?fieldValidation=Ignore", warns: false },
      { name: "the default (no parameter)", query: "", warns: true },
      { name: "an empty parameter", query: "?fieldValidation=", warns: true }
    ]
    for (const mode of lenient) {
      it(`${mode.name} creates the object without the unknown fields${mode.warns ? " and warns" : ", silently"}`, async () => {
        const project = `w-lenient-${lenient.indexOf(mode)}`
        await createProject(server, project)
        const reply = await request(server, "POST", `${jobsPath(project)}${mode.query}`, { body: withUnknown("j") })
        assert.strictEqual(reply.status, 201, reply.text)
        const warning = reply.headers.get("warning")
        if (mode.warns) {
          assert.isString(warning, "Warning header")
          assert.match(warning!, /^299 /u)
          assert.include(warning!, "foo")
          assert.include(warning!, "metadata.bar")
        } else {
          assert.isNull(warning)
        }
        const stored = (await request(server, "GET", jobPath(project, "j"))).body
        for (const object of [reply.body, stored]) {
          assert.isFalse("foo" in object, JSON.stringify(object))
          assert.isFalse("bar" in object.metadata, JSON.stringify(object))
          assert.strictEqual(object.spec.image, "python:3.12")
        }
      })
    }

    it("a valid body gets no Warning header", async () => {
      await createProject(server, "w-valid")
      const reply = await request(server, "POST", jobsPath("w-valid"), { body: jobBody("j") })
      assert.strictEqual(reply.status, 201, reply.text)
      assert.isNull(reply.headers.get("warning"))
    })

    it("Strict also applies to patches", async () => {
      await createProject(server, "w-strict-patch")
      await createJob(server, "w-strict-patch", "j")
      const reply = await mergePatch(server, `${jobPath("w-strict-patch", "j")}?fieldValidation=Strict`, { foo: 1 })
      const body = assertStatus(server, reply, 400, "BadRequest")
      assert.include(causeFields(body), "foo")
    })

    it("fieldValidation=Nope is a BadRequest", async () => {
      await createProject(server, "w-nope")
      const reply = await request(server, "POST", `${jobsPath("w-nope")}?fieldValidation=Nope`, { body: jobBody("j") })
      assertStatus(server, reply, 400, "BadRequest")
      assert.strictEqual((await request(server, "GET", jobPath("w-nope", "j"))).status, 404)
    })
  })

  it("every write of a new object gets a higher resourceVersion than the last read list", async () => {
    await createProject(server, "w-rv")
    const before = await request(server, "GET", jobsPath("w-rv"))
    const created = await createJob(server, "w-rv", "j")
    assert.isAbove(rv(created), Number(before.body.metadata.resourceVersion))
  })
})
