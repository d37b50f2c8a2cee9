/**
 * What the runtime writes of an object its machine stepped, through the ordinary write paths of the API server:
 *
 * - the object's status, through the status subresource, and in the same commit (the outbox pattern) a Kubernetes
 *   Event per event of the step — counted up when it repeats (Kubernetes' aggregation) — and, for an event of a spec
 *   type, its outbox record (EventOutbox.ts): no event is stored without the status that caused it, and no status
 *   without its events;
 * - an Attempt per run of capacity (spec: Attempt), owned by its object (the garbage collector deletes them with it),
 *   with the placement explanation, and its status whenever the run's facts change.
 *
 * A write that finds the object gone drops what it carried; one that loses a race (Conflict) reads again and retries.
 * Every commit carries the fence of the object's shard (`fence`, runtime/Ownership.ts): a process that no longer owns
 * the object writes nothing of it.
 */
import { Effect, Result } from "effect"
import type { Ids } from "../apiserver/Ids.ts"
import type { DecidedWrite, Resources, WriteOptions } from "../apiserver/Resources.ts"
import type { AttemptFacts } from "../core/capacity/Capacity.ts"
import type { Explanation } from "../core/capacity/Placement.ts"
import type { ControllerEvent } from "../core/controller/Controller.ts"
import type { Json, JsonObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import {
  aggregationKey,
  eventBody,
  eventName,
  eventObject,
  type EventRecord,
  type InvolvedObject
} from "../core/meta/Events.ts"
import { eventRef, type ResourceRef } from "../core/meta/Kinds.ts"
import { checkDns1123Label } from "../core/meta/Names.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { attemptStatusOf } from "../kinds/attempt/AttemptRecords.ts"
import type { Store, WriteOp } from "../store/Store.ts"
import { deliveryOf, type EventOutbox } from "./EventOutbox.ts"
import { entityOf } from "./Ownership.ts"

/** `source.component` of the runtime's events and the field manager of its writes. */
export const runtimeComponent = "nodus-runtime"

const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: runtimeComponent }

/** An Attempt of a stepped object, with what was last written of it. */
export interface AttemptRecord {
  /** The driver's facts, refreshed before each step. */
  facts: AttemptFacts
  readonly placement: Explanation | undefined
  created: boolean
  /** The JSON of the status last written, and the resourceVersion that write gave the object. */
  written: string | undefined
  resourceVersion: string | undefined
}

/** What the writer keeps of an object between writes. */
export interface WrittenObject {
  readonly ref: ResourceRef
  readonly namespace: string
  readonly name: string
  readonly uid: string
  /** The JSON of the status last written, and the resourceVersion that write gave the object. */
  written: string | undefined
  resourceVersion: string | undefined
  /** Attempts whose objects may still need a write; ended ones leave once written. */
  readonly attempts: Map<string, AttemptRecord>
  /** The Events written by aggregation key, so a repeat only counts up. */
  readonly events: Map<string, { readonly name: string; readonly count: number; readonly first: number }>
}

/** An event of a step, with the time it happened. */
export interface StepEvent {
  readonly event: ControllerEvent
  readonly at: number
}

export interface WriterServices {
  readonly resources: Resources["Service"]
  readonly store: Store["Service"]
  readonly ids: Ids["Service"]
  readonly outbox: EventOutbox["Service"]
  readonly attemptRef: ResourceRef
  /** The fencing ops of an object's owner (by entity: Ownership.entityOf); none where one process owns everything. */
  readonly fence?: (entity: string) => ReadonlyArray<WriteOp>
}

/** Logs a failed write and goes on: one object the store refuses must not stop the others. */
export const quietly = (what: string) => <A>(effect: Effect.Effect<A, ApiError>): Effect.Effect<void> =>
  effect.pipe(Effect.asVoid, Effect.catch((error) => Effect.logWarning(`runtime: ${what}: ${error.message}`)))

/** Where a status goes: the object, its uid when it must still be that object, and the resourceVersion written last. */
export interface StatusTarget {
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  readonly name: string
  readonly uid: string | undefined
  readonly resourceVersion: string | undefined
}

/**
 * Replaces the status of an object through the status subresource, with `ops` in the same commit. It first tries the
 * resourceVersion it wrote last (no read; the usual case, since only the runtime writes these statuses), and reads
 * the object again when there is none or another writer got there first. Answers the new resourceVersion, or undefined
 * when the object is gone or is another object now (a different uid).
 */
export const statusWriter =
  (resources: Resources["Service"]) =>
  (target: StatusTarget, status: Json, ops: () => ReadonlyArray<WriteOp> = () => []) => {
    const { ref, namespace, name, uid } = target
    const replace = (resourceVersion: string) => {
      const metadata = {
        name,
        ...(namespace === undefined ? {} : { namespace }),
        ...(uid === undefined ? {} : { uid }),
        resourceVersion
      }
      const body = { apiVersion: ref.apiVersion, kind: ref.info.kind, metadata, status }
      return Effect.map(
        resources.replace(ref, namespace, name, body, { ...writeOptions, commitWith: ops }, "status"),
        (result) => result.object.metadata.resourceVersion
      )
    }
    const fresh = Effect.gen(function*() {
      const current = yield* Effect.result(resources.get(ref, namespace, name))
      if (Result.isFailure(current)) return current.failure.code === "NotFound" ? undefined : yield* current.failure
      if (uid !== undefined && current.success.metadata.uid !== uid) return undefined
      return yield* replace(current.success.metadata.resourceVersion)
    }).pipe(Effect.retry({ times: 5, while: (error) => error.code === "Conflict" }))
    if (target.resourceVersion === undefined) return fresh
    return replace(target.resourceVersion).pipe(
      Effect.catchIf((error) => error.code === "Conflict" || error.code === "NotFound", () => fresh)
    )
  }

/**
 * Replaces an object's status with what `next` makes of the object as stored (undefined: leave it), read and made
 * again when another writer got there first; `ops` of the object as it will be shown commit with it (its events'
 * outbox records). Answers the object and whether it was written. For statuses made from what they replace (a
 * TopUp's phase, a WebhookEndpoint's health), where `statusWriter` writes one it already holds.
 */
export const statusUpdater = (resources: Resources["Service"], options: WriteOptions) =>
(
  ref: ResourceRef,
  namespace: string | undefined,
  name: string,
  next: (current: ResourceObject) => JsonObject | undefined,
  ops: (shown: ResourceObject) => ReadonlyArray<WriteOp> = () => []
) =>
  Effect.gen(function*() {
    const current = yield* resources.get(ref, namespace, name)
    const status = next(current)
    if (status === undefined) return { object: current, written: false }
    const metadata = {
      name,
      ...(namespace === undefined ? {} : { namespace }),
      uid: current.metadata.uid,
      resourceVersion: current.metadata.resourceVersion
    }
    const commitWith = () => ops({ ...current, status })
    const replaced = yield* resources.replace(
      ref,
      namespace,
      name,
      { apiVersion: ref.apiVersion, kind: ref.info.kind, metadata, status },
      { ...options, commitWith },
      "status"
    )
    return { object: replaced.object, written: true }
  }).pipe(Effect.retry({ times: 5, while: (error) => error.code === "Conflict" }))

export const makeWriter = (services: WriterServices) => {
  const { resources, store, ids, outbox, attemptRef } = services
  let sequence = 0

  const objectKey = (object: WrittenObject) => ({
    resource: object.ref.info.plural,
    namespace: object.namespace,
    name: object.name
  })

  const fenceOf = (object: WrittenObject) =>
    services.fence?.(entityOf(object.ref.info.plural, object.namespace, object.name)) ?? []

  /**
   * Records about an object are written only while it exists, so none outlives it uncollected, and only by its owner.
   */
  const guard = (
    object: WrittenObject
  ): ReadonlyArray<WriteOp> => [{ _tag: "Require", key: objectKey(object), notDeleting: false }, ...fenceOf(object)]

  const writeStatus = statusWriter(resources)

  const attemptBody = (object: WrittenObject, attempt: AttemptRecord): JsonObject => ({
    apiVersion: attemptRef.apiVersion,
    kind: attemptRef.info.kind,
    metadata: {
      name: attempt.facts.name,
      namespace: object.namespace,
      // The label names the workload by its kind (`<group>/job: <name>`), when the name is a valid label value.
      labels: checkDns1123Label(object.name).length === 0
        ? { [`${object.ref.group}/${object.ref.info.singular}`]: object.name }
        : {},
      ownerReferences: [{
        apiVersion: object.ref.apiVersion,
        kind: object.ref.info.kind,
        name: object.name,
        uid: object.uid,
        controller: true,
        blockOwnerDeletion: true
      }]
    },
    spec: {
      workload: { kind: object.ref.info.kind, name: object.name, uid: object.uid },
      index: attempt.facts.index,
      epoch: attempt.facts.number
    }
  })

  /**
   * Creates the Attempt with its status, in one commit; one left by an earlier object of the same name (not yet
   * collected) makes way.
   */
  const createAttempt = (object: WrittenObject, attempt: AttemptRecord, status: JsonObject) =>
    Effect.gen(function*() {
      const create = resources.create(attemptRef, object.namespace, attemptBody(object, attempt), {
        ...writeOptions,
        status,
        commitWith: () => guard(object)
      })
      const created = yield* Effect.result(create)
      if (Result.isFailure(created)) {
        if (created.failure.code === "NotFound") return
        if (created.failure.code !== "AlreadyExists") return yield* created.failure
        const existing = yield* resources.get(attemptRef, object.namespace, attempt.facts.name)
        if (!(existing.metadata.ownerReferences ?? []).some((owner) => owner.uid === object.uid)) {
          yield* resources.remove(attemptRef, object.namespace, attempt.facts.name, {
            dryRun: false,
            propagationPolicy: "Background",
            preconditions: { uid: existing.metadata.uid }
          })
          yield* create
        }
      } else {
        attempt.resourceVersion = created.success.object.metadata.resourceVersion
        attempt.written = JSON.stringify(status)
      }
      attempt.created = true
    })

  const writeAttempt = (object: WrittenObject, attempt: AttemptRecord) =>
    Effect.gen(function*() {
      const status = attemptStatusOf(attempt.facts, attempt.placement)
      if (!attempt.created) yield* createAttempt(object, attempt, status)
      const text = JSON.stringify(status)
      if (text !== attempt.written) {
        attempt.resourceVersion = yield* writeStatus(
          {
            ref: attemptRef,
            namespace: object.namespace,
            name: attempt.facts.name,
            uid: undefined,
            resourceVersion: attempt.resourceVersion
          },
          status,
          () => fenceOf(object)
        )
        attempt.written = text
      }
      if (attempt.facts.phase === "Ended") object.attempts.delete(attempt.facts.name)
    })

  const involvedOf = (object: WrittenObject): InvolvedObject => ({
    apiVersion: object.ref.apiVersion,
    kind: object.ref.info.kind,
    name: object.name,
    namespace: object.namespace,
    uid: object.uid
  })

  const eventKey = (record: EventRecord) => ({
    resource: eventRef.info.plural,
    namespace: record.involved.namespace,
    name: record.name
  })

  /**
   * The ops of the step's events: an Event created, or an aggregated one counted up (read first: its update names the
   * version it replaces), and the outbox record of a spec-typed event, showing the object with `status`. Answers the
   * ops and the aggregation state to keep once they are committed.
   */
  const eventOps = (object: WrittenObject, events: ReadonlyArray<StepEvent>, status: JsonObject) =>
    Effect.gen(function*() {
      const ops: Array<WriteOp> = []
      const counts = new Map(object.events)
      const involved = involvedOf(object)
      for (const { event, at } of events) {
        const key = aggregationKey(involved, event.reason, event.message, event.warning)
        const previous = counts.get(key)
        const record: EventRecord = {
          name: previous?.name ?? eventName(object.name, at, sequence++),
          involved,
          reason: event.reason,
          message: event.message,
          warning: event.warning,
          count: (previous?.count ?? 0) + 1,
          first: previous?.first ?? at,
          last: at,
          component: runtimeComponent
        }
        counts.set(key, { name: record.name, count: record.count, first: record.first })
        const existing = previous === undefined
          ? undefined
          : yield* Effect.orElseSucceed(store.get(eventKey(record)), () => undefined)
        if (existing !== undefined && existing._tag === "Some") {
          const updated = { ...existing.value, ...eventBody(record) } as ResourceObject
          ops.push({
            _tag: "Update",
            key: eventKey(record),
            object: updated,
            previous: existing.value,
            expectedRv: existing.value.metadata.resourceVersion
          })
        } else {
          ops.push({ _tag: "Create", key: eventKey(record), object: eventObject(record, ids.uid(), record.last) })
        }
        if (event.type !== undefined) {
          const delivered = {
            apiVersion: involved.apiVersion,
            kind: involved.kind,
            metadata: { name: involved.name, namespace: involved.namespace, uid: involved.uid },
            status
          }
          ops.push(outbox.record(deliveryOf(event.type, at, record, delivered)))
        }
      }
      return { ops, counts }
    })

  /**
   * Writes an object's step in one commit: its Attempts (created, or their statuses), its status and the step's events.
   * Each write is decided as the API would make it (Resources.decideCreate, decideStatus); when any of them cannot be
   * (an Attempt of an earlier object's name, a resourceVersion not known, another writer first), the step is written
   * apart instead (`writeApart`). A commit saved per Attempt that changed, at every launch and every phase of a run.
   */
  const write = (object: WrittenObject, status: JsonObject | undefined, events: ReadonlyArray<StepEvent>) =>
    Effect.catch(writeTogether(object, status, events), () => writeApart(object, status, events))

  const writeTogether = (object: WrittenObject, status: JsonObject | undefined, events: ReadonlyArray<StepEvent>) =>
    Effect.gen(function*() {
      const attempts: Array<{ readonly attempt: AttemptRecord; readonly text: string; readonly write: DecidedWrite }> =
        []
      for (const attempt of object.attempts.values()) {
        const attemptStatus = attemptStatusOf(attempt.facts, attempt.placement)
        const text = JSON.stringify(attemptStatus)
        if (!attempt.created) {
          attempts.push({
            attempt,
            text,
            write: yield* resources.decideCreate(attemptRef, object.namespace, attemptBody(object, attempt), {
              ...writeOptions,
              status: attemptStatus
            })
          })
        } else if (text !== attempt.written) {
          const metadata = {
            name: attempt.facts.name,
            namespace: object.namespace,
            resourceVersion: attempt.resourceVersion ?? ""
          }
          attempts.push({
            attempt,
            text,
            write: yield* resources.decideStatus(attemptRef, object.namespace, attempt.facts.name, {
              apiVersion: attemptRef.apiVersion,
              kind: attemptRef.info.kind,
              metadata,
              status: attemptStatus
            }, writeOptions)
          })
        }
      }
      const text = status === undefined ? object.written : JSON.stringify(status)
      const statusChanged = status !== undefined && text !== object.written
      if (!statusChanged && events.length === 0 && attempts.length === 0) return forgetEnded(object)
      const { ops, counts } = yield* eventOps(object, events, status ?? {})
      // The first write of an object taken in knows no resourceVersion yet: the stored one, if it is still this object.
      const resourceVersion = object.resourceVersion ?? (statusChanged ? yield* storedVersion(object) : "")
      const metadata = { name: object.name, namespace: object.namespace, uid: object.uid, resourceVersion }
      const own = statusChanged
        ? [
          yield* resources.decideStatus(object.ref, object.namespace, object.name, {
            apiVersion: object.ref.apiVersion,
            kind: object.ref.info.kind,
            metadata,
            status
          }, writeOptions)
        ]
        : []
      const about = { ref: object.ref, namespace: object.namespace, name: object.name }
      const committed = yield* resources.commitDecided([...attempts.map((one) => one.write), ...own], [
        ...guard(object),
        ...ops
      ], about)
      attempts.forEach((one, index) => {
        one.attempt.created = true
        one.attempt.resourceVersion = committed[index]!.metadata.resourceVersion
        one.attempt.written = one.text
      })
      if (statusChanged) {
        object.resourceVersion = committed[attempts.length]!.metadata.resourceVersion
        object.written = text
      }
      for (const [key, value] of counts) object.events.set(key, value)
      forgetEnded(object)
    })

  /** The stored object's resourceVersion; a Conflict when another object has its name now (written apart then). */
  const storedVersion = (object: WrittenObject) =>
    Effect.flatMap(
      resources.get(object.ref, object.namespace, object.name),
      (stored) =>
        stored.metadata.uid === object.uid
          ? Effect.succeed(stored.metadata.resourceVersion)
          : Effect.fail(new ApiError({ code: "Conflict", message: `${object.name} is another object now` }))
    )

  /** Ended Attempts whose last status is written leave the object's records. */
  const forgetEnded = (object: WrittenObject) => {
    for (const attempt of [...object.attempts.values()]) {
      if (
        attempt.facts.phase === "Ended" && attempt.created &&
        attempt.written === JSON.stringify(attemptStatusOf(attempt.facts, attempt.placement))
      ) object.attempts.delete(attempt.facts.name)
    }
  }

  /**
   * Writes an object's step apart: its Attempts first, then its status with the step's events in one commit. `status`
   * undefined leaves the stored status as it is (an object finished under an earlier process): its events still need
   * the object to exist.
   */
  const writeApart = (object: WrittenObject, status: JsonObject | undefined, events: ReadonlyArray<StepEvent>) =>
    Effect.gen(function*() {
      for (const attempt of [...object.attempts.values()]) {
        yield* quietly(`Attempt ${object.namespace}/${attempt.facts.name}`)(writeAttempt(object, attempt))
      }
      const text = status === undefined ? object.written : JSON.stringify(status)
      if (text === object.written && events.length === 0) return
      const { ops, counts } = yield* eventOps(object, events, status ?? {})
      if (status === undefined) {
        yield* resources.commit(object.ref, object.namespace, object.name, [...guard(object), ...ops])
      } else {
        const target = {
          ref: object.ref,
          namespace: object.namespace,
          name: object.name,
          uid: object.uid,
          resourceVersion: object.resourceVersion
        }
        const written = yield* writeStatus(target, status as unknown as Json, () => [...fenceOf(object), ...ops])
        // The object is gone (or another object has its name): nothing of this step is stored, by design.
        if (written === undefined) return
        object.resourceVersion = written
        object.written = text
      }
      for (const [key, value] of counts) object.events.set(key, value)
    })

  /** Deletes the object (its ttl ran out), if it is still the one of this uid. */
  const remove = (object: WrittenObject) =>
    resources.remove(object.ref, object.namespace, object.name, {
      dryRun: false,
      propagationPolicy: "Background",
      preconditions: { uid: object.uid }
    }).pipe(
      Effect.asVoid,
      Effect.catchIf((error) => error.code === "NotFound" || error.code === "Conflict", () => Effect.void)
    )

  return { write, writeStatus, remove }
}

export type ObjectWriter = ReturnType<typeof makeWriter>
