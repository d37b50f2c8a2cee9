// JSON Merge Patch (RFC 7386), the `application/merge-patch+json` PATCH flavour: a patch document
// mirrors the shape of the target, and its members say what to set (a value), what to delete (null) and
// what to merge further (an object). `diff` goes the other way and computes the merge patch between two
// versions of a resource. Pure: inputs are never mutated; untouched members are shared with the input.

import { equals, hasMember, isObject } from "../Json.ts"
import type { Json, JsonObject } from "../Json.ts"

/**
 * Apply a merge patch to a target, following the pseudo-code of RFC 7386 §2 exactly: a patch that is
 * not an object replaces the target wholesale; an object patch turns a non-object (or missing) target
 * into `{}` and then, member by member, deletes the member when the patch value is null and otherwise
 * sets it to the recursive merge of the old member value with the patch value. Arrays are never merged,
 * they replace. Member order is preserved, and new members come after the existing ones.
 */
export const apply = (target: Json | undefined, patch: Json): Json => {
  if (!isObject(patch)) return patch
  // RFC 7386 §2: "if Target is not an Object: Target = {}", ignoring its contents.
  const members = new Map<string, Json>(isObject(target) ? Object.entries(target) : [])
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) members.delete(name)
    else members.set(name, apply(members.get(name), value))
  }
  // Object.fromEntries defines own data properties, so a member named "__proto__" stays a member.
  return Object.fromEntries(members)
}

/**
 * Compute a merge patch that turns `from` into `to`, so that `apply(from, diff(from, to))` equals `to`.
 * Between two objects the patch holds null for each removed member, the new value for each added member
 * and the recursive diff for each changed member; unchanged members are left out, so equal objects give
 * `{}` (a no-op patch). Any other pair gives `to` itself, since a non-object patch replaces the target.
 *
 * Limitation (RFC 7386 §1): a merge patch cannot set a member to null, because null in a patch means
 * "delete". When `to` holds null as a member value of an object reached without crossing an array, the
 * law does not hold: applying the patch deletes that member instead. Nulls inside arrays are fine, as
 * arrays are replaced verbatim, and so is a top-level null `to`.
 */
export const diff = (from: Json, to: Json): Json => {
  if (!isObject(from) || !isObject(to)) return to
  return diffObjects(from, to)
}

const diffObjects = (from: JsonObject, to: JsonObject): JsonObject => {
  const removed = Object.keys(from)
    .filter((name) => !hasMember(to, name))
    .map((name): [string, Json] => [name, null])
  const changed = Object.entries(to).flatMap(([name, value]): Array<[string, Json]> => {
    if (!hasMember(from, name)) return [[name, value]]
    const previous = from[name] as Json
    return equals(previous, value) ? [] : [[name, diff(previous, value)]]
  })
  return Object.fromEntries([...removed, ...changed])
}
