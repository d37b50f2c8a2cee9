/**
 * Building blocks for the kinds' schemas: bounded integers, durations, quantities, USD amounts, names, enumerations,
 * defaults and cross-field rules, each with a Kubernetes-style message for admission and a JSON Schema fragment for
 * OpenAPI and test-data generation. A rule written once here is enforced, documented and generated alike.
 *
 * JSON Schema extensions (kept by the OpenAPI 3.0.3 conversion, read by the test arbitraries):
 * `x-nodus-duration` {minimumMs, maximumMs, zero}, `x-nodus-quantity` {maximum}, `x-nodus-usd`, and `x-nodus-keys`
 * (a map's key schema: JSON Schema's propertyNames, which OpenAPI 3.0 lacks).
 */
import { Effect, Schema } from "effect"
import { compareUsd, formatDurationMs, isUsd, parseDurationMs, parseQuantity, usdPattern } from "../Units.ts"

/**
 * A field's schema with its description (what `kubectl explain` prints). The description is a key annotation: it
 * lands beside the field's schema, so a named schema keeps its own description and single definition, and a schema
 * whose last check has no JSON Schema form (a cross-field rule) does not lose it.
 */
export const described = <S extends Schema.Top>(schema: S, description: string): S["Rebuild"] =>
  schema.annotateKey({ description })

/** An optional field with a description. */
export const optional = <S extends Schema.Top>(schema: S, description: string) =>
  Schema.optionalKey(described(schema, description) as S)

/**
 * A field that takes `value` when absent (spec: "default …"): applied at admission, so it is stored and visible on
 * read, and shown as `default` in OpenAPI.
 */
export const defaulted = <S extends Schema.Top>(schema: S, value: S["Encoded"], description: string) =>
  Schema.withDecodingDefaultKey(Effect.succeed(value))(schema.annotateKey({ description, default: value }) as S)

/** An integer from `minimum` to `maximum` inclusive. */
export const intBetween = (minimum: number, maximum: number) =>
  Schema.Int.check(Schema.makeFilter(
    (value: number) =>
      value >= minimum && value <= maximum
        ? undefined
        : `Invalid value: ${value}: must be between ${minimum} and ${maximum}, inclusive`,
    { toJsonSchema: () => ({ minimum, maximum }) }
  ))

/** An integer of at least `minimum`. */
export const intAtLeast = (minimum: number) =>
  Schema.Int.check(Schema.makeFilter(
    (value: number) =>
      value >= minimum ? undefined : `Invalid value: ${value}: must be greater than or equal to ${minimum}`,
    { toJsonSchema: () => ({ minimum }) }
  ))

/** One of `values` (one of the spec's value sets, e.g. Never | Allow | Prefer), refused in Kubernetes' words. */
export const oneOf = <const Values extends ReadonlyArray<string | number | boolean>>(values: Values) =>
  Schema.Literals(values).annotate({
    message: `Unsupported value: supported values: ${values.map((value) => JSON.stringify(value)).join(", ")}`
  })

export const durationPattern = "^(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$"

export interface DurationBounds {
  readonly minimumMs?: number
  readonly maximumMs?: number
  /** "0s" allowed below the minimum (e.g. idleTimeout: 0s means never). */
  readonly zero?: boolean
}

const rangeText = (bounds: DurationBounds): string => {
  const parts: Array<string> = []
  if (bounds.minimumMs !== undefined && bounds.maximumMs !== undefined) {
    parts.push(`between ${formatDurationMs(bounds.minimumMs)} and ${formatDurationMs(bounds.maximumMs)}`)
  } else if (bounds.minimumMs !== undefined) parts.push(`at least ${formatDurationMs(bounds.minimumMs)}`)
  else if (bounds.maximumMs !== undefined) parts.push(`at most ${formatDurationMs(bounds.maximumMs)}`)
  return `${bounds.zero === true ? "0s or " : ""}${parts.join("")}`
}

/** A duration string ("30s", "15m", "24h") within bounds (spec: Conventions 2). */
export const duration = (bounds: DurationBounds = {}) =>
  Schema.String.check(Schema.makeFilter(
    (text: string) => {
      const milliseconds = parseDurationMs(text)
      if (milliseconds === undefined) return `Invalid value: "${text}": must be a duration such as 30s, 15m or 24h`
      if (bounds.zero === true && milliseconds === 0) return undefined
      const tooSmall = bounds.minimumMs !== undefined && milliseconds < bounds.minimumMs
      const tooLarge = bounds.maximumMs !== undefined && milliseconds > bounds.maximumMs
      return tooSmall || tooLarge ? `Invalid value: "${text}": must be ${rangeText(bounds)}` : undefined
    },
    { toJsonSchema: () => ({ pattern: durationPattern, "x-nodus-duration": { ...bounds } }) }
  ))

export const quantityPattern = "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"

/** A Kubernetes quantity ("16Gi", "500m", "2"), at most `maximum` base units when given. */
export const quantity = (maximum?: { readonly value: number; readonly text: string }) =>
  Schema.String.check(Schema.makeFilter(
    (text: string) => {
      const value = parseQuantity(text)
      if (value === undefined) return `Invalid value: "${text}": must be a quantity such as 16Gi, 500m or 2`
      return maximum !== undefined && value > maximum.value
        ? `Invalid value: "${text}": must be at most ${maximum.text}`
        : undefined
    },
    {
      toJsonSchema: () => ({
        pattern: quantityPattern,
        ...(maximum === undefined ? {} : { "x-nodus-quantity": { maximum: maximum.value } })
      })
    }
  ))

/** A USD amount: a decimal string with at most six decimals (spec: Conventions 2; the ledger counts micro-USD). */
export const usd = Schema.String.check(Schema.makeFilter(
  (text: string) =>
    isUsd(text)
      ? undefined
      : `Invalid value: "${text}": must be a decimal USD amount such as 12.50, with at most 6 decimals`,
  { toJsonSchema: () => ({ pattern: usdPattern.source, "x-nodus-usd": true }) }
))

/** A USD amount above zero (a rate, a grant, a top-up). */
export const positiveUsd = usd.check(Schema.makeFilter(
  // Text that is no USD amount is refused by `usd` alone (every check runs; compareUsd would throw on it).
  (text: string) =>
    !isUsd(text) || compareUsd(text, "0") > 0 ? undefined : `Invalid value: "${text}": must be greater than 0`,
  { toJsonSchema: () => ({ not: { pattern: "^0(\\.0*)?$" } }) }
))

/** A string matching `pattern` (which must carry the `u` flag), with the spec's wording of the rule. */
export const matching = (pattern: RegExp, rule: string) =>
  Schema.String.check(Schema.makeFilter(
    (text: string) => pattern.test(text) ? undefined : `Invalid value: "${text}": ${rule}`,
    { toJsonSchema: () => ({ pattern: pattern.source }) }
  ))

/** A decimal number written as a string, such as 0.05 or -1.25 (metrics, rates, rewards); never a float on the wire. */
export const decimalString = matching(/^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/u, "must be a decimal string such as 0.25")

/** The check that a string is not empty. */
export const notEmpty = Schema.makeFilter(
  (text: string) => text.length > 0 ? undefined : "Required value: must not be empty",
  { toJsonSchema: () => ({ minLength: 1 }) }
)

/** A non-empty string. */
export const nonEmpty = Schema.String.check(notEmpty)

/** A list of at most `maximum` items. */
export const listOf = <S extends Schema.Top>(item: S, maximum: number) =>
  Schema.Array(item).check(Schema.makeFilter(
    (items: ReadonlyArray<unknown>) =>
      items.length <= maximum ? undefined : `Too many: ${items.length}: must have at most ${maximum} items`,
    { toJsonSchema: () => ({ maxItems: maximum }) }
  ))

/**
 * A map whose keys obey `keyProblem` (undefined for a good key). Keys are checked by a filter, not by the record's key
 * schema: Effect reports a key its key schema refuses as an excess property, which `fieldValidation` would then drop
 * instead of refusing. `propertyNames` is the keys' JSON Schema, for OpenAPI and generated test data.
 */
export const mapOf = <S extends Schema.Top>(
  value: S,
  keyProblem: (key: string) => string | undefined,
  propertyNames?: object
) =>
  Schema.Record(Schema.String, value).check(Schema.makeFilter(
    (map: Readonly<Record<string, unknown>>) =>
      Object.keys(map).flatMap((key) => {
        const problem = keyProblem(key)
        return problem === undefined ? [] : [{ path: [key], issue: `Invalid value: "${key}": ${problem}` }]
      }),
    // OpenAPI 3.0 has no propertyNames, hence the extension; it is at most as strict as keyProblem.
    { toJsonSchema: () => [propertyNames === undefined ? {} : { "x-nodus-keys": propertyNames }, true] }
  ))

/** An absolute path (starts with "/"). */
export const absolutePath = matching(/^\/.*$/u, "must be an absolute path")

const present = (value: object, field: string): boolean => (value as Record<string, unknown>)[field] !== undefined

/** Exactly one of `fields` is set (spec: "exactly one of"). */
export const exactlyOneOf = <T extends object>(fields: ReadonlyArray<string>) =>
  Schema.makeFilter<T>(
    (value) => {
      const set = fields.filter((field) => present(value, field))
      return set.length === 1
        ? undefined
        : `Invalid value: exactly one of ${fields.join(", ")} must be set${
          set.length > 1 ? ` (found ${set.join(", ")})` : ""
        }`
    },
    { toJsonSchema: () => ({ oneOf: fields.map((field) => ({ required: [field] })) }) }
  )

/** `field` may be set only when `requires` holds (spec: "only with"). */
export const onlyWith = <T extends object>(field: string, condition: string, requires: (value: T) => boolean) =>
  Schema.makeFilter<T>(
    (value) =>
      !present(value, field) || requires(value)
        ? undefined
        : { path: [field], issue: `Forbidden: may only be set with ${condition}` },
    // A cross-field rule JSON Schema does not express: documented, and the generated data is checked by admission.
    { toJsonSchema: () => [{}, true] }
  )

/** The names of items are unique within their list. */
export const uniqueBy = <T>(key: (item: T) => string, what: string) =>
  Schema.makeFilter<ReadonlyArray<T>>(
    (items) => {
      const seen = new Set<string>()
      const issues: Array<{ readonly path: ReadonlyArray<PropertyKey>; readonly issue: string }> = []
      items.forEach((item, index) => {
        const name = key(item)
        if (seen.has(name)) issues.push({ path: [index], issue: `Duplicate value: "${name}": ${what} must be unique` })
        seen.add(name)
      })
      return issues
    },
    // Items unique by a key are unique as wholes too, so uniqueItems is a looser approximation.
    { toJsonSchema: () => [{ uniqueItems: true }, true] }
  )
