/**
 * The internal stream of the spec's event types (spec: Events — job.succeeded, job.preempted, …), which webhook
 * deliveries will consume. Whatever records an event with a spec type publishes it here once the object's state it
 * reports is stored, in the shape of a delivery body (spec: Delivery — `type`, `timestamp`, `data {event, object}`),
 * so a WebhookEndpoint only filters, signs and sends it.
 *
 * In memory and best effort: a subscriber that falls more than `eventStreamLag` events behind loses the oldest, and
 * nothing is kept for subscribers that come later. Webhooks make it durable when they arrive.
 */
import { Context, Effect, Layer, PubSub, type Scope, Stream } from "effect"
import { isObject, type JsonObject } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"

/** One event of a spec type, as a webhook delivery body carries it. */
export interface StreamEvent {
  /** `<kind>.<reason>` in lower case with underscores, e.g. job.succeeded (spec: Event types). */
  readonly type: string
  /** ISO 8601, in the service's (simulated) time. */
  readonly timestamp: string
  readonly data: {
    readonly event: { readonly reason: string; readonly message: string; readonly count: number }
    /**
     * What the API shows for the object: never provider names or machine ids (spec: Delivery). A cluster-scoped object
     * (TopUp, Budget, CreditGrant) has no namespace; organization-level billing.* events name the account (docs/billing.md).
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
export type DeliveredObject = StreamEvent["data"]["object"]

/** What a delivery shows of a stored object: its identity and its status (no spec, never provider details). */
export const deliveredObjectOf = (object: ResourceObject): DeliveredObject => ({
  apiVersion: object.apiVersion,
  kind: object.kind,
  metadata: {
    name: object.metadata.name,
    ...(object.metadata.namespace === undefined ? {} : { namespace: object.metadata.namespace }),
    uid: object.metadata.uid
  },
  status: isObject(object.status) ? object.status : {}
})

/** A delivery-shaped event (spec: Delivery) of `type` about `object`, at `at` (epoch ms of the service's clock). */
export const deliveryOf = (type: string, at: number, event: { readonly reason: string; readonly message: string; readonly count?: number }, object: DeliveredObject): StreamEvent => ({
  type,
  timestamp: new Date(at).toISOString(),
  data: { event: { reason: event.reason, message: event.message, count: event.count ?? 1 }, object }
})

/** Events a subscriber may fall behind by before it loses the oldest. */
export const eventStreamLag = 65_536

export class EventStream extends Context.Service<EventStream, {
  readonly publish: (event: StreamEvent) => Effect.Effect<void>
  /** Every event published from now on, while the scope lasts. */
  readonly subscribe: Effect.Effect<Stream.Stream<StreamEvent>, never, Scope.Scope>
}>()("nodus/server/EventStream") {
  static readonly layer = Layer.effect(EventStream, Effect.gen(function*() {
    const pubsub = yield* PubSub.sliding<StreamEvent>(eventStreamLag)
    return EventStream.of({
      publish: (event) => Effect.asVoid(PubSub.publish(pubsub, event)),
      subscribe: Effect.map(PubSub.subscribe(pubsub), (subscription) => Stream.fromSubscription(subscription))
    })
  }))
}
