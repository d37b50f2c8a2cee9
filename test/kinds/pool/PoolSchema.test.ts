/**
 * The Pool's admission rules (spec: Pool, Limits "Pool"), one row per rule: the spec as written, and either the field
 * path admission refuses or what the admitted spec holds. Then its update rules (none: every field may change) and
 * its status schema.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { cronPattern, pool } from "../../../src/kinds/pool/PoolSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const policy = (fields: JsonObject): JsonObject => ({ act: { mode: "Propose", policies: [fields] } })

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["sandboxCapable that is not a bool", { sandboxCapable: "yes" }, "spec.sandboxCapable"],
  ["an unknown routing mode", { routing: { mode: "Always" } }, "spec.routing.mode"],
  ["an unknown burstToMarket", { routing: { burstToMarket: "Ask" } }, "spec.routing.burstToMarket"],
  ["an unknown waitPolicy", { routing: { waitPolicy: "Forever" } }, "spec.routing.waitPolicy"],
  ["waitTimeout below 1m", { routing: { waitTimeout: "59s" } }, "spec.routing.waitTimeout"],
  ["waitTimeout above 24h", { routing: { waitTimeout: "24h1s" } }, "spec.routing.waitTimeout"],
  ["waitTimeout that is not a duration", { routing: { waitTimeout: "half an hour" } }, "spec.routing.waitTimeout"],
  ["predict.enabled that is not a bool", { predict: { enabled: "true" } }, "spec.predict.enabled"],
  ["predict horizon below 24h", { predict: { horizon: "23h59m" } }, "spec.predict.horizon"],
  ["predict horizon above 720h", { predict: { horizon: "721h" } }, "spec.predict.horizon"],
  ["an unknown act mode", { act: { mode: "Manual" } }, "spec.act.mode"],
  ["act.paused that is not a bool", { act: { paused: 1 } }, "spec.act.paused"],
  [
    "17 policies",
    { act: { policies: Array.from({ length: 17 }, () => ({ action: "Defragment" })) } },
    "spec.act.policies"
  ],
  ["a policy without action", policy({ idleFor: "1h" }), "spec.act.policies[0].action"],
  ["an unknown policy action", policy({ action: "Shrink" }), "spec.act.policies[0].action"],
  [
    "duration on a non-Drain policy",
    policy({ action: "IdleReclaim", duration: "1h" }),
    "spec.act.policies[0].duration"
  ],
  ["a Drain duration below 1m", policy({ action: "Drain", duration: "30s" }), "spec.act.policies[0].duration"],
  [
    "schedule on a non-Drain policy",
    policy({ action: "Burst", schedule: "0 2 * * *" }),
    "spec.act.policies[0].schedule"
  ],
  ["a schedule of four fields", policy({ action: "Drain", schedule: "0 2 * *" }), "spec.act.policies[0].schedule"],
  [
    "a schedule of six fields (seconds)",
    policy({ action: "Drain", schedule: "0 0 2 * * *" }),
    "spec.act.policies[0].schedule"
  ],
  ["a schedule with minute 60", policy({ action: "Drain", schedule: "60 2 * * *" }), "spec.act.policies[0].schedule"],
  ["a schedule with hour 24", policy({ action: "Drain", schedule: "0 24 * * *" }), "spec.act.policies[0].schedule"],
  [
    "a schedule with day of month 0",
    policy({ action: "Drain", schedule: "0 2 0 * *" }),
    "spec.act.policies[0].schedule"
  ],
  ["a schedule with month 13", policy({ action: "Drain", schedule: "0 2 1 13 *" }), "spec.act.policies[0].schedule"],
  ["a schedule with weekday 8", policy({ action: "Drain", schedule: "0 2 * * 8" }), "spec.act.policies[0].schedule"],
  [
    "a schedule with a step of 0",
    policy({ action: "Drain", schedule: "*/0 * * * *" }),
    "spec.act.policies[0].schedule"
  ],
  ["a schedule macro", policy({ action: "Drain", schedule: "@daily" }), "spec.act.policies[0].schedule"],
  ["idleFor on a non-IdleReclaim policy", policy({ action: "Drain", idleFor: "1h" }), "spec.act.policies[0].idleFor"],
  ["an idleFor below 1m", policy({ action: "IdleReclaim", idleFor: "0s" }), "spec.act.policies[0].idleFor"],
  ["maxGPUs on a non-Burst policy", policy({ action: "Drain", maxGPUs: 8 }), "spec.act.policies[0].maxGPUs"],
  ["maxGPUs 0", policy({ action: "Burst", maxGPUs: 0 }), "spec.act.policies[0].maxGPUs"],
  [
    "maxRateUSDPerHour on a non-Burst policy",
    policy({ action: "WaitTuning", maxRateUSDPerHour: "10" }),
    "spec.act.policies[0].maxRateUSDPerHour"
  ],
  [
    "a maxRateUSDPerHour with 7 decimals",
    policy({ action: "Burst", maxRateUSDPerHour: "2.0000001" }),
    "spec.act.policies[0].maxRateUSDPerHour"
  ],
  [
    "a maxRateUSDPerHour that is a number",
    policy({ action: "Burst", maxRateUSDPerHour: 2 }),
    "spec.act.policies[0].maxRateUSDPerHour"
  ],
  [
    "minWaitTimeout on a non-WaitTuning policy",
    policy({ action: "Burst", minWaitTimeout: "5m" }),
    "spec.act.policies[0].minWaitTimeout"
  ],
  [
    "maxWaitTimeout on a non-WaitTuning policy",
    policy({ action: "Drain", maxWaitTimeout: "5m" }),
    "spec.act.policies[0].maxWaitTimeout"
  ],
  [
    "minWaitTimeout below 1m",
    policy({ action: "WaitTuning", minWaitTimeout: "30s" }),
    "spec.act.policies[0].minWaitTimeout"
  ],
  [
    "maxWaitTimeout above 24h",
    policy({ action: "WaitTuning", maxWaitTimeout: "25h" }),
    "spec.act.policies[0].maxWaitTimeout"
  ],
  [
    "minWaitTimeout above maxWaitTimeout",
    policy({ action: "WaitTuning", minWaitTimeout: "2h", maxWaitTimeout: "1h" }),
    "spec.act.policies[0].maxWaitTimeout"
  ],
  ["an unknown field", { replicas: 3 }, "spec.replicas"],
  ["an unknown routing field", { routing: { priority: 1 } }, "spec.routing.priority"],
  ["an unknown policy field", policy({ action: "Drain", window: "1h" }), "spec.act.policies[0].window"]
]

describe("Pool admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(pool, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(pool, {})
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      routing: { mode: "Prefer", burstToMarket: "Approve", waitPolicy: "Timeout", waitTimeout: "30m" },
      predict: { horizon: "168h" },
      act: { mode: "Off" }
    })
  })

  it("keeps what the caller wrote over the defaults", () => {
    const written = {
      sandboxCapable: true,
      routing: { mode: "Only", burstToMarket: "Deny", waitPolicy: "Cheaper", waitTimeout: "2h" },
      predict: { enabled: true, horizon: "336h" },
      act: { mode: "Auto", paused: true, policies: [{ action: "IdleReclaim", idleFor: "2h" }] }
    }
    const admission = admitSpec(pool, written)
    assert.deepStrictEqual(admission, { _tag: "Admitted", spec: written })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      { routing: { waitTimeout: "1m" }, predict: { horizon: "24h" } },
      { routing: { waitTimeout: "24h" }, predict: { horizon: "720h" } },
      { act: { policies: Array.from({ length: 16 }, () => ({ action: "Defragment" })) } },
      policy({ action: "Drain", duration: "1m", schedule: "0 2 * * MON-FRI" }),
      policy({ action: "IdleReclaim", idleFor: "1m" }),
      policy({ action: "Burst", maxGPUs: 1, maxRateUSDPerHour: "0.000001" }),
      policy({ action: "WaitTuning", minWaitTimeout: "1m", maxWaitTimeout: "1m" }),
      policy({ action: "WaitTuning", minWaitTimeout: "1m", maxWaitTimeout: "24h" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(pool, edge)._tag, "Admitted", JSON.stringify(admitSpec(pool, edge)))
    }
  })

  it("admits the cron forms of five fields", () => {
    const schedules = [
      "* * * * *",
      "0 2 * * *",
      "*/15 0-6 * * *",
      "0,30 8-18/2 1,15 * 1-5",
      "59 23 31 12 7",
      "00 09 01 01 0",
      "0 3 * JAN,jul sun",
      "0 22 * * MON-FRI",
      "5  4   *  *  *"
    ]
    for (const schedule of schedules) {
      assert.isTrue(cronPattern.test(schedule), schedule)
      assert.strictEqual(admitSpec(pool, policy({ action: "Drain", schedule }))._tag, "Admitted", schedule)
    }
  })
})

describe("Pool updates", () => {
  const created = {
    routing: { mode: "Prefer" },
    act: { mode: "Propose", policies: [{ action: "IdleReclaim", idleFor: "1h" }] }
  }

  // Spec: Pool — no field is declared immutable.
  const changes: ReadonlyArray<readonly [string, JsonObject]> = [
    ["routing.mode", { ...created, routing: { mode: "Only" } }],
    ["act.mode and act.paused", { ...created, act: { mode: "Auto", paused: true } }],
    ["predict", { ...created, predict: { enabled: true, horizon: "720h" } }],
    ["sandboxCapable", { ...created, sandboxCapable: true }]
  ]

  for (const [field, after] of changes) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(pool, created, after), { immutable: [], invalid: [] })
    })
  }
})

describe("Pool status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(pool.status)(status))

  it("admits every field the spec lists", () => {
    assert.isTrue(decodes({
      phase: "Ready",
      observedGeneration: 3,
      capacity: { nodes: 4, readyNodes: 3, gpus: { "H100-SXM-80GB": { total: 32, free: 8 } } },
      conditions: [{
        type: "Ready",
        status: "True",
        lastTransitionTime: "2026-01-02T15:04:05Z",
        reason: "NodesReady",
        message: "3 of 4 Nodes Ready"
      }],
      forecast: {
        generatedTime: "2026-01-02T15:04:05Z",
        horizon: "168h",
        peakDemandGPUs: { p50: 20, p90: 40 },
        shortfallTime: "2026-01-05T00:00:00Z"
      },
      predict: { enabledTime: "2026-01-01T00:00:00Z" },
      routing: { waiting: 2, burstPending: 1, consent: { rateUSD: "3.25", time: "2026-01-01T00:00:00Z" } },
      act: { pending: 1, lastActionTime: "2026-01-02T00:00:00Z" },
      utilization: { deviceHours: "1234.5", gpuPercent: 71.5, window: "24h" }
    }))
  })

  const refusedStatus: ReadonlyArray<readonly [string, JsonObject]> = [
    ["an unknown phase", { phase: "Running" }],
    ["deviceHours that is not a decimal string", { utilization: { deviceHours: 12 } }],
    ["gpuPercent above 100", { utilization: { gpuPercent: 101 } }],
    ["a negative free GPU count", { capacity: { gpus: { H100: { total: 1, free: -1 } } } }],
    ["a consent rate that is not USD", { routing: { consent: { rateUSD: "$3" } } }]
  ]

  for (const [rule, status] of refusedStatus) {
    it(`refuses ${rule}`, () => assert.isFalse(decodes(status)))
  }
})
