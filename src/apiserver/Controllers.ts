/**
 * The API machinery's own controllers, level-triggered like Kubernetes' (style.md §3): they look at the state of the
 * store, never at a single event, and re-check everything at start-up, so a crash between two steps loses nothing.
 *
 * - Garbage collector (background cascading deletion): an object whose every owner (metadata.ownerReferences) is
 *   gone is deleted, and its own dependents follow when its deletion is seen.
 * - Namespace controller: a project marked Terminating has its content deleted; once it is empty, the project goes.
 */
import { Effect, Layer, Option, Stream } from "effect"
import type { ApiError } from "../core/meta/ApiError.ts"
import { eventKind, type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { kinds, refOfObjectKind } from "../kinds/Kinds.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { type Change, Store } from "../store/Store.ts"
import { ApiConfig } from "./ApiConfig.ts"
import { Resources } from "./Resources.ts"

// Events (core/v1) live in projects too, owned by the objects they are about.
const namespacedKinds = [...kinds.filter((info) => info.scope === "Namespaced"), eventKind]

export const layer = Layer.effectDiscard(Effect.gen(function*() {
  const store = yield* Store
  const feed = yield* ChangeFeed
  const resources = yield* Resources
  const { group } = yield* ApiConfig

  const refOf = (object: ResourceObject): ResourceRef | undefined => refOfObjectKind(group, object.kind)

  // Another writer may have changed or removed the object first; the next pass sees the new state.
  const forget = (effect: Effect.Effect<unknown, ApiError>) => Effect.ignore(effect)

  const deleteObject = (object: ResourceObject) => {
    const ref = refOf(object)
    if (ref === undefined) return Effect.void
    return forget(
      resources.remove(ref, object.metadata.namespace, object.metadata.name, {
        dryRun: false,
        propagationPolicy: "Background"
      })
    )
  }

  /** Deletes the dependents of `uid` that no longer have any owner. */
  const collectDependents = (uid: string) =>
    Effect.gen(function*() {
      const dependents = yield* store.dependentsOf(uid).pipe(Effect.orElseSucceed(() => []))
      for (const dependent of dependents) {
        if (dependent.metadata.deletionTimestamp !== undefined) continue
        const owners = dependent.metadata.ownerReferences ?? []
        const alive = yield* Effect.forEach(owners, (owner) =>
          store.uidExists(owner.uid).pipe(Effect.orElseSucceed(() => true)))
        if (!alive.some(Boolean)) {
          yield* deleteObject(dependent)
        }
      }
    })

  /** Empties a terminating project, then removes it. */
  const finishNamespace = (name: string) =>
    Effect.gen(function*() {
      const found = yield* store.get({ resource: "namespaces", namespace: "", name }).pipe(
        Effect.orElseSucceed(() => Option.none<ResourceObject>())
      )
      if (Option.isNone(found) || found.value.metadata.deletionTimestamp === undefined) return
      let remaining = 0
      for (const info of namespacedKinds) {
        const page = yield* store.list({ resource: info.plural, namespace: name }).pipe(
          Effect.orElseSucceed(() => ({ items: [] as ReadonlyArray<ResourceObject> }))
        )
        remaining += page.items.length
        yield* Effect.forEach(
          page.items.filter((item) => item.metadata.deletionTimestamp === undefined),
          deleteObject,
          { discard: true }
        )
      }
      if (remaining === 0) {
        yield* Effect.ignore(
          store.commit([{
            _tag: "Delete",
            key: { resource: "namespaces", namespace: "", name },
            object: found.value,
            expectedRv: found.value.metadata.resourceVersion
          }])
        )
      }
    })

  const react = (change: Change) => {
    const work: Array<Effect.Effect<void>> = []
    if (change.type === "DELETED") work.push(collectDependents(change.object.metadata.uid))
    if (change.key.resource === "namespaces" && change.type !== "DELETED") work.push(finishNamespace(change.key.name))
    else if (change.type === "DELETED" && change.key.namespace !== "") work.push(finishNamespace(change.key.namespace))
    return Effect.all(work, { discard: true })
  }

  /** Start-up pass: whatever happened while no controller ran is repaired now. */
  const resync = Effect.gen(function*() {
    const namespaces = yield* store.list({ resource: "namespaces" }).pipe(
      Effect.orElseSucceed(() => ({ items: [] as ReadonlyArray<ResourceObject> }))
    )
    for (const namespace of namespaces.items) yield* finishNamespace(namespace.metadata.name)
    for (const info of [...kinds, eventKind]) {
      const page = yield* store.list({ resource: info.plural }).pipe(
        Effect.orElseSucceed(() => ({ items: [] as ReadonlyArray<ResourceObject> }))
      )
      for (const object of page.items) {
        for (const owner of object.metadata.ownerReferences ?? []) {
          if (!(yield* store.uidExists(owner.uid).pipe(Effect.orElseSucceed(() => true)))) {
            yield* collectDependents(owner.uid)
          }
        }
      }
    }
  })

  // Subscribe first, then resync, then follow: nothing committed in between is missed. A subscriber that falls too far
  // behind ends as Expired and starts over with a fresh resync.
  const follow = Effect.scoped(Effect.gen(function*() {
    const subscription = yield* feed.subscribe(undefined)
    yield* resync
    yield* Stream.runForEach(subscription.live, react)
  }))
  yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.ignore(follow), Effect.sleep("1 second"))))
}))
