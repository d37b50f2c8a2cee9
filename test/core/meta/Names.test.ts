// Unit tests for the apimachinery name grammars of src/core/meta/Names.ts: valid and invalid values for each check, the
// 63- and 253-byte bounds at the exact edge, lengths counted in UTF-8 bytes, and apimachinery's exact message texts
// (k8s.io/apimachinery/pkg/api/validate/content: MaxLenError in bytes, RegexError with its double space).

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import {
  checkDns1123Label,
  checkDns1123Subdomain,
  checkLabelValue,
  checkQualifiedName,
  dns1123LabelMaxLength,
  dns1123SubdomainMaxLength,
  labelValueMaxLength,
  qualifiedNameMaxLength,
  utf8Length
} from "../../../src/core/meta/Names.ts"

// Verbatim apimachinery texts.
const labelRegexMessage =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
const subdomainRegexMessage =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
const qualifiedNameRegexMessage =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
const qualifiedNameSlashesMessage =
  "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
const labelValueRegexMessage =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

const tooLong = (limit: number): string => `must be no more than ${limit} bytes`

// 63 bytes of a valid label, and so on: the exact edges.
const label63 = `a${"b".repeat(61)}c`
const label64 = `a${"b".repeat(62)}c`
const subdomain253 = [label63, label63, label63, "a".repeat(61)].join(".")
const subdomain254 = [label63, label63, label63, "a".repeat(62)].join(".")

// 2-byte and 3-byte characters: é is U+00E9, € is U+20AC.
const twoByte = "é"
const threeByte = "€"

interface Row {
  readonly value: string
  /** The problems, verbatim, or just how many there are where the text is pinned elsewhere. */
  readonly problems: ReadonlyArray<string> | number
}

const runTable = (check: (value: string) => ReadonlyArray<string>, table: Record<string, Row>) => {
  for (const [label, row] of Object.entries(table)) {
    it(label, () => {
      const problems = check(row.value)
      if (typeof row.problems === "number") assert.strictEqual(problems.length, row.problems, JSON.stringify(problems))
      else assert.deepStrictEqual(problems, row.problems)
    })
  }
}

describe("the fixtures", () => {
  it("sit at the exact bounds", () => {
    assert.deepStrictEqual([
      dns1123LabelMaxLength,
      dns1123SubdomainMaxLength,
      qualifiedNameMaxLength,
      labelValueMaxLength
    ], [63, 253, 63, 63])
    assert.deepStrictEqual([label63.length, label64.length, subdomain253.length, subdomain254.length], [
      63,
      64,
      253,
      254
    ])
    assert.deepStrictEqual([utf8Length(twoByte), utf8Length(threeByte), utf8Length("a"), utf8Length("")], [2, 3, 1, 0])
  })

  it("utf8Length agrees with Buffer.byteLength", () => {
    // Any code units, lone surrogates included (encoded as U+FFFD, as Buffer and TextEncoder do).
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" })), (text) => {
        assert.strictEqual(utf8Length(text), Buffer.byteLength(text, "utf8"))
      }),
      { numRuns: 1_000 }
    )
  })
})

describe("Names.checkDns1123Label", () => {
  runTable(checkDns1123Label, {
    "single character": { value: "a", problems: [] },
    "digits first": { value: "123-abc", problems: [] },
    "dashes inside": { value: "my--name", problems: [] },
    "63 bytes": { value: label63, problems: [] },
    "64 bytes": { value: label64, problems: [tooLong(63)] },
    "empty": { value: "", problems: [labelRegexMessage] },
    "upper case": { value: "My-name", problems: [labelRegexMessage] },
    "leading dash": { value: "-a", problems: 1 },
    "trailing dash": { value: "a-", problems: 1 },
    "dot": { value: "a.b", problems: 1 },
    "underscore": { value: "a_b", problems: 1 },
    "space": { value: "a b", problems: 1 },
    "non-ASCII letter": { value: `a${twoByte}`, problems: 1 },
    "too long and invalid": { value: `${label63}-`, problems: [tooLong(63), labelRegexMessage] }
  })

  it("counts UTF-8 bytes, not characters", () => {
    // 31 two-byte characters and one ASCII letter: 32 characters, 63 bytes. One more two-byte character: 65 bytes.
    const at = `${twoByte.repeat(31)}a`
    const over = `${twoByte.repeat(32)}a`
    assert.strictEqual(utf8Length(at), 63)
    assert.deepStrictEqual(checkDns1123Label(at), [labelRegexMessage])
    assert.deepStrictEqual(checkDns1123Label(over), [tooLong(63), labelRegexMessage])
    // 22 characters, 66 bytes.
    assert.include(checkDns1123Label(threeByte.repeat(22)), tooLong(63))
  })
})

describe("Names.checkDns1123Subdomain", () => {
  runTable(checkDns1123Subdomain, {
    "single label": { value: "train", problems: [] },
    "dotted": { value: "example.com", problems: [] },
    "dashes and digits": { value: "a-1.b-2.c3", problems: [] },
    "a label of 63 bytes": { value: `${label63}.x`, problems: [] },
    "253 bytes": { value: subdomain253, problems: [] },
    "254 bytes": { value: subdomain254, problems: [tooLong(253)] },
    "empty": { value: "", problems: [subdomainRegexMessage] },
    "upper case": { value: "Example.com", problems: [subdomainRegexMessage] },
    "leading dot": { value: ".a", problems: 1 },
    "trailing dot": { value: "a.", problems: 1 },
    "empty label": { value: "a..b", problems: 1 },
    "label ending in a dash": { value: "a-.b", problems: 1 },
    "label starting with a dash": { value: "a.-b", problems: 1 },
    "slash": { value: "a/b", problems: 1 },
    "underscore": { value: "a_b", problems: 1 },
    "non-ASCII letter": { value: `${threeByte}.com`, problems: 1 }
  })

  it("counts UTF-8 bytes, not characters", () => {
    // 126 two-byte characters and one ASCII letter: 127 characters, 253 bytes. One more: 255 bytes.
    assert.deepStrictEqual(checkDns1123Subdomain(`${twoByte.repeat(126)}a`), [subdomainRegexMessage])
    assert.deepStrictEqual(checkDns1123Subdomain(`${twoByte.repeat(127)}a`), [tooLong(253), subdomainRegexMessage])
  })
})

describe("Names.checkQualifiedName", () => {
  runTable(checkQualifiedName, {
    "plain": { value: "app", problems: [] },
    "mixed case, dots, dashes and underscores": { value: "My_App.name-2", problems: [] },
    "single character": { value: "a", problems: [] },
    "prefixed": { value: "app.kubernetes.io/name", problems: [] },
    "prefix with upper-case name": { value: "example.com/MyName", problems: [] },
    "name of 63 bytes": { value: `example.com/${label63}`, problems: [] },
    "name of 64 bytes": { value: `example.com/${label64}`, problems: [`name part ${tooLong(63)}`] },
    "unprefixed name of 64 bytes": { value: label64, problems: [`name part ${tooLong(63)}`] },
    "prefix of 253 bytes": { value: `${subdomain253}/a`, problems: [] },
    "prefix of 254 bytes": { value: `${subdomain254}/a`, problems: [`prefix part ${tooLong(253)}`] },
    "empty": { value: "", problems: ["name part must be non-empty", qualifiedNameRegexMessage] },
    "empty name after the prefix": {
      value: "example.com/",
      problems: ["name part must be non-empty", qualifiedNameRegexMessage]
    },
    "empty prefix": { value: "/name", problems: ["prefix part must be non-empty"] },
    "upper-case prefix": { value: "Example.com/name", problems: [`prefix part ${subdomainRegexMessage}`] },
    "name ending in a dot": { value: "app.", problems: [qualifiedNameRegexMessage] },
    "name starting with a dash": { value: "-app", problems: [qualifiedNameRegexMessage] },
    "name with a space": { value: "my app", problems: [qualifiedNameRegexMessage] },
    "two slashes": { value: "a/b/c", problems: [qualifiedNameSlashesMessage] },
    "only slashes": { value: "//", problems: [qualifiedNameSlashesMessage] },
    "bad prefix and bad name": {
      value: "a_b/-c",
      problems: [`prefix part ${subdomainRegexMessage}`, qualifiedNameRegexMessage]
    }
  })

  it("counts UTF-8 bytes in the name part", () => {
    assert.deepStrictEqual(checkQualifiedName(`${twoByte.repeat(31)}a`), [qualifiedNameRegexMessage])
    assert.deepStrictEqual(checkQualifiedName(`${twoByte.repeat(32)}`), [
      `name part ${tooLong(63)}`,
      qualifiedNameRegexMessage
    ])
  })
})

describe("Names.checkLabelValue", () => {
  runTable(checkLabelValue, {
    "empty": { value: "", problems: [] },
    "single character": { value: "x", problems: [] },
    "mixed": { value: "My_Value-1.0", problems: [] },
    "63 bytes": { value: label63, problems: [] },
    "64 bytes": { value: label64, problems: [tooLong(63)] },
    "slash": { value: "a/b", problems: [labelValueRegexMessage] },
    "leading dot": { value: ".a", problems: [labelValueRegexMessage] },
    "trailing underscore": { value: "a_", problems: [labelValueRegexMessage] },
    "space": { value: " ", problems: [labelValueRegexMessage] },
    "too long and invalid": { value: `${label63}_`, problems: [tooLong(63), labelValueRegexMessage] }
  })

  it("counts UTF-8 bytes, not characters", () => {
    assert.deepStrictEqual(checkLabelValue(`${threeByte.repeat(21)}`), [labelValueRegexMessage])
    assert.deepStrictEqual(checkLabelValue(`${threeByte.repeat(21)}a`), [tooLong(63), labelValueRegexMessage])
  })
})

describe("the grammars agree with each other", () => {
  const lowerLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/u)

  it("every DNS label is a DNS subdomain, a qualified name and a label value", () => {
    fc.assert(fc.property(lowerLabel, (value) => {
      assert.deepStrictEqual(checkDns1123Label(value), [])
      assert.deepStrictEqual(checkDns1123Subdomain(value), [])
      assert.deepStrictEqual(checkQualifiedName(value), [])
      assert.deepStrictEqual(checkLabelValue(value), [])
    }))
  })

  it("labels joined by dots form a subdomain, and prefix a qualified name", () => {
    fc.assert(fc.property(fc.array(lowerLabel, { minLength: 1, maxLength: 5 }), lowerLabel, (labels, name) => {
      const subdomain = labels.join(".")
      assert.deepStrictEqual(checkDns1123Subdomain(subdomain), [])
      assert.deepStrictEqual(checkQualifiedName(`${subdomain}/${name}`), [])
    }))
  })
})
