// JSON Patch (RFC 6902), the `application/json-patch+json` PATCH flavour, addressed with JSON Pointer
// (RFC 6901). `decode` validates an untrusted patch document into typed operations; `apply` runs them in
// order against a document. Pure: the target is never mutated (new values share untouched subtrees with
// it), which also makes every patch atomic, since an error simply discards the partial result.

import { equals, hasMember, isArray, isJson, isObject } from "../Json.ts"
import type { Json, JsonObject } from "../Json.ts"

/** One JSON Patch operation (RFC 6902 §4). Pointers are RFC 6901 strings. */
export type Operation =
  | { readonly op: "add"; readonly path: string; readonly value: Json }
  | { readonly op: "remove"; readonly path: string }
  | { readonly op: "replace"; readonly path: string; readonly value: Json }
  | { readonly op: "move"; readonly from: string; readonly path: string }
  | { readonly op: "copy"; readonly from: string; readonly path: string }
  | { readonly op: "test"; readonly path: string; readonly value: Json }

/**
 * Why a patch failed. `index` is the position of the failing operation in the patch (-1 when the patch
 * document itself is malformed, e.g. not an array); `path` is the pointer at fault (the operation's
 * `from` when that is what failed to resolve). `reason` is "Invalid" for malformed operations, pointers
 * and array indices and for moves into a child; "NotFound" for a location that does not exist (a missing
 * member, an index out of bounds, a parent that is not a container); "TestFailed" for a `test` whose
 * value differs.
 */
export interface PatchError {
  readonly index: number
  readonly path: string
  readonly message: string
  readonly reason: "Invalid" | "TestFailed" | "NotFound"
}

/** The outcome of applying a patch: the patched document, or the first error. */
export type PatchResult = { readonly _tag: "Ok"; readonly value: Json } | {
  readonly _tag: "Err"
  readonly error: PatchError
}

// An error before it is attributed to an operation index.
type Fault = Omit<PatchError, "index">

// The outcome of one step inside an operation.
type Step = { readonly _tag: "Ok"; readonly value: Json } | { readonly _tag: "Err"; readonly error: Fault }

const ok = (value: Json): Step => ({ _tag: "Ok", value })
const fault = (reason: Fault["reason"], path: string, message: string): Step => ({
  _tag: "Err",
  error: { reason, path, message }
})

// ---------------------------------------------------------------------------------------------------
// JSON Pointer (RFC 6901)
// ---------------------------------------------------------------------------------------------------

/**
 * Parse an RFC 6901 JSON Pointer into its reference tokens: "" is the whole document (no tokens), and
 * otherwise the pointer must start with "/" and each "/"-separated token is unescaped, "~1" to "/" and
 * then "~0" to "~" (RFC 6901 §4, so "~01" is "~1"). Returns undefined for an invalid pointer: a
 * non-empty one that does not start with "/", or one with a "~" not followed by "0" or "1" (§3).
 */
export const parsePointer = (pointer: string): ReadonlyArray<string> | undefined => {
  if (pointer === "") return []
  if (!pointer.startsWith("/")) return undefined
  const tokens = pointer.slice(1).split("/")
  if (tokens.some((token) => /~(?![01])/.test(token))) return undefined
  return tokens.map((token) => token.replaceAll("~1", "/").replaceAll("~0", "~"))
}

// RFC 6901 §4: array-index = %x30 / ( %x31-39 *%x30-39 ), i.e. decimal without leading zeros.
const arrayIndexSyntax = /^(?:0|[1-9][0-9]*)$/

// Resolve a reference token against an array of `length` elements. `allowEnd` admits `length` itself
// (and "-", which RFC 6901 §4 defines as the nonexistent element after the last), as `add` needs.
const arrayIndex = (token: string, length: number, allowEnd: boolean, pointer: string): number | Fault => {
  if (token === "-") {
    return allowEnd
      ? length
      : { reason: "NotFound", path: pointer, message: `"-" refers to a nonexistent array element` }
  }
  if (!arrayIndexSyntax.test(token)) {
    return { reason: "Invalid", path: pointer, message: `"${token}" is not an array index` }
  }
  const index = Number(token)
  const limit = allowEnd ? length : length - 1
  if (index > limit) {
    return { reason: "NotFound", path: pointer, message: `array index ${token} is out of bounds (length ${length})` }
  }
  return index
}

// The child of `container` named by `token`, when it exists.
const child = (container: Json, token: string, pointer: string): Step => {
  if (isArray(container)) {
    const index = arrayIndex(token, container.length, false, pointer)
    return typeof index === "number" ? ok(container[index] as Json) : { _tag: "Err", error: index }
  }
  if (isObject(container) && hasMember(container, token)) return ok(container[token] as Json)
  return fault("NotFound", pointer, `no value at "${pointer}"`)
}

// The value at `tokens` within `document`.
const valueAt = (document: Json, tokens: ReadonlyArray<string>, pointer: string): Step => {
  let current: Step = ok(document)
  for (const token of tokens) {
    if (current._tag === "Err") return current
    current = child(current.value, token, pointer)
  }
  return current
}

// ---------------------------------------------------------------------------------------------------
// Immutable edits
// ---------------------------------------------------------------------------------------------------

// An edit of the container that holds the target location, given the location's last token.
type Edit = (parent: Json, token: string) => Step

// Apply `edit` to the parent of the location `tokens` (non-empty), rebuilding the containers above it
// with every untouched subtree shared. `depth` is the number of tokens already descended.
const editParent = (
  document: Json,
  tokens: ReadonlyArray<string>,
  depth: number,
  pointer: string,
  edit: Edit
): Step => {
  const token = tokens[depth] as string
  if (depth === tokens.length - 1) return edit(document, token)
  const below = child(document, token, pointer)
  if (below._tag === "Err") return below
  const edited = editParent(below.value, tokens, depth + 1, pointer, edit)
  if (edited._tag === "Err") return edited
  // `child` succeeded, so `document` is a container and `token` names an existing element or member.
  if (isArray(document)) return ok(document.with(Number(token), edited.value))
  return isObject(document) ? ok({ ...document, [token]: edited.value }) : notContainer(pointer)
}

const withoutMember = (object: JsonObject, name: string): JsonObject =>
  Object.fromEntries(Object.entries(object).filter(([key]) => key !== name))

const notContainer = (pointer: string): Step =>
  fault("NotFound", pointer, `the parent of "${pointer}" is not an object or array`)

// RFC 6902 §4.1: insert into an array (shifting later elements), or add or overwrite an object member.
const addEdit = (value: Json, pointer: string): Edit => (parent, token) => {
  if (isArray(parent)) {
    const index = arrayIndex(token, parent.length, true, pointer)
    return typeof index === "number" ? ok(parent.toSpliced(index, 0, value)) : { _tag: "Err", error: index }
  }
  // A computed key in an object literal defines an own property, even for "__proto__".
  return isObject(parent) ? ok({ ...parent, [token]: value }) : notContainer(pointer)
}

// RFC 6902 §4.2: the target location must exist; array elements above it shift down.
const removeEdit = (pointer: string): Edit => (parent, token) => {
  if (isArray(parent)) {
    const index = arrayIndex(token, parent.length, false, pointer)
    return typeof index === "number" ? ok(parent.toSpliced(index, 1)) : { _tag: "Err", error: index }
  }
  if (isObject(parent) && hasMember(parent, token)) return ok(withoutMember(parent, token))
  return isObject(parent) ? fault("NotFound", pointer, `no value at "${pointer}"`) : notContainer(pointer)
}

// RFC 6902 §4.3: the target location must exist; its value is replaced in place.
const replaceEdit = (value: Json, pointer: string): Edit => (parent, token) => {
  if (isArray(parent)) {
    const index = arrayIndex(token, parent.length, false, pointer)
    return typeof index === "number" ? ok(parent.with(index, value)) : { _tag: "Err", error: index }
  }
  if (isObject(parent) && hasMember(parent, token)) return ok({ ...parent, [token]: value })
  return isObject(parent) ? fault("NotFound", pointer, `no value at "${pointer}"`) : notContainer(pointer)
}

// RFC 6902 §4.1: adding at the root replaces the whole document.
const addAt = (document: Json, tokens: ReadonlyArray<string>, pointer: string, value: Json): Step =>
  tokens.length === 0 ? ok(value) : editParent(document, tokens, 0, pointer, addEdit(value, pointer))

// Removing the root would leave no document at all, which JSON cannot represent.
const removeAt = (document: Json, tokens: ReadonlyArray<string>, pointer: string): Step =>
  tokens.length === 0
    ? fault("Invalid", pointer, "the document root cannot be removed")
    : editParent(document, tokens, 0, pointer, removeEdit(pointer))

const replaceAt = (document: Json, tokens: ReadonlyArray<string>, pointer: string, value: Json): Step =>
  tokens.length === 0 ? ok(value) : editParent(document, tokens, 0, pointer, replaceEdit(value, pointer))

// ---------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------

const isProperPrefix = (prefix: ReadonlyArray<string>, tokens: ReadonlyArray<string>): boolean =>
  prefix.length < tokens.length && prefix.every((token, index) => tokens[index] === token)

const sameTokens = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length === b.length && a.every((token, index) => b[index] === token)

// RFC 6902 §4.4: remove at `from`, then add the removed value at `path`; moving a location into one of
// its own children is an error. Moving a location onto itself changes nothing.
const move = (
  document: Json,
  from: ReadonlyArray<string>,
  fromPointer: string,
  path: ReadonlyArray<string>,
  pointer: string
): Step => {
  if (isProperPrefix(from, path)) {
    return fault("Invalid", fromPointer, `cannot move "${fromPointer}" into its own child "${pointer}"`)
  }
  const moved = valueAt(document, from, fromPointer)
  if (moved._tag === "Err") return moved
  if (sameTokens(from, path)) return ok(document)
  const removed = removeAt(document, from, fromPointer)
  return removed._tag === "Err" ? removed : addAt(removed.value, path, pointer, moved.value)
}

// RFC 6902 §4.5: add a copy of the value at `from` to `path`.
const copy = (
  document: Json,
  from: ReadonlyArray<string>,
  fromPointer: string,
  path: ReadonlyArray<string>,
  pointer: string
): Step => {
  const copied = valueAt(document, from, fromPointer)
  return copied._tag === "Err" ? copied : addAt(document, path, pointer, copied.value)
}

// RFC 6902 §4.6: the value at `path` must equal `value` (deep equality, see Json.equals).
const testValue = (document: Json, path: ReadonlyArray<string>, pointer: string, value: Json): Step => {
  const actual = valueAt(document, path, pointer)
  if (actual._tag === "Err") return actual
  return equals(actual.value, value)
    ? ok(document)
    : fault("TestFailed", pointer, `the value at "${pointer}" differs from the expected value`)
}

const invalidPointer = (pointer: string): Step => fault("Invalid", pointer, `"${pointer}" is not a valid JSON pointer`)

// Apply one operation to `document`, parsing its pointers first.
const applyOperation = (document: Json, operation: Operation): Step => {
  const path = parsePointer(operation.path)
  if (path === undefined) return invalidPointer(operation.path)
  switch (operation.op) {
    case "add":
      return addAt(document, path, operation.path, operation.value)
    case "remove":
      return removeAt(document, path, operation.path)
    case "replace":
      return replaceAt(document, path, operation.path, operation.value)
    case "test":
      return testValue(document, path, operation.path, operation.value)
    case "move":
    case "copy": {
      const from = parsePointer(operation.from)
      if (from === undefined) return invalidPointer(operation.from)
      const run = operation.op === "move" ? move : copy
      return run(document, from, operation.from, path, operation.path)
    }
  }
}

/**
 * Apply a JSON Patch: the operations run in order, each against the result of the previous one
 * (RFC 6902 §3), and the patch is atomic (§5): the first failing operation makes the whole patch an
 * `Err` carrying that operation's index, and the target itself is never modified either way.
 */
export const apply = (target: Json, operations: ReadonlyArray<Operation>): PatchResult => {
  let document = target
  for (const [index, operation] of operations.entries()) {
    const step = applyOperation(document, operation)
    if (step._tag === "Err") return { _tag: "Err", error: { index, ...step.error } }
    document = step.value
  }
  return { _tag: "Ok", value: document }
}

// ---------------------------------------------------------------------------------------------------
// Decoding untrusted patch documents
// ---------------------------------------------------------------------------------------------------

/** The outcome of decoding a patch document. */
export type DecodeResult =
  | { readonly _tag: "Ok"; readonly operations: ReadonlyArray<Operation> }
  | { readonly _tag: "Err"; readonly error: PatchError }

// The outcome of decoding one part of a patch document.
type Decoding<A> = { readonly _tag: "Ok"; readonly value: A } | { readonly _tag: "Err"; readonly error: Fault }

// An operation object before validation.
type Fields = Readonly<Record<string, unknown>>

const isRecord = (value: unknown): value is Fields =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const decoded = <A>(value: A): Decoding<A> => ({ _tag: "Ok", value })

const invalid = (path: string, message: string): Decoding<never> => ({
  _tag: "Err",
  error: { reason: "Invalid", path, message }
})

// A required member of an operation object; `path` is the operation's path, for error reports.
const member = (record: Fields, name: string, path: string): Decoding<unknown> =>
  Object.hasOwn(record, name) ? decoded(record[name]) : invalid(path, `operation is missing the "${name}" member`)

// A required member holding a valid JSON pointer.
const pointerMember = (record: Fields, name: "path" | "from", path: string): Decoding<string> => {
  const found = member(record, name, path)
  if (found._tag === "Err") return found
  if (typeof found.value !== "string") return invalid(path, `the "${name}" member must be a string`)
  return parsePointer(found.value) === undefined
    ? invalid(found.value, `"${found.value}" is not a valid JSON pointer`)
    : decoded(found.value)
}

// A required "value" member holding a JSON value (null included).
const valueMember = (record: Fields, path: string): Decoding<Json> => {
  const found = member(record, "value", path)
  if (found._tag === "Err") return found
  return isJson(found.value) ? decoded(found.value) : invalid(path, `the "value" member is not a JSON value`)
}

// Decode one operation object. Members other than the ones its "op" requires are ignored (RFC 6902 §4).
const decodeOperation = (element: unknown): Decoding<Operation> => {
  if (!isRecord(element)) return invalid("", "an operation must be a JSON object")
  const reportedPath = typeof element["path"] === "string" ? element["path"] : ""
  const op = member(element, "op", reportedPath)
  if (op._tag === "Err") return op
  const path = pointerMember(element, "path", reportedPath)
  if (path._tag === "Err") return path
  switch (op.value) {
    case "remove":
      return decoded({ op: "remove", path: path.value })
    case "add":
    case "replace":
    case "test": {
      const value = valueMember(element, path.value)
      return value._tag === "Err" ? value : decoded({ op: op.value, path: path.value, value: value.value })
    }
    case "move":
    case "copy": {
      const from = pointerMember(element, "from", path.value)
      return from._tag === "Err" ? from : decoded({ op: op.value, from: from.value, path: path.value })
    }
    default:
      return invalid(
        path.value,
        typeof op.value === "string" ? `unknown operation "${op.value}"` : `the "op" member must be a string`
      )
  }
}

/**
 * Decode an untrusted JSON Patch document (typically the parsed request body): it must be an array
 * (RFC 6902 §3) of operation objects, each with a known "op", a valid "path" pointer and the members
 * that op requires ("value" for add, replace and test; a valid "from" pointer for move and copy).
 * Unknown members are dropped. Errors carry the index of the offending operation, or -1 when the
 * document is not an array. Duplicate member names (RFC 6902 Appendix A.13) cannot be detected here,
 * since JSON.parse keeps the last one.
 */
export const decode = (document: unknown): DecodeResult => {
  if (!Array.isArray(document)) {
    return {
      _tag: "Err",
      error: { index: -1, reason: "Invalid", path: "", message: "a JSON patch document must be an array of operations" }
    }
  }
  const elements: ReadonlyArray<unknown> = document
  const operations: Array<Operation> = []
  for (const [index, element] of elements.entries()) {
    const operation = decodeOperation(element)
    if (operation._tag === "Err") return { _tag: "Err", error: { index, ...operation.error } }
    operations.push(operation.value)
  }
  return { _tag: "Ok", operations }
}
