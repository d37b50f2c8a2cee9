/**
 * Builders of stored objects for unit tests: a Job as the store holds it, with server-owned metadata filled in and
 * any field overridden.
 */
import type { Json } from "../../src/core/Json.ts"
import type { ManagedFieldsEntry } from "../../src/core/meta/ManagedFields.ts"
import type { ObjectMeta, ResourceObject } from "../../src/core/meta/ObjectMeta.ts"

export interface ObjectOverrides {
  readonly metadata?: Partial<ObjectMeta>
  readonly [field: string]: unknown
}

/** A stored Job `demo/train` (uid-1, resourceVersion 7, generation 3), with `overrides` and managed fields. */
export const makeStoredObject = (
  overrides: ObjectOverrides = {},
  entries: ReadonlyArray<ManagedFieldsEntry> = []
): ResourceObject => {
  const { metadata, ...rest } = overrides
  return {
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: {
      name: "train",
      namespace: "demo",
      uid: "uid-1",
      resourceVersion: "7",
      generation: 3,
      creationTimestamp: "2024-01-01T00:00:00Z",
      ...(entries.length === 0 ? {} : { managedFields: entries as unknown as ReadonlyArray<Json> }),
      ...metadata
    },
    ...rest
  } as ResourceObject
}
