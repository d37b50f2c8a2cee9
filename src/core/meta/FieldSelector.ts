// Kubernetes field selectors (`--field-selector` / `fieldSelector=`): a pure parser and
// matcher reproducing apimachinery's `fields.ParseSelector` (terms, backslash escapes,
// error texts) followed by the API server's per-resource check of which field labels
// it supports, whose "field label not supported: …" message kubectl prints verbatim.

import { err, ok, type ParseResult } from "./ParseResult.ts"

export interface FieldRequirement {
  readonly field: string
  readonly operator: "Equals" | "NotEquals"
  readonly value: string
}

export interface FieldSelector {
  readonly requirements: ReadonlyArray<FieldRequirement>
}

/** The selector with no requirements; it matches every object. */
export const everything: FieldSelector = { requirements: [] }

/** The field labels every resource supports here: the two metadata fields and the pod-style phase. */
export const defaultSupportedFields: ReadonlySet<string> = new Set([
  "metadata.name",
  "metadata.namespace",
  "status.phase"
])

// Go sorts the terms bytewise (UTF-8), which is code point order; UTF-16 code units differ
// from it only between surrogates and U+E000–U+FFFF, so those are remapped before comparing.
const codePointOrderUnit = (
  unit: number
): number => (unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit)

const compareByteOrder = (left: string, right: string): number => {
  const shared = Math.min(left.length, right.length)
  for (let index = 0; index < shared; index++) {
    const difference = codePointOrderUnit(left.charCodeAt(index)) - codePointOrderUnit(right.charCodeAt(index))
    if (difference !== 0) return difference
  }
  return left.length - right.length
}

// Splits on commas that are not backslash-escaped; escapes stay in the terms for later unescaping.
const splitTerms = (input: string): ReadonlyArray<string> => {
  if (input.length === 0) return []
  const terms: Array<string> = []
  let start = 0
  let escaped = false
  for (let index = 0; index < input.length; index++) {
    const character = input[index]
    if (escaped) escaped = false
    else if (character === "\\") escaped = true
    else if (character === ",") {
      terms.push(input.slice(start, index))
      start = index + 1
    }
  }
  terms.push(input.slice(start))
  return terms
}

// "==" is tried before "=" so that it does not leave a leading "=" on the value.
const termOperators = [
  ["!=", "NotEquals"],
  ["==", "Equals"],
  ["=", "Equals"]
] as const

// Splits a term at the first operator found; field names have no escaping.
const splitTerm = (term: string): FieldRequirement | undefined => {
  for (let index = 0; index < term.length; index++) {
    for (const [symbol, operator] of termOperators) {
      if (term.startsWith(symbol, index)) {
        return { field: term.slice(0, index), operator, value: term.slice(index + symbol.length) }
      }
    }
  }
  return undefined
}

/**
 * Undoes field-selector escaping (`\\`, `\,`, `\=`) with apimachinery's `UnescapeValue`
 * rules and messages: any other escape, a trailing backslash, or a bare ',' or '=' is an
 * error. The bare-character message prints the code point as a number, as Go's `%v` does.
 */
export const unescapeValue = (value: string): ParseResult<string> => {
  let unescaped = ""
  let escaped = false
  for (const character of value) {
    if (escaped) {
      if (character !== "\\" && character !== "," && character !== "=") {
        return err(`invalid field selector: invalid escape sequence: \\${character}`)
      }
      unescaped += character
      escaped = false
    } else if (character === "\\") {
      escaped = true
    } else if (character === "," || character === "=") {
      return err(`invalid field selector: unescaped character in value: ${character.codePointAt(0) ?? 0}`)
    } else {
      unescaped += character
    }
  }
  return escaped ? err("invalid field selector: invalid escape sequence: \\") : ok(unescaped)
}

/** Escapes a literal value for use in a field selector, as apimachinery's `EscapeValue` does. */
export const escapeValue = (value: string): string => value.replace(/[\\,=]/g, (character) => `\\${character}`)

// The syntactic half: apimachinery's ParseSelector, terms sorted and empty terms skipped.
const parseTerms = (input: string): ParseResult<ReadonlyArray<FieldRequirement>> => {
  const requirements: Array<FieldRequirement> = []
  for (const term of splitTerms(input).toSorted(compareByteOrder)) {
    if (term === "") continue
    const requirement = splitTerm(term)
    if (requirement === undefined) return err(`invalid selector: '${input}'; can't understand '${term}'`)
    const value = unescapeValue(requirement.value)
    if (value._tag === "Err") return value
    // ParseSelector's identity transform drops a term whose field and value are both empty ("=", "!=").
    if (requirement.field === "" && value.value === "") continue
    requirements.push({ ...requirement, value: value.value })
  }
  return ok(requirements)
}

/**
 * Parses a field selector (`f=v`, `f==v`, `f!=v`, comma-separated, values escaped with
 * backslashes) and checks each field against the ones the resource supports. Syntax
 * errors win over support errors, as in the API server, which parses the whole query
 * before converting field labels; the first unsupported field in sorted term order
 * yields exactly `field label not supported: <field>`. Whitespace is not trimmed.
 */
export const parse = (input: string, supported: ReadonlySet<string>): ParseResult<FieldSelector> => {
  const requirements = parseTerms(input)
  if (requirements._tag === "Err") return requirements
  const unsupported = requirements.value.find((requirement) => !supported.has(requirement.field))
  return unsupported === undefined
    ? ok({ requirements: requirements.value })
    : err(`field label not supported: ${unsupported.field}`)
}

/**
 * Whether an object's field values satisfy every requirement. A missing (undefined)
 * field reads as "", as apimachinery's `Fields.Get` does, so `status.phase!=Running`
 * matches an object that has no phase yet.
 */
export const matches = (selector: FieldSelector, fields: Readonly<Record<string, string | undefined>>): boolean =>
  selector.requirements.every((requirement) => {
    const actual = (Object.hasOwn(fields, requirement.field) ? fields[requirement.field] : undefined) ?? ""
    return requirement.operator === "Equals" ? actual === requirement.value : actual !== requirement.value
  })

const phaseOf = (status: unknown): string | undefined =>
  typeof status === "object" && status !== null && "phase" in status && typeof status.phase === "string"
    ? status.phase
    : undefined

/**
 * The field values of an object that `defaultSupportedFields` names: `metadata.name`,
 * `metadata.namespace`, and `status.phase` when it is a string. Absent ones are undefined.
 */
export const fieldsOf = (object: {
  readonly metadata?: { readonly name?: string; readonly namespace?: string }
  readonly status?: unknown
}): Record<string, string | undefined> => ({
  "metadata.name": object.metadata?.name,
  "metadata.namespace": object.metadata?.namespace,
  "status.phase": phaseOf(object.status)
})

/** The single metadata.name value an Equals term pins, if any (used to make "get NAME -w" cheap). */
export const pinnedName = (selector: FieldSelector): string | undefined =>
  selector.requirements.find((requirement) =>
    requirement.operator === "Equals" && requirement.field === "metadata.name"
  )
    ?.value
