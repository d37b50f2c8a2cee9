/**
 * The deletes of the resource API (Resources.ts): preconditions and If-Match, the strategy's removal (or, with
 * finalizers, the deletion mark), a project's Terminating phase, orphaned dependents and what a kind removes with its
 * object, all in one commit; a delete without a pinned resourceVersion is retried on Conflict.
 */
import { Effect } from "effect"
import { conflict, subjectOf } from "../core/meta/ApiError.ts"
import { type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import * as Strategy from "../core/meta/Strategy.ts"
import { byKindName } from "../kinds/Kinds.ts"
import { type ObjectKey, type WriteOp } from "../store/Store.ts"
import { isNamespaceKind, patchConflictRetriesMax, type Shared, storeFailure } from "./ResourceShared.ts"

export interface DeleteOptions {
  readonly dryRun: boolean
  readonly propagationPolicy: "Background" | "Orphan"
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string }
  readonly ifMatch?: string
  /** The server's own deletes: ops committed with the delete (a controller's fence: runtime/Ownership.ts). */
  readonly commitWith?: () => ReadonlyArray<WriteOp>
}

/** The deletes, over the shared steps. */
export const makeDeletes = (shared: Shared) => {
  const { store, plugins, now, readExisting, checkIfMatch, writeDisposition } = shared

  /** Orphan: dependents lose their reference to the owner, in the same commit as the owner's removal. */
  const orphanOps = (owner: ResourceObject) =>
    Effect.map(
      store.dependentsOf(owner.metadata.uid).pipe(Effect.mapError(storeFailure)),
      (dependents) =>
        dependents.map((dependent): WriteOp => {
          const ownerReferences = (dependent.metadata.ownerReferences ?? []).filter((reference) =>
            reference.uid !== owner.metadata.uid
          )
          const { ownerReferences: _dropped, ...metadata } = dependent.metadata
          const object = {
            ...dependent,
            metadata: ownerReferences.length === 0 ? metadata : { ...metadata, ownerReferences }
          }
          return {
            _tag: "Update",
            key: storedKey(dependent),
            object,
            previous: dependent,
            expectedRv: dependent.metadata.resourceVersion
          }
        })
    )

  /**
   * A DELETE retries on Conflict like a patch: a controller's status write between the read and the commit must not
   * turn a plain DELETE into a 409 (Kubernetes' GuaranteedUpdate). One that pins a resourceVersion (a precondition or
   * If-Match) is a compare-and-swap and is not retried; a uid precondition is checked again on every try.
   */
  const remove = (ref: ResourceRef, namespace: string | undefined, name: string, options: DeleteOptions) => {
    const once = removeOnce(ref, namespace, name, options)
    const pinned = options.preconditions?.resourceVersion !== undefined || options.ifMatch !== undefined
    return pinned
      ? once
      : once.pipe(Effect.retry({ times: patchConflictRetriesMax, while: (error) => error.code === "Conflict" }))
  }

  const removeOnce = (ref: ResourceRef, namespace: string | undefined, name: string, options: DeleteOptions) =>
    Effect.gen(function*() {
      const current = yield* readExisting(ref, namespace, name)
      yield* checkIfMatch(options.ifMatch, current)
      const preconditions = options.preconditions
      if (preconditions?.uid !== undefined && preconditions.uid !== current.metadata.uid) {
        return yield* conflict(
          subjectOf(ref, name),
          `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${current.metadata.uid}`
        )
      }
      if (
        preconditions?.resourceVersion !== undefined &&
        preconditions.resourceVersion !== current.metadata.resourceVersion
      ) {
        return yield* conflict(
          subjectOf(ref, name),
          `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`
        )
      }
      const at = yield* now
      // A project is emptied by the namespace controller before it goes: it always lingers as Terminating first.
      const disposition = isNamespaceKind(ref) ? terminate(current, at) : Strategy.remove(current, at)
      const orphans = options.propagationPolicy === "Orphan" && disposition._tag === "Remove"
        ? yield* orphanOps(current)
        : []
      // What goes with the object (a Secret's values).
      const values = disposition._tag === "Remove"
        ? plugins.of(ref).flatMap((plugin) => plugin.removeOps?.(current) ?? [])
        : []
      const object = yield* writeDisposition(ref, namespace, current, disposition, current.metadata.resourceVersion, {
        dryRun: options.dryRun,
        extraOps: [...orphans, ...values, ...(options.commitWith?.() ?? [])]
      })
      return object
    })

  return { remove }
}

/** A Namespace's DELETE: mark it Terminating; the namespace controller deletes its content and then it. */
const terminate = (current: ResourceObject, now: number): Strategy.Disposition =>
  current.metadata.deletionTimestamp !== undefined
    ? { _tag: "Unchanged", object: current }
    : {
      _tag: "Write",
      object: {
        ...current,
        metadata: { ...current.metadata, deletionTimestamp: Strategy.timestamp(now), deletionGracePeriodSeconds: 0 },
        status: { phase: "Terminating" }
      }
    }

/** Where a stored object lives: objects carry their kind, and the registry maps it back to its plural. */
export const storedKey = (object: ResourceObject): ObjectKey => ({
  resource: byKindName(object.kind)?.plural ?? object.kind.toLowerCase(),
  namespace: object.metadata.namespace ?? "",
  name: object.metadata.name
})
