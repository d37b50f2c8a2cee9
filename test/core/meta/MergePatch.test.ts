// Tests for JSON Merge Patch: the RFC 7386 Appendix A table verbatim, the label-removal case the API
// server relies on, the diff/apply round-trip law, and immutability of inputs.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { canonical } from "../../../src/core/Json.ts"
import type { Json } from "../../../src/core/Json.ts"
import { apply, diff } from "../../../src/core/meta/MergePatch.ts"

// RFC 7386 Appendix A, all 15 rows: original, patch, result (as JSON text, verbatim).
const appendixA: ReadonlyArray<readonly [string, string, string]> = [
  [`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`],
  [`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`],
  [`{"a":"b"}`, `{"a":null}`, `{}`],
  [`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`],
  [`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`],
  [`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`],
  [`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`],
  [`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`],
  [`["a","b"]`, `["c","d"]`, `["c","d"]`],
  [`{"a":"b"}`, `["c"]`, `["c"]`],
  [`{"a":"foo"}`, `null`, `null`],
  [`{"a":"foo"}`, `"bar"`, `"bar"`],
  [`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`],
  [`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`],
  [`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`]
]

const parse = (text: string): Json => JSON.parse(text) as Json

// Freeze a value and everything inside it, so any mutation throws (test files run in strict mode).
const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null) {
    Object.values(value).forEach(deepFreeze)
    Object.freeze(value)
  }
  return value
}

// Member names that are easy to mishandle: prototype properties, the empty name, pointer syntax.
const awkwardKey = fc.constantFrom("__proto__", "constructor", "toString", "", "a/b", "m~n", "0")
const key = fc.oneof(fc.string({ maxLength: 4 }), awkwardKey)
const scalar = fc.oneof(
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 6 })
)

// JSON values in which null never appears as an object member value (it may appear in arrays).
const { value: jsonWithoutNullMembers } = fc.letrec<{ value: Json; member: Json }>((tie) => ({
  value: fc.oneof({ depthSize: "small" }, fc.constant(null), tie("member")),
  member: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(key, tie("member"), { maxKeys: 5, noNullPrototype: true })
  )
}))

// Arbitrary JSON values, nulls anywhere.
const { value: anyJson } = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.oneof(fc.constant(null), scalar),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(key, tie("value"), { maxKeys: 5, noNullPrototype: true })
  )
}))

describe("MergePatch.apply", () => {
  it("reproduces every row of RFC 7386 Appendix A", () => {
    for (const [original, patch, result] of appendixA) {
      assert.deepStrictEqual(apply(parse(original), parse(patch)), parse(result), `${original} + ${patch}`)
    }
  })

  it("treats a missing target as not an object", () => {
    assert.deepStrictEqual(apply(undefined, parse(`{"a":{"b":null,"c":1}}`)), parse(`{"a":{"c":1}}`))
    assert.deepStrictEqual(apply(undefined, parse(`[1]`)), [1])
  })

  it("removes a label with null and keeps the other labels and metadata", () => {
    const resource = parse(
      `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"a":"1","b":"2"}},"spec":{"x":[1]}}`
    )
    const patched = apply(resource, parse(`{"metadata":{"labels":{"a":null}}}`))
    assert.deepStrictEqual(
      patched,
      parse(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"b":"2"}},"spec":{"x":[1]}}`)
    )
  })

  it("keeps member names such as __proto__ as ordinary members", () => {
    const patched = apply(parse(`{"a":1}`), parse(`{"__proto__":{"polluted":true}}`))
    assert.strictEqual(canonical(patched), `{"__proto__":{"polluted":true},"a":1}`)
    assert.strictEqual(Object.getPrototypeOf(patched), Object.prototype)
  })

  it("never mutates its inputs", () => {
    fc.assert(
      fc.property(anyJson, anyJson, (target, patch) => {
        const before = [canonical(target), canonical(patch)]
        apply(deepFreeze(target), deepFreeze(patch))
        assert.deepStrictEqual([canonical(target), canonical(patch)], before)
      })
    )
  })
})

describe("MergePatch.diff", () => {
  it("turns from into to whenever to has no null members", () => {
    fc.assert(
      fc.property(jsonWithoutNullMembers, jsonWithoutNullMembers, (from, to) => {
        assert.strictEqual(canonical(apply(from, diff(from, to))), canonical(to))
      })
    )
  })

  it("gives an empty patch for equal objects, ignoring member order", () => {
    assert.deepStrictEqual(diff(parse(`{"a":1,"b":{"c":[1]}}`), parse(`{"b":{"c":[1]},"a":1}`)), {})
  })

  it("lists removed members as null and only changed members otherwise", () => {
    const from = parse(`{"keep":1,"drop":2,"nested":{"x":1,"y":2},"list":[1,2]}`)
    const to = parse(`{"keep":1,"nested":{"x":1,"y":3},"list":[1],"added":{"z":null}}`)
    assert.deepStrictEqual(diff(from, to), parse(`{"drop":null,"nested":{"y":3},"list":[1],"added":{"z":null}}`))
  })

  it("cannot express a null member: applying the diff deletes it (RFC 7386 §1)", () => {
    const from = parse(`{"a":1}`)
    const to = parse(`{"a":null}`)
    assert.deepStrictEqual(apply(from, diff(from, to)), {})
  })
})
