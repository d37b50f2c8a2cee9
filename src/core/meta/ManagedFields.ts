/**
 * `metadata.managedFields`: which field manager last set which fields, in Kubernetes' FieldsV1 form
 * (`{"f:spec":{"f:image":{}}}`). Server-side apply needs it to know what an applier stopped declaring, and users read
 * it to learn who changed what.
 *
 * Simplification, documented in docs/api-machinery.md: lists are atomic (a list is one leaf owned as a whole), so the
 * `k:`/`v:` keys of associative lists never appear.
 */
import { equals, hasMember, isObject, type Json, type JsonObject } from "../Json.ts"

/** A set of leaf paths; each path is a list of member names. */
export type FieldPath = ReadonlyArray<string>

export interface ManagedFieldsEntry {
  readonly manager: string
  readonly operation: "Apply" | "Update"
  readonly apiVersion: string
  readonly time: string
  readonly fieldsType: "FieldsV1"
  readonly fieldsV1: JsonObject
  readonly subresource?: string
}

/** One write, as the strategy reports it to this module. */
export interface ManagedWrite {
  readonly manager: string
  readonly operation: "Apply" | "Update"
  readonly apiVersion: string
  readonly time: string
  readonly subresource?: string
}

const separator = "\u0000"
const keyOf = (path: FieldPath): string => path.join(separator)
const pathOf = (key: string): FieldPath => key.split(separator)

/** The tracked part of an object: everything but identity and server-owned metadata. */
export const trackedPart = (object: JsonObject, subresource: string | undefined): JsonObject => {
  if (subresource === "status") return object["status"] === undefined ? {} : { status: object["status"] }
  const tracked: Record<string, Json> = {}
  for (const [key, value] of Object.entries(object)) {
    if (key === "apiVersion" || key === "kind" || key === "status") continue
    if (key === "metadata") {
      const metadata = isObject(value) ? value : {}
      const owned: Record<string, Json> = {}
      for (const field of ["labels", "annotations", "finalizers", "ownerReferences"]) {
        const fieldValue = metadata[field]
        if (fieldValue !== undefined && fieldValue !== null) owned[field] = fieldValue
      }
      if (Object.keys(owned).length > 0) tracked["metadata"] = owned
      continue
    }
    tracked[key] = value
  }
  return tracked
}

/** Every leaf path of a value: scalars, arrays and empty objects are leaves. */
export const leaves = (value: Json, prefix: FieldPath = []): ReadonlyArray<FieldPath> => {
  const found: Array<FieldPath> = []
  collectLeaves(value, prefix, found)
  return found
}

// Pushes into one array: a flatMap per level made an array per member of every object on the way.
const collectLeaves = (value: Json, path: FieldPath, found: Array<FieldPath>): void => {
  const keys = isObject(value) ? Object.keys(value) : []
  if (keys.length === 0) {
    if (path.length > 0) found.push(path)
    return
  }
  for (const key of keys) collectLeaves((value as JsonObject)[key] as Json, [...path, key], found)
}

/** FieldsV1 JSON of every leaf of a value: `toFieldsV1` of its `leaves`, built in one walk. */
const fieldsOf = (value: Json): JsonObject => {
  const fields: Record<string, Json> = {}
  if (isObject(value)) { for (const key of Object.keys(value)) fields[`f:${key}`] = fieldsOf(value[key] as Json) }
  return fields
}

const valueAt = (value: Json | undefined, path: FieldPath): Json | undefined => {
  let current = value
  for (const segment of path) {
    // Own members only: a field named like an Object.prototype property (toString, __proto__) is still a field.
    if (!isObject(current) || !hasMember(current, segment)) return undefined
    current = current[segment]
  }
  return current
}

/** Leaves of `after` whose value differs from `before`, plus leaves of `before` that `after` no longer has. */
export const changedLeaves = (before: JsonObject, after: JsonObject): ReadonlySet<string> => {
  const changed = new Set<string>()
  for (const path of leaves(after)) {
    const previous = valueAt(before, path)
    const next = valueAt(after, path) as Json
    if (previous === undefined || !equals(previous, next)) changed.add(keyOf(path))
  }
  for (const path of leaves(before)) if (valueAt(after, path) === undefined) changed.add(keyOf(path))
  return changed
}

/** FieldsV1 JSON of a set of leaf paths. */
export const toFieldsV1 = (paths: Iterable<string>): JsonObject => {
  const root: Record<string, Json> = {}
  for (const key of paths) {
    let node = root
    for (const segment of pathOf(key)) {
      const member = `f:${segment}`
      // Every node here was made by this loop, so it is extended in place (a copy per path was quadratic in a
      // node's width).
      const child = node[member] as Record<string, Json> | undefined
      const next: Record<string, Json> = child ?? {}
      node[member] = next
      node = next
    }
  }
  return root
}

/** The leaf paths a FieldsV1 JSON names. */
export const fromFieldsV1 = (fields: JsonObject, prefix: FieldPath = []): ReadonlyArray<string> => {
  const entries = Object.entries(fields).filter(([member]) => member.startsWith("f:"))
  if (entries.length === 0) return prefix.length === 0 ? [] : [keyOf(prefix)]
  return entries.flatMap(([member, child]) => fromFieldsV1(isObject(child) ? child : {}, [...prefix, member.slice(2)]))
}

const entryPaths = (entry: ManagedFieldsEntry): Set<string> => new Set(fromFieldsV1(entry.fieldsV1))

const sameOwner = (entry: ManagedFieldsEntry, write: ManagedWrite): boolean =>
  entry.manager === write.manager && entry.operation === write.operation && entry.subresource === write.subresource

const entryOf = (write: ManagedWrite, fieldsV1: JsonObject): ManagedFieldsEntry => ({
  manager: write.manager,
  operation: write.operation,
  apiVersion: write.apiVersion,
  time: write.time,
  fieldsType: "FieldsV1",
  fieldsV1,
  ...(write.subresource === undefined ? {} : { subresource: write.subresource })
})

const makeEntry = (write: ManagedWrite, paths: ReadonlySet<string>): ManagedFieldsEntry =>
  entryOf(write, toFieldsV1(paths))

/**
 * The managed fields after a write. An Update takes ownership of the leaves it changed; an Apply owns exactly the
 * leaves of its applied configuration (`applied`). Other managers lose the leaves whose value changed, and every
 * manager loses leaves the object no longer has. Entries left with no fields are dropped, as Kubernetes does.
 */
export const record = (
  entries: ReadonlyArray<ManagedFieldsEntry>,
  write: ManagedWrite,
  before: JsonObject,
  after: JsonObject,
  applied?: JsonObject
): ReadonlyArray<ManagedFieldsEntry> => {
  const beforeTracked = trackedPart(before, write.subresource)
  const afterTracked = trackedPart(after, write.subresource)
  // A create (no entries, nothing before) by an Update: the writer owns every leaf, so its entry is the object's shape
  // (what the general rules below give, without their sets of path keys: a create is the API's hottest write).
  if (entries.length === 0 && write.operation === "Update" && Object.keys(beforeTracked).length === 0) {
    const fieldsV1 = fieldsOf(afterTracked)
    return Object.keys(fieldsV1).length === 0 ? [] : [entryOf(write, fieldsV1)]
  }
  const changed = changedLeaves(beforeTracked, afterTracked)
  const present = new Set(leaves(afterTracked).map(keyOf))
  const kept = (paths: Iterable<string>) => new Set([...paths].filter((path) => present.has(path)))

  // Other managers lose what this write changed; only fields of the same part (main resource or status) change hands.
  const transferred = (entry: ManagedFieldsEntry): ManagedFieldsEntry =>
    entry.subresource !== write.subresource
      ? entry
      : { ...entry, fieldsV1: toFieldsV1(kept([...entryPaths(entry)].filter((path) => !changed.has(path)))) }
  const previous = entries.find((entry) => sameOwner(entry, write))
  const ownPaths = write.operation === "Apply" && applied !== undefined
    ? kept(leaves(trackedPart(applied, write.subresource)).map(keyOf))
    : kept([...(previous === undefined ? [] : entryPaths(previous)), ...changed])
  const candidate = ownPaths.size === 0 ? undefined : makeEntry(write, ownPaths)
  // An unchanged entry keeps its time so that a no-op write leaves managedFields as they were.
  const own = previous !== undefined && candidate !== undefined && changed.size === 0 &&
      equals(previous.fieldsV1, candidate.fieldsV1)
    ? previous
    : candidate
  // The writer's entry keeps its place in the list; a new manager's entry goes last.
  const updated = entries.map((entry) => (sameOwner(entry, write) ? own : transferred(entry)))
  const listed = previous === undefined ? [...updated, own] : updated
  return listed.filter((entry): entry is ManagedFieldsEntry =>
    entry !== undefined && Object.keys(entry.fieldsV1).length > 0
  )
}

/** The leaf paths an Apply manager owned before this apply (what server-side apply may now remove). */
export const appliedPaths = (
  entries: ReadonlyArray<ManagedFieldsEntry>,
  manager: string,
  subresource?: string
): ReadonlyArray<FieldPath> =>
  entries
    .filter((entry) => entry.manager === manager && entry.operation === "Apply" && entry.subresource === subresource)
    .flatMap((entry) => fromFieldsV1(entry.fieldsV1).map(pathOf))

/** Leaf paths owned by any manager other than `manager` (the fields apply must not remove). */
export const pathsOwnedByOthers = (entries: ReadonlyArray<ManagedFieldsEntry>, manager: string): ReadonlySet<string> =>
  new Set(entries.filter((entry) => entry.manager !== manager).flatMap((entry) => fromFieldsV1(entry.fieldsV1)))

export const pathKey = keyOf

/** The path a key of `changedLeaves` stands for. */
export const keyPath = pathOf
