/**
 * The per-write rules every kind follows, after Kubernetes' registry strategies (`pkg/registry/.../strategy.go`):
 * create fills in the server-owned metadata and drops status; an update keeps status and bumps `generation` only when
 * the spec changed; a status write keeps everything but status; a delete of an object with finalizers only marks it.
 *
 * Pure: time, uids and generated-name suffixes come in through the context. Each function answers what the store
 * should do, not how.
 */
import { Result } from "effect"
import { equals, isObject, type Json, type JsonObject } from "../Json.ts"
import { lastValues } from "../Memo.ts"
import {
  ApiError,
  badRequest,
  conflict,
  fieldForbidden,
  fieldInvalid,
  fieldRequired,
  invalid,
  type Subject
} from "./ApiError.ts"
import * as ManagedFields from "./ManagedFields.ts"
import { checkDns1123Subdomain } from "./Names.ts"
import { generateNamePrefixMaxLength, type ObjectMeta, type ResourceObject } from "./ObjectMeta.ts"

// The texts of the last few seconds: every write stamps its second, a create twice (created, and its managed fields).
const secondTexts = lastValues<string>(4)

/** RFC 3339 at second precision, as Kubernetes writes metav1.Time. */
export const timestamp = (epochMs: number): string => {
  const second = Math.floor(epochMs / 1_000)
  return secondTexts(String(second), () => new Date(second * 1_000).toISOString().replace(/\.\d{3}Z$/u, "Z"))
}

/** What a write is about: the kind as the URL named it. */
export interface Target {
  readonly apiVersion: string
  readonly kind: string
  /** The plural, as `details.kind` carries it. */
  readonly plural: string
  readonly group: string
  /** The project from the URL; undefined for cluster-scoped kinds. */
  readonly namespace: string | undefined
}

export interface WriteContext {
  readonly now: number
  readonly fieldManager: string
}

export interface CreateContext extends WriteContext {
  readonly uid: string
  /** Five characters appended to `generateName` (asked for only when the object has no name). */
  readonly nameSuffix: () => string
  /** Apply when server-side apply creates the object; Update otherwise. */
  readonly operation?: "Apply" | "Update"
  /** For an Apply: the configuration as applied (before defaults), which the manager then owns exactly. */
  readonly applied?: JsonObject
}

/** What the store should do with the result of a write. */
export type Disposition =
  | { readonly _tag: "Write"; readonly object: ResourceObject }
  | { readonly _tag: "Unchanged"; readonly object: ResourceObject }
  | { readonly _tag: "Remove"; readonly object: ResourceObject }

const subjectOf = (target: Target, name?: string): Subject => ({
  group: target.group,
  kind: target.plural,
  ...(name === undefined ? {} : { name })
})

const metadataOf = (object: JsonObject): JsonObject => {
  const metadata = object["metadata"]
  return isObject(metadata) ? metadata : {}
}

const stringField = (object: JsonObject, field: string): string | undefined => {
  const value = object[field]
  return typeof value === "string" && value !== "" ? value : undefined
}

/** The user-owned metadata fields a write may set; nulls mean "none". */
const userMetadata = (metadata: JsonObject): Partial<ObjectMeta> => {
  const owned: Record<string, Json> = {}
  for (const field of ["labels", "annotations", "finalizers", "ownerReferences"] as const) {
    const value = metadata[field]
    if (value !== undefined && value !== null) owned[field] = value
  }
  return owned as Partial<ObjectMeta>
}

/** Everything of the object but metadata and status: what `generation` counts changes of. */
const specPart = (object: JsonObject): JsonObject => {
  const { metadata: _metadata, status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = object
  return rest
}

const bodyPart = (input: JsonObject): JsonObject => {
  const { metadata: _metadata, status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = input
  return rest
}

const checkNamespace = (target: Target, metadata: JsonObject): ApiError | undefined => {
  const namespace = stringField(metadata, "namespace")
  if (target.namespace === undefined || namespace === undefined || namespace === target.namespace) return undefined
  return badRequest("the namespace of the provided object does not match the namespace sent on the request")
}

const nameFor = (target: Target, metadata: JsonObject, suffix: () => string): Result.Result<string, ApiError> => {
  const name = stringField(metadata, "name")
  if (name !== undefined) return Result.succeed(name)
  const generateName = stringField(metadata, "generateName")
  if (generateName === undefined) {
    return Result.fail(
      invalid(subjectOf(target), [{
        ...fieldRequired("metadata.name"),
        message: "Required value: name or generateName is required"
      }], target.kind)
    )
  }
  const generated = `${generateName.slice(0, generateNamePrefixMaxLength)}${suffix()}`
  const problems = checkDns1123Subdomain(generated)
  return problems.length === 0
    ? Result.succeed(generated)
    : Result.fail(
      invalid(subjectOf(target), [
        fieldInvalid("metadata.generateName", `Invalid value: "${generateName}": ${problems.join("; ")}`)
      ], target.kind)
    )
}

const managedWrite = (
  target: Target,
  context: WriteContext,
  operation: "Apply" | "Update",
  subresource?: string
): ManagedFields.ManagedWrite => ({
  manager: context.fieldManager,
  operation,
  apiVersion: target.apiVersion,
  time: timestamp(context.now),
  ...(subresource === undefined ? {} : { subresource })
})

const entriesOf = (object: ResourceObject): ReadonlyArray<ManagedFields.ManagedFieldsEntry> =>
  (object.metadata.managedFields ?? []) as unknown as ReadonlyArray<ManagedFields.ManagedFieldsEntry>

const withManagedFields = (
  object: ResourceObject,
  entries: ReadonlyArray<ManagedFields.ManagedFieldsEntry>
): ResourceObject => {
  const { managedFields: _previous, ...metadata } = object.metadata
  return {
    ...object,
    metadata: entries.length === 0
      ? metadata
      : { ...metadata, managedFields: entries as unknown as ReadonlyArray<Json> }
  }
}

/**
 * A new object from a validated create request. Status is dropped: on kinds with a status subresource only the
 * controllers write it (spec: Conventions).
 */
export const create = (
  target: Target,
  input: JsonObject,
  context: CreateContext
): Result.Result<ResourceObject, ApiError> => {
  const metadata = metadataOf(input)
  const mismatch = checkNamespace(target, metadata)
  if (mismatch !== undefined) return Result.fail(mismatch)
  return Result.map(nameFor(target, metadata, context.nameSuffix), (name) => {
    const generateName = stringField(metadata, "generateName")
    const object: ResourceObject = {
      apiVersion: target.apiVersion,
      kind: target.kind,
      metadata: {
        name,
        ...(generateName === undefined ? {} : { generateName }),
        ...(target.namespace === undefined ? {} : { namespace: target.namespace }),
        uid: context.uid,
        resourceVersion: "",
        generation: 1,
        creationTimestamp: timestamp(context.now),
        ...userMetadata(metadata)
      },
      ...bodyPart(input)
    }
    const operation = context.operation ?? "Update"
    const entries = ManagedFields.record(
      [],
      managedWrite(target, context, operation),
      {},
      object,
      operation === "Apply" ? context.applied ?? input : undefined
    )
    return withManagedFields(object, entries)
  })
}

const checkIdentity = (target: Target, current: ResourceObject, metadata: JsonObject): ApiError | undefined => {
  const name = stringField(metadata, "name")
  if (name !== undefined && name !== current.metadata.name) {
    return badRequest(`the name of the object (${name}) does not match the name on the URL (${current.metadata.name})`)
  }
  const uid = stringField(metadata, "uid")
  if (uid !== undefined && uid !== current.metadata.uid) {
    return conflict(
      subjectOf(target, current.metadata.name),
      `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${current.metadata.uid}`
    )
  }
  return checkNamespace(target, metadata)
}

/** Kubernetes refuses new finalizers once deletion has started, so deletion always ends. */
const checkFinalizers = (target: Target, current: ResourceObject, next: Partial<ObjectMeta>): ApiError | undefined => {
  if (current.metadata.deletionTimestamp === undefined) return undefined
  const existing = new Set(current.metadata.finalizers ?? [])
  const added = (next.finalizers ?? []).filter((finalizer) => !existing.has(finalizer))
  return added.length === 0
    ? undefined
    : invalid(subjectOf(target, current.metadata.name), [
      fieldForbidden("metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being deleted")
    ], target.kind)
}

/** The server-owned metadata an update keeps from the stored object. */
const serverMetadata = (metadata: ObjectMeta): ObjectMeta => {
  const { labels: _l, annotations: _a, finalizers: _f, ownerReferences: _o, managedFields: _m, ...owned } = metadata
  return owned
}

/** Whether a written object should leave the store: deletion was requested and no finalizer holds it. */
const dispositionOf = (current: ResourceObject, next: ResourceObject): Disposition => {
  if (next.metadata.deletionTimestamp !== undefined && (next.metadata.finalizers ?? []).length === 0) {
    return { _tag: "Remove", object: next }
  }
  return equals(current as unknown as Json, next as unknown as Json)
    ? { _tag: "Unchanged", object: current }
    : { _tag: "Write", object: next }
}

export interface UpdateOptions {
  readonly operation: "Apply" | "Update"
  /** For an Apply: the applied configuration, which the manager then owns exactly. */
  readonly applied?: JsonObject
}

/**
 * The object after a replace or patch of the main resource. Status is kept; `generation` grows when anything outside
 * metadata and status changed. A write that changes nothing answers Unchanged, so the resourceVersion stays.
 */
export const update = (
  target: Target,
  current: ResourceObject,
  input: JsonObject,
  context: WriteContext,
  options: UpdateOptions = { operation: "Update" }
): Result.Result<Disposition, ApiError> => {
  const metadata = metadataOf(input)
  const identity = checkIdentity(target, current, metadata)
  if (identity !== undefined) return Result.fail(identity)
  const owned = userMetadata(metadata)
  const finalizers = checkFinalizers(target, current, owned)
  if (finalizers !== undefined) return Result.fail(finalizers)
  const specChanged = !equals(specPart(current), bodyPart(input))
  const candidate: ResourceObject = {
    apiVersion: target.apiVersion,
    kind: target.kind,
    metadata: {
      ...serverMetadata(current.metadata),
      generation: current.metadata.generation + (specChanged ? 1 : 0),
      ...owned
    },
    ...bodyPart(input),
    ...(current.status === undefined ? {} : { status: current.status })
  }
  const entries = ManagedFields.record(
    entriesOf(current),
    managedWrite(target, context, options.operation),
    current,
    candidate,
    options.applied
  )
  return Result.succeed(dispositionOf(current, withManagedFields(candidate, entries)))
}

/** The object after a write to `/status`: only status changes, and generation stays (spec: Conventions). */
export const updateStatus = (
  target: Target,
  current: ResourceObject,
  input: JsonObject,
  context: WriteContext
): Result.Result<Disposition, ApiError> => {
  const identity = checkIdentity(target, current, metadataOf(input))
  if (identity !== undefined) return Result.fail(identity)
  const { status: _previous, ...rest } = current
  const status = input["status"]
  const candidate: ResourceObject = status === undefined || status === null
    ? rest as ResourceObject
    : { ...rest, status } as ResourceObject
  const entries = ManagedFields.record(
    entriesOf(current),
    managedWrite(target, context, "Update", "status"),
    current,
    candidate
  )
  return Result.succeed(dispositionOf(current, withManagedFields(candidate, entries)))
}

/**
 * A delete request: objects without finalizers leave at once; others get `deletionTimestamp` and stay until the last
 * finalizer is removed. Deleting an object already being deleted changes nothing.
 */
export const remove = (current: ResourceObject, now: number): Disposition => {
  if ((current.metadata.finalizers ?? []).length === 0) return { _tag: "Remove", object: current }
  if (current.metadata.deletionTimestamp !== undefined) return { _tag: "Unchanged", object: current }
  return {
    _tag: "Write",
    object: {
      ...current,
      metadata: {
        ...current.metadata,
        deletionTimestamp: timestamp(now),
        deletionGracePeriodSeconds: 0,
        generation: current.metadata.generation + 1
      }
    }
  }
}

/** The stored object as an update input: what a merge or JSON patch is applied to. */
export const asJson = (object: ResourceObject): JsonObject => object as unknown as JsonObject

/** The uids of the owners an object names (the garbage collector's index). */
export const ownerUids = (object: ResourceObject): ReadonlyArray<string> =>
  (object.metadata.ownerReferences ?? []).map((reference) => reference.uid)
