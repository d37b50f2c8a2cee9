/**
 * Webhook deliveries under the simulator (src/backends/sim/SimWebhooks.ts; docs/simulator.md, "Webhooks"): the
 * production rules on virtual time. One receiver down for two days gets every event once it is back, each retry at
 * the schedule's instant; one down for four days — longer than any event's 3-day window — ends every delivery Failed
 * after its 18 attempts. Same seed, same trace.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Engine } from "../../../src/backends/sim/Engine.ts"
import { runScenario } from "../../../src/backends/sim/Run.ts"
import { parseScenario } from "../../../src/backends/sim/Scenario.ts"
import { SimWebhooks } from "../../../src/backends/sim/SimWebhooks.ts"
import * as Limits from "../../../src/core/Limits.ts"
import { nextAttemptAt } from "../../../src/core/WebhookDelivery.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"

const hour = Limits.hourMs
const T0 = Date.parse("2026-01-01T00:00:00Z")

/** The attempts the schedule allows an event at `eventAt` (retries within 3 days of it). */
const scheduleOf = (eventAt: number): Array<number> => {
  const times = [eventAt]
  for (
    let next = nextAttemptAt(eventAt, 1, eventAt);
    next !== undefined;
    next = nextAttemptAt(eventAt, times.length, times.at(-1)!)
  ) times.push(next)
  return times
}

describe("simulated receivers", () => {
  it("a receiver down for 2 days gets the event at the schedule's first attempt after it is back", () => {
    const engine = new Engine(T0)
    const lines: Array<string> = []
    const webhooks = new SimWebhooks(engine, [{
      name: "recovers",
      eventTypes: ["*"],
      projects: [],
      down: [{ from: T0, to: T0 + 48 * hour }]
    }], { record: (line) => lines.push(line) })
    webhooks.event("job.succeeded", "etl", "uid-1")
    engine.run(T0 + 10 * 24 * hour)
    const expected = scheduleOf(T0).filter((_, index, all) => index === 0 || all[index - 1]! < T0 + 48 * hour)
    expect(lines.map((line) => Number(line.split(" ")[0]))).toEqual(expected)
    expect(lines.at(-1)).toMatch(/ 200$/u)
    expect(webhooks.summary()).toEqual([
      expect.objectContaining({
        deliveries: 1,
        succeeded: 1,
        failed: 0,
        pending: 0,
        succeededAfterRetries: 1,
        offSchedule: 0
      })
    ])
  })

  it("a receiver down for 4 days: Failed after every attempt the 3-day window allows", () => {
    const engine = new Engine(T0)
    const webhooks = new SimWebhooks(engine, [{
      name: "gone",
      eventTypes: ["job.*"],
      projects: [],
      down: [{ from: T0, to: T0 + 96 * hour }]
    }])
    webhooks.event("job.failed", "etl", "uid-2")
    webhooks.event("topup.succeeded", undefined, "uid-3") // not subscribed
    engine.run(T0 + 10 * 24 * hour)
    expect(scheduleOf(T0)).toHaveLength(18)
    expect(webhooks.summary()).toEqual([
      expect.objectContaining({ deliveries: 1, succeeded: 0, failed: 1, attempts: 18, offSchedule: 0 })
    ])
  })
})

describe("the webhook-outage scenario", () => {
  const file = join(import.meta.dirname, "..", "..", "..", "scenarios", "webhook-outage.json")
  const parsed = parseScenario(JSON.parse(readFileSync(file, "utf8")))
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems))
  const run = () => runScenario(parsed.scenario, { catalog: loadCatalog(), check: true })

  it("delivers every event to the receiver that recovers, and fails every one of the receiver that stays down", () => {
    const summary = run()
    const jobs = summary.totals.byPhase["Succeeded"] ?? 0
    expect(jobs).toBeGreaterThan(10)
    const byName = Object.fromEntries((summary.webhooks ?? []).map((endpoint) => [endpoint.endpoint, endpoint]))
    expect(byName["steady"]).toMatchObject({
      succeeded: byName["steady"]!.deliveries,
      attempts: byName["steady"]!.deliveries,
      failed: 0,
      pending: 0
    })
    expect(byName["recovers"]).toMatchObject({
      deliveries: jobs,
      succeeded: jobs,
      succeededAfterRetries: jobs,
      failed: 0,
      pending: 0,
      offSchedule: 0
    })
    expect(byName["recovers"]!.maxDeliverySeconds).toBeGreaterThan(36 * 3600)
    expect(byName["gone"]).toMatchObject({
      succeeded: 0,
      failed: byName["gone"]!.deliveries,
      attempts: 18 * byName["gone"]!.deliveries,
      offSchedule: 0
    })
    expect(summary.violations).toEqual([])
  })

  it("gives the same trace for the same seed", () => {
    expect(run().traceHash).toBe(run().traceHash)
  })
})
