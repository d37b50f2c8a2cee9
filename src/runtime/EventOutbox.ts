/**
 * The durable outbox of the spec's event types (spec: Events — job.succeeded, topup.failed, budget.threshold, …),
 * which webhook deliveries consume. Whatever changes state and has an event of a spec type to tell writes the event's
 * record in the same commit as the change (`record`): a crash loses both or neither, and a change that rolled back
 * sends nothing. Each record is shaped as a delivery body (spec: Delivery — `type`, `timestamp`, `data {event,
 * object}`), so a WebhookEndpoint only filters, signs and sends it; consumers page through them in order (`read`).
 *
 * The Kubernetes Event objects of the same changes are written in the same commits by their writers (the runtime's
 * object writer); this module holds the spec-typed half.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Ids } from "../apiserver/Ids.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { Store, type StoreError, type WriteOp } from "../store/Store.ts"

/** One event of a spec type, as a webhook delivery body carries it. */
export interface OutboxEvent {
  /** `<kind>.<reason>` in lower case with underscores, e.g. job.succeeded (spec: Event types). */
  readonly type: string
  /** ISO 8601, in the service's (simulated) time. */
  readonly timestamp: string
  readonly data: {
    readonly event: { readonly reason: string; readonly message: string; readonly count: number }
    /**
     * What the API shows for the object: never provider names or machine ids (spec: Delivery). A cluster-scoped object
     * (TopUp, Budget, CreditGrant) has no namespace; organization-level billing.* events name the account
     * (docs/billing.md).
     */
    readonly object: {
      readonly apiVersion: string
      readonly kind: string
      readonly metadata: { readonly name: string; readonly namespace?: string; readonly uid: string }
      readonly status: JsonObject
    }
  }
}

/** The object of a delivery: what the API shows of it. */
export type DeliveredObject = OutboxEvent["data"]["object"]

/**
 * What a delivery shows of a stored object: its identity and its status (no spec, so no secret values), less what names
 * a machine — a gang's rendezvous address (spec: Delivery, "never provider names, machine ids or internal details").
 */
export const deliveredObjectOf = (object: ResourceObject): DeliveredObject => ({
  apiVersion: object.apiVersion,
  kind: object.kind,
  metadata: {
    name: object.metadata.name,
    ...(object.metadata.namespace === undefined ? {} : { namespace: object.metadata.namespace }),
    uid: object.metadata.uid
  },
  status: withoutMachines(isObject(object.status) ? object.status : {})
})

const withoutMachines = (status: JsonObject): JsonObject => {
  const gang = status["gang"]
  if (!isObject(gang) || gang["rendezvous"] === undefined) return status
  const { rendezvous: _address, ...rest } = gang
  return { ...status, gang: rest }
}

/** A delivery-shaped event (spec: Delivery) of `type` about `object`, at `at` (epoch ms of the service's clock). */
export const deliveryOf = (
  type: string,
  at: number,
  event: { readonly reason: string; readonly message: string; readonly count?: number },
  object: DeliveredObject
): OutboxEvent => ({
  type,
  timestamp: new Date(at).toISOString(),
  data: { event: { reason: event.reason, message: event.message, count: event.count ?? 1 }, object }
})

/** The store's record table of the outbox. */
export const outboxTable = "eventoutbox"

/** How long a record is kept: the spec keeps a webhook endpoint's delivery log 7 days (spec: Limits, Webhook). */
export const outboxRetentionMs = 7 * Limits.dayMs

export interface OutboxEntry {
  readonly id: string
  readonly event: OutboxEvent
}

export class EventOutbox extends Context.Service<EventOutbox, {
  /** The op that records `event` in the commit of the change that caused it. */
  readonly record: (event: OutboxEvent) => WriteOp
  /** How many records this process has made (a reader woken by a commit skips its read when none came since). */
  readonly recorded: () => number
  /**
   * The records after `after` ("" for the first), in the order of their ids, at most `limit`; `now` drops expired ones.
   */
  readonly read: (after: string, limit: number, now: number) => Effect.Effect<ReadonlyArray<OutboxEntry>, StoreError>
}>()("nodus/runtime/EventOutbox") {
  static readonly layer = Layer.effect(
    EventOutbox,
    Effect.gen(function*() {
      const store = yield* Store
      const ids = yield* Ids
      const clock = yield* Clock.Clock
      // Ids order records as they are made: by the service's clock (never back under the simulator), then this process
      // and its count (several processes share one store). An event's own time is in its body: a controller stepping an
      // earlier instant may record after a later one.
      const processTag = ids.uid().slice(0, 8)
      let counter = 0
      return EventOutbox.of({
        record: (event) => {
          const at = Date.parse(event.timestamp)
          const id = `${String(clock.currentTimeMillisUnsafe()).padStart(15, "0")}.${processTag}.${
            String(++counter).padStart(10, "0")
          }`
          return {
            _tag: "PutRecord",
            table: outboxTable,
            id,
            value: event as unknown as Json,
            expiresAt: at + outboxRetentionMs
          }
        },
        recorded: () => counter,
        read: (after, limit, now) =>
          Effect.map(
            store.records(outboxTable, after, limit, now),
            (entries) => entries.map((entry) => ({ id: entry.id, event: entry.value as unknown as OutboxEvent }))
          )
      })
    })
  )
}
