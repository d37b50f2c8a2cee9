/**
 * The registry of served kinds (src/kinds/Kinds.ts): one entry per kind, each from its own folder, in the spec's order;
 * what other modules keep of it (the scope vocabulary) agrees with it.
 */
import { assert, describe, it } from "@effect/vitest"
import { coreKinds } from "../../src/core/meta/Kinds.ts"
import { blobScopePrefix, scopePrefixes } from "../../src/core/meta/Scopes.ts"
import { byKindName, definitionOf, isDefined, kinds, registered, runtimeKinds } from "../../src/kinds/Kinds.ts"

describe("the registry of served kinds", () => {
  it("lists every kind once, each with its own schema", () => {
    assert.strictEqual(new Set(kinds.map((info) => info.kind)).size, kinds.length)
    assert.strictEqual(new Set(kinds.map((info) => info.plural)).size, kinds.length)
    for (const entry of registered) {
      assert.isTrue(isDefined(entry.info.kind), entry.info.kind)
      assert.strictEqual(definitionOf(entry.info.kind), entry.definition)
      assert.strictEqual(byKindName(entry.info.kind), entry.info)
    }
    assert.isFalse(isDefined("NoSuchKind"))
  })

  it("runs the kinds whose entry has a machine, each served under its own name", () => {
    assert.isAtLeast(runtimeKinds.length, 3)
    for (const kind of runtimeKinds) assert.isDefined(byKindName(kind.kind), kind.kind)
  })

  it("the scope vocabulary is every served kind's prefix, the core group's and blobs", () => {
    const expected = new Set([...kinds, ...coreKinds].map((info) => info.scopePrefix).concat(blobScopePrefix))
    assert.deepStrictEqual([...scopePrefixes].sort(), [...expected].sort())
  })
})
