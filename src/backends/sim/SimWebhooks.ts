/**
 * Webhook deliveries under the simulator (docs/webhooks.md, docs/simulator.md "Webhooks"): the events a scenario's
 * Jobs raise go to simulated receivers by the production rules (core/WebhookDelivery.ts — which endpoint takes an
 * event, when a failed attempt is tried again, when a delivery is given up) on the engine's virtual time. A receiver
 * answers 2xx except in its down windows, so a scenario shows a receiver that is down for two days getting every
 * event once it is back, and one that is down for longer than the retry window losing what it missed: Failed.
 *
 * The summary checks every retry against the schedule (each wait the one `retryDelayMs` gives, to the millisecond).
 */
import { delivers, nextAttemptAt, retryDelayMs, type Subscription } from "../../core/WebhookDelivery.ts"
import type { Engine } from "./Engine.ts"
import type { TraceSink } from "./Simulation.ts"

/** A simulated receiver behind one endpoint: what it subscribes to, and when it is down (epoch ms, [from, to)). */
export interface SimEndpoint {
  readonly name: string
  readonly eventTypes: ReadonlyArray<string>
  readonly projects: ReadonlyArray<string>
  readonly down: ReadonlyArray<{ readonly from: number; readonly to: number }>
}

interface SimDelivery {
  readonly endpoint: SimEndpoint
  readonly type: string
  readonly eventAt: number
  readonly attempts: Array<number>
  phase: "Pending" | "Succeeded" | "Failed"
}

/** What an endpoint's receiver got, for the scenario's summary. */
export interface WebhookSummary {
  readonly endpoint: string
  readonly deliveries: number
  readonly succeeded: number
  readonly failed: number
  readonly pending: number
  readonly attempts: number
  /** Deliveries that succeeded after at least one failed attempt (the receiver caught up). */
  readonly succeededAfterRetries: number
  /** The longest time from an event to its delivery's success, in virtual seconds. */
  readonly maxDeliverySeconds: number
  /** Deliveries with a retry made at another time than the schedule says (0: every wait to the millisecond). */
  readonly offSchedule: number
}

export class SimWebhooks {
  private readonly deliveries: Array<SimDelivery> = []
  private readonly subscriptions: ReadonlyArray<readonly [SimEndpoint, Subscription]>
  private readonly engine: Engine
  private readonly trace: TraceSink | undefined

  constructor(engine: Engine, endpoints: ReadonlyArray<SimEndpoint>, trace?: TraceSink) {
    this.engine = engine
    this.trace = trace
    this.subscriptions = endpoints.map((endpoint) =>
      [endpoint, {
        uid: endpoint.name,
        eventTypes: endpoint.eventTypes,
        projects: endpoint.projects,
        enabled: true
      }] as const
    )
  }

  /** An event of a spec type, now: one delivery per endpoint that takes it, its first attempt at once. */
  event(type: string, namespace: string | undefined, uid: string): void {
    for (const [endpoint, subscription] of this.subscriptions) {
      if (!delivers(subscription, { type, namespace, uid })) continue
      const delivery: SimDelivery = { endpoint, type, eventAt: this.engine.now, attempts: [], phase: "Pending" }
      this.deliveries.push(delivery)
      this.attempt(delivery)
    }
  }

  private attempt(delivery: SimDelivery): void {
    const now = this.engine.now
    delivery.attempts.push(now)
    const answered = !delivery.endpoint.down.some((window) => now >= window.from && now < window.to)
    this.trace?.record(
      `${now} webhook ${delivery.endpoint.name} ${delivery.type} attempt ${delivery.attempts.length} ${
        answered ? "200" : "503"
      }`
    )
    if (answered) {
      delivery.phase = "Succeeded"
      return
    }
    const next = nextAttemptAt(delivery.eventAt, delivery.attempts.length, now)
    if (next === undefined) delivery.phase = "Failed"
    else this.engine.at(next, () => this.attempt(delivery))
  }

  summary(): ReadonlyArray<WebhookSummary> {
    return this.subscriptions.map(([endpoint]) => {
      const mine = this.deliveries.filter((delivery) => delivery.endpoint === endpoint)
      const succeeded = mine.filter((delivery) => delivery.phase === "Succeeded")
      return {
        endpoint: endpoint.name,
        deliveries: mine.length,
        succeeded: succeeded.length,
        failed: mine.filter((delivery) => delivery.phase === "Failed").length,
        pending: mine.filter((delivery) => delivery.phase === "Pending").length,
        attempts: mine.reduce((sum, delivery) => sum + delivery.attempts.length, 0),
        succeededAfterRetries: succeeded.filter((delivery) => delivery.attempts.length > 1).length,
        maxDeliverySeconds: succeeded.reduce(
          (max, delivery) => Math.max(max, (delivery.attempts.at(-1)! - delivery.eventAt) / 1_000),
          0
        ),
        offSchedule: mine.filter((delivery) =>
          delivery.attempts.some((at, index) =>
            index > 0 && at - delivery.attempts[index - 1]! !== retryDelayMs(index)
          )
        ).length
      }
    })
  }
}
