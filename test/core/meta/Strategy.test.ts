// Unit tests for the per-write rules of src/core/meta/Strategy.ts: what create fills in and refuses, when an update
// bumps `generation` or is a no-op, identity and finalizer checks, status writes, the delete disposition, the timestamp
// format, and the managedFields entry a create records.

import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import type { JsonObject } from "../../../src/core/Json.ts"
import type { ApiError } from "../../../src/core/meta/ApiError.ts"
import type { ManagedFieldsEntry } from "../../../src/core/meta/ManagedFields.ts"
import type { ObjectMeta, ResourceObject } from "../../../src/core/meta/ObjectMeta.ts"
import * as Strategy from "../../../src/core/meta/Strategy.ts"
import type { CreateContext, Disposition, Target, WriteContext } from "../../../src/core/meta/Strategy.ts"
import { makeStoredObject, type ObjectOverrides } from "../../support/Objects.ts"

const target: Target = {
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  plural: "jobs",
  group: "nodus.dev",
  namespace: "demo"
}
const clusterTarget: Target = {
  apiVersion: "nodus.dev/v1",
  kind: "Budget",
  plural: "budgets",
  group: "nodus.dev",
  namespace: undefined
}

const t0 = Date.UTC(2024, 0, 2, 3, 4, 5)
const t1 = t0 + 60_000

interface Counted {
  readonly context: CreateContext
  readonly calls: () => number
}

// A create context whose suffix function (answering `suffix`) counts how often it was asked.
const createContext = (overrides: Partial<Omit<CreateContext, "nameSuffix">> = {}, suffix = "abcde"): Counted => {
  let calls = 0
  return {
    context: {
      now: t0,
      fieldManager: "kubectl",
      uid: "uid-1",
      nameSuffix: () => {
        calls += 1
        return suffix
      },
      ...overrides
    },
    calls: () => calls
  }
}

const writeContext: WriteContext = { now: t1, fieldManager: "kubectl" }

// A stored object as the store would hold it: server-owned metadata filled in.
// A stored Job with a spec and a status, as the update rules need both.
const makeObject = (overrides: ObjectOverrides = {}): ResourceObject =>
  makeStoredObject({ spec: { image: "a", replicas: 1 }, status: { phase: "Running" }, ...overrides })

const asInput = (object: ResourceObject): JsonObject => Strategy.asJson(object)

const success = <A>(result: Result.Result<A, ApiError>): A => {
  if (Result.isFailure(result)) assert.fail(`expected success, got ${result.failure.code}: ${result.failure.message}`)
  return result.success
}

const failure = <A>(result: Result.Result<A, ApiError>): ApiError => {
  if (Result.isSuccess(result)) assert.fail(`expected a failure, got ${JSON.stringify(result.success)}`)
  return result.failure
}

const written = (disposition: Disposition, tag: Disposition["_tag"] = "Write"): ResourceObject => {
  assert.strictEqual(disposition._tag, tag)
  return disposition.object
}

const entriesOf = (object: ResourceObject): ReadonlyArray<ManagedFieldsEntry> =>
  (object.metadata.managedFields ?? []) as unknown as ReadonlyArray<ManagedFieldsEntry>

describe("Strategy.timestamp", () => {
  it("writes RFC 3339 at second precision", () => {
    assert.strictEqual(Strategy.timestamp(0), "1970-01-01T00:00:00Z")
    assert.strictEqual(Strategy.timestamp(1_999), "1970-01-01T00:00:01Z")
    assert.strictEqual(Strategy.timestamp(t0 + 999), "2024-01-02T03:04:05Z")
  })

  it("truncates to the whole second and parses back to it", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) }), (ms) => {
      const text = Strategy.timestamp(ms)
      assert.match(text, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/u)
      assert.strictEqual(Date.parse(text), Math.floor(ms / 1000) * 1000)
    }))
  })

  it("answers a second it made a moment ago as it made it (the last seconds' texts are kept)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -3_000, max: 6_000 }), { minLength: 1, maxLength: 30 }), (offsets) => {
        for (const offset of offsets) {
          assert.strictEqual(
            Strategy.timestamp(t0 + offset),
            new Date(t0 + offset).toISOString().replace(/\.\d{3}Z$/u, "Z")
          )
        }
      })
    )
  })
})

describe("Strategy.create", () => {
  const input: JsonObject = {
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: {
      name: "train",
      labels: { app: "x" },
      uid: "client-uid",
      resourceVersion: "99",
      generation: 42,
      creationTimestamp: "2000-01-01T00:00:00Z"
    },
    spec: { image: "a" },
    status: { phase: "Succeeded" }
  }

  it("fills in the server-owned metadata and drops status", () => {
    const { context } = createContext()
    const object = success(Strategy.create(target, input, context))
    assert.strictEqual(object.apiVersion, "nodus.dev/v1")
    assert.strictEqual(object.kind, "Job")
    assert.strictEqual(object.metadata.name, "train")
    assert.strictEqual(object.metadata.namespace, "demo")
    assert.strictEqual(object.metadata.uid, "uid-1")
    assert.strictEqual(object.metadata.resourceVersion, "")
    assert.strictEqual(object.metadata.generation, 1)
    assert.strictEqual(object.metadata.creationTimestamp, "2024-01-02T03:04:05Z")
    assert.deepStrictEqual(object.metadata.labels, { app: "x" })
    assert.deepStrictEqual(object.spec, { image: "a" })
    assert.isFalse(Object.hasOwn(object, "status"))
  })

  it("sets the namespace from the target and accepts a body namespace that agrees", () => {
    const { context } = createContext()
    const agreeing = { ...input, metadata: { name: "train", namespace: "demo" } }
    assert.strictEqual(success(Strategy.create(target, agreeing, context)).metadata.namespace, "demo")
    assert.strictEqual(
      success(Strategy.create(target, { metadata: { name: "train" } }, context)).metadata.namespace,
      "demo"
    )
  })

  it("gives a cluster-scoped object no namespace, whatever the body says", () => {
    const { context } = createContext()
    const object = success(Strategy.create(clusterTarget, { metadata: { name: "b", namespace: "elsewhere" } }, context))
    assert.strictEqual(object.kind, "Budget")
    assert.isFalse(Object.hasOwn(object.metadata, "namespace"))
  })

  it("rejects a body namespace that differs from the target's (BadRequest)", () => {
    const { context, calls } = createContext()
    const error = failure(Strategy.create(target, { metadata: { name: "train", namespace: "other" } }, context))
    assert.strictEqual(error.code, "BadRequest")
    assert.include(error.message, "does not match the namespace sent on the request")
    assert.strictEqual(calls(), 0)
  })

  it("needs a name or generateName (Invalid, cause metadata.name)", () => {
    const table: Record<string, JsonObject> = {
      "no metadata": { spec: {} },
      "empty metadata": { metadata: {} },
      "empty name": { metadata: { name: "" } },
      "empty name and generateName": { metadata: { name: "", generateName: "" } },
      "non-string name": { metadata: { name: 5 } }
    }
    for (const [label, body] of Object.entries(table)) {
      const { context, calls } = createContext()
      const error = failure(Strategy.create(target, body, context))
      assert.strictEqual(error.code, "Invalid", label)
      assert.deepStrictEqual(error.causes?.map((cause) => [cause.field, cause.reason]), [[
        "metadata.name",
        "FieldValueRequired"
      ]], label)
      assert.include(error.message, "name or generateName is required", label)
      assert.strictEqual(calls(), 0, label)
    }
  })

  it("asks for a suffix only when there is no name", () => {
    const table: ReadonlyArray<
      { readonly label: string; readonly metadata: JsonObject; readonly name: string; readonly calls: number }
    > = [
      { label: "name only", metadata: { name: "train" }, name: "train", calls: 0 },
      {
        label: "name wins over generateName",
        metadata: { name: "train", generateName: "job-" },
        name: "train",
        calls: 0
      },
      { label: "generateName only", metadata: { generateName: "job-" }, name: "job-abcde", calls: 1 },
      {
        label: "empty name falls back to generateName",
        metadata: { name: "", generateName: "job-" },
        name: "job-abcde",
        calls: 1
      }
    ]
    for (const row of table) {
      const { context, calls } = createContext()
      const object = success(Strategy.create(target, { metadata: row.metadata }, context))
      assert.strictEqual(object.metadata.name, row.name, row.label)
      assert.strictEqual(calls(), row.calls, row.label)
    }
  })

  it("keeps generateName in metadata", () => {
    const { context } = createContext()
    assert.strictEqual(
      success(Strategy.create(target, { metadata: { generateName: "job-" } }, context)).metadata.generateName,
      "job-"
    )
  })

  it("cuts generateName to 58 characters before the suffix", () => {
    const table: ReadonlyArray<readonly [number, number]> = [
      [57, 57],
      [58, 58],
      [59, 58],
      [200, 58]
    ]
    for (const [length, kept] of table) {
      const { context } = createContext()
      const generateName = "a".repeat(length)
      const object = success(Strategy.create(target, { metadata: { generateName } }, context))
      assert.strictEqual(object.metadata.name, `${"a".repeat(kept)}abcde`, `length ${length}`)
      assert.strictEqual(object.metadata.generateName, generateName)
    }
  })

  it("rejects a generated name that is not a DNS subdomain (Invalid at metadata.generateName)", () => {
    const table: Record<string, { readonly generateName: string; readonly suffix: string }> = {
      "upper case prefix": { generateName: "Job-", suffix: "abcde" },
      "underscore": { generateName: "job_", suffix: "abcde" },
      "suffix ends in a dash": { generateName: "job-", suffix: "abcd-" }
    }
    for (const [label, row] of Object.entries(table)) {
      const { context, calls } = createContext({}, row.suffix)
      const error = failure(Strategy.create(target, { metadata: { generateName: row.generateName } }, context))
      assert.strictEqual(error.code, "Invalid", label)
      assert.deepStrictEqual(error.causes?.map((cause) => [cause.field, cause.reason]), [[
        "metadata.generateName",
        "FieldValueInvalid"
      ]], label)
      assert.include(error.causes?.[0]?.message ?? "", `Invalid value: "${row.generateName}"`, label)
      assert.strictEqual(calls(), 1, label)
    }
  })

  it("records one Update entry for the field manager", () => {
    const { context } = createContext()
    const object = success(Strategy.create(target, input, context))
    assert.deepStrictEqual(entriesOf(object), [{
      manager: "kubectl",
      operation: "Update",
      apiVersion: "nodus.dev/v1",
      time: "2024-01-02T03:04:05Z",
      fieldsType: "FieldsV1",
      fieldsV1: { "f:metadata": { "f:labels": { "f:app": {} } }, "f:spec": { "f:image": {} } }
    }])
  })

  it("records an Apply entry when server-side apply creates the object", () => {
    const { context } = createContext({ operation: "Apply", fieldManager: "ssa" })
    const object = success(Strategy.create(target, input, context))
    const entries = entriesOf(object)
    assert.strictEqual(entries.length, 1)
    assert.strictEqual(entries[0]?.manager, "ssa")
    assert.strictEqual(entries[0]?.operation, "Apply")
    // Status was dropped, so the applied configuration's status is not owned.
    assert.deepStrictEqual(entries[0]?.fieldsV1, {
      "f:metadata": { "f:labels": { "f:app": {} } },
      "f:spec": { "f:image": {} }
    })
  })

  it("records no entry when the object has no tracked fields", () => {
    const { context } = createContext()
    const object = success(Strategy.create(target, { metadata: { name: "bare" } }, context))
    assert.strictEqual(object.metadata.name, "bare")
    assert.isFalse(Object.hasOwn(object.metadata, "managedFields"))
  })
})

describe("Strategy.update", () => {
  it("keeps uid, creationTimestamp, resourceVersion and status from the stored object", () => {
    const current = makeObject()
    const input: JsonObject = {
      ...asInput(current),
      metadata: { name: "train", creationTimestamp: "1999-01-01T00:00:00Z", resourceVersion: "1", generation: 100 },
      spec: { image: "b", replicas: 1 },
      status: { phase: "Failed" }
    }
    const object = written(success(Strategy.update(target, current, input, writeContext)))
    assert.strictEqual(object.metadata.uid, "uid-1")
    assert.strictEqual(object.metadata.creationTimestamp, "2024-01-01T00:00:00Z")
    assert.strictEqual(object.metadata.resourceVersion, "7")
    assert.strictEqual(object.metadata.generation, 4)
    assert.deepStrictEqual(object.status, { phase: "Running" })
    assert.deepStrictEqual(object.spec, { image: "b", replicas: 1 })
  })

  it("bumps generation only when something outside metadata and status changed", () => {
    const current = makeObject({ metadata: { labels: { app: "x" }, annotations: { note: "n" } } })
    const base = asInput(current)
    const metadata = current.metadata
    const table: Record<string, { readonly input: JsonObject; readonly delta: number }> = {
      "spec change": { input: { ...base, spec: { image: "b", replicas: 1 } }, delta: 1 },
      "spec field removed": { input: { ...base, spec: { image: "a" } }, delta: 1 },
      "label change": { input: { ...base, metadata: { ...metadata, labels: { app: "y" } } }, delta: 0 },
      "label removed": { input: { ...base, metadata: { ...metadata, labels: null } }, delta: 0 },
      "annotation change": { input: { ...base, metadata: { ...metadata, annotations: { note: "m" } } }, delta: 0 },
      "finalizer added": { input: { ...base, metadata: { ...metadata, finalizers: ["example.com/f"] } }, delta: 0 },
      "status change (ignored)": {
        input: { ...base, status: { phase: "Failed" }, metadata: { ...metadata, labels: { app: "z" } } },
        delta: 0
      },
      "adding a top-level field": { input: { ...base, data: { key: "v" } }, delta: 1 },
      "removing spec": { input: { apiVersion: "nodus.dev/v1", kind: "Job", metadata }, delta: 1 }
    }
    for (const [label, row] of Object.entries(table)) {
      const object = written(success(Strategy.update(target, current, row.input, writeContext)))
      assert.strictEqual(object.metadata.generation, current.metadata.generation + row.delta, label)
    }
  })

  it("answers Unchanged with the stored object for a no-op", () => {
    const { context } = createContext()
    const created = success(
      Strategy.create(target, { metadata: { name: "train", labels: { app: "x" } }, spec: { image: "a" } }, context)
    )
    const current: ResourceObject = {
      ...created,
      metadata: { ...created.metadata, resourceVersion: "7" },
      status: { phase: "Running" }
    }
    assert.isTrue(entriesOf(current).length === 1)
    for (const manager of ["kubectl", "someone-else"]) {
      const disposition = success(
        Strategy.update(target, current, asInput(current), { now: t1, fieldManager: manager })
      )
      assert.strictEqual(disposition._tag, "Unchanged", manager)
      assert.strictEqual(disposition.object, current, manager)
    }
    // Reordered members and an omitted status are still a no-op.
    const { status: _status, ...withoutStatus } = asInput(current)
    const reordered: JsonObject = { spec: { image: "a" }, ...withoutStatus }
    assert.strictEqual(success(Strategy.update(target, current, reordered, writeContext))._tag, "Unchanged")
  })

  it("rejects a name that differs from the stored one (BadRequest)", () => {
    const current = makeObject()
    const error = failure(
      Strategy.update(target, current, { ...asInput(current), metadata: { name: "other" } }, writeContext)
    )
    assert.strictEqual(error.code, "BadRequest")
    assert.include(error.message, "(other)")
  })

  it("rejects a uid that differs from the stored one (Conflict)", () => {
    const current = makeObject()
    const error = failure(
      Strategy.update(target, current, { ...asInput(current), metadata: { name: "train", uid: "uid-2" } }, writeContext)
    )
    assert.strictEqual(error.code, "Conflict")
    assert.include(error.message, "uid-2")
  })

  it("rejects a body namespace that differs from the target's (BadRequest)", () => {
    const current = makeObject()
    const error = failure(
      Strategy.update(
        target,
        current,
        { ...asInput(current), metadata: { name: "train", namespace: "other" } },
        writeContext
      )
    )
    assert.strictEqual(error.code, "BadRequest")
  })

  describe("on an object being deleted", () => {
    const deleting = makeObject({
      metadata: { deletionTimestamp: "2024-01-01T01:00:00Z", finalizers: ["example.com/a", "example.com/b"] }
    })
    const withFinalizers = (finalizers: ReadonlyArray<string> | null): JsonObject => ({
      ...asInput(deleting),
      metadata: { ...deleting.metadata, finalizers }
    })

    it("refuses new finalizers (Invalid at metadata.finalizers)", () => {
      const error = failure(
        Strategy.update(
          target,
          deleting,
          withFinalizers(["example.com/a", "example.com/b", "example.com/c"]),
          writeContext
        )
      )
      assert.strictEqual(error.code, "Invalid")
      assert.deepStrictEqual(error.causes?.map((cause) => [cause.field, cause.reason]), [[
        "metadata.finalizers",
        "FieldValueForbidden"
      ]])
    })

    it("allows removing finalizers", () => {
      const object = written(
        success(Strategy.update(target, deleting, withFinalizers(["example.com/b"]), writeContext))
      )
      assert.deepStrictEqual(object.metadata.finalizers, ["example.com/b"])
      assert.strictEqual(object.metadata.deletionTimestamp, "2024-01-01T01:00:00Z")
    })

    it("answers Remove when the last finalizer goes", () => {
      const table: Record<string, JsonObject> = {
        "empty list": withFinalizers([]),
        "null": withFinalizers(null),
        "omitted": { ...asInput(deleting), metadata: { name: "train" } }
      }
      for (const [label, input] of Object.entries(table)) {
        const object = written(success(Strategy.update(target, deleting, input, writeContext)), "Remove")
        assert.strictEqual(object.metadata.uid, "uid-1", label)
      }
    })
  })

  it("allows adding finalizers to an object not being deleted", () => {
    const current = makeObject()
    const object = written(
      success(
        Strategy.update(target, current, {
          ...asInput(current),
          metadata: { name: "train", finalizers: ["example.com/a"] }
        }, writeContext)
      )
    )
    assert.deepStrictEqual(object.metadata.finalizers, ["example.com/a"])
  })

  it("moves ownership of a changed field to the writer", () => {
    const { context } = createContext({ fieldManager: "first" })
    const created = success(
      Strategy.create(target, { metadata: { name: "train" }, spec: { image: "a", replicas: 1 } }, context)
    )
    const object = written(
      success(
        Strategy.update(target, created, { ...asInput(created), spec: { image: "b", replicas: 1 } }, {
          now: t1,
          fieldManager: "second"
        })
      )
    )
    assert.deepStrictEqual(entriesOf(object).map((entry) => [entry.manager, entry.fieldsV1]), [
      ["first", { "f:spec": { "f:replicas": {} } }],
      ["second", { "f:spec": { "f:image": {} } }]
    ])
    assert.strictEqual(entriesOf(object)[1]?.time, Strategy.timestamp(t1))
  })
})

describe("Strategy.updateStatus", () => {
  it("takes only status from the input and keeps generation", () => {
    const current = makeObject({ metadata: { labels: { app: "x" } } })
    const input: JsonObject = {
      ...asInput(current),
      metadata: { name: "train", labels: { app: "changed" } },
      spec: { image: "changed" },
      status: { phase: "Succeeded" }
    }
    const object = written(success(Strategy.updateStatus(target, current, input, writeContext)))
    assert.deepStrictEqual(object.status, { phase: "Succeeded" })
    assert.deepStrictEqual(object.spec, current.spec)
    assert.deepStrictEqual(object.metadata.labels, { app: "x" })
    assert.strictEqual(object.metadata.generation, current.metadata.generation)
    assert.deepStrictEqual(entriesOf(object).map((entry) => [entry.manager, entry.subresource, entry.fieldsV1]), [
      ["kubectl", "status", { "f:status": { "f:phase": {} } }]
    ])
  })

  it("removes status when the input has none", () => {
    const current = makeObject()
    for (const status of [undefined, null]) {
      const input: JsonObject = status === undefined
        ? { metadata: { name: "train" } }
        : { metadata: { name: "train" }, status }
      const object = written(success(Strategy.updateStatus(target, current, input, writeContext)))
      assert.isFalse(Object.hasOwn(object, "status"), String(status))
      assert.deepStrictEqual(object.spec, current.spec)
    }
  })

  it("answers Unchanged when status is the same", () => {
    const current = makeObject()
    const disposition = success(
      Strategy.updateStatus(
        target,
        current,
        { metadata: { name: "train" }, status: { phase: "Running" } },
        writeContext
      )
    )
    assert.strictEqual(disposition._tag, "Unchanged")
    assert.strictEqual(disposition.object, current)
  })

  it("checks identity like an update", () => {
    const current = makeObject()
    assert.strictEqual(
      failure(Strategy.updateStatus(target, current, { metadata: { name: "other" }, status: {} }, writeContext)).code,
      "BadRequest"
    )
    assert.strictEqual(
      failure(Strategy.updateStatus(target, current, { metadata: { uid: "uid-2" }, status: {} }, writeContext)).code,
      "Conflict"
    )
  })
})

describe("Strategy.remove", () => {
  const table: Record<string, { readonly metadata: Partial<ObjectMeta>; readonly tag: Disposition["_tag"] }> = {
    "no finalizers": { metadata: {}, tag: "Remove" },
    "empty finalizers": { metadata: { finalizers: [] }, tag: "Remove" },
    "finalizers": { metadata: { finalizers: ["example.com/a"] }, tag: "Write" },
    "already deleting": {
      metadata: { finalizers: ["example.com/a"], deletionTimestamp: "2024-01-01T01:00:00Z" },
      tag: "Unchanged"
    }
  }

  it("decides by finalizers and deletionTimestamp", () => {
    for (const [label, row] of Object.entries(table)) {
      const current = makeObject({ metadata: row.metadata })
      const disposition = Strategy.remove(current, t1)
      assert.strictEqual(disposition._tag, row.tag, label)
      if (row.tag !== "Write") assert.strictEqual(disposition.object, current, label)
    }
  })

  it("marks an object with finalizers: deletionTimestamp set, generation + 1", () => {
    const current = makeObject({ metadata: { finalizers: ["example.com/a"] } })
    const object = written(Strategy.remove(current, t1))
    assert.strictEqual(object.metadata.deletionTimestamp, "2024-01-02T03:05:05Z")
    assert.strictEqual(object.metadata.deletionGracePeriodSeconds, 0)
    assert.strictEqual(object.metadata.generation, current.metadata.generation + 1)
    assert.deepStrictEqual(object.metadata.finalizers, ["example.com/a"])
    assert.deepStrictEqual(object.spec, current.spec)
    assert.isUndefined(current.metadata.deletionTimestamp)
  })
})
