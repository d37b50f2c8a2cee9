// Tests for the field selector parser and matcher. The expected error messages are the
// ones apimachinery's fields.ParseSelector and the API server's field label check give.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as FieldSelector from "../../../src/core/meta/FieldSelector.ts"

const supported = FieldSelector.defaultSupportedFields

const parsed = (input: string): FieldSelector.FieldSelector => {
  const result = FieldSelector.parse(input, supported)
  if (result._tag === "Err") assert.fail(`expected ${JSON.stringify(input)} to parse, got: ${result.message}`)
  return result.value
}

const running = { metadata: { name: "x", namespace: "default" }, status: { phase: "Running" } }
const pending = { metadata: { name: "y", namespace: "default" }, status: { phase: "Pending" } }
const noStatus = { metadata: { name: "a,b", namespace: "kube-system" } }
const oddStatus = { metadata: { name: "x" }, status: { phase: 3 } }

describe("FieldSelector.matches", () => {
  type Case = readonly [string, Parameters<typeof FieldSelector.fieldsOf>[0], boolean]
  const table: ReadonlyArray<Case> = [
    ["", running, true],
    ["metadata.name=x", running, true],
    ["metadata.name=x", pending, false],
    ["metadata.name==x", running, true],
    ["metadata.name!=x", running, false],
    ["metadata.name!=x", pending, true],
    ["metadata.name=x,metadata.namespace=default", running, true],
    ["metadata.name=x,metadata.namespace=kube-system", running, false],
    ["metadata.namespace!=kube-system,status.phase=Pending", pending, true],
    ["metadata.name=a\\,b", noStatus, true],
    ["metadata.name=a\\,b", running, false],
    ["status.phase=Running", running, true],
    ["status.phase=Running", noStatus, false],
    ["status.phase!=Running", noStatus, true],
    ["status.phase=", noStatus, true],
    ["status.phase=", oddStatus, true],
    ["metadata.namespace=", oddStatus, true],
    [",metadata.name=x,", running, true]
  ]
  for (const [input, object, expected] of table) {
    it(`${JSON.stringify(input)} on ${JSON.stringify(object)} → ${expected}`, () => {
      assert.strictEqual(FieldSelector.matches(parsed(input), FieldSelector.fieldsOf(object)), expected)
    })
  }

  it("reads missing and inherited fields as empty", () => {
    const selector = parsed("metadata.name=")
    assert.isTrue(FieldSelector.matches(selector, {}))
    assert.isTrue(FieldSelector.matches(selector, { "metadata.name": undefined }))
    // An inherited Object.prototype.constructor must not count as a field value.
    const custom = FieldSelector.parse("constructor=", new Set(["constructor"]))
    assert.isTrue(custom._tag === "Ok" && FieldSelector.matches(custom.value, {}))
    assert.isTrue(custom._tag === "Ok" && !FieldSelector.matches(custom.value, { constructor: "x" }))
  })
})

describe("FieldSelector.parse", () => {
  it("returns requirements in apimachinery's sorted term order with values unescaped", () => {
    assert.deepStrictEqual(parsed("status.phase!=Running,metadata.name==a\\=b\\\\c"), {
      requirements: [
        { field: "metadata.name", operator: "Equals", value: "a=b\\c" },
        { field: "status.phase", operator: "NotEquals", value: "Running" }
      ]
    })
  })

  it("treats empty input, empty terms and empty `=` terms as everything", () => {
    assert.deepStrictEqual(parsed(""), FieldSelector.everything)
    assert.deepStrictEqual(parsed(",,"), FieldSelector.everything)
    assert.deepStrictEqual(parsed("="), FieldSelector.everything)
    assert.deepStrictEqual(parsed("!="), FieldSelector.everything)
  })

  it("accepts any field named in the supported set", () => {
    const result = FieldSelector.parse("spec.nodeName=n1", new Set(["spec.nodeName"]))
    assert.deepStrictEqual(result, {
      _tag: "Ok",
      value: { requirements: [{ field: "spec.nodeName", operator: "Equals", value: "n1" }] }
    })
  })

  const errors: ReadonlyArray<readonly [string, string]> = [
    ["spec.foo=1", "field label not supported: spec.foo"],
    ["status.phase=Running,spec.foo=1,spec.bar=2", "field label not supported: spec.bar"],
    ["metadata.name = x", "field label not supported: metadata.name "],
    ["=x", "field label not supported: "],
    ["metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"],
    ["metadata.name=a,b", "invalid selector: 'metadata.name=a,b'; can't understand 'b'"],
    ["spec.foo=1,oops", "invalid selector: 'spec.foo=1,oops'; can't understand 'oops'"],
    ["metadata.name=a=b", "invalid field selector: unescaped character in value: 61"],
    ["metadata.name=a\\!b", "invalid field selector: invalid escape sequence: \\!"],
    ["metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"]
  ]
  for (const [input, message] of errors) {
    it(`${JSON.stringify(input)} is rejected`, () => {
      assert.deepStrictEqual(FieldSelector.parse(input, supported), { _tag: "Err", message })
    })
  }
})

describe("FieldSelector helpers", () => {
  it("fieldsOf extracts name, namespace and a string phase", () => {
    assert.deepStrictEqual(FieldSelector.fieldsOf(running), {
      "metadata.name": "x",
      "metadata.namespace": "default",
      "status.phase": "Running"
    })
    assert.deepStrictEqual(FieldSelector.fieldsOf({}), {
      "metadata.name": undefined,
      "metadata.namespace": undefined,
      "status.phase": undefined
    })
    assert.strictEqual(FieldSelector.fieldsOf(oddStatus)["status.phase"], undefined)
    assert.strictEqual(FieldSelector.fieldsOf({ status: null })["status.phase"], undefined)
  })

  it("pinnedName reports the name an Equals term pins", () => {
    assert.strictEqual(FieldSelector.pinnedName(parsed("metadata.name=x")), "x")
    assert.strictEqual(FieldSelector.pinnedName(parsed("status.phase=Running,metadata.name==a\\,b")), "a,b")
    assert.strictEqual(FieldSelector.pinnedName(parsed("metadata.name!=x")), undefined)
    assert.strictEqual(FieldSelector.pinnedName(parsed("metadata.namespace=x")), undefined)
    assert.strictEqual(FieldSelector.pinnedName(FieldSelector.everything), undefined)
  })

  it("escapeValue and parse round-trip any value", () => {
    const specials = fc.string({ unit: fc.constantFrom("a", "\\", ",", "=", "!", " ", "é") })
    const value = fc.oneof(specials, fc.string({ unit: "grapheme-composite" }))
    fc.assert(
      fc.property(value, (value) => {
        const result = FieldSelector.parse(`metadata.name=${FieldSelector.escapeValue(value)}`, supported)
        const requirements: ReadonlyArray<FieldSelector.FieldRequirement> = [{
          field: "metadata.name",
          operator: "Equals",
          value
        }]
        assert.deepStrictEqual(result, { _tag: "Ok", value: { requirements } })
        assert.deepStrictEqual(FieldSelector.unescapeValue(FieldSelector.escapeValue(value)), { _tag: "Ok", value })
      }),
      { numRuns: 500 }
    )
  })
})
