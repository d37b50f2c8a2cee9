// Unit tests for src/core/meta/ServerSideApply.ts: how an applied configuration is merged into the stored object
// (objects merge, lists and scalars replace), which fields the applier's earlier applies lose (unless another manager
// owns them), emptied maps, which metadata a configuration may set, `withName`, and two laws over generated documents.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { equals, isObject, type Json, type JsonObject } from "../../../src/core/Json.ts"
import * as ManagedFields from "../../../src/core/meta/ManagedFields.ts"
import type { ManagedFieldsEntry } from "../../../src/core/meta/ManagedFields.ts"
import type { ResourceObject } from "../../../src/core/meta/ObjectMeta.ts"
import { apply, withName } from "../../../src/core/meta/ServerSideApply.ts"
import { makeStoredObject, type ObjectOverrides } from "../../support/Objects.ts"

const makeEntry = (
  manager: string,
  operation: "Apply" | "Update",
  paths: ReadonlyArray<ReadonlyArray<string>>
): ManagedFieldsEntry => ({
  manager,
  operation,
  apiVersion: "nodus.dev/v1",
  time: "2024-01-01T00:00:00Z",
  fieldsType: "FieldsV1",
  fieldsV1: ManagedFields.toFieldsV1(paths.map((path) => ManagedFields.pathKey(path)))
})

// ServerSideApply's stored object sits at resourceVersion 5, generation 2 (its tests compare them).
const makeObject = (overrides: ObjectOverrides = {}, entries: ReadonlyArray<ManagedFieldsEntry> = []): ResourceObject =>
  makeStoredObject({ ...overrides, metadata: { resourceVersion: "5", generation: 2, ...overrides.metadata } }, entries)

// Freeze a value and everything inside it, so any mutation throws.
const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null) {
    Object.values(value).forEach(deepFreeze)
    Object.freeze(value)
  }
  return value
}

const metadataOf = (object: JsonObject): JsonObject => {
  const metadata = object["metadata"]
  if (!isObject(metadata)) assert.fail("the result has no metadata")
  return metadata
}

describe("ServerSideApply.apply: merging", () => {
  const table: Record<string, { readonly spec: Json; readonly configuration: Json; readonly result: Json }> = {
    "new field is added": { spec: { a: 1 }, configuration: { b: 2 }, result: { a: 1, b: 2 } },
    "scalar is replaced": { spec: { a: 1 }, configuration: { a: 2 }, result: { a: 2 } },
    "nested objects merge": {
      spec: { a: 1, n: { x: 1, y: 2 } },
      configuration: { n: { y: 3, z: 4 } },
      result: { a: 1, n: { x: 1, y: 3, z: 4 } }
    },
    "lists replace": { spec: { args: [1, 2, 3] }, configuration: { args: [9] }, result: { args: [9] } },
    "lists of objects replace": {
      spec: { env: [{ name: "A", value: "1" }] },
      configuration: { env: [{ name: "A" }] },
      result: { env: [{ name: "A" }] }
    },
    "object replaces scalar": { spec: { a: 1 }, configuration: { a: { b: 1 } }, result: { a: { b: 1 } } },
    "scalar replaces object": { spec: { a: { b: 1 } }, configuration: { a: 1 }, result: { a: 1 } },
    "empty object merges as nothing": { spec: { a: { b: 1 } }, configuration: { a: {} }, result: { a: { b: 1 } } }
  }
  for (const [label, row] of Object.entries(table)) {
    it(label, () => {
      const current = deepFreeze(makeObject({ spec: row.spec }))
      const result = apply(current, { spec: row.configuration }, "ssa")
      assert.deepStrictEqual(result["spec"], row.result)
    })
  }

  it("creates a body field the object did not have", () => {
    const result = apply(makeObject({}), { spec: { a: 1 } }, "ssa")
    assert.deepStrictEqual(result["spec"], { a: 1 })
  })
})

describe("ServerSideApply.apply: fields no longer stated", () => {
  it("removes a field the manager applied before and no longer states", () => {
    const current = deepFreeze(
      makeObject({ spec: { a: 1, b: 2, c: 3 } }, [makeEntry("ssa", "Apply", [["spec", "a"], ["spec", "b"]])])
    )
    assert.deepStrictEqual(apply(current, { spec: { a: 1 } }, "ssa")["spec"], { a: 1, c: 3 })
  })

  it("keeps it when another manager owns it too", () => {
    const table: Record<string, ManagedFieldsEntry> = {
      "an updater": makeEntry("ctl", "Update", [["spec", "b"]]),
      "another applier": makeEntry("other", "Apply", [["spec", "b"]])
    }
    for (const [label, other] of Object.entries(table)) {
      const current = makeObject({ spec: { a: 1, b: 2 } }, [
        makeEntry("ssa", "Apply", [["spec", "a"], ["spec", "b"]]),
        other
      ])
      assert.deepStrictEqual(apply(current, { spec: { a: 1 } }, "ssa")["spec"], { a: 1, b: 2 }, label)
    }
  })

  it("keeps fields the manager set by other means than apply, and fields another applier applied", () => {
    const current = makeObject({ spec: { a: 1, b: 2, c: 3 } }, [
      makeEntry("ssa", "Apply", [["spec", "a"]]),
      makeEntry("ssa", "Update", [["spec", "b"]]),
      makeEntry("other", "Apply", [["spec", "c"]])
    ])
    assert.deepStrictEqual(apply(current, { spec: { z: 0 } }, "ssa")["spec"], { b: 2, c: 3, z: 0 })
  })

  it("removes emptied maps, up to the root, but not maps that were empty already", () => {
    const entries = [makeEntry("ssa", "Apply", [["spec", "template", "x"], ["metadata", "labels", "app"]])]
    const table: Record<string, { readonly spec: Json; readonly result: Json | undefined }> = {
      "emptied map goes": { spec: { template: { x: 1 }, keep: 1 }, result: { keep: 1 } },
      "map with other members stays": { spec: { template: { x: 1, y: 2 } }, result: { template: { y: 2 } } },
      "emptied parent goes too": { spec: { template: { x: 1 } }, result: undefined },
      "an empty sibling stays": { spec: { template: { x: 1 }, empty: {} }, result: { empty: {} } }
    }
    for (const [label, row] of Object.entries(table)) {
      const current = makeObject({ metadata: { labels: { app: "x" } }, spec: row.spec }, entries)
      const result = apply(current, {}, "ssa")
      assert.deepStrictEqual(result["spec"], row.result, label)
      assert.isFalse(Object.hasOwn(metadataOf(result), "labels"), label)
    }
  })

  it("removes a label it applied before and keeps labels set by others", () => {
    const current = makeObject({ metadata: { labels: { mine: "1", theirs: "2" } } }, [
      makeEntry("ssa", "Apply", [["metadata", "labels", "mine"]])
    ])
    assert.deepStrictEqual(metadataOf(apply(current, { metadata: { labels: { next: "3" } } }, "ssa"))["labels"], {
      theirs: "2",
      next: "3"
    })
  })
})

describe("ServerSideApply.apply: metadata", () => {
  it("takes only labels, annotations, finalizers and ownerReferences from the configuration", () => {
    const current = deepFreeze(
      makeObject({ metadata: { labels: { a: "1" }, finalizers: ["example.com/old"] }, spec: { a: 1 } })
    )
    const ownerReference = { apiVersion: "nodus.dev/v1", kind: "Pool", name: "p", uid: "uid-9" }
    const configuration: JsonObject = {
      metadata: {
        name: "other",
        namespace: "elsewhere",
        uid: "uid-2",
        resourceVersion: "1",
        generation: 99,
        creationTimestamp: "1999-01-01T00:00:00Z",
        deletionTimestamp: "1999-01-01T00:00:00Z",
        generateName: "x-",
        managedFields: [],
        labels: { b: "2" },
        annotations: { note: "n" },
        finalizers: ["example.com/new"],
        ownerReferences: [ownerReference]
      }
    }
    assert.deepStrictEqual(metadataOf(apply(current, configuration, "ssa")), {
      ...current.metadata,
      labels: { a: "1", b: "2" },
      annotations: { note: "n" },
      finalizers: ["example.com/new"],
      ownerReferences: [ownerReference]
    })
  })

  it("leaves metadata as it was when the configuration states none", () => {
    const current = makeObject({ metadata: { labels: { a: "1" } }, spec: { a: 1 } })
    assert.deepStrictEqual(metadataOf(apply(current, { spec: { a: 2 } }, "ssa")), current.metadata)
  })
})

describe("ServerSideApply.withName", () => {
  const table: Record<string, { readonly configuration: JsonObject; readonly result: JsonObject }> = {
    "no metadata": { configuration: { spec: { a: 1 } }, result: { spec: { a: 1 }, metadata: { name: "train" } } },
    "metadata without a name": {
      configuration: { metadata: { labels: { a: "1" } } },
      result: { metadata: { labels: { a: "1" }, name: "train" } }
    },
    "the same name": { configuration: { metadata: { name: "train" } }, result: { metadata: { name: "train" } } },
    "metadata that is not an object": { configuration: { metadata: "x" }, result: { metadata: { name: "train" } } }
  }
  for (const [label, row] of Object.entries(table)) {
    it(label, () => {
      assert.deepStrictEqual(withName(deepFreeze(row.configuration), "train"), row.result)
    })
  }
})

// Laws over generated specs; member names include ones Object.prototype also has, which are ordinary fields here.
const member = fc.constantFrom("a", "b", "c", "d", "e-f", "g.h", "toString", "constructor")
const scalar: fc.Arbitrary<Json> = fc.oneof(
  fc.boolean(),
  fc.integer({ min: 0, max: 3 }),
  fc.constantFrom("x", "y"),
  fc.constant(null)
)
const { node } = fc.letrec<{ node: Json }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(scalar, { maxLength: 2 }),
    fc.dictionary(member, tie("node"), { maxKeys: 3 })
  )
}))
const spec = fc.dictionary(member, node, { minKeys: 1, maxKeys: 4 })

const valueAt = (value: Json | undefined, path: ReadonlyArray<string>): Json | undefined => {
  let current = value
  for (const segment of path) {
    if (!isObject(current) || !Object.hasOwn(current, segment)) return undefined
    current = current[segment]
  }
  return current
}

const isPrefix = (prefix: ReadonlyArray<string>, path: ReadonlyArray<string>): boolean =>
  prefix.length <= path.length && prefix.every((segment, index) => path[index] === segment)
const related = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => isPrefix(a, b) || isPrefix(b, a)

const scenario = fc.tuple(spec, spec).chain(([currentSpec, configuredSpec]) => {
  const leaves = ManagedFields.leaves({ spec: currentSpec })
  return fc.record({
    currentSpec: fc.constant(currentSpec),
    configuredSpec: fc.constant(configuredSpec),
    applied: fc.subarray([...leaves]),
    others: fc.subarray([...leaves])
  })
})

describe("ServerSideApply.apply laws", () => {
  it("every stated field ends up with the stated value", () => {
    fc.assert(fc.property(scenario, ({ currentSpec, configuredSpec, applied, others }) => {
      const current = makeObject({ spec: currentSpec }, [
        makeEntry("ssa", "Apply", applied),
        makeEntry("ctl", "Update", others)
      ])
      const result = apply(current, { spec: configuredSpec }, "ssa")
      const stated = ManagedFields.leaves({ spec: configuredSpec })
      assert.isTrue(stated.length > 0)
      for (const path of stated) {
        const value = valueAt(result, path)
        const configured = valueAt({ spec: configuredSpec }, path)!
        // An empty map states the map, not its members: the stored members stay.
        if (isObject(configured)) assert.isTrue(isObject(value), path.join("."))
        else assert.isTrue(value !== undefined && equals(value, configured), path.join("."))
      }
    }))
  })

  it("a field not related to a stated one is removed exactly when only this manager applied it", () => {
    // Both branches must have been exercised, or the law held vacuously.
    const seen = { removed: 0, kept: 0 }
    fc.assert(fc.property(scenario, ({ currentSpec, configuredSpec, applied, others }) => {
      const current = makeObject({ spec: currentSpec }, [
        makeEntry("ssa", "Apply", applied),
        makeEntry("ctl", "Update", others)
      ])
      const result = apply(current, { spec: configuredSpec }, "ssa")
      const stated = ManagedFields.leaves({ spec: configuredSpec })
      const key = (path: ReadonlyArray<string>) => ManagedFields.pathKey(path)
      const appliedKeys = new Set(applied.map(key))
      const otherKeys = new Set(others.map(key))
      for (const path of ManagedFields.leaves({ spec: currentSpec })) {
        if (stated.some((statedPath) => related(statedPath, path))) continue
        const removed = appliedKeys.has(key(path)) && !otherKeys.has(key(path))
        const value = valueAt(result, path)
        if (removed) assert.isUndefined(value, path.join("."))
        else assert.isTrue(value !== undefined && equals(value, valueAt({ spec: currentSpec }, path)!), path.join("."))
        seen[removed ? "removed" : "kept"] += 1
      }
    }))
    assert.isAbove(seen.removed, 0)
    assert.isAbove(seen.kept, 0)
  })
})
