/**
 * The rules of webhook deliveries (spec: Events — Delivery, Retry and ordering rules; docs/webhooks.md), pure:
 * which endpoints an event goes to, when a failed delivery is tried again and when it is given up, and when an
 * endpoint is unhealthy. The sender (runtime/Webhooks.ts) applies them on the service's clock, so the simulator's
 * virtual time follows the same schedule to the second.
 */
import * as Limits from "./Limits.ts"

/** Delivery phases (spec: Events, retry rule 5). */
export type DeliveryPhase = "Pending" | "Succeeded" | "Failed" | "Abandoned"

/** The event an endpoint gets once, right after its create, whatever it subscribes to (spec: Events). */
export const pingType = "webhookendpoint.ping"
export const failingType = "webhookendpoint.deliveries_failing"

/** What a subscription says (spec: WebhookEndpoint): event type patterns, projects, enabled. */
export interface Subscription {
  readonly uid: string
  readonly eventTypes: ReadonlyArray<string>
  /** Empty: every project. */
  readonly projects: ReadonlyArray<string>
  readonly enabled: boolean
}

/** Whether a pattern (an exact type, `<kind>.*` or `*`) matches an event type (spec: Events). */
export const typeMatches = (pattern: string, type: string): boolean =>
  pattern === "*" || pattern === type || (pattern.endsWith(".*") && type.startsWith(pattern.slice(0, -1)))

/**
 * Whether an event goes to an endpoint: enabled, its type matched by a pattern, and its project listed (an event of
 * no project — the organization's billing, a cluster-scoped object — always matches). A ping goes to its own endpoint
 * alone, whatever it subscribes to.
 */
export const delivers = (
  endpoint: Subscription,
  event: { readonly type: string; readonly namespace: string | undefined; readonly uid: string }
): boolean => {
  if (!endpoint.enabled) return false
  if (event.type === pingType) return event.uid === endpoint.uid
  if (!endpoint.eventTypes.some((pattern) => typeMatches(pattern, event.type))) return false
  return event.namespace === undefined || endpoint.projects.length === 0 || endpoint.projects.includes(event.namespace)
}

/** The wait after the `failed`-th failed attempt: 30 s, doubling, at most 8 h (spec: Events, retry rule 1). */
export const retryDelayMs = (failed: number): number =>
  Math.min(Limits.webhookRetryFirstDelayMs * 2 ** Math.max(0, Math.min(failed - 1, 30)), Limits.webhookRetryDelayMsMax)

/**
 * After a failed attempt: when to try again, or undefined when the next try would fall more than 3 days after the
 * event, so the delivery is Failed now.
 */
export const nextAttemptAt = (eventAt: number, failedAttempts: number, lastAttemptAt: number): number | undefined => {
  const next = lastAttemptAt + retryDelayMs(failedAttempts)
  return next > eventAt + Limits.webhookRetryWindowMs ? undefined : next
}

/** Whether a receiver's answer is a success (spec: Events, retry rule 1: any 2xx). */
export const isSuccess = (status: number): boolean => status >= 200 && status < 300

/**
 * The endpoint's health after a run of failed attempts in a row (a success resets it): unhealthy from the third
 * (spec: Events, retry rule 6). Each failed attempt counts, so a receiver that is down shows it within minutes, not
 * when its first delivery gives up three days later.
 */
export const isFailing = (failuresInARow: number): boolean => failuresInARow >= Limits.webhookFailuresUnhealthy
