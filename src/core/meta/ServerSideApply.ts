/**
 * Server-side apply (`application/apply-patch+yaml`, `kubectl apply --server-side`): the applied configuration states
 * the manager's whole intent. Fields the manager applied before and no longer states are removed, unless another
 * manager also owns them; every stated field is merged in (objects recursively, lists and scalars replaced, lists
 * being atomic in nodus — see ManagedFields.ts).
 */
import { hasMember, isObject, type Json, type JsonObject } from "../Json.ts"
import * as ManagedFields from "./ManagedFields.ts"
import type { ResourceObject } from "./ObjectMeta.ts"

const without = (value: Json, path: ReadonlyArray<string>): Json => {
  if (!isObject(value) || path.length === 0) return value
  const [head, ...rest] = path as [string, ...Array<string>]
  if (!Object.hasOwn(value, head)) return value
  if (rest.length === 0) {
    const { [head]: _removed, ...kept } = value
    return kept
  }
  const child = without(value[head] as Json, rest)
  // A map emptied by the removal goes too, as it would had the manager never set it.
  if (isObject(child) && Object.keys(child).length === 0) {
    const { [head]: _removed, ...kept } = value
    return kept
  }
  return { ...value, [head]: child }
}

const merge = (target: Json | undefined, configuration: Json): Json => {
  if (!isObject(configuration) || !isObject(target)) return configuration
  const merged: Record<string, Json> = { ...target }
  for (const [key, value] of Object.entries(configuration)) {
    merged[key] = merge(hasMember(target, key) ? target[key] : undefined, value)
  }
  return merged
}

/** The object after applying `configuration` for `manager` to `current`. */
export const apply = (current: ResourceObject, configuration: JsonObject, manager: string): JsonObject => {
  const entries = (current.metadata.managedFields ?? []) as unknown as ReadonlyArray<ManagedFields.ManagedFieldsEntry>
  const stated = new Set(
    ManagedFields.leaves(ManagedFields.trackedPart(configuration, undefined)).map(ManagedFields.pathKey)
  )
  const others = ManagedFields.pathsOwnedByOthers(entries, manager)
  let result: Json = current as unknown as JsonObject
  for (const path of ManagedFields.appliedPaths(entries, manager)) {
    const key = ManagedFields.pathKey(path)
    if (!stated.has(key) && !others.has(key)) result = without(result, path)
  }
  const { metadata: configuredMetadata, ...configuredBody } = configuration
  const withBody = merge(result, configuredBody) as JsonObject
  const metadata = isObject(configuredMetadata) ? configuredMetadata : {}
  const userMetadata = Object.fromEntries(
    ["labels", "annotations", "finalizers", "ownerReferences"].flatMap((
      field
    ) => (metadata[field] === undefined ? [] : [[field, metadata[field]!]]))
  )
  return { ...withBody, metadata: merge(withBody["metadata"], userMetadata) }
}

/** An applied configuration names its object; the URL's name is used when the body has none. */
export const withName = (configuration: JsonObject, name: string): JsonObject => {
  const metadata = isObject(configuration["metadata"]) ? configuration["metadata"] : {}
  return { ...configuration, metadata: { ...metadata, name } }
}
