// Tests for JSON values: `canonical` ignores member order, and `equals` agrees with canonical equality,
// which is what idempotency payload hashing and no-op detection rely on.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { canonical, equals, isJson, isObject } from "../../src/core/Json.ts"
import type { Json } from "../../src/core/Json.ts"
import { jsonValue } from "../support/Arbitraries.ts"

const key = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.constantFrom("__proto__", "constructor", "", "10", "2", "é", "\u{1F600}")
)
const anyJson = jsonValue(key)

// Values from a tiny domain, so that independently generated pairs are often equal.
const { value: smallJson } = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom<Json>(null, true, 0, 1, "a"),
    fc.array(tie("value"), { maxLength: 2 }),
    fc.dictionary(fc.constantFrom("a", "b"), tie("value"), { maxKeys: 2, noNullPrototype: true })
  )
}))

// Flat objects over two names and two values, so that one often holds a subset of the other's members.
const flatObject = fc.dictionary(fc.constantFrom("a", "b"), fc.constantFrom<Json>(0, 1), {
  maxKeys: 2,
  noNullPrototype: true
})

// A copy of a value with the members of every object inserted in the order `compare` gives. (Integer-like
// names always enumerate first in ascending order in JavaScript, whatever the insertion order.)
const reorder = (value: Json, compare: (a: string, b: string) => number): Json => {
  if (Array.isArray(value)) return value.map((element: Json) => reorder(element, compare))
  if (!isObject(value)) return value
  const names = Object.keys(value).sort(compare)
  return Object.fromEntries(names.map((name) => [name, reorder(value[name] as Json, compare)]))
}

describe("Json.canonical", () => {
  it("sorts members recursively and has no whitespace", () => {
    const value = JSON.parse(`{ "b": [ { "z": 1, "y": null } ], "a": "x", "": true }`) as Json
    assert.strictEqual(canonical(value), `{"":true,"a":"x","b":[{"y":null,"z":1}]}`)
  })

  it("writes numbers by value", () => {
    assert.strictEqual(canonical(JSON.parse(`[1.0, 1e2, -0, 0.1]`) as Json), `[1,100,0,0.1]`)
  })

  it("is stable under member reordering", () => {
    fc.assert(
      fc.property(anyJson, fc.compareFunc<string>(), (value, compare) => {
        assert.strictEqual(canonical(reorder(value, compare)), canonical(value))
      })
    )
  })

  it("parses back to an equal value", () => {
    fc.assert(
      fc.property(anyJson, (value) => {
        assert.isTrue(equals(JSON.parse(canonical(value)) as Json, value))
      })
    )
  })
})

describe("Json.equals", () => {
  it("agrees with canonical equality", () => {
    const pairs = fc.oneof(
      fc.tuple(anyJson, anyJson),
      fc.tuple(smallJson, smallJson),
      fc.tuple(flatObject, flatObject),
      fc.tuple(anyJson, fc.compareFunc<string>()).map(([value, compare]) => [value, reorder(value, compare)] as const)
    )
    fc.assert(
      fc.property(pairs, ([a, b]) => {
        assert.strictEqual(equals(a, b), canonical(a) === canonical(b))
      })
    )
  })

  it("distinguishes types, lengths and member sets", () => {
    assert.isFalse(equals(10, "10"))
    assert.isFalse(equals(null, {}))
    assert.isFalse(equals([], {}))
    assert.isFalse(equals([1], [1, 1]))
    assert.isFalse(equals({ a: 1 }, { b: 1 }))
    assert.isFalse(equals({}, JSON.parse(`{"constructor":{}}`) as Json))
    // Without an own-member check, b["__proto__"] would read Object.prototype, which looks like `{}`.
    assert.isFalse(equals(JSON.parse(`{"__proto__":{}}`) as Json, { y: {} }))
    assert.isTrue(equals({ a: [1, { b: null }] }, { a: [1, { b: null }] }))
  })
})

describe("Json.isJson", () => {
  it("accepts parsed JSON and rejects what JSON cannot express", () => {
    assert.isTrue(isJson(JSON.parse(`{"a":[1,null,"x",{"b":false}]}`)))
    for (
      const value of [
        undefined,
        Number.NaN,
        Number.POSITIVE_INFINITY,
        () => 1,
        new Date(0),
        [1, , 2],
        { a: undefined },
        1n
      ]
    ) {
      assert.isFalse(isJson(value))
    }
    const cyclic: Array<unknown> = []
    cyclic.push(cyclic)
    assert.isFalse(isJson(cyclic))
    const shared = { a: 1 }
    assert.isTrue(isJson([shared, shared]))
  })
})
