/**
 * A webhook delivery as its record keeps it (table `webhookdeliveries`, by `<endpoint uid>/<entry id>`, kept 7 days;
 * docs/webhooks.md): the exact body, the webhook-id every attempt carries, the phase and the attempts, and what one
 * attempt's result makes of it by the spec's rules (core/WebhookDelivery.ts). The deliveries sub-resource shows each as
 * a log entry. Pure, but for the random webhook-id of a replay.
 */
import { createHash } from "node:crypto"
import type { JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import { type DeliveryPhase, isSuccess, nextAttemptAt } from "../core/WebhookDelivery.ts"
import type { WriteOp } from "../store/Store.ts"
import type { OutboxEntry } from "./EventOutbox.ts"
import { newWebhookId } from "./WebhookSigning.ts"
import type { AttemptResult } from "./WebhookTransport.ts"

export const deliveriesTable = "webhookdeliveries"

/** Attempts a record keeps (time and status code), for the endpoint's health after a restart. */
const resultsKept = 32

/** One delivery, as its record stores it. */
export interface Delivery {
  readonly endpoint: string
  readonly id: string
  readonly webhookId: string
  readonly type: string
  readonly body: string
  readonly eventAt: number
  readonly createdAt: number
  readonly phase: DeliveryPhase
  readonly attempts: number
  /** Each attempt's time and the receiver's status code (0: no answer), newest last. */
  readonly results: ReadonlyArray<readonly [number, number]>
  readonly nextAttemptAt?: number | undefined
  readonly responseCode?: number | undefined
  readonly durationMs?: number | undefined
  readonly error?: string | undefined
  readonly replayOf?: string | undefined
  /**
   * The project of the event's object; "" for an event of the organization (a cluster-scoped object, a ping). Absent
   * from records written before it was kept: then read from the body.
   */
  readonly project?: string | undefined
}

export const recordKey = (endpoint: string, id: string): string => `${endpoint}/${id}`

export const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * A new delivery, due now. One of an event has a webhook-id derived from its record's key, so a second process that
 * fans the same event out writes the same record (receivers drop the duplicate attempt by it); a replay's is new.
 */
export const newDelivery = (
  endpoint: string,
  id: string,
  type: string,
  body: string,
  eventAt: number,
  at: number,
  project: string | undefined,
  replayOf?: string
): Delivery => ({
  endpoint,
  id,
  webhookId: replayOf === undefined
    ? `msg_${createHash("sha256").update(recordKey(endpoint, id)).digest("hex").slice(0, 32)}`
    : newWebhookId(),
  type,
  body,
  eventAt,
  createdAt: at,
  phase: "Pending",
  attempts: 0,
  results: [],
  nextAttemptAt: at,
  project: project ?? "",
  ...(replayOf === undefined ? {} : { replayOf })
})

/** The op that stores a delivery as it now is. */
export const putDelivery = (delivery: Delivery): WriteOp => ({
  _tag: "PutRecord",
  table: deliveriesTable,
  id: recordKey(delivery.endpoint, delivery.id),
  value: delivery as unknown as JsonObject,
  expiresAt: delivery.createdAt + Limits.webhookLogRetentionMs
})

/**
 * The delivery after an attempt signed at `at`: Succeeded on a 2xx; after any other answer or none, Pending until the
 * schedule's next instant, or Failed when that falls more than 3 days after the event; Failed at once when the
 * receiver may not be connected to.
 */
export const afterAttempt = (delivery: Delivery, result: AttemptResult, at: number): Delivery => {
  const attempts = delivery.attempts + 1
  const code = result._tag === "Answered" ? result.status : 0
  const base = {
    ...delivery,
    attempts,
    results: [...delivery.results, [at, code] as const].slice(-resultsKept),
    durationMs: result._tag === "Refused" ? undefined : result.durationMs,
    responseCode: result._tag === "Answered" ? result.status : delivery.responseCode
  }
  if (result._tag === "Answered" && isSuccess(result.status)) {
    return { ...base, phase: "Succeeded", nextAttemptAt: undefined, error: undefined }
  }
  const retryAt = result._tag === "Refused" ? undefined : nextAttemptAt(delivery.eventAt, attempts, at)
  return {
    ...base,
    phase: retryAt === undefined ? "Failed" : "Pending",
    nextAttemptAt: retryAt,
    error: result._tag === "Answered" ? `the receiver answered ${result.status}` : result.message
  }
}

/**
 * The body of an event's delivery, at most 64 KiB (spec: Delivery): an object whose status is larger keeps its phase,
 * reason and message alone.
 */
export const bodyOf = (event: OutboxEntry["event"]): string => {
  const body = JSON.stringify(event)
  if (Buffer.byteLength(body) <= Limits.webhookBodyBytesMax) return body
  const status = event.data.object.status
  const kept = Object.fromEntries(
    ["phase", "reason", "message"].flatMap((field) =>
      typeof status[field] === "string" ? [[field, String(status[field]).slice(0, 4_096)]] : []
    )
  )
  const message = event.data.event.message.slice(0, 4_096)
  return JSON.stringify({
    ...event,
    data: { event: { ...event.data.event, message }, object: { ...event.data.object, status: kept } }
  })
}

/** The project of a delivery's event ("" for the organization's). */
export const projectOf = (delivery: Delivery): string => {
  if (delivery.project !== undefined) return delivery.project
  const body = JSON.parse(delivery.body) as {
    readonly data?: { readonly object?: { readonly metadata?: { readonly namespace?: unknown } } }
  }
  const namespace = body.data?.object?.metadata?.namespace
  return typeof namespace === "string" ? namespace : ""
}

/**
 * A page of entries from the deliveries read past `after`: the first `limit`, and a `continue` when one more was read.
 */
export const pageOf = (
  read: ReadonlyArray<Delivery>,
  limit: number
): { readonly items: ReadonlyArray<JsonObject>; readonly continue: string | undefined } => {
  const items = read.slice(0, limit).map(entryOf)
  return { items, continue: read.length > limit ? read[limit - 1]!.id : undefined }
}

/** A delivery's log entry, as the deliveries sub-resource shows it. */
export const entryOf = (delivery: Delivery): JsonObject => ({
  id: delivery.id,
  webhookId: delivery.webhookId,
  type: delivery.type,
  phase: delivery.phase,
  attempts: delivery.attempts,
  createdTime: iso(delivery.createdAt),
  ...(delivery.results.length === 0 ? {} : { lastAttemptTime: iso(delivery.results[delivery.results.length - 1]![0]) }),
  ...(delivery.nextAttemptAt === undefined || delivery.phase !== "Pending"
    ? {}
    : { nextAttemptTime: iso(delivery.nextAttemptAt) }),
  ...(delivery.responseCode === undefined ? {} : { responseCode: delivery.responseCode }),
  ...(delivery.durationMs === undefined ? {} : { durationMs: delivery.durationMs }),
  ...(delivery.error === undefined ? {} : { error: delivery.error }),
  ...(delivery.replayOf === undefined ? {} : { replayOf: delivery.replayOf })
})
