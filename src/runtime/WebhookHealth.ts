/**
 * What an endpoint's status says of its deliveries (spec: WebhookEndpoint status, Events retry rule 6;
 * docs/webhooks.md, "The endpoint's status"): the last delivery, the attempts of the last 24 hours, and whether it is
 * failing — three failed attempts in a row make it so (Healthy False, DeliveriesFailing, with `failingSince`), a
 * success clears it. The sender feeds it each attempt; the status writer turns it into the status.
 */
import { conditionsOf, type ConditionStatus, withCondition } from "../core/controller/Conditions.ts"
import { isObject, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { isFailing, isSuccess } from "../core/WebhookDelivery.ts"
import { type Delivery, iso } from "./WebhookLog.ts"

/** Attempts counted per minute: what `deliveries24h` sums (to the minute) without keeping every attempt. */
class AttemptWindow {
  private readonly minutes = new Map<number, { succeeded: number; failed: number }>()

  add(at: number, ok: boolean): void {
    const minute = Math.floor(at / Limits.minuteMs)
    const counts = this.minutes.get(minute) ?? { succeeded: 0, failed: 0 }
    if (ok) counts.succeeded++
    else counts.failed++
    this.minutes.set(minute, counts)
  }

  /** The attempts from `cutoff` on; older minutes are dropped. */
  since(cutoff: number): { readonly succeeded: number; readonly failed: number } {
    const first = Math.floor(cutoff / Limits.minuteMs)
    let succeeded = 0
    let failed = 0
    for (const [minute, counts] of this.minutes) {
      if (minute < first) this.minutes.delete(minute)
      else {
        succeeded += counts.succeeded
        failed += counts.failed
      }
    }
    return { succeeded, failed }
  }
}

export class Health {
  private failuresInARow = 0
  private failingSince: number | undefined
  private last: Delivery | undefined
  /** Attempts of the last 24 hours (a busy endpoint's day is at most 1,440 entries). */
  private readonly window = new AttemptWindow()
  /** The third failure in a row happened and its event is not yet written. */
  announce = false
  /** Something changed that the status does not show yet. */
  dirty = false

  /** A delivery of the log, read at start: its attempts of the last day, and whether it is the latest. */
  load(delivery: Delivery, now: number): void {
    for (const [time, code] of delivery.results) if (time > now - Limits.dayMs) this.window.add(time, isSuccess(code))
    if (this.last === undefined || (delivery.results.at(-1)?.[0] ?? 0) > (this.last.results.at(-1)?.[0] ?? 0)) {
      this.last = delivery
    }
  }

  /** A restarted server takes up the failing state its status shows. */
  resume(failingSince: number): void {
    if (this.failingSince !== undefined) return
    this.failingSince = failingSince
    this.failuresInARow = Math.max(this.failuresInARow, Limits.webhookFailuresUnhealthy)
  }

  /** An attempt made at `at`, as `delivery` now stands after it. */
  observe(delivery: Delivery, at: number): void {
    const ok = delivery.phase === "Succeeded"
    this.window.add(at, ok)
    this.last = delivery
    if (ok) {
      this.failuresInARow = 0
      this.failingSince = undefined
    } else {
      this.failuresInARow++
      if (isFailing(this.failuresInARow) && this.failingSince === undefined) {
        this.failingSince = at
        this.announce = true
      }
    }
    this.dirty = true
  }

  /** The endpoint's status at `at`: its own fields kept, the delivery fields and the Healthy condition written. */
  statusOf(object: ResourceObject, at: number): JsonObject {
    const current = isObject(object.status) ? object.status : {}
    const last = this.last
    const [status, reason, message] = this.healthy()
    const conditions = withCondition(
      conditionsOf(current),
      "Healthy",
      status,
      reason,
      message,
      at,
      object.metadata.generation
    )
    const { failingSince: _cleared, ...rest } = current
    return {
      ...rest,
      ...(last === undefined ? {} : {
        lastDelivery: {
          id: last.webhookId,
          type: last.type,
          phase: last.phase,
          attempts: last.attempts,
          ...(last.results.length === 0 ? {} : { time: iso(last.results[last.results.length - 1]![0]) }),
          ...(last.responseCode === undefined ? {} : { responseCode: last.responseCode }),
          ...(last.durationMs === undefined ? {} : { durationMs: last.durationMs })
        }
      }),
      deliveries24h: this.window.since(at - Limits.dayMs),
      ...(this.failingSince === undefined ? {} : { failingSince: iso(this.failingSince) }),
      conditions: conditions as unknown as JsonObject[],
      observedGeneration: object.metadata.generation ?? 0
    }
  }

  /**
   * The Healthy condition: False once three attempts in a row failed (spec: retry rule 6); True only when the last
   * attempt succeeded; Unknown before any attempt, or while the last failed and fewer than three did in a row — an
   * endpoint whose first delivery failed is not known to be healthy.
   */
  private healthy(): readonly [ConditionStatus, string, string] {
    if (this.failingSince !== undefined) {
      return ["False", "DeliveriesFailing", `The last ${this.failuresInARow} delivery attempts failed.`]
    }
    const lastAttempt = this.last?.results.at(-1)
    if (lastAttempt === undefined) return ["Unknown", "NoDeliveriesYet", "No delivery attempt was made yet."]
    if (isSuccess(lastAttempt[1])) return ["True", "DeliveriesSucceeding", "The last delivery attempt succeeded."]
    return [
      "Unknown",
      "DeliveryFailed",
      `The last delivery attempt failed (${
        this.last?.error ?? "no answer"
      }); ${Limits.webhookFailuresUnhealthy} in a row make the endpoint unhealthy.`
    ]
  }

  /** The failed attempts in a row, and why the last one failed (for the deliveries_failing event). */
  failing(): { readonly inARow: number; readonly lastError: string } {
    return { inARow: this.failuresInARow, lastError: this.last?.error ?? "unknown" }
  }
}
