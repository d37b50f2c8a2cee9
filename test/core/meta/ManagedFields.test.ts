// Unit tests for src/core/meta/ManagedFields.ts: the FieldsV1 encoding (a round-trip law over generated objects), leaf
// paths and changed leaves, and `record`, the ownership rules of a write: what an Update takes, what an Apply owns,
// when an entry disappears or keeps its place, no-op writes, and status writes.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import * as ManagedFields from "../../../src/core/meta/ManagedFields.ts"
import type { ManagedFieldsEntry, ManagedWrite } from "../../../src/core/meta/ManagedFields.ts"

const key = (...path: ReadonlyArray<string>): string => ManagedFields.pathKey(path)
const sorted = (keys: Iterable<string>): ReadonlyArray<string> => [...keys].sort()

const makeEntry = (
  manager: string,
  paths: ReadonlyArray<ReadonlyArray<string>>,
  options: { readonly operation?: "Apply" | "Update"; readonly subresource?: string; readonly time?: string } = {}
): ManagedFieldsEntry => ({
  manager,
  operation: options.operation ?? "Update",
  apiVersion: "nodus.dev/v1",
  time: options.time ?? "2024-01-01T00:00:00Z",
  fieldsType: "FieldsV1",
  fieldsV1: ManagedFields.toFieldsV1(paths.map((path) => key(...path))),
  ...(options.subresource === undefined ? {} : { subresource: options.subresource })
})

const makeWrite = (
  manager: string,
  options: { readonly operation?: "Apply" | "Update"; readonly subresource?: string } = {}
): ManagedWrite => ({
  manager,
  operation: options.operation ?? "Update",
  apiVersion: "nodus.dev/v1",
  time: "2024-06-01T00:00:00Z",
  ...(options.subresource === undefined ? {} : { subresource: options.subresource })
})

const makeObject = (fields: JsonObject): JsonObject => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  ...fields,
  metadata: {
    name: "train",
    uid: "uid-1",
    resourceVersion: "3",
    generation: 1,
    ...(fields["metadata"] as JsonObject | undefined)
  }
})

// manager (with operation and subresource when not a plain Update) → its owned leaf keys, in list order.
const ownership = (
  entries: ReadonlyArray<ManagedFieldsEntry>
): ReadonlyArray<readonly [string, ReadonlyArray<string>]> =>
  entries.map((entry) => [
    `${entry.manager}${entry.operation === "Apply" ? "/Apply" : ""}${
      entry.subresource === undefined ? "" : `/${entry.subresource}`
    }`,
    sorted(ManagedFields.fromFieldsV1(entry.fieldsV1))
  ])

// Member names, awkward ones included; never the separator the keys use.
const awkwardSegment = fc.oneof(
  fc.constantFrom(
    "spec",
    "image",
    "labels",
    "__proto__",
    "constructor",
    "toString",
    "f:x",
    "",
    "a.b",
    "app.kubernetes.io/name"
  ),
  fc.string({ maxLength: 3 }).filter((text) => !text.includes("\u0000"))
)
const scalar: fc.Arbitrary<Json> = fc.oneof(fc.boolean(), fc.integer(), fc.string({ maxLength: 3 }), fc.constant(null))
const documentOf = (segment: fc.Arbitrary<string>): fc.Arbitrary<JsonObject> => {
  const { node } = fc.letrec<{ node: Json }>((tie) => ({
    node: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      scalar,
      fc.array(scalar, { maxLength: 2 }),
      fc.dictionary(segment, tie("node"), { maxKeys: 4 })
    )
  }))
  return fc.dictionary(segment, node, { minKeys: 1, maxKeys: 4 })
}
// Names of Object.prototype members ("__proto__", "toString") are ordinary fields here: members are read as own only.
const awkwardDocument = documentOf(awkwardSegment)
const document = awkwardDocument

describe("FieldsV1 encoding", () => {
  it("writes nested f: members with empty leaves", () => {
    assert.deepStrictEqual(
      ManagedFields.toFieldsV1([key("spec", "image"), key("spec", "replicas"), key("metadata", "labels", "app")]),
      {
        "f:spec": { "f:image": {}, "f:replicas": {} },
        "f:metadata": { "f:labels": { "f:app": {} } }
      }
    )
    assert.deepStrictEqual(ManagedFields.toFieldsV1([]), {})
  })

  it("reads leaf paths back, ignoring members that are not f:", () => {
    const fields: JsonObject = { "f:spec": { "f:image": {}, ".": {} }, "k:{\"name\":\"x\"}": {}, "f:data": {} }
    assert.deepStrictEqual(sorted(ManagedFields.fromFieldsV1(fields)), sorted([key("spec", "image"), key("data")]))
    assert.deepStrictEqual(ManagedFields.fromFieldsV1({}), [])
  })

  it("round-trips the leaf paths of any object", () => {
    fc.assert(fc.property(awkwardDocument, (value) => {
      const paths = ManagedFields.leaves(value).map((path) => ManagedFields.pathKey(path))
      assert.isTrue(paths.length > 0)
      const fields = ManagedFields.toFieldsV1(paths)
      assert.deepStrictEqual(sorted(ManagedFields.fromFieldsV1(fields)), sorted(new Set(paths)))
      // …and the encoding of what was read back is the encoding itself.
      assert.deepStrictEqual(ManagedFields.toFieldsV1(ManagedFields.fromFieldsV1(fields)), fields)
    }))
  })
})

describe("ManagedFields.leaves", () => {
  const table: Record<string, { readonly value: Json; readonly leaves: ReadonlyArray<ReadonlyArray<string>> }> = {
    "empty object": { value: {}, leaves: [] },
    "scalar at the root": { value: 5, leaves: [] },
    "array at the root": { value: [1, 2], leaves: [] },
    "flat": { value: { a: 1, b: "x", c: null, d: false }, leaves: [["a"], ["b"], ["c"], ["d"]] },
    "nested": {
      value: { spec: { image: "a", resources: { cpu: 1 } } },
      leaves: [["spec", "image"], ["spec", "resources", "cpu"]]
    },
    "arrays are leaves": { value: { spec: { args: ["a", { b: 1 }] } }, leaves: [["spec", "args"]] },
    "empty objects are leaves": {
      value: { spec: { selector: {} }, data: {} },
      leaves: [["spec", "selector"], ["data"]]
    }
  }
  for (const [label, row] of Object.entries(table)) {
    it(label, () => {
      assert.deepStrictEqual(ManagedFields.leaves(row.value), row.leaves)
    })
  }
})

describe("ManagedFields.changedLeaves", () => {
  const table: Record<
    string,
    { readonly before: JsonObject; readonly after: JsonObject; readonly changed: ReadonlyArray<ReadonlyArray<string>> }
  > = {
    "nothing": { before: { spec: { a: 1, b: [1] } }, after: { spec: { b: [1], a: 1 } }, changed: [] },
    "changed scalar": { before: { spec: { a: 1, b: 2 } }, after: { spec: { a: 1, b: 3 } }, changed: [["spec", "b"]] },
    "changed array": {
      before: { spec: { args: [1, 2] } },
      after: { spec: { args: [2, 1] } },
      changed: [["spec", "args"]]
    },
    "added": { before: { spec: { a: 1 } }, after: { spec: { a: 1, b: 2 } }, changed: [["spec", "b"]] },
    "removed": { before: { spec: { a: 1, b: 2 } }, after: { spec: { a: 1 } }, changed: [["spec", "b"]] },
    "emptied map becomes a leaf": {
      before: { spec: { a: 1 } },
      after: { spec: {} },
      changed: [["spec"], ["spec", "a"]]
    },
    "scalar becomes map": {
      before: { spec: { a: 1 } },
      after: { spec: { a: { b: 1 } } },
      changed: [["spec", "a", "b"]]
    },
    "map becomes scalar": {
      before: { spec: { a: { b: 1 } } },
      after: { spec: { a: 1 } },
      changed: [["spec", "a"], ["spec", "a", "b"]]
    },
    "null is a value": { before: { spec: { a: null } }, after: { spec: { a: 0 } }, changed: [["spec", "a"]] }
  }
  for (const [label, row] of Object.entries(table)) {
    it(label, () => {
      assert.deepStrictEqual(
        sorted(ManagedFields.changedLeaves(row.before, row.after)),
        sorted(row.changed.map((path) => key(...path)))
      )
    })
  }
})

describe("ManagedFields.changedLeaves laws", () => {
  it("sees fields named like Object.prototype members", () => {
    assert.deepStrictEqual([...ManagedFields.changedLeaves({ spec: { a: 1, toString: 1 } }, { spec: { a: 1 } })], [
      ManagedFields.pathKey(["spec", "toString"])
    ])
    const withProto = JSON.parse("{\"spec\":{\"a\":1,\"__proto__\":{}}}") as JsonObject
    assert.deepStrictEqual([...ManagedFields.changedLeaves({ spec: { a: 1 } }, withProto)], [
      ManagedFields.pathKey(["spec", "__proto__"])
    ])
  })

  it("nothing changed between a document and itself", () => {
    fc.assert(fc.property(document, (value) => {
      assert.strictEqual(ManagedFields.changedLeaves(value, value).size, 0)
    }))
  })

  it("every changed leaf is a leaf of one side, and every differing leaf of the after side is changed", () => {
    fc.assert(fc.property(document, document, (before, after) => {
      const changed = ManagedFields.changedLeaves(before, after)
      const sides = new Set(
        [...ManagedFields.leaves(before), ...ManagedFields.leaves(after)].map((path) => ManagedFields.pathKey(path))
      )
      for (const path of changed) assert.isTrue(sides.has(path), JSON.stringify(path))
      const beforeKeys = new Set(ManagedFields.leaves(before).map((path) => ManagedFields.pathKey(path)))
      for (const path of ManagedFields.leaves(after)) {
        if (!beforeKeys.has(ManagedFields.pathKey(path))) {
          assert.isTrue(changed.has(ManagedFields.pathKey(path)), JSON.stringify(path))
        }
      }
    }))
  })
})

describe("ManagedFields.trackedPart", () => {
  it("keeps the user-owned metadata and the body, never identity or status", () => {
    const object = makeObject({
      metadata: { labels: { app: "x" }, annotations: null, finalizers: ["f"], managedFields: [] },
      spec: { a: 1 },
      status: { phase: "Running" }
    })
    assert.deepStrictEqual(ManagedFields.trackedPart(object, undefined), {
      metadata: { labels: { app: "x" }, finalizers: ["f"] },
      spec: { a: 1 }
    })
    assert.deepStrictEqual(ManagedFields.trackedPart(object, "status"), { status: { phase: "Running" } })
    assert.deepStrictEqual(ManagedFields.trackedPart(makeObject({ spec: {} }), "status"), {})
  })
})

describe("ManagedFields.record", () => {
  it("an Update takes the leaves it changed from another manager and keeps its earlier ones", () => {
    const entries = [makeEntry("alice", [["spec", "a"], ["spec", "b"]]), makeEntry("bob", [["spec", "c"]])]
    const before = makeObject({ spec: { a: 1, b: 1, c: 1 } })
    const after = makeObject({ spec: { a: 2, b: 1, c: 1 } })
    const recorded = ManagedFields.record(entries, makeWrite("bob"), before, after)
    assert.deepStrictEqual(ownership(recorded), [
      ["alice", [key("spec", "b")]],
      ["bob", sorted([key("spec", "a"), key("spec", "c")])]
    ])
    assert.strictEqual(recorded[1]?.time, "2024-06-01T00:00:00Z")
    assert.strictEqual(recorded[0]?.time, "2024-01-01T00:00:00Z") // alice's entry keeps its time
  })

  it("an Update of a new manager records exactly what it changed, last in the list", () => {
    const entries = [makeEntry("alice", [["spec", "a"], ["spec", "b"]])]
    const recorded = ManagedFields.record(
      entries,
      makeWrite("carol"),
      makeObject({ spec: { a: 1, b: 1 } }),
      makeObject({ spec: { a: 1, b: 1, c: 1 }, metadata: { labels: { x: "y" } } })
    )
    assert.deepStrictEqual(ownership(recorded), [
      ["alice", sorted([key("spec", "a"), key("spec", "b")])],
      ["carol", sorted([key("metadata", "labels", "x"), key("spec", "c")])]
    ])
    assert.deepStrictEqual(recorded[1], {
      manager: "carol",
      operation: "Update",
      apiVersion: "nodus.dev/v1",
      time: "2024-06-01T00:00:00Z",
      fieldsType: "FieldsV1",
      fieldsV1: { "f:metadata": { "f:labels": { "f:x": {} } }, "f:spec": { "f:c": {} } }
    })
  })

  it("a create's entry owns every leaf of the object, as the encoding of its leaf paths", () => {
    fc.assert(fc.property(document, fc.constantFrom(undefined, "status"), (fields, subresource) => {
      const object = makeObject(fields)
      const write = makeWrite("kubectl", subresource === undefined ? {} : { subresource })
      const paths = ManagedFields.leaves(ManagedFields.trackedPart(object, subresource)).map((path) =>
        ManagedFields.pathKey(path)
      )
      const expected: ReadonlyArray<ManagedFieldsEntry> = paths.length === 0
        ? []
        : [{ ...write, fieldsType: "FieldsV1", fieldsV1: ManagedFields.toFieldsV1(paths) }]
      assert.deepStrictEqual(ManagedFields.record([], write, {}, object), expected)
    }))
  })

  it("an Apply owns exactly the applied leaves", () => {
    const entries = [
      makeEntry("ssa", [["spec", "a"], ["spec", "b"]], { operation: "Apply" }),
      makeEntry("ctl", [["spec", "a"]])
    ]
    const object = makeObject({ spec: { a: 1, b: 1, c: 1 } })
    const applied: JsonObject = {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "train" },
      spec: { a: 1, c: 1 },
      status: { phase: "x" }
    }
    const recorded = ManagedFields.record(entries, makeWrite("ssa", { operation: "Apply" }), object, object, applied)
    assert.deepStrictEqual(ownership(recorded), [
      ["ssa/Apply", sorted([key("spec", "a"), key("spec", "c")])],
      // an applied value equal to the stored one is shared, not taken
      ["ctl", [key("spec", "a")]]
    ])
  })

  it("an Apply and an Update of the same manager are separate entries", () => {
    const entries = [makeEntry("m", [["spec", "a"]]), makeEntry("m", [["spec", "b"]], { operation: "Apply" })]
    const before = makeObject({ spec: { a: 1, b: 1 } })
    const after = makeObject({ spec: { a: 1, b: 2 } })
    const recorded = ManagedFields.record(entries, makeWrite("m", { operation: "Apply" }), before, after, {
      spec: { b: 2 }
    })
    assert.deepStrictEqual(ownership(recorded), [["m", [key("spec", "a")]], ["m/Apply", [key("spec", "b")]]])
  })

  it("a manager whose every field was taken disappears", () => {
    const entries = [makeEntry("alice", [["spec", "a"]]), makeEntry("bob", [["spec", "b"]])]
    const recorded = ManagedFields.record(
      entries,
      makeWrite("bob"),
      makeObject({ spec: { a: 1, b: 1 } }),
      makeObject({ spec: { a: 2, b: 1 } })
    )
    assert.deepStrictEqual(ownership(recorded), [["bob", sorted([key("spec", "a"), key("spec", "b")])]])
  })

  it("every manager loses the leaves the object no longer has", () => {
    const entries = [
      makeEntry("alice", [["spec", "a"], ["spec", "b"]]),
      makeEntry("bob", [["spec", "b"], ["spec", "c"]])
    ]
    const recorded = ManagedFields.record(
      entries,
      makeWrite("carol"),
      makeObject({ spec: { a: 1, b: 1, c: 1 } }),
      makeObject({ spec: { a: 1, c: 1 } })
    )
    // carol only removed a field, so she owns nothing and gets no entry.
    assert.deepStrictEqual(ownership(recorded), [["alice", [key("spec", "a")]], ["bob", [key("spec", "c")]]])
  })

  it("the writer's entry keeps its position in the list", () => {
    const entries = [
      makeEntry("alice", [["spec", "a"]]),
      makeEntry("bob", [["spec", "b"]]),
      makeEntry("carol", [["spec", "c"]])
    ]
    const before = makeObject({ spec: { a: 1, b: 1, c: 1 } })
    const recorded = ManagedFields.record(
      entries,
      makeWrite("alice"),
      before,
      makeObject({ spec: { a: 1, b: 1, c: 1, d: 1 } })
    )
    assert.deepStrictEqual(recorded.map((entry) => entry.manager), ["alice", "bob", "carol"])
    assert.deepStrictEqual(ownership(recorded)[0], ["alice", sorted([key("spec", "a"), key("spec", "d")])])
    const middle = ManagedFields.record(entries, makeWrite("bob"), before, makeObject({ spec: { a: 1, b: 2, c: 1 } }))
    assert.deepStrictEqual(middle.map((entry) => entry.manager), ["alice", "bob", "carol"])
    assert.strictEqual(middle[1]?.time, "2024-06-01T00:00:00Z")
  })

  it("a no-op write returns entries equal to the input, times included", () => {
    const entries = [
      makeEntry("alice", [["spec", "a"], ["metadata", "labels", "app"]]),
      makeEntry("ssa", [["spec", "b"]], { operation: "Apply" }),
      makeEntry("ctl", [["status", "phase"]], { subresource: "status" })
    ]
    const object = makeObject({
      metadata: { labels: { app: "x" } },
      spec: { a: 1, b: 1 },
      status: { phase: "Running" }
    })
    const writes: Record<string, { readonly write: ManagedWrite; readonly applied?: JsonObject }> = {
      "existing updater": { write: makeWrite("alice") },
      "new updater": { write: makeWrite("dave") },
      "applier restating its fields": { write: makeWrite("ssa", { operation: "Apply" }), applied: { spec: { b: 1 } } },
      "status writer": { write: makeWrite("ctl", { subresource: "status" }) },
      "new status writer": { write: makeWrite("eve", { subresource: "status" }) }
    }
    for (const [label, row] of Object.entries(writes)) {
      assert.deepStrictEqual(ManagedFields.record(entries, row.write, object, object, row.applied), entries, label)
    }
  })

  it("a status write only moves status fields", () => {
    const entries = [
      makeEntry("alice", [["spec", "a"]]),
      makeEntry("ctl", [["status", "phase"], ["status", "ready"]], { subresource: "status" })
    ]
    const before = makeObject({ spec: { a: 1 }, status: { phase: "Pending", ready: 0 } })
    // The spec differs too, but a status write does not look at it.
    const after = makeObject({ spec: { a: 2 }, status: { phase: "Running", ready: 0 } })
    const recorded = ManagedFields.record(entries, makeWrite("kubelet", { subresource: "status" }), before, after)
    assert.deepStrictEqual(ownership(recorded), [
      ["alice", [key("spec", "a")]],
      ["ctl/status", [key("status", "ready")]],
      ["kubelet/status", [key("status", "phase")]]
    ])
    assert.strictEqual(recorded[2]?.subresource, "status")
  })

  it("a main-resource write leaves status entries alone", () => {
    const entries = [
      makeEntry("ctl", [["status", "phase"]], { subresource: "status" }),
      makeEntry("alice", [["spec", "a"]])
    ]
    const recorded = ManagedFields.record(
      entries,
      makeWrite("bob"),
      makeObject({ spec: { a: 1 }, status: { phase: "A" } }),
      makeObject({ spec: { a: 2 }, status: { phase: "B" } })
    )
    assert.deepStrictEqual(ownership(recorded), [["ctl/status", [key("status", "phase")]], ["bob", [key("spec", "a")]]])
    assert.strictEqual(recorded[0], entries[0])
  })
})

describe("ManagedFields.record laws", () => {
  it("after an Update, the previous owner and the writer split the object's leaves between them", () => {
    fc.assert(fc.property(document, document, (beforeSpec, afterSpec) => {
      const before = makeObject({ spec: beforeSpec })
      const after = makeObject({ spec: afterSpec })
      const all = (object: JsonObject) =>
        ManagedFields.leaves(ManagedFields.trackedPart(object, undefined)).map((path) => ManagedFields.pathKey(path))
      const entries = [makeEntry("alice", ManagedFields.leaves(ManagedFields.trackedPart(before, undefined)))]
      assert.isTrue(entries[0] !== undefined && all(before).length > 0)
      const recorded = ManagedFields.record(entries, makeWrite("bob"), before, after)
      const owned = recorded.map((entry) => new Set(ManagedFields.fromFieldsV1(entry.fieldsV1)))
      const union = owned.flatMap((paths) => [...paths])
      // Disjoint, and together exactly the leaves of the new object.
      assert.strictEqual(union.length, new Set(union).size)
      assert.deepStrictEqual(sorted(union), sorted(new Set(all(after))))
      // bob owns exactly what he changed.
      const changed = ManagedFields.changedLeaves(
        ManagedFields.trackedPart(before, undefined),
        ManagedFields.trackedPart(after, undefined)
      )
      const bob = recorded.find((entry) => entry.manager === "bob")
      assert.deepStrictEqual(
        sorted(bob === undefined ? [] : ManagedFields.fromFieldsV1(bob.fieldsV1)),
        sorted(all(after).filter((path) => changed.has(path)))
      )
    }))
  })
})

describe("ManagedFields ownership queries", () => {
  const entries = [
    makeEntry("ssa", [["spec", "a"], ["spec", "b"]], { operation: "Apply" }),
    makeEntry("ssa", [["spec", "c"]]),
    makeEntry("ssa", [["status", "x"]], { operation: "Apply", subresource: "status" }),
    makeEntry("other", [["spec", "b"], ["spec", "d"]])
  ]

  it("appliedPaths lists what a manager applied to the main resource", () => {
    assert.deepStrictEqual(
      ManagedFields.appliedPaths(entries, "ssa").map((path) => key(...path)).sort(),
      sorted([key("spec", "a"), key("spec", "b")])
    )
    assert.deepStrictEqual(ManagedFields.appliedPaths(entries, "ssa", "status"), [["status", "x"]])
    assert.deepStrictEqual(ManagedFields.appliedPaths(entries, "other"), [])
  })

  it("pathsOwnedByOthers lists every other manager's leaves", () => {
    assert.deepStrictEqual(
      sorted(ManagedFields.pathsOwnedByOthers(entries, "ssa")),
      sorted([key("spec", "b"), key("spec", "d")])
    )
    assert.deepStrictEqual(
      sorted(ManagedFields.pathsOwnedByOthers(entries, "other")),
      sorted([key("spec", "a"), key("spec", "b"), key("spec", "c"), key("status", "x")])
    )
  })
})
