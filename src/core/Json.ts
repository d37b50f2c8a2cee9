// JSON values as immutable plain data, with the three questions the API server keeps asking of them:
// "is this an object?", "are these two documents the same?" and "what is the one canonical text of this
// document?" (for idempotency payload hashes and no-op detection). Pure: no I/O, inputs never mutated.
//
// Object keys are always read with Object.hasOwn and objects are always built with spread or
// Object.fromEntries, so member names such as "__proto__" or "constructor" behave like any other name.

/** A JSON value (RFC 8259 §3). Numbers are expected to be finite: NaN and ±Infinity are not JSON. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** A JSON object (RFC 8259 §4): an unordered collection of name/value pairs. */
export type JsonObject = { readonly [key: string]: Json }

/**
 * Whether a value is a JSON object: a non-null, non-array object. `undefined` (a missing member) is
 * accepted so that callers can ask about `object[key]` directly; it is never an object.
 */
export const isObject = (value: Json | undefined): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Whether a value is a JSON array. This exists because `Array.isArray` narrows to a mutable `any[]`,
 * which does not remove `ReadonlyArray<Json>` from a union in its false branch.
 */
export const isArray = (value: Json | undefined): value is ReadonlyArray<Json> => Array.isArray(value)

/**
 * Whether an own member named `key` exists on `object`. Inherited properties such as "constructor" or
 * "toString" are never members of a JSON object.
 */
export const hasMember = (object: JsonObject, key: string): boolean => Object.hasOwn(object, key)

/**
 * Deep equality of two JSON values, as RFC 6902 §4.6 defines it: numbers compare by numeric value,
 * strings by code units, arrays element by element in order, and objects by their member sets with
 * member order ignored.
 */
export const equals = (a: Json, b: Json): boolean => {
  if (a === b) return true
  if (isArray(a)) {
    return isArray(b) && a.length === b.length && a.every((element, index) => equals(element, b[index] as Json))
  }
  if (isObject(a)) return isObject(b) && objectsEqual(a, b)
  return false
}

// Two objects are equal when they have the same number of own members and every member of `a` exists in
// `b` with an equal value; together these imply the key sets coincide.
const objectsEqual = (a: JsonObject, b: JsonObject): boolean => {
  const keys = Object.keys(a)
  if (keys.length !== Object.keys(b).length) return false
  return keys.every((key) => hasMember(b, key) && equals(a[key] as Json, b[key] as Json))
}

/**
 * The canonical JSON text of a value: no insignificant whitespace and object members sorted by name,
 * recursively, so that `canonical(a) === canonical(b)` exactly when `equals(a, b)`. Member names are
 * sorted by UTF-16 code units and numbers and strings are serialised as ECMAScript's JSON.stringify
 * does, which is the JSON Canonicalization Scheme of RFC 8785 §3.2 for finite numbers.
 */
export const canonical = (value: Json): string => {
  if (isArray(value)) return `[${value.map(canonical).join(",")}]`
  if (isObject(value)) {
    // Default sort compares UTF-16 code units, which is the order RFC 8785 §3.2.3 prescribes.
    const members = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key] as Json)}`)
    return `{${members.join(",")}}`
  }
  return JSON.stringify(value)
}

/**
 * Whether an untrusted value is a JSON value: null, a boolean, a finite number, a string, an array of
 * JSON values or a plain object (prototype Object.prototype or null) whose own enumerable members are
 * JSON values. Cyclic structures are rejected, since JSON text cannot express them.
 */
export const isJson = (value: unknown): value is Json => isJsonWithin(value, new Set())

// `ancestors` holds the containers on the path from the root to `value`, to detect cycles.
const isJsonWithin = (value: unknown, ancestors: Set<object>): boolean => {
  if (value === null || typeof value === "boolean" || typeof value === "string") return true
  if (typeof value === "number") return Number.isFinite(value)
  if (typeof value !== "object" || ancestors.has(value)) return false
  if (!Array.isArray(value) && !isPlainObject(value)) return false
  // Array.from turns holes of a sparse array into undefined, which is rightly rejected.
  const members: ReadonlyArray<unknown> = Array.isArray(value) ? Array.from(value) : Object.values(value)
  ancestors.add(value)
  const valid = members.every((member) => isJsonWithin(member, ancestors))
  ancestors.delete(value)
  return valid
}

const isPlainObject = (value: object): boolean => {
  const prototype: unknown = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}
