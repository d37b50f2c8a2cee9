// Tests for the label selector parser and matcher. The expected error messages were
// produced by apimachinery's own labels.Parse, so these tables pin the exact texts that
// kubectl users will see.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as LabelSelector from "../../../src/core/meta/LabelSelector.ts"
import type { Operator, Requirement } from "../../../src/core/meta/LabelSelector.ts"
import type { ParseResult } from "../../../src/core/meta/ParseResult.ts"

const parsed = (input: string): LabelSelector.LabelSelector => {
  const result = LabelSelector.parse(input)
  if (result._tag === "Err") assert.fail(`expected ${JSON.stringify(input)} to parse, got: ${result.message}`)
  return result.value
}

const errorOf = (
  result: ParseResult<unknown>
): string | undefined => (result._tag === "Err" ? result.message : undefined)

describe("LabelSelector.matches", () => {
  const table: ReadonlyArray<readonly [string, Record<string, string> | undefined, boolean]> = [
    ["", {}, true],
    ["", undefined, true],
    ["   ", { a: "b" }, true],
    ["a=b", { a: "b" }, true],
    ["a=b", { a: "c" }, false],
    ["a=b", {}, false],
    ["a==b", { a: "b" }, true],
    ["a = b", { a: "b" }, true],
    ["\ta\t==\tb\t", { a: "b" }, true],
    ["a!=b", { a: "c" }, true],
    ["a!=b", { a: "b" }, false],
    ["a!=b", {}, true],
    ["a != b", undefined, true],
    ["a=", { a: "" }, true],
    ["a=", { a: "x" }, false],
    ["a=", {}, false],
    ["a==", { a: "" }, true],
    ["a!=", {}, true],
    ["a!=", { a: "" }, false],
    ["a", { a: "" }, true],
    ["a", { b: "x" }, false],
    ["!a", { b: "x" }, true],
    ["!a", { a: "x" }, false],
    ["! a", undefined, true],
    ["a in (x,y)", { a: "y" }, true],
    ["a in (x,y)", { a: "z" }, false],
    ["a in (x,y)", {}, false],
    ["a in ( x , y )", { a: "x" }, true],
    ["a in ()", { a: "" }, true],
    ["a in ()", {}, false],
    ["a in (x,)", { a: "" }, true],
    ["a notin (x,y)", { a: "z" }, true],
    ["a notin (x,y)", { a: "x" }, false],
    ["a notin (x,y)", {}, true],
    ["a notin (x,y)", undefined, true],
    ["a > 5", { a: "6" }, true],
    ["a>5", { a: "5" }, false],
    ["a>5", { a: "007" }, true],
    ["a>5", { a: "x" }, false],
    ["a>5", { a: "6.5" }, false],
    ["a>5", { a: "" }, false],
    ["a>5", {}, false],
    ["a>5", { a: "-7" }, false],
    ["a<5", { a: "-7" }, true],
    ["a<5", { a: "4" }, true],
    ["a<5", { a: "5" }, false],
    ["a<5", { a: "four" }, false],
    ["a<5", {}, false],
    ["a>9223372036854775806", { a: "9223372036854775807" }, true],
    ["a<1", { a: "9223372036854775808" }, false],
    ["app.kubernetes.io/name=x", { "app.kubernetes.io/name": "x" }, true],
    ["app.kubernetes.io/name=x", { name: "x" }, false],
    ["team in (a,b),!gone", { team: "a" }, true],
    ["team in (a,b),!gone", { team: "b", gone: "" }, false],
    ["team in (a,b),!gone", { team: "c" }, false],
    ["team in (a,b),!gone", {}, false],
    ["a=1,b=2", { a: "1", b: "2" }, true],
    ["a=1,b=2", { a: "1" }, false],
    ["a=1 , b!=2", { a: "1" }, true],
    ["in in (in),notin notin (notin)", { in: "in" }, true],
    ["constructor", {}, false],
    ["!constructor", {}, true],
    ["toString!=x", {}, true]
  ]
  for (const [input, labels, expected] of table) {
    it(`${JSON.stringify(input)} on ${JSON.stringify(labels)} → ${expected}`, () => {
      assert.strictEqual(LabelSelector.matches(parsed(input), labels), expected)
    })
  }
})

describe("LabelSelector.parse structure", () => {
  it("folds == into Equals and defaults a missing value to the empty string", () => {
    assert.deepStrictEqual(parsed("a==b").requirements, [{ key: "a", operator: "Equals", values: ["b"] }])
    assert.deepStrictEqual(parsed("a==").requirements, [{ key: "a", operator: "Equals", values: [""] }])
    assert.deepStrictEqual(parsed("a!=,b").requirements, [
      { key: "a", operator: "NotEquals", values: [""] },
      { key: "b", operator: "Exists", values: [] }
    ])
  })

  it("sorts requirements by key and set values, dropping duplicate values", () => {
    assert.deepStrictEqual(parsed("z, !y, x notin (c,a,c), w in (b,,a)").requirements, [
      { key: "w", operator: "In", values: ["", "a", "b"] },
      { key: "x", operator: "NotIn", values: ["a", "c"] },
      { key: "y", operator: "DoesNotExist", values: [] },
      { key: "z", operator: "Exists", values: [] }
    ])
  })

  it("reads empty set members the way apimachinery does", () => {
    const valuesOf = (input: string) => parsed(input).requirements[0]?.values
    assert.deepStrictEqual(valuesOf("a in ()"), [""])
    assert.deepStrictEqual(valuesOf("a in (,)"), [""])
    assert.deepStrictEqual(valuesOf("a in (b,)"), ["", "b"])
    assert.deepStrictEqual(valuesOf("a in (,b)"), ["", "b"])
    assert.deepStrictEqual(valuesOf("a in (b,,c)"), ["", "b", "c"])
    assert.deepStrictEqual(valuesOf("a in (b,,)"), ["", "b"])
  })

  it("treats in and notin as identifiers where a key or value is expected", () => {
    assert.deepStrictEqual(parsed("in in (notin)").requirements, [{ key: "in", operator: "In", values: ["notin"] }])
    assert.deepStrictEqual(parsed("notin=in").requirements, [{ key: "notin", operator: "Equals", values: ["in"] }])
  })

  it("returns the shared everything selector's shape for empty input", () => {
    assert.deepStrictEqual(parsed(""), LabelSelector.everything)
    assert.deepStrictEqual(parsed(" \t\r\n"), LabelSelector.everything)
  })
})

const keyRegexHint =
  "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
const nameMessage =
  `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character ${keyRegexHint}`
const valueMessage =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
const integerMessage = "for 'Gt', 'Lt' operators, the value must be an integer"

describe("LabelSelector.parse errors", () => {
  const table: ReadonlyArray<readonly [string, string]> = [
    ["a in", "unable to parse requirement: found '' expected: '('"],
    ["a in b", "unable to parse requirement: found 'b' expected: '('"],
    ["a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"],
    ["a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"],
    ["a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"],
    ["a notin (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"],
    ["a=b=c", "found '=', expected: ',' or 'end of string'"],
    ["a=b c", "found 'c', expected: ',' or 'end of string'"],
    ["=b", "found '=', expected: !, identifier, or 'end of string'"],
    [",", "found ',', expected: !, identifier, or 'end of string'"],
    ["a,", "found '', expected: identifier after ','"],
    ["a,,b", "found ',', expected: identifier after ','"],
    ["!a=b", "found '=', expected: ',' or 'end of string'"],
    ["!a in (b)", "found 'in', expected: ',' or 'end of string'"],
    ["!", "unable to parse requirement: found '', expected: identifier"],
    ["a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"],
    ["a=(", "unable to parse requirement: found '(', expected: identifier"],
    [
      `${"a".repeat(64)}=b`,
      `unable to parse requirement: <nil>: Invalid value: "${"a".repeat(64)}": name part must be no more than 63 bytes`
    ],
    ["a/", `unable to parse requirement: <nil>: Invalid value: "a/": name part must be non-empty; ${nameMessage}`],
    ["/a", "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty"],
    [
      "x/y/z=1",
      `unable to parse requirement: <nil>: Invalid value: "x/y/z": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character ${keyRegexHint} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`
    ],
    [
      "Ab.com/x=1",
      "unable to parse requirement: <nil>: Invalid value: \"Ab.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ],
    ["a=-b", `unable to parse requirement: values[0][a]: Invalid value: "-b": ${valueMessage}`],
    [
      `a=${"v".repeat(64)}`,
      `unable to parse requirement: values[0][a]: Invalid value: "${"v".repeat(64)}": must be no more than 63 bytes`
    ],
    ["a=b\"c", `unable to parse requirement: values[0][a]: Invalid value: "b\\"c": ${valueMessage}`],
    ["a>b", `unable to parse requirement: values[0]: Invalid value: "b": ${integerMessage}`],
    ["a>", `unable to parse requirement: values[0]: Invalid value: "": ${integerMessage}`],
    [
      "a>99999999999999999999",
      `unable to parse requirement: values[0]: Invalid value: "99999999999999999999": ${integerMessage}`
    ],
    ["a>-1", `unable to parse requirement: values[0][a]: Invalid value: "-1": ${valueMessage}`],
    [
      "a>x-",
      `unable to parse requirement: [values[0]: Invalid value: "x-": ${integerMessage}, values[0][a]: Invalid value: "x-": ${valueMessage}]`
    ]
  ]
  for (const [input, message] of table) {
    it(`${JSON.stringify(input)} is rejected`, () => {
      assert.strictEqual(errorOf(LabelSelector.parse(input)), message)
    })
  }
})

describe("LabelSelector.format", () => {
  const table: ReadonlyArray<readonly [string, string]> = [
    ["", ""],
    ["a==b", "a=b"],
    [" b != c , a ", "a,b!=c"],
    ["!a", "!a"],
    ["x notin (c, a), w in ()", "w in (),x notin (a,c)"],
    ["a in (b,,c)", "a in (,b,c)"],
    ["a>5,a<10", "a>5,a<10"],
    ["a=", "a="]
  ]
  for (const [input, expected] of table) {
    it(`${JSON.stringify(input)} prints as ${JSON.stringify(expected)}`, () => {
      assert.strictEqual(LabelSelector.format(parsed(input)), expected)
    })
  }
})

describe("LabelSelector.equalityTerms", () => {
  it("lists only Equals requirements, == included", () => {
    assert.deepStrictEqual(LabelSelector.equalityTerms(parsed("b==2, a=1, c!=3, d in (4), e, f=")), [
      ["a", "1"],
      ["b", "2"],
      ["f", ""]
    ])
    assert.deepStrictEqual(LabelSelector.equalityTerms(LabelSelector.everything), [])
  })
})

describe("LabelSelector key and value validation", () => {
  it("accepts Kubernetes label keys and values", () => {
    for (const key of ["a", "A.b-c_d", "app.kubernetes.io/name", `${"p".repeat(253)}/${"n".repeat(63)}`]) {
      assert.deepStrictEqual(LabelSelector.validateLabelKey(key), [], key)
    }
    for (const value of ["", "a", "0", "My_value.1", "v".repeat(63)]) {
      assert.deepStrictEqual(LabelSelector.validateLabelValue(value), [], value)
    }
  })

  it("rejects an over-long prefix and a name starting with a dash", () => {
    assert.deepStrictEqual(LabelSelector.validateLabelKey(`${"p".repeat(254)}/n`), [
      "prefix part must be no more than 253 bytes"
    ])
    assert.deepStrictEqual(LabelSelector.validateLabelKey("-a"), [nameMessage])
  })
})

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

const keyPool = ["a", "b", "in", "notin", "app.kubernetes.io/name", "constructor"] as const
const valuePool = ["", "x", "y", "in", "0", "5", "007", "10"] as const

const arbitraryKey = fc.oneof(
  fc.constantFrom(...keyPool),
  fc.stringMatching(
    /^([a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\.[a-z0-9]{1,4}){0,2}\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/
  )
)
const arbitraryValue = fc.oneof(
  fc.constantFrom(...valuePool),
  fc.stringMatching(/^([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?$/)
)
const arbitraryInteger = fc.oneof(fc.constantFrom("0", "5", "007", "10"), fc.nat().map(String))

const byKey = (
  left: Requirement,
  right: Requirement
): number => (left.key < right.key ? -1 : left.key > right.key ? 1 : 0)
const sortedValues = (values: ReadonlyArray<string>): ReadonlyArray<string> =>
  values.toSorted((l, r) => (l < r ? -1 : l > r ? 1 : 0))

const arbitraryRequirement = (key: fc.Arbitrary<string>, value: fc.Arbitrary<string>): fc.Arbitrary<Requirement> =>
  fc.oneof(
    fc.record({ key, operator: fc.constantFrom<Operator>("Equals", "NotEquals"), values: value.map((v) => [v]) }),
    fc.record({
      key,
      operator: fc.constantFrom<Operator>("In", "NotIn"),
      values: fc.uniqueArray(value, { minLength: 1, maxLength: 4 }).map(sortedValues)
    }),
    fc.record({ key, operator: fc.constantFrom<Operator>("Exists", "DoesNotExist"), values: fc.constant([]) }),
    fc.record({
      key,
      operator: fc.constantFrom<Operator>("GreaterThan", "LessThan"),
      values: arbitraryInteger.map((v) => [v])
    })
  )

const arbitrarySelector = (
  key: fc.Arbitrary<string>,
  value: fc.Arbitrary<string>
): fc.Arbitrary<LabelSelector.LabelSelector> =>
  fc.array(arbitraryRequirement(key, value), { maxLength: 5 }).map((requirements) => ({
    requirements: requirements.toSorted(byKey)
  }))

// A deliberately naive restatement of each operator's meaning, written apart from the module.
const modelMatches = (requirement: Requirement, labels: Readonly<Record<string, string>>): boolean => {
  const present = Object.keys(labels).includes(requirement.key)
  const label = present ? labels[requirement.key] : undefined
  const asNumber = (
    text: string | undefined
  ) => (text !== undefined && /^[+-]?[0-9]+$/.test(text) ? Number(text) : undefined)
  const actual = asNumber(label)
  const bound = asNumber(requirement.values[0])
  switch (requirement.operator) {
    case "Equals":
      return present && label === requirement.values[0]
    case "NotEquals":
      return !present || label !== requirement.values[0]
    case "In":
      return present && requirement.values.some((value) => value === label)
    case "NotIn":
      return !present || requirement.values.every((value) => value !== label)
    case "Exists":
      return present
    case "DoesNotExist":
      return !present
    case "GreaterThan":
      return actual !== undefined && bound !== undefined && actual > bound
    case "LessThan":
      return actual !== undefined && bound !== undefined && actual < bound
  }
}

describe("LabelSelector properties", () => {
  it("parse(format(s)) gives back s", () => {
    fc.assert(
      fc.property(arbitrarySelector(arbitraryKey, arbitraryValue), (selector) => {
        assert.deepStrictEqual(LabelSelector.parse(LabelSelector.format(selector)), { _tag: "Ok", value: selector })
      }),
      { numRuns: 500 }
    )
  })

  it("matches agrees with a direct model of every operator", () => {
    const poolKey = fc.constantFrom(...keyPool)
    const poolValue = fc.constantFrom(...valuePool)
    const labels = fc.dictionary(poolKey, fc.oneof(poolValue, fc.constantFrom("-3", "1.5", "abc")), { maxKeys: 4 })
    fc.assert(
      fc.property(arbitrarySelector(poolKey, poolValue), labels, (selector, labelMap) => {
        const expected = selector.requirements.every((requirement) => modelMatches(requirement, labelMap))
        assert.strictEqual(LabelSelector.matches(selector, labelMap), expected)
      }),
      { numRuns: 2000 }
    )
  })

  it("never throws on arbitrary input, and anything it accepts prints canonically", () => {
    const pieces = fc.constantFrom(
      "a",
      "in",
      "notin",
      " ",
      "=",
      "==",
      "!=",
      "!",
      "(",
      ")",
      ",",
      ">",
      "<",
      "5",
      "-",
      "/",
      "é"
    )
    fc.assert(
      fc.property(fc.array(pieces, { maxLength: 10 }).map((parts) => parts.join("")), (input) => {
        const result = LabelSelector.parse(input)
        if (result._tag === "Ok") {
          const printed = LabelSelector.format(result.value)
          assert.deepStrictEqual(LabelSelector.parse(printed), result)
        }
      }),
      { numRuns: 2000 }
    )
  })
})
