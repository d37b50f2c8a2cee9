/**
 * fast-check arbitraries derived from a kind's OpenAPI 3.0 JSON Schema: the very document clients download, so the
 * data generated from it tests what OpenAPI promises. `arbitraryOf` generates values the schema accepts;
 * `violationsOf` lists single-field mutations of a valid value that each break one declared bound; `validates` is the
 * small JSON Schema validator (the keywords the generator understands) both are checked with.
 *
 * Understood: `$ref` (`#/components/schemas/<name>`), `allOf` (merged), `anyOf`/`oneOf` of schemas (one is picked),
 * `oneOf`/`anyOf` of required-groups ("exactly one of" / "at least one of"), `not: {required}` (never all of them),
 * `not: {pattern}` and other `not`s (filtered), `type`, `nullable`, `enum`/`const`, `pattern`, `minLength`/`maxLength`,
 * `minimum`/`maximum` (and the exclusive forms), `minItems`/`maxItems`/`uniqueItems`, `items`, `properties`,
 * `required`, `additionalProperties`, `patternProperties`, `propertyNames`, `minProperties`/`maxProperties`, and the
 * nodus extensions `x-nodus-duration` {minimumMs, maximumMs, zero}, `x-nodus-quantity` {maximum}, `x-nodus-usd` and
 * `x-nodus-decimal` {minimum, maximum} (a decimal string's numeric range), `x-nodus-keys` (propertyNames, which
 * OpenAPI 3.0 lacks).
 * Anything else is ignored: values are generated from what is known.
 */
import * as fc from "fast-check"
import { canonical, equals, isArray, isObject, type Json, type JsonObject } from "../../src/core/Json.ts"
import type { KindInfo } from "../../src/core/meta/Kinds.ts"
import { schemaDocuments } from "../../src/http/openapi/SchemaDocuments.ts"

export interface SchemaDocument {
  readonly schema: JsonObject
  readonly definitions: JsonObject
}

/** The spec schema of a kind as its OpenAPI document serves it, with the named definitions it refers to. */
export const specDocument = (info: KindInfo): SchemaDocument => {
  const documents = schemaDocuments(info)
  return { schema: documents.spec, definitions: documents.definitions ?? {} }
}

// ---------------------------------------------------------------------------------------------------------------------
// Units (written here rather than imported, so the test data does not share the server's parsers)

const durationUnits: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000
}
const durationText = /^(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h))+$/u
const durationPart = /([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)/gu

/** Milliseconds of a Go-style duration ("1h30m", "0"); undefined when the text is not one. */
export const durationMs = (text: string): number | undefined => {
  if (text === "0") return 0
  if (!durationText.test(text)) return undefined
  let total = 0
  for (const [, amount, unit] of text.matchAll(durationPart)) {
    total += Number(amount) * (durationUnits[unit ?? ""] ?? Number.NaN)
  }
  return total
}

const quantityText = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$/u
const quantityFactors: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18
}

/** Base units of a Kubernetes quantity ("16Gi", "500m", "1e3"); undefined when the text is not one. */
export const quantityValue = (text: string): number | undefined => {
  const match = quantityText.exec(text)
  if (match === null) return undefined
  const amount = Number(match[1])
  const suffix = match[2] ?? ""
  if (suffix.length > 1 && (suffix[0] === "e" || suffix[0] === "E")) return amount * 10 ** Number(suffix.slice(1))
  return amount * (quantityFactors[suffix] ?? Number.NaN)
}

// ---------------------------------------------------------------------------------------------------------------------
// Schemas

const regexes = new Map<string, RegExp>()

/** A JSON Schema pattern as a RegExp (ECMA-262 with the `u` flag, as JSON Schema reads it). */
const regexOf = (pattern: string): RegExp => {
  let regex = regexes.get(pattern)
  if (regex === undefined) {
    try {
      regex = new RegExp(pattern, "u")
    } catch {
      regex = new RegExp(pattern)
    }
    regexes.set(pattern, regex)
  }
  return regex
}

const matches = (pattern: string, text: string): boolean => regexOf(pattern).test(text)

/**
 * The pattern without lookaheads and lookbehinds (`(?=…)`, `(?!…)`, `(?<=…)`, `(?<!…)`), which fc.stringMatching cannot
 * generate.
 */
const withoutLookarounds = (pattern: string): string => {
  let out = ""
  for (let index = 0; index < pattern.length; index++) {
    const rest = pattern.slice(index)
    if (/^\(\?(=|!|<=|<!)/u.test(rest)) {
      let depth = 0
      let inClass = false
      for (; index < pattern.length; index++) {
        const char = pattern[index]
        if (char === "\\") index++
        else if (inClass) inClass = char !== "]"
        else if (char === "[") inClass = true
        else if (char === "(") depth++
        else if (char === ")" && --depth === 0) break
      }
      continue
    }
    const char = pattern[index]!
    out += char
    if (char === "\\" && index + 1 < pattern.length) out += pattern[++index]
  }
  return out
}

const patternArbitraries = new Map<string, fc.Arbitrary<string>>()

/**
 * Strings matching `pattern`: fc.stringMatching, or where it cannot read the pattern (lookarounds, backreferences),
 * strings of a simpler pattern (or any strings) filtered by the real one.
 */
const patternArbitrary = (pattern: string): fc.Arbitrary<string> => {
  let arbitrary = patternArbitraries.get(pattern)
  if (arbitrary !== undefined) return arbitrary
  const regex = regexOf(pattern)
  try {
    arbitrary = fc.stringMatching(regex)
  } catch {
    try {
      arbitrary = fc.stringMatching(regexOf(withoutLookarounds(pattern))).filter((text) => regex.test(text))
    } catch {
      arbitrary = fc.string({ maxLength: 24 }).filter((text) => regex.test(text))
    }
  }
  patternArbitraries.set(pattern, arbitrary)
  return arbitrary
}

const numberOr = (
  value: Json | undefined
): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined)

const stringsOf = (value: Json | undefined): ReadonlyArray<string> | undefined =>
  isArray(value) && value.every((item) => typeof item === "string") ? (value as ReadonlyArray<string>) : undefined

const refPrefixes = ["#/components/schemas/", "#/definitions/", "#/$defs/"]

/** The schema a `$ref` names, or undefined when it is not in the document. */
const resolveRef = (document: SchemaDocument, ref: string): Json | undefined => {
  const prefix = refPrefixes.find((candidate) => ref.startsWith(candidate))
  if (prefix === undefined) return undefined
  const name = decodeURIComponent(ref.slice(prefix.length)).replaceAll("~1", "/").replaceAll("~0", "~")
  return Object.hasOwn(document.definitions, name) ? document.definitions[name] : undefined
}

/** Whether a oneOf/anyOf alternative only says which fields are present (`{required: [...]}`). */
const requiredGroup = (alternative: Json): ReadonlyArray<string> | undefined => {
  if (!isObject(alternative)) return undefined
  const keys = Object.keys(alternative).filter((key) => key !== "description" && key !== "title")
  return keys.length === 1 && keys[0] === "required" ? stringsOf(alternative["required"]) : undefined
}

const requiredGroups = (alternatives: ReadonlyArray<Json>): ReadonlyArray<ReadonlyArray<string>> | undefined => {
  const groups = alternatives.map(requiredGroup)
  return groups.length > 0 && groups.every((group) => group !== undefined)
    ? (groups as ReadonlyArray<ReadonlyArray<string>>)
    : undefined
}

interface DurationBounds {
  readonly minimumMs?: number
  readonly maximumMs?: number
  readonly zero?: boolean
}

/** Every constraint of a schema with its `$ref`s and `allOf`s merged in. */
interface Merged {
  types: ReadonlyArray<string> | undefined
  nullable: boolean
  enum: ReadonlyArray<Json> | undefined
  patterns: Array<string>
  notRequired: Array<ReadonlyArray<string>>
  /** `not` schemas other than `{required}`: generated values are filtered by them. */
  nots: Array<Json>
  /** "Exactly one of" (oneOf) and "at least one of" (anyOf) groups of required fields. */
  exactlyOne: Array<ReadonlyArray<ReadonlyArray<string>>>
  atLeastOne: Array<ReadonlyArray<ReadonlyArray<string>>>
  /** anyOf/oneOf of schemas: one alternative of each is picked. */
  alternatives: Array<{ readonly exclusive: boolean; readonly schemas: ReadonlyArray<Json> }>
  minimum: number | undefined
  maximum: number | undefined
  exclusiveMinimum: boolean
  exclusiveMaximum: boolean
  minLength: number | undefined
  maxLength: number | undefined
  minItems: number | undefined
  maxItems: number | undefined
  uniqueItems: boolean
  items: Array<Json>
  properties: Map<string, Array<Json>>
  required: Set<string>
  /** Schemas of members not named in properties; `false` forbids them. */
  additional: Array<Json> | false
  patternProperties: Array<readonly [string, Json]>
  propertyNames: Array<Json>
  minProperties: number | undefined
  maxProperties: number | undefined
  format: string | undefined
  duration: DurationBounds | undefined
  quantity: { readonly maximum?: number } | undefined
  decimal: { readonly minimum?: number; readonly maximum?: number } | undefined
  usd: boolean
}

const emptyMerged = (): Merged => ({
  types: undefined,
  nullable: false,
  enum: undefined,
  patterns: [],
  notRequired: [],
  nots: [],
  exactlyOne: [],
  atLeastOne: [],
  alternatives: [],
  minimum: undefined,
  maximum: undefined,
  exclusiveMinimum: false,
  exclusiveMaximum: false,
  minLength: undefined,
  maxLength: undefined,
  minItems: undefined,
  maxItems: undefined,
  uniqueItems: false,
  items: [],
  properties: new Map(),
  required: new Set(),
  additional: [],
  patternProperties: [],
  propertyNames: [],
  minProperties: undefined,
  maxProperties: undefined,
  format: undefined,
  duration: undefined,
  quantity: undefined,
  decimal: undefined,
  usd: false
})

const cloneMerged = (merged: Merged): Merged => ({
  ...merged,
  patterns: [...merged.patterns],
  notRequired: [...merged.notRequired],
  nots: [...merged.nots],
  exactlyOne: [...merged.exactlyOne],
  atLeastOne: [...merged.atLeastOne],
  alternatives: [...merged.alternatives],
  items: [...merged.items],
  properties: new Map([...merged.properties].map(([key, schemas]) => [key, [...schemas]])),
  required: new Set(merged.required),
  additional: merged.additional === false ? false : [...merged.additional],
  patternProperties: [...merged.patternProperties],
  propertyNames: [...merged.propertyNames]
})

const larger = (
  a: number | undefined,
  b: number | undefined
): number | undefined => (a === undefined ? b : b === undefined ? a : Math.max(a, b))
const smaller = (
  a: number | undefined,
  b: number | undefined
): number | undefined => (a === undefined ? b : b === undefined ? a : Math.min(a, b))

const typesOf = (value: Json | undefined): ReadonlyArray<string> | undefined =>
  typeof value === "string" ? [value] : stringsOf(value)

const intersectTypes = (
  a: ReadonlyArray<string> | undefined,
  b: ReadonlyArray<string> | undefined
): ReadonlyArray<string> | undefined => {
  if (a === undefined) return b
  if (b === undefined) return a
  const both = a.filter((type) => b.includes(type) || (type === "integer" && b.includes("number")))
  for (const type of b) {
    if (type === "integer" && a.includes("number") && !both.includes("integer")) both.push("integer")
  }
  return both
}

/** Merges `schema` (and what it refers to and is allOf) into `into`. */
const mergeInto = (
  document: SchemaDocument,
  schema: Json | undefined,
  into: Merged,
  seen: ReadonlySet<string> = new Set()
): void => {
  if (!isObject(schema)) return
  const ref = schema["$ref"]
  if (typeof ref === "string" && !seen.has(ref)) {
    mergeInto(document, resolveRef(document, ref), into, new Set([...seen, ref]))
  }
  const types = typesOf(schema["type"])
  if (types !== undefined) {
    if (types.includes("null")) into.nullable = true
    into.types = intersectTypes(into.types, types.filter((type) => type !== "null"))
  }
  if (schema["nullable"] === true) into.nullable = true
  const values = isArray(schema["enum"])
    ? schema["enum"]
    : Object.hasOwn(schema, "const")
    ? [schema["const"] as Json]
    : undefined
  if (values !== undefined) {
    into.enum = into.enum === undefined
      ? values
      : into.enum.filter((value) => values.some((other) => equals(value, other)))
  }
  if (typeof schema["pattern"] === "string") into.patterns.push(schema["pattern"])
  if (typeof schema["format"] === "string") into.format = schema["format"]
  const minimum = numberOr(schema["minimum"])
  const maximum = numberOr(schema["maximum"])
  if (minimum !== undefined && (into.minimum === undefined || minimum >= into.minimum)) {
    into.exclusiveMinimum = minimum === into.minimum
      ? into.exclusiveMinimum || schema["exclusiveMinimum"] === true
      : schema["exclusiveMinimum"] === true
    into.minimum = minimum
  }
  if (maximum !== undefined && (into.maximum === undefined || maximum <= into.maximum)) {
    into.exclusiveMaximum = maximum === into.maximum
      ? into.exclusiveMaximum || schema["exclusiveMaximum"] === true
      : schema["exclusiveMaximum"] === true
    into.maximum = maximum
  }
  // JSON Schema 2019+ writes exclusive bounds as numbers.
  const exclusiveMinimum = numberOr(schema["exclusiveMinimum"])
  if (exclusiveMinimum !== undefined && (into.minimum === undefined || exclusiveMinimum >= into.minimum)) {
    into.minimum = exclusiveMinimum
    into.exclusiveMinimum = true
  }
  const exclusiveMaximum = numberOr(schema["exclusiveMaximum"])
  if (exclusiveMaximum !== undefined && (into.maximum === undefined || exclusiveMaximum <= into.maximum)) {
    into.maximum = exclusiveMaximum
    into.exclusiveMaximum = true
  }
  into.minLength = larger(into.minLength, numberOr(schema["minLength"]))
  into.maxLength = smaller(into.maxLength, numberOr(schema["maxLength"]))
  into.minItems = larger(into.minItems, numberOr(schema["minItems"]))
  into.maxItems = smaller(into.maxItems, numberOr(schema["maxItems"]))
  into.minProperties = larger(into.minProperties, numberOr(schema["minProperties"]))
  into.maxProperties = smaller(into.maxProperties, numberOr(schema["maxProperties"]))
  if (schema["uniqueItems"] === true) into.uniqueItems = true
  if (Object.hasOwn(schema, "items") && !isArray(schema["items"])) into.items.push(schema["items"] as Json)
  const properties = schema["properties"]
  if (isObject(properties)) {
    for (const [key, property] of Object.entries(properties)) {
      into.properties.set(key, [...(into.properties.get(key) ?? []), property])
    }
  }
  for (const key of stringsOf(schema["required"]) ?? []) into.required.add(key)
  const additional = schema["additionalProperties"]
  if (additional === false) into.additional = false
  else if (isObject(additional) && into.additional !== false) into.additional.push(additional)
  const patternProperties = schema["patternProperties"]
  if (isObject(patternProperties)) {
    for (const [pattern, property] of Object.entries(patternProperties)) {
      into.patternProperties.push([pattern, property])
    }
  }
  const propertyNames = keysOf(schema)
  if (propertyNames !== undefined) into.propertyNames.push(propertyNames)
  const duration = schema["x-nodus-duration"]
  if (isObject(duration)) {
    const bounds: { minimumMs?: number; maximumMs?: number; zero?: boolean } = { ...into.duration }
    const minimumMs = larger(bounds.minimumMs, numberOr(duration["minimumMs"]))
    const maximumMs = smaller(bounds.maximumMs, numberOr(duration["maximumMs"]))
    if (minimumMs !== undefined) bounds.minimumMs = minimumMs
    if (maximumMs !== undefined) bounds.maximumMs = maximumMs
    if (duration["zero"] === true) bounds.zero = true
    into.duration = bounds
  }
  const quantity = schema["x-nodus-quantity"]
  if (isObject(quantity)) {
    const maximumQuantity = smaller(into.quantity?.maximum, numberOr(quantity["maximum"]))
    into.quantity = maximumQuantity === undefined ? {} : { maximum: maximumQuantity }
  }
  if (schema["x-nodus-usd"] === true) into.usd = true
  const decimal = schema["x-nodus-decimal"]
  if (isObject(decimal)) {
    const bounds: { minimum?: number; maximum?: number } = { ...into.decimal }
    const minimumDecimal = larger(bounds.minimum, numberOr(decimal["minimum"]))
    const maximumDecimal = smaller(bounds.maximum, numberOr(decimal["maximum"]))
    if (minimumDecimal !== undefined) bounds.minimum = minimumDecimal
    if (maximumDecimal !== undefined) bounds.maximum = maximumDecimal
    into.decimal = bounds
  }
  const not = schema["not"]
  if (isObject(not)) {
    const group = requiredGroup(not)
    if (group !== undefined) into.notRequired.push(group)
    else into.nots.push(not)
  }
  for (const [keyword, exclusive] of [["oneOf", true], ["anyOf", false]] as const) {
    const alternatives = schema[keyword]
    if (!isArray(alternatives) || alternatives.length === 0) continue
    const groups = requiredGroups(alternatives)
    if (groups !== undefined) (exclusive ? into.exactlyOne : into.atLeastOne).push(groups)
    else into.alternatives.push({ exclusive, schemas: alternatives })
  }
  const allOf = schema["allOf"]
  if (isArray(allOf)) { for (const member of allOf) mergeInto(document, member, into, seen) }
}

const mergedOf = (document: SchemaDocument, schema: Json | undefined): Merged => {
  const merged = emptyMerged()
  mergeInto(document, schema, merged)
  return merged
}

/** A map's key schema: JSON Schema's propertyNames, or nodus's OpenAPI 3.0 spelling of it. */
const keysOf = (schema: JsonObject): JsonObject | undefined => {
  const keys = schema["propertyNames"] ?? schema["x-nodus-keys"]
  return isObject(keys) ? keys : undefined
}

/** The merged schema of one member of an object (properties, then patternProperties, then additionalProperties). */
const memberSchemas = (merged: Merged, key: string): ReadonlyArray<Json> | undefined => {
  const named = merged.properties.get(key)
  if (named !== undefined) return named
  const patterned = merged.patternProperties.filter(([pattern]) => matches(pattern, key)).map(([, schema]) => schema)
  if (patterned.length > 0) return patterned
  return merged.additional === false ? undefined : merged.additional
}

const allOf = (schemas: ReadonlyArray<Json>): Json => (schemas.length === 1 ? schemas[0]! : { allOf: [...schemas] })

// ---------------------------------------------------------------------------------------------------------------------
// Validation

const typeMatches = (type: string, value: Json): boolean => {
  switch (type) {
    case "string":
      return typeof value === "string"
    case "integer":
      return typeof value === "number" && Number.isInteger(value)
    case "number":
      return typeof value === "number" && Number.isFinite(value)
    case "boolean":
      return typeof value === "boolean"
    case "array":
      return isArray(value)
    case "object":
      return isObject(value)
    case "null":
      return value === null
    default:
      return true
  }
}

const codePoints = (text: string): number => [...text].length

/** Whether `value` satisfies `schema`, for the keywords this module understands (the others are ignored). */
export const validates = (document: SchemaDocument, schema: Json | undefined, value: Json): boolean =>
  check(document, schema, value, new Set())

const check = (document: SchemaDocument, schema: Json | undefined, value: Json, seen: ReadonlySet<string>): boolean => {
  if (schema === false) return false
  if (!isObject(schema)) return true
  if (value === null && schema["nullable"] === true) return true
  const ref = schema["$ref"]
  if (
    typeof ref === "string" && !seen.has(ref) &&
    !check(document, resolveRef(document, ref), value, new Set([...seen, ref]))
  ) return false
  const types = typesOf(schema["type"])
  if (types !== undefined && !types.some((type) => typeMatches(type, value))) return false
  if (isArray(schema["enum"]) && !schema["enum"].some((option) => equals(option, value))) return false
  if (Object.hasOwn(schema, "const") && !equals(schema["const"] as Json, value)) return false
  if (typeof value === "string" && !checkString(schema, value)) return false
  if (typeof value === "number" && !checkNumber(schema, value)) return false
  if (isArray(value) && !checkArray(document, schema, value, seen)) return false
  if (isObject(value) && !checkObject(document, schema, value, seen)) return false
  const all = schema["allOf"]
  if (isArray(all) && !all.every((member) => check(document, member, value, seen))) return false
  const any = schema["anyOf"]
  if (isArray(any) && !any.some((member) => check(document, member, value, seen))) return false
  const one = schema["oneOf"]
  if (isArray(one) && one.filter((member) => check(document, member, value, seen)).length !== 1) return false
  if (Object.hasOwn(schema, "not") && isObject(schema["not"]) && check(document, schema["not"], value, seen)) {
    return false
  }
  return true
}

const checkString = (schema: JsonObject, value: string): boolean => {
  const minLength = numberOr(schema["minLength"])
  const maxLength = numberOr(schema["maxLength"])
  if (minLength !== undefined && codePoints(value) < minLength) return false
  if (maxLength !== undefined && codePoints(value) > maxLength) return false
  if (typeof schema["pattern"] === "string" && !matches(schema["pattern"], value)) return false
  const duration = schema["x-nodus-duration"]
  if (isObject(duration)) {
    const ms = durationMs(value)
    if (ms === undefined) return false
    const zero = duration["zero"] === true && ms === 0
    const minimumMs = numberOr(duration["minimumMs"])
    const maximumMs = numberOr(duration["maximumMs"])
    if (!zero && minimumMs !== undefined && ms < minimumMs) return false
    if (!zero && maximumMs !== undefined && ms > maximumMs) return false
  }
  const decimal = schema["x-nodus-decimal"]
  if (isObject(decimal)) {
    const amount = /^[0-9]*\.?[0-9]+$/u.test(value) ? Number(value) : Number.NaN
    const minimum = numberOr(decimal["minimum"])
    const maximum = numberOr(decimal["maximum"])
    if (
      Number.isNaN(amount) || (minimum !== undefined && amount < minimum) || (maximum !== undefined && amount > maximum)
    ) return false
  }
  const quantity = schema["x-nodus-quantity"]
  if (isObject(quantity)) {
    const amount = quantityValue(value)
    const maximum = numberOr(quantity["maximum"])
    if (amount === undefined || (maximum !== undefined && amount > maximum)) return false
  }
  return true
}

const checkNumber = (schema: JsonObject, value: number): boolean => {
  const minimum = numberOr(schema["minimum"])
  const maximum = numberOr(schema["maximum"])
  if (minimum !== undefined && (schema["exclusiveMinimum"] === true ? value <= minimum : value < minimum)) return false
  if (maximum !== undefined && (schema["exclusiveMaximum"] === true ? value >= maximum : value > maximum)) return false
  const exclusiveMinimum = numberOr(schema["exclusiveMinimum"])
  const exclusiveMaximum = numberOr(schema["exclusiveMaximum"])
  if (exclusiveMinimum !== undefined && value <= exclusiveMinimum) return false
  if (exclusiveMaximum !== undefined && value >= exclusiveMaximum) return false
  const multipleOf = numberOr(schema["multipleOf"])
  return multipleOf === undefined || multipleOf <= 0 || Number.isInteger(value / multipleOf)
}

const checkArray = (
  document: SchemaDocument,
  schema: JsonObject,
  value: ReadonlyArray<Json>,
  seen: ReadonlySet<string>
): boolean => {
  const minItems = numberOr(schema["minItems"])
  const maxItems = numberOr(schema["maxItems"])
  if (minItems !== undefined && value.length < minItems) return false
  if (maxItems !== undefined && value.length > maxItems) return false
  if (schema["uniqueItems"] === true && new Set(value.map(canonical)).size !== value.length) return false
  const items = schema["items"]
  return !isObject(items) || value.every((item) => check(document, items, item, seen))
}

const checkObject = (
  document: SchemaDocument,
  schema: JsonObject,
  value: JsonObject,
  seen: ReadonlySet<string>
): boolean => {
  const keys = Object.keys(value)
  if ((stringsOf(schema["required"]) ?? []).some((key) => !Object.hasOwn(value, key))) return false
  const minProperties = numberOr(schema["minProperties"])
  const maxProperties = numberOr(schema["maxProperties"])
  if (minProperties !== undefined && keys.length < minProperties) return false
  if (maxProperties !== undefined && keys.length > maxProperties) return false
  const properties = isObject(schema["properties"]) ? schema["properties"] : {}
  const patternProperties = isObject(schema["patternProperties"]) ? schema["patternProperties"] : {}
  const additional = schema["additionalProperties"]
  const propertyNames = keysOf(schema)
  for (const key of keys) {
    const member = value[key] as Json
    if (isObject(propertyNames) && !check(document, propertyNames, key, seen)) return false
    let known = false
    if (Object.hasOwn(properties, key)) {
      known = true
      if (!check(document, properties[key], member, seen)) return false
    }
    for (const [pattern, property] of Object.entries(patternProperties)) {
      if (!matches(pattern, key)) continue
      known = true
      if (!check(document, property, member, seen)) return false
    }
    if (!known && additional === false) return false
    if (!known && isObject(additional) && !check(document, additional, member, seen)) return false
  }
  return true
}

// ---------------------------------------------------------------------------------------------------------------------
// Generation

export interface ArbitraryOptions {
  /** Nesting of objects and arrays below which only required members and minimum lengths are generated (default 5). */
  readonly maxDepth?: number
}

interface Context {
  readonly document: SchemaDocument
  readonly maxDepth: number
  readonly cache: WeakMap<object, Map<number, fc.Arbitrary<Json>>>
}

const optionalFieldsAt = (depth: number): number => (depth === 0 ? 4 : depth === 1 ? 3 : 2)

/** Values for a schema with nothing known about it: small scalars. */
const anyScalar: fc.Arbitrary<Json> = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.integer({ min: -100, max: 100 }),
  fc.boolean()
)

/** An arbitrary of values that satisfy `document.schema`. */
export const arbitraryOf = (document: SchemaDocument, options: ArbitraryOptions = {}): fc.Arbitrary<Json> => {
  const context: Context = { document, maxDepth: options.maxDepth ?? 5, cache: new WeakMap() }
  return arbitraryAt(context, document.schema, 0)
}

const arbitraryAt = (context: Context, schema: Json | undefined, depth: number): fc.Arbitrary<Json> => {
  if (!isObject(schema)) return anyScalar
  let byDepth = context.cache.get(schema)
  if (byDepth === undefined) context.cache.set(schema, byDepth = new Map())
  let arbitrary = byDepth.get(depth)
  if (arbitrary === undefined) {
    byDepth.set(depth, arbitrary = fromMerged(context, mergedOf(context.document, schema), depth))
  }
  return arbitrary
}

const fromMerged = (context: Context, merged: Merged, depth: number): fc.Arbitrary<Json> => {
  const [choice, ...rest] = merged.alternatives
  if (choice !== undefined) {
    // One alternative of the first anyOf/oneOf, merged with everything else; a oneOf must match no other alternative.
    const options = choice.schemas.map((alternative) => {
      const next = cloneMerged(merged)
      next.alternatives = rest
      mergeInto(context.document, alternative, next)
      const arbitrary = fromMerged(context, next, depth)
      const others = choice.schemas.filter((other) => other !== alternative)
      return choice.exclusive
        ? arbitrary.filter((value) => others.every((other) => !validates(context.document, other, value)))
        : arbitrary
    })
    return fc.oneof(...options)
  }
  const base = withNots(context, merged, plain(context, merged, depth))
  return merged.nullable
    ? fc.oneof({ weight: 9, arbitrary: base }, { weight: 1, arbitrary: fc.constant<Json>(null) })
    : base
}

const withNots = (context: Context, merged: Merged, arbitrary: fc.Arbitrary<Json>): fc.Arbitrary<Json> =>
  merged.nots.length === 0
    ? arbitrary
    : arbitrary.filter((value) => merged.nots.every((not) => !validates(context.document, not, value)))

const inferredTypes = (merged: Merged): ReadonlyArray<string> => {
  if (merged.types !== undefined && merged.types.length > 0) return merged.types
  if (merged.properties.size > 0 || merged.required.size > 0 || merged.patternProperties.length > 0) return ["object"]
  if (merged.items.length > 0 || merged.minItems !== undefined || merged.maxItems !== undefined) return ["array"]
  if (
    merged.patterns.length > 0 || merged.duration !== undefined || merged.quantity !== undefined || merged.usd ||
    merged.minLength !== undefined || merged.maxLength !== undefined
  ) return ["string"]
  if (merged.minimum !== undefined || merged.maximum !== undefined) return ["number"]
  return []
}

const plain = (context: Context, merged: Merged, depth: number): fc.Arbitrary<Json> => {
  if (merged.enum !== undefined) {
    const values = merged.enum.filter((value) => value !== null || merged.nullable)
    return values.length === 0 ? fc.constant<Json>(null) : fc.constantFrom(...values)
  }
  const types = inferredTypes(merged)
  if (types.length === 0) return anyScalar
  const arbitraries = types.map((type) => {
    switch (type) {
      case "string":
        return stringArbitrary(merged)
      case "integer":
        return integerArbitrary(merged)
      case "number":
        return numberArbitrary(merged)
      case "boolean":
        return fc.boolean() as fc.Arbitrary<Json>
      case "array":
        return arrayArbitrary(context, merged, depth)
      case "object":
        return objectArbitrary(context, merged, depth)
      default:
        return anyScalar
    }
  })
  return arbitraries.length === 1 ? arbitraries[0]! : fc.oneof(...arbitraries)
}

// Strings

const units: ReadonlyArray<readonly [string, number]> = [["s", 1_000], ["m", 60_000], ["h", 3_600_000]]

/** Durations within bounds, written in whole seconds, minutes or hours (and h+m pairs), "0s" where zero is allowed. */
const durationArbitrary = (bounds: DurationBounds): fc.Arbitrary<string> => {
  const minimumMs = bounds.minimumMs ?? 0
  const maximumMs = bounds.maximumMs ?? 1_000 * 3_600_000
  const options: Array<fc.Arbitrary<string>> = []
  for (const [unit, size] of units) {
    const low = Math.ceil(minimumMs / size)
    const high = Math.min(Math.floor(maximumMs / size), low + 5_000)
    if (low <= high) options.push(fc.integer({ min: low, max: high }).map((count) => `${count}${unit}`))
  }
  const lowHours = Math.max(1, Math.ceil(minimumMs / 3_600_000))
  const highHours = Math.floor((maximumMs - 59 * 60_000) / 3_600_000)
  if (lowHours <= highHours) {
    options.push(
      fc.tuple(fc.integer({ min: lowHours, max: Math.min(highHours, lowHours + 100) }), fc.integer({ min: 1, max: 59 }))
        .map(([hours, minutes]) => `${hours}h${minutes}m`)
    )
  }
  if (bounds.zero === true || minimumMs === 0) options.push(fc.constant("0s"))
  return options.length === 0 ? fc.constant(`${minimumMs}ms`) : fc.oneof(...options)
}

const quantitySuffixes: ReadonlyArray<string> = ["", "Ki", "Mi", "Gi", "Ti", "k", "M", "G", "m"]

/** Quantities "<n><suffix>" of at most `maximum` base units. */
const quantityArbitrary = (maximum: number | undefined): fc.Arbitrary<string> => {
  const options = quantitySuffixes.flatMap((suffix) => {
    const factor = quantityFactors[suffix] ?? 1
    const high = Math.min(maximum === undefined ? 4_096 : Math.floor(maximum / factor), 4_096)
    return high < 0 ? [] : [fc.integer({ min: 0, max: high }).map((count) => `${count}${suffix}`)]
  })
  return options.length === 0 ? fc.constant("0") : fc.oneof(...options)
}

/** USD amounts: whole dollars or up to six decimals. */
const usdArbitrary: fc.Arbitrary<string> = fc
  .tuple(
    fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 0, max: 1_000_000 })),
    fc.option(fc.stringMatching(/^[0-9]{1,6}$/u), { nil: undefined })
  )
  .map(([whole, decimals]) => (decimals === undefined ? `${whole}` : `${whole}.${decimals}`))

/** Decimal strings ("2", "2.5", "1.125") from minimum to maximum inclusive. */
const decimalArbitrary = (bounds: { readonly minimum?: number; readonly maximum?: number }): fc.Arbitrary<string> => {
  const minimum = bounds.minimum ?? 0
  const maximum = bounds.maximum ?? minimum + 1_000
  return fc
    .tuple(
      fc.integer({ min: Math.max(0, Math.floor(minimum)), max: Math.max(0, Math.floor(maximum)) }),
      fc.option(fc.stringMatching(/^[0-9]{1,3}$/u), { nil: undefined })
    )
    .map(([whole, decimals]) => (decimals === undefined ? `${whole}` : `${whole}.${decimals}`))
    .filter((text) => Number(text) >= minimum && Number(text) <= maximum)
}

const dateTimeArbitrary: fc.Arbitrary<string> = fc
  .date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true })
  .map((date) => date.toISOString().replace(/\.000Z$/u, "Z"))

const stringArbitrary = (merged: Merged): fc.Arbitrary<Json> => {
  const minLength = merged.minLength ?? 0
  const [first, ...others] = merged.patterns
  const base: fc.Arbitrary<string> = merged.duration !== undefined ?
    durationArbitrary(merged.duration)
    : merged.quantity !== undefined ?
    quantityArbitrary(merged.quantity.maximum)
    : merged.usd ?
    usdArbitrary
    : merged.decimal !== undefined ?
    decimalArbitrary(merged.decimal)
    : first !== undefined ?
    patternArbitrary(first)
    : merged.format === "date-time" ?
    dateTimeArbitrary
    : fc.string({
      minLength,
      maxLength: Math.max(minLength, Math.min(merged.maxLength ?? minLength + 12, minLength + 12))
    })
  const patterns =
    merged.duration !== undefined || merged.quantity !== undefined || merged.usd || merged.decimal !== undefined
      ? merged.patterns
      : others
  return base.filter((text) => {
    const length = codePoints(text)
    return length >= minLength &&
      (merged.maxLength === undefined || length <= merged.maxLength) &&
      patterns.every((pattern) => matches(pattern, text))
  })
}

// Numbers

const integerArbitrary = (merged: Merged): fc.Arbitrary<Json> => {
  const minimum = merged.minimum === undefined
    ? undefined
    : merged.exclusiveMinimum
    ? Math.floor(merged.minimum) + 1
    : Math.ceil(merged.minimum)
  const maximum = merged.maximum === undefined
    ? undefined
    : merged.exclusiveMaximum
    ? Math.ceil(merged.maximum) - 1
    : Math.floor(merged.maximum)
  const min = Math.max(minimum ?? -(2 ** 31), Number.MIN_SAFE_INTEGER)
  const max = Math.min(maximum ?? 2 ** 31 - 1, Number.MAX_SAFE_INTEGER)
  return min > max ? fc.constant(min) : fc.integer({ min, max })
}

const numberArbitrary = (merged: Merged): fc.Arbitrary<Json> => {
  const constraints: fc.DoubleConstraints = {
    noNaN: true,
    noDefaultInfinity: true,
    ...(merged.minimum === undefined ? {} : { min: merged.minimum, minExcluded: merged.exclusiveMinimum }),
    ...(merged.maximum === undefined ? {} : { max: merged.maximum, maxExcluded: merged.exclusiveMaximum })
  }
  return fc.double(constraints).map((value) => (Object.is(value, -0) ? 0 : value))
}

// Arrays

const arrayArbitrary = (context: Context, merged: Merged, depth: number): fc.Arbitrary<Json> => {
  const item = merged.items.length === 0 ? anyScalar : arbitraryAt(context, allOf(merged.items), depth + 1)
  const minLength = merged.minItems ?? 0
  const maxLength = depth >= context.maxDepth
    ? minLength
    : Math.max(minLength, Math.min(merged.maxItems ?? minLength + 3, minLength + 3))
  return merged.uniqueItems
    ? fc.uniqueArray(item, { minLength, maxLength, selector: (value) => canonical(value) })
    : fc.array(item, { minLength, maxLength })
}

// Objects

const defaultKey: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.stringMatching(/^[a-z][a-z0-9]{0,9}$/u) },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z][a-z0-9-]{0,6}\.[a-z]{2,5}\/[a-z][a-z0-9-]{0,6}$/u) }
)

const objectArbitrary = (context: Context, merged: Merged, depth: number): fc.Arbitrary<Json> => {
  const named = [...merged.properties.keys()]
  const deep = depth >= context.maxDepth
  if (named.length === 0 && merged.required.size === 0) return dictionaryArbitrary(context, merged, depth)
  const optional = named.filter((key) => !merged.required.has(key))
  const choice = fc.record({
    exactlyOne: fc.tuple(...merged.exactlyOne.map((groups) => fc.nat({ max: groups.length - 1 }))),
    atLeastOne: fc.tuple(...merged.atLeastOne.map((groups) => fc.nat({ max: groups.length - 1 }))),
    optional: deep
      ? fc.constant<ReadonlyArray<string>>([])
      : fc.subarray(optional, { maxLength: Math.min(optional.length, optionalFieldsAt(depth)) })
  })
  return choice.chain(({ exactlyOne, atLeastOne, optional: picked }) => {
    const forced = new Set(merged.required)
    const excluded = new Set<string>()
    merged.exactlyOne.forEach((groups, index) => {
      const chosen = groups[exactlyOne[index] ?? 0] ?? []
      for (const key of chosen) forced.add(key)
      for (const group of groups) for (const key of group) if (!chosen.includes(key)) excluded.add(key)
    })
    merged.atLeastOne.forEach((groups, index) => {
      for (const key of groups[atLeastOne[index] ?? 0] ?? []) forced.add(key)
    })
    const keys = new Set([...forced, ...picked.filter((key) => !excluded.has(key))])
    for (const group of merged.notRequired) {
      if (!group.every((key) => keys.has(key))) continue
      const removable = group.find((key) => !forced.has(key))
      if (removable !== undefined) keys.delete(removable)
    }
    const members: Record<string, fc.Arbitrary<Json>> = {}
    for (const key of keys) {
      const schemas = memberSchemas(merged, key)
      members[key] = schemas === undefined || schemas.length === 0
        ? anyScalar
        : arbitraryAt(context, allOf(schemas), depth + 1)
    }
    return fc.record(members) as fc.Arbitrary<Json>
  })
}

/** A map: members from patternProperties or additionalProperties, keys from propertyNames or the patterns. */
const dictionaryArbitrary = (context: Context, merged: Merged, depth: number): fc.Arbitrary<Json> => {
  const minKeys = merged.minProperties ?? 0
  const maxKeys = depth >= context.maxDepth
    ? minKeys
    : Math.max(minKeys, Math.min(merged.maxProperties ?? minKeys + 3, minKeys + 3))
  const names = merged.propertyNames.length === 0
    ? undefined
    : arbitraryAt(context, allOf(merged.propertyNames), depth + 1).filter((key): key is string =>
      typeof key === "string"
    )
  const entries: Array<fc.Arbitrary<readonly [string, Json]>> = merged.patternProperties.map(([pattern, schema]) =>
    fc.tuple(
      names === undefined ? patternArbitrary(pattern) : names.filter((key) => matches(pattern, key)),
      arbitraryAt(context, schema, depth + 1)
    )
  )
  if (merged.additional !== false && (merged.additional.length > 0 || entries.length === 0)) {
    const value = merged.additional.length === 0 ? anyScalar : arbitraryAt(context, allOf(merged.additional), depth + 1)
    const key = (names ?? defaultKey).filter((name) =>
      !merged.patternProperties.some(([pattern]) => matches(pattern, name))
    )
    entries.push(fc.tuple(key, value))
  }
  if (entries.length === 0) return fc.constant<Json>({})
  return fc
    .uniqueArray(fc.oneof(...entries), { minLength: minKeys, maxLength: maxKeys, selector: ([key]) => key })
    .map((pairs) => Object.fromEntries(pairs) as Json)
}

// ---------------------------------------------------------------------------------------------------------------------
// Mutations

export interface Violation {
  readonly path: ReadonlyArray<string>
  readonly value: Json
  readonly rule: string
  /**
   * Set when the bound comes from one alternative of an object's oneOf/anyOf (a discriminated union, or a rule such
   * as "ephemeral must be true without a volume"): the path of that object. Such a bound is a rule of the object as
   * much as of the field, so admission may name the object or another of its members.
   */
  readonly context?: ReadonlyArray<string>
}

export interface ViolationOptions {
  /**
   * Whether a whole value is acceptable beyond what the JSON Schema says (e.g. the kind's own Schema). Items added to
   * make an array too long are drawn so that the value with one of them added is still accepted, so that the length
   * is the only thing wrong.
   */
  readonly accepts?: (value: Json) => boolean
}

interface Walk {
  readonly document: SchemaDocument
  readonly root: Json
  readonly options: ViolationOptions
  readonly out: Array<Violation>
}

/** `value` with the member at `path` (object keys, array indices as decimal strings) set to `leaf`. */
export const setAt = (value: Json, path: ReadonlyArray<string>, leaf: Json): Json => {
  const [head, ...rest] = path
  if (head === undefined) return leaf
  if (isArray(value)) {
    const index = Number(head)
    const next = [...value]
    next[index] = setAt(value[index] ?? null, rest, leaf)
    return next.map((item) => item ?? null)
  }
  const object = isObject(value) ? value : {}
  return { ...object, [head]: setAt(Object.hasOwn(object, head) ? (object[head] as Json) : {}, rest, leaf) }
}

/**
 * The schema of one member of `value` under `schema` (an object key, or an array index as a decimal string), with the
 * anyOf/oneOf alternatives `value` satisfies merged in; undefined when the schema does not declare the member.
 */
export const childSchema = (
  document: SchemaDocument,
  schema: Json | undefined,
  value: Json,
  segment: string
): Json | undefined => {
  const merged = pickAlternatives(document, mergedOf(document, schema), value)
  if (isArray(value)) return merged.items.length === 0 ? undefined : allOf(merged.items)
  const schemas = memberSchemas(merged, segment)
  return schemas === undefined || schemas.length === 0 ? undefined : allOf(schemas)
}

/** Every path in `value` (each object member and array element, at any depth), parents before children. */
export const pathsIn = (value: Json, prefix: ReadonlyArray<string> = []): ReadonlyArray<ReadonlyArray<string>> => {
  const children: ReadonlyArray<readonly [string, Json]> = isArray(value)
    ? value.map((item, index) => [String(index), item] as const)
    : isObject(value)
    ? Object.entries(value)
    : []
  return children.flatMap(([key, child]) => [[...prefix, key], ...pathsIn(child, [...prefix, key])])
}

/**
 * Candidates for a string that breaks `pattern`, in order of preference: same length first, then a space, then odd
 * characters.
 */
const patternBreakers = (text: string): ReadonlyArray<string> => [
  ...(text.length > 0 ? [`${text.slice(0, -1)} `, ` ${text.slice(1)}`] : []),
  `${text} `,
  ` ${text}`,
  `${text}#`,
  "#",
  " ",
  "",
  `${text}\u0000`
]

/**
 * For a valid value: single-field mutations that break one declared bound, one per bound of each bounded leaf present
 * in the value (minimum and maximum are two). Each mutated leaf is checked to fail its own schema, alternatives
 * included.
 */
export const violationsOf = (
  document: SchemaDocument,
  value: Json,
  options: ViolationOptions = {}
): ReadonlyArray<Violation> => {
  const out: Array<Violation> = []
  walk({ document, root: value, options, out }, document.schema, value, [], undefined)
  return out
}

const walk = (
  state: Walk,
  schema: Json | undefined,
  value: Json,
  path: ReadonlyArray<string>,
  context: ReadonlyArray<string> | undefined
): void => {
  const { document, out } = state
  const base = mergedOf(document, schema)
  const merged = pickAlternatives(document, base, value)
  const candidates: Array<{ readonly rule: string; readonly value: Json }> = []
  const add = (rule: string, mutated: Json | undefined) => {
    if (mutated !== undefined) candidates.push({ rule, value: mutated })
  }
  if (merged.enum !== undefined) add("enum", outsideEnum(merged, value))
  if (typeof value === "number") {
    const integer = (merged.types ?? []).includes("integer")
    const step = integer || Number.isInteger(value) ? 1 : Math.max(1, Math.abs(value) * 1e-9)
    if (merged.minimum !== undefined) add("minimum", merged.exclusiveMinimum ? merged.minimum : merged.minimum - step)
    if (merged.maximum !== undefined) add("maximum", merged.exclusiveMaximum ? merged.maximum : merged.maximum + step)
  }
  if (typeof value === "string") stringViolations(merged, value, add)
  if (isArray(value)) {
    if (merged.maxItems !== undefined) add("maxItems", longerArray(state, merged, value, path))
    if (merged.minItems !== undefined && merged.minItems > 0 && value.length > 0) {
      add("minItems", value.slice(0, merged.minItems - 1))
    }
  }
  for (const candidate of candidates) {
    if (!validates(document, schema, candidate.value)) {
      out.push({ path, value: candidate.value, rule: candidate.rule, ...(context === undefined ? {} : { context }) })
    }
  }
  if (isArray(value)) {
    const items = merged.items.length === 0 ? undefined : allOf(merged.items)
    if (items !== undefined) value.forEach((item, index) => walk(state, items, item, [...path, String(index)], context))
  }
  if (isObject(value)) {
    for (const [key, member] of Object.entries(value)) {
      const schemas = memberSchemas(merged, key)
      if (schemas === undefined || schemas.length === 0) continue
      // A member an alternative constrains (beyond what the object itself says) is bounded by that alternative.
      const fromAlternative = (memberSchemas(base, key) ?? []).length !== schemas.length
      walk(state, allOf(schemas), member as Json, [...path, key], context ?? (fromAlternative ? path : undefined))
    }
  }
}

/** Merges in, for each anyOf/oneOf of schemas, the first alternative the value satisfies. */
const pickAlternatives = (document: SchemaDocument, merged: Merged, value: Json): Merged => {
  let current = merged
  for (let guard = 0; current.alternatives.length > 0 && guard < 16; guard++) {
    const [choice, ...rest] = current.alternatives
    const next = cloneMerged(current)
    next.alternatives = rest
    const alternative = choice!.schemas.find((schema) => validates(document, schema, value))
    if (alternative !== undefined) mergeInto(document, alternative, next)
    current = next
  }
  return current
}

const outsideEnum = (merged: Merged, value: Json): Json | undefined => {
  const options = merged.enum ?? []
  const inside = (candidate: Json) => options.some((option) => equals(option, candidate))
  const fits = (candidate: Json) =>
    typeof candidate !== "string" ||
    (merged.patterns.every((pattern) => matches(pattern, candidate)) &&
      codePoints(candidate) <= (merged.maxLength ?? Infinity))
  const candidates: ReadonlyArray<Json> = typeof value === "string" ?
    [value.toLowerCase(), value.toUpperCase(), `${value}x`, `x${value}`, "x"]
    : typeof value === "number" ?
    [value + 1, value - 1, 0, Math.max(...options.filter((option): option is number => typeof option === "number")) + 1]
    : typeof value === "boolean" ?
    [!value]
    : []
  return candidates.find((candidate) => !inside(candidate) && fits(candidate)) ??
    candidates.find((candidate) => !inside(candidate))
}

const stringViolations = (
  merged: Merged,
  value: string,
  add: (rule: string, mutated: Json | undefined) => void
): void => {
  const length = codePoints(value)
  const lengthFits = (text: string) =>
    codePoints(text) >= (merged.minLength ?? 0) && codePoints(text) <= (merged.maxLength ?? Infinity)
  if (merged.maxLength !== undefined) {
    const filler = [...value].at(-1) ?? "a"
    const padded = [filler, "a", "0", "A"].map((fill) => value + fill.repeat(merged.maxLength! + 1 - length))
    add("maxLength", padded.find((text) => merged.patterns.every((pattern) => matches(pattern, text))) ?? padded[0])
  }
  if (merged.minLength !== undefined && merged.minLength > 0) {
    add("minLength", [...value].slice(0, merged.minLength - 1).join(""))
  }
  for (const pattern of merged.patterns) {
    const breakers = patternBreakers(value).filter((text) => !matches(pattern, text))
    add("pattern", breakers.find(lengthFits) ?? breakers[0])
  }
  for (const not of merged.nots) {
    const forbidden = isObject(not) && typeof not["pattern"] === "string" ? not["pattern"] : undefined
    if (forbidden === undefined) continue
    // A string the forbidden pattern matches that keeps every other rule, e.g. "platform.x" for `not: ^platform\.`.
    const found = fc
      .sample(patternArbitrary(forbidden), { numRuns: 200, seed: 7 })
      .find((text) => lengthFits(text) && merged.patterns.every((pattern) => matches(pattern, text)))
    add("not-pattern", found)
  }
  const duration = merged.duration
  if (duration !== undefined && durationMs(value) !== undefined) {
    const { minimumMs, maximumMs } = duration
    const below = minimumMs === undefined ? undefined : minimumMs - 1
    if (below !== undefined && below >= 0 && !(below === 0 && duration.zero === true)) {
      add("duration-minimum", below === 0 ? "0s" : `${below}ms`)
    }
    if (maximumMs !== undefined) {
      add("duration-maximum", maximumMs % 1_000 === 0 ? `${maximumMs / 1_000 + 1}s` : `${maximumMs + 1}ms`)
    }
  }
  const decimal = merged.decimal
  if (decimal !== undefined && /^[0-9]*\.?[0-9]+$/u.test(value)) {
    // Just outside, in thousandths: 1 → "0.999", 10 → "10.001".
    if (decimal.minimum !== undefined && decimal.minimum >= 0.001) {
      add("decimal-minimum", (decimal.minimum - 0.001).toFixed(3))
    }
    if (decimal.maximum !== undefined) add("decimal-maximum", (decimal.maximum + 0.001).toFixed(3))
  }
  const maximum = merged.quantity?.maximum
  if (maximum !== undefined && quantityValue(value) !== undefined) {
    add("quantity-maximum", maximum % 1_024 === 0 ? `${maximum / 1_024 + 1}Ki` : `${Math.floor(maximum) + 1}`)
  }
}

/**
 * The array with valid items appended until it is one longer than maxItems: fresh distinct items (deterministic), each
 * of which the whole value accepts in place of the last item or beside the others.
 */
const longerArray = (
  state: Walk,
  merged: Merged,
  value: ReadonlyArray<Json>,
  path: ReadonlyArray<string>
): Json | undefined => {
  const maxItems = merged.maxItems
  if (maxItems === undefined) return undefined
  const missing = maxItems + 1 - value.length
  if (missing <= 0) return undefined
  const itemSchema = merged.items.length === 0 ? {} : allOf(merged.items)
  const item = arbitraryOf(
    { schema: isObject(itemSchema) ? itemSchema : {}, definitions: state.document.definitions },
    { maxDepth: 2 }
  )
  const accepts = state.options.accepts
  const fits = (candidate: Json): boolean =>
    accepts === undefined ||
    accepts(
      setAt(state.root, path, value.length < maxItems ? [...value, candidate] : [...value.slice(0, -1), candidate])
    )
  const seen = new Set(value.map(canonical))
  const samples = fc.sample(item, { numRuns: missing * 4 + 16, seed: 42 })
  const fresh: Array<Json> = []
  for (const sample of samples) {
    if (fresh.length >= missing) break
    if (seen.has(canonical(sample)) || !fits(sample)) continue
    seen.add(canonical(sample))
    fresh.push(sample)
  }
  // Not enough acceptable distinct items: repeat the accepted ones (or the value's own), else take any valid ones.
  const fillers = fresh.length > 0 || value.length > 0 ? [...value, ...fresh] : samples
  for (let index = 0; fresh.length < missing && fillers.length > 0; index++) {
    fresh.push(fillers[index % fillers.length]!)
  }
  return fresh.length < missing ? undefined : [...value, ...fresh]
}
