// Tests for JSON Patch and JSON Pointer: every example of RFC 6902 Appendix A, the RFC 6901 §5 pointer
// examples, error reporting with operation indices, atomicity, decoding of untrusted documents, and
// round-trip properties over generated documents.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { canonical, isArray, isObject } from "../../../src/core/Json.ts"
import type { Json } from "../../../src/core/Json.ts"
import { apply, decode, parsePointer } from "../../../src/core/meta/JsonPatch.ts"
import type { Operation, PatchError, PatchResult } from "../../../src/core/meta/JsonPatch.ts"
import { jsonValue } from "../../support/Arbitraries.ts"

const parse = (text: string): Json => JSON.parse(text) as Json

// Decode a patch given as JSON text (it must be valid) and apply it to a document given as JSON text.
const run = (documentText: string, patchText: string): PatchResult => {
  const decoded = decode(JSON.parse(patchText))
  if (decoded._tag === "Err") throw new Error(`patch did not decode: ${decoded.error.message}`)
  return apply(parse(documentText), decoded.operations)
}

const expectOk = (result: PatchResult, expected: Json): void => {
  if (result._tag === "Err") assert.fail(`expected Ok, got ${JSON.stringify(result.error)}`)
  else assert.deepStrictEqual(result.value, expected)
}

const expectErr = (result: PatchResult, index: number, reason: PatchError["reason"]): PatchError => {
  if (result._tag === "Ok") return assert.fail(`expected Err, got ${JSON.stringify(result.value)}`)
  assert.strictEqual(result.error.index, index)
  assert.strictEqual(result.error.reason, reason)
  return result.error
}

// Freeze a value and everything inside it, so any mutation throws (test files run in strict mode).
const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null) {
    Object.values(value).forEach(deepFreeze)
    Object.freeze(value)
  }
  return value
}

// RFC 6902 Appendix A: name, document, patch, and the resulting document or the expected error reason.
const appendixA: ReadonlyArray<readonly [string, string, string, string | { readonly error: PatchError["reason"] }]> = [
  [
    "A.1 Adding an Object Member",
    `{ "foo": "bar"}`,
    `[ { "op": "add", "path": "/baz", "value": "qux" } ]`,
    `{ "baz": "qux", "foo": "bar" }`
  ],
  [
    "A.2 Adding an Array Element",
    `{ "foo": [ "bar", "baz" ] }`,
    `[ { "op": "add", "path": "/foo/1", "value": "qux" } ]`,
    `{ "foo": [ "bar", "qux", "baz" ] }`
  ],
  [
    "A.3 Removing an Object Member",
    `{ "baz": "qux", "foo": "bar" }`,
    `[ { "op": "remove", "path": "/baz" } ]`,
    `{ "foo": "bar" }`
  ],
  [
    "A.4 Removing an Array Element",
    `{ "foo": [ "bar", "qux", "baz" ] }`,
    `[ { "op": "remove", "path": "/foo/1" } ]`,
    `{ "foo": [ "bar", "baz" ] }`
  ],
  [
    "A.5 Replacing a Value",
    `{ "baz": "qux", "foo": "bar" }`,
    `[ { "op": "replace", "path": "/baz", "value": "boo" } ]`,
    `{ "baz": "boo", "foo": "bar" }`
  ],
  [
    "A.6 Moving a Value",
    `{ "foo": { "bar": "baz", "waldo": "fred" }, "qux": { "corge": "grault" } }`,
    `[ { "op": "move", "from": "/foo/waldo", "path": "/qux/thud" } ]`,
    `{ "foo": { "bar": "baz" }, "qux": { "corge": "grault", "thud": "fred" } }`
  ],
  [
    "A.7 Moving an Array Element",
    `{ "foo": [ "all", "grass", "cows", "eat" ] }`,
    `[ { "op": "move", "from": "/foo/1", "path": "/foo/3" } ]`,
    `{ "foo": [ "all", "cows", "eat", "grass" ] }`
  ],
  [
    "A.8 Testing a Value: Success",
    `{ "baz": "qux", "foo": [ "a", 2, "c" ] }`,
    `[ { "op": "test", "path": "/baz", "value": "qux" }, { "op": "test", "path": "/foo/1", "value": 2 } ]`,
    `{ "baz": "qux", "foo": [ "a", 2, "c" ] }`
  ],
  ["A.9 Testing a Value: Error", `{ "baz": "qux" }`, `[ { "op": "test", "path": "/baz", "value": "bar" } ]`, {
    error: "TestFailed"
  }],
  [
    "A.10 Adding a Nested Member Object",
    `{ "foo": "bar" }`,
    `[ { "op": "add", "path": "/child", "value": { "grandchild": { } } } ]`,
    `{ "foo": "bar", "child": { "grandchild": { } } }`
  ],
  [
    "A.11 Ignoring Unrecognized Elements",
    `{ "foo": "bar" }`,
    `[ { "op": "add", "path": "/baz", "value": "qux", "xyz": 123 } ]`,
    `{ "foo": "bar", "baz": "qux" }`
  ],
  [
    "A.12 Adding to a Nonexistent Target",
    `{ "foo": "bar" }`,
    `[ { "op": "add", "path": "/baz/bat", "value": "qux" } ]`,
    { error: "NotFound" }
  ],
  // A.13 gives no target and expects an error for the duplicate "op". JSON.parse keeps the last "op", so
  // the operation decodes as a remove of "/baz", which still fails against the running example document.
  [
    "A.13 Invalid JSON Patch Document",
    `{ "foo": "bar" }`,
    `[ { "op": "add", "path": "/baz", "value": "qux", "op": "remove" } ]`,
    { error: "NotFound" }
  ],
  [
    "A.14 ~ Escape Ordering",
    `{ "/": 9, "~1": 10 }`,
    `[ {"op": "test", "path": "/~01", "value": 10} ]`,
    `{ "/": 9, "~1": 10 }`
  ],
  // A.15: comparing strings and numbers, the string "10" is not the number 10.
  ["A.15 Comparing Strings and Numbers", `{ "/": 9, "~1": 10 }`, `[ {"op": "test", "path": "/~01", "value": "10"} ]`, {
    error: "TestFailed"
  }],
  [
    "A.16 Adding an Array Value",
    `{ "foo": ["bar"] }`,
    `[ { "op": "add", "path": "/foo/-", "value": ["abc", "def"] } ]`,
    `{ "foo": ["bar", ["abc", "def"]] }`
  ]
]

// RFC 6901 §5: the example document and each pointer with the value it references.
const pointerDocument = `{
  "foo": ["bar", "baz"],
  "": 0,
  "a/b": 1,
  "c%d": 2,
  "e^f": 3,
  "g|h": 4,
  "i\\\\j": 5,
  "k\\"l": 6,
  " ": 7,
  "m~n": 8
}`
const pointerExamples: ReadonlyArray<readonly [string, Json]> = [
  ["", parse(pointerDocument)],
  ["/foo", ["bar", "baz"]],
  ["/foo/0", "bar"],
  ["/", 0],
  ["/a~1b", 1],
  ["/c%d", 2],
  ["/e^f", 3],
  ["/g|h", 4],
  ["/i\\j", 5],
  ["/k\"l", 6],
  ["/ ", 7],
  ["/m~0n", 8]
]

describe("JsonPatch.apply: RFC 6902 Appendix A", () => {
  for (const [name, document, patch, expected] of appendixA) {
    it(name, () => {
      const result = run(document, patch)
      if (typeof expected === "string") expectOk(result, parse(expected))
      else expectErr(result, 0, expected.error)
    })
  }

  it("A.11 drops the unrecognized member when decoding", () => {
    const decoded = decode(JSON.parse(`[ { "op": "add", "path": "/baz", "value": "qux", "xyz": 123 } ]`))
    assert.deepStrictEqual(decoded, { _tag: "Ok", operations: [{ op: "add", path: "/baz", value: "qux" }] })
  })
})

describe("JsonPatch.parsePointer: RFC 6901", () => {
  it("references every value of the §5 example document", () => {
    const document = parse(pointerDocument)
    for (const [pointer, value] of pointerExamples) {
      expectOk(apply(document, [{ op: "test", path: pointer, value }]), document)
      expectErr(apply(document, [{ op: "test", path: pointer, value: "something else" }]), 0, "TestFailed")
    }
  })

  it("unescapes ~1 before ~0 (§4)", () => {
    assert.deepStrictEqual(parsePointer(""), [])
    assert.deepStrictEqual(parsePointer("/"), [""])
    assert.deepStrictEqual(parsePointer("/a~1b/m~0n"), ["a/b", "m~n"])
    assert.deepStrictEqual(parsePointer("/~01"), ["~1"])
    assert.deepStrictEqual(parsePointer("/~10"), ["/0"])
    assert.deepStrictEqual(parsePointer("/foo//0"), ["foo", "", "0"])
  })

  it("rejects pointers that do not start with / and malformed escapes (§3)", () => {
    for (const pointer of ["foo", "#/foo", "/~", "/a~2b", "/~a"]) {
      assert.strictEqual(parsePointer(pointer), undefined, pointer)
    }
  })
})

describe("JsonPatch.apply: errors", () => {
  const document = `{ "foo": ["bar", "baz"], "a": { "b": 1 }, "ab": 2 }`

  it("reports the index of the failing operation and the pointer at fault", () => {
    const error = expectErr(
      run(document, `[{"op":"add","path":"/x","value":1},{"op":"remove","path":"/missing"}]`),
      1,
      "NotFound"
    )
    assert.strictEqual(error.path, "/missing")
    const fromError = expectErr(run(document, `[{"op":"copy","from":"/nope","path":"/x"}]`), 0, "NotFound")
    assert.strictEqual(fromError.path, "/nope")
  })

  it("requires array indices without leading zeros and within bounds (RFC 6901 §4)", () => {
    expectErr(run(document, `[{"op":"replace","path":"/foo/01","value":1}]`), 0, "Invalid")
    expectErr(run(document, `[{"op":"remove","path":"/foo/1e0"}]`), 0, "Invalid")
    expectErr(run(document, `[{"op":"add","path":"/foo/3","value":1}]`), 0, "NotFound")
    expectErr(run(document, `[{"op":"remove","path":"/foo/2"}]`), 0, "NotFound")
    expectErr(run(document, `[{"op":"replace","path":"/foo/-","value":1}]`), 0, "NotFound")
    expectOk(
      run(document, `[{"op":"add","path":"/foo/2","value":1}]`),
      parse(`{ "foo": ["bar", "baz", 1], "a": { "b": 1 }, "ab": 2 }`)
    )
  })

  it("forbids moving a location into its own child, comparing tokens rather than text", () => {
    const error = expectErr(run(document, `[{"op":"move","from":"/a","path":"/a/c"}]`), 0, "Invalid")
    assert.strictEqual(error.path, "/a")
    expectOk(
      run(document, `[{"op":"move","from":"/a","path":"/abc"}]`),
      parse(`{ "foo": ["bar", "baz"], "ab": 2, "abc": { "b": 1 } }`)
    )
    expectOk(run(document, `[{"op":"move","from":"/a","path":"/a"}]`), parse(document))
  })

  it("reports missing locations, scalar parents and the root as errors", () => {
    expectErr(run(document, `[{"op":"test","path":"/nope","value":1}]`), 0, "NotFound")
    expectErr(run(document, `[{"op":"add","path":"/foo/0/x","value":1}]`), 0, "NotFound")
    expectErr(run(document, `[{"op":"remove","path":"/constructor"}]`), 0, "NotFound")
    expectErr(run(document, `[{"op":"remove","path":""}]`), 0, "Invalid")
    expectErr(apply(parse(document), [{ op: "add", path: "foo", value: 1 }]), 0, "Invalid")
  })

  it("tests by deep equality: numbers by value, object members in any order (RFC 6902 §4.6)", () => {
    expectOk(
      run(
        `{"n":1.0,"o":{"a":1,"b":[1,{"c":2,"d":3}]}}`,
        `[{"op":"test","path":"/n","value":1},{"op":"test","path":"/o","value":{"b":[1,{"d":3,"c":2}],"a":1}}]`
      ),
      {
        n: 1,
        o: { a: 1, b: [1, { c: 2, d: 3 }] }
      }
    )
    expectErr(run(`{"a":[1,2]}`, `[{"op":"test","path":"/a","value":[2,1]}]`), 0, "TestFailed")
  })

  it("replaces and adds at the root", () => {
    expectOk(run(document, `[{"op":"replace","path":"","value":[1]}]`), [1])
    expectOk(run(document, `[{"op":"add","path":"","value":{"z":null}},{"op":"copy","from":"/z","path":"/y"}]`), {
      z: null,
      y: null
    })
  })

  it("is atomic: a failing third operation leaves the target unchanged", () => {
    const target = deepFreeze(parse(document))
    const before = canonical(target)
    const operations: ReadonlyArray<Operation> = [
      { op: "add", path: "/x", value: 1 },
      { op: "replace", path: "/foo/0", value: "z" },
      { op: "remove", path: "/missing" }
    ]
    expectErr(apply(target, operations), 2, "NotFound")
    assert.strictEqual(canonical(target), before)
  })
})

describe("JsonPatch.decode", () => {
  const decodeError = (document: unknown): PatchError => {
    const decoded = decode(document)
    if (decoded._tag === "Ok") return assert.fail(`expected Err, got ${JSON.stringify(decoded.operations)}`)
    assert.strictEqual(decoded.error.reason, "Invalid")
    return decoded.error
  }

  it("rejects a document that is not an array", () => {
    assert.strictEqual(decodeError({ op: "add", path: "/a", value: 1 }).index, -1)
    assert.strictEqual(decodeError(null).index, -1)
  })

  it("rejects malformed operations with their index", () => {
    assert.strictEqual(decodeError([{ path: "/a" }]).index, 0)
    const unknown = decodeError([{ op: "add", path: "/a", value: 1 }, { op: "frobnicate", path: "/a" }])
    assert.strictEqual(unknown.index, 1)
    assert.include(unknown.message, "frobnicate")
    assert.strictEqual(decodeError([{ op: "remove", path: 5 }]).index, 0)
    assert.strictEqual(decodeError([{ op: 7, path: "/a" }]).index, 0)
    assert.strictEqual(decodeError([{ op: "remove", path: "a" }]).index, 0)
    assert.strictEqual(decodeError([{ op: "move", path: "/a" }]).index, 0)
    assert.strictEqual(decodeError([{ op: "copy", from: 1, path: "/a" }]).index, 0)
    assert.strictEqual(decodeError([{ op: "add", path: "/a" }]).index, 0)
    assert.strictEqual(decodeError([{ op: "add", path: "/a", value: Number.NaN }]).index, 0)
    assert.strictEqual(decodeError([{ op: "test", path: "/a", value: [undefined] }]).index, 0)
    assert.strictEqual(decodeError(["remove"]).index, 0)
  })

  it("accepts null values and keeps only the members each op needs", () => {
    const decoded = decode([{ op: "replace", path: "/a", value: null, from: "/b" }, {
      op: "move",
      from: "/b",
      path: "/c",
      value: 1
    }])
    assert.deepStrictEqual(decoded, {
      _tag: "Ok",
      operations: [
        { op: "replace", path: "/a", value: null },
        { op: "move", from: "/b", path: "/c" }
      ]
    })
  })
})

// Member names that are easy to mishandle: prototype properties, the empty name, pointer syntax.
const key = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.constantFrom("__proto__", "constructor", "", "a/b", "m~n", "~1", "-", "0")
)
const anyJson = jsonValue(key)
const objectDocument = fc.dictionary(key, anyJson, { maxKeys: 5, noNullPrototype: true })

// RFC 6901 §3 escaping, the inverse of parsePointer's unescaping.
const toPointer = (tokens: ReadonlyArray<string>): string =>
  tokens.map((token) => `/${token.replaceAll("~", "~0").replaceAll("/", "~1")}`).join("")

// Every container (object or array) inside a document, with the tokens that reach it.
const containers = (
  document: Json,
  tokens: ReadonlyArray<string> = []
): ReadonlyArray<readonly [ReadonlyArray<string>, Json]> => {
  const children = isArray(document)
    ? document.map((element, index): readonly [string, Json] => [String(index), element])
    : isObject(document)
    ? Object.entries(document)
    : []
  const here = isArray(document) || isObject(document) ? [[tokens, document] as const] : []
  return [...here, ...children.flatMap(([name, value]) => containers(value, [...tokens, name]))]
}

// A fresh location inside a container: a member name not yet present, or an index up to the length.
const freshToken = (container: Json, name: string, choice: number): string => {
  if (isArray(container)) return String(choice % (container.length + 1))
  let fresh = name
  while (isObject(container) && Object.hasOwn(container, fresh)) fresh = `${fresh}_`
  return fresh
}

describe("JsonPatch properties", () => {
  it("a document always tests equal to itself at the root", () => {
    fc.assert(
      fc.property(anyJson, (document) => {
        expectOk(apply(document, [{ op: "test", path: "", value: document }]), document)
      })
    )
  })

  it("add then remove at a fresh location gives back the original", () => {
    fc.assert(
      fc.property(objectDocument, fc.nat(), key, anyJson, (document, choice, name, value) => {
        const all = containers(document)
        const [tokens, container] = all[choice % all.length] as readonly [ReadonlyArray<string>, Json]
        const path = toPointer([...tokens, freshToken(container, name, choice)])
        const added = apply(deepFreeze(document), [{ op: "add", path, value }, { op: "test", path, value }])
        if (added._tag === "Err") return assert.fail(JSON.stringify(added.error))
        expectOk(apply(added.value, [{ op: "remove", path }]), document)
      })
    )
  })
})
