/**
 * The Budget's admission rules (spec: Other kinds, Estimate.holdUSD, Events budget.*; nodus's schema in
 * docs/kinds/Budget.md), one row per rule, then its update rules (every field may change) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { budget } from "../../../src/kinds/budget/BudgetSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { amountUSD: "500.00", period: "Monthly" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no amountUSD", { period: "Monthly" }, "spec.amountUSD"],
  ["no period", { amountUSD: "10" }, "spec.period"],
  ["an amount that is not a decimal", spec({ amountUSD: "ten" }), "spec.amountUSD"],
  ["a negative amount", spec({ amountUSD: "-5" }), "spec.amountUSD"],
  ["an amount with 7 decimals", spec({ amountUSD: "1.0000001" }), "spec.amountUSD"],
  ["an amount as a number", spec({ amountUSD: 500 }), "spec.amountUSD"],
  ["an unknown period", spec({ period: "Yearly" }), "spec.period"],
  ["an unknown action", spec({ action: "Suspend" }), "spec.action"],
  ["a threshold of 0", spec({ thresholds: [0] }), "spec.thresholds[0]"],
  ["a threshold above 100", spec({ thresholds: [50, 101] }), "spec.thresholds[1]"],
  ["a fractional threshold", spec({ thresholds: [50.5] }), "spec.thresholds[0]"],
  ["a threshold twice", spec({ thresholds: [80, 80] }), "spec.thresholds[1]"],
  ["11 thresholds", spec({ thresholds: [10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 100] }), "spec.thresholds"],
  ["a project that is no DNS label", spec({ selector: { projects: ["ML"] } }), "spec.selector.projects[0]"],
  ["a project twice", spec({ selector: { projects: ["ml", "ml"] } }), "spec.selector.projects[1]"],
  [
    "257 projects",
    spec({ selector: { projects: Array.from({ length: 257 }, (_, i) => `p${i}`) } }),
    "spec.selector.projects"
  ],
  [
    "a label key that is no qualified name",
    spec({ selector: { labels: { "team name": "ml" } } }),
    "spec.selector.labels[team name]"
  ],
  [
    "a label value with a space",
    spec({ selector: { labels: { team: "machine learning" } } }),
    "spec.selector.labels.team"
  ],
  ["an unknown selector field", spec({ selector: { matchExpressions: [] } }), "spec.selector.matchExpressions"],
  ["an unknown field", spec({ currency: "EUR" }), "spec.currency"]
]

describe("Budget admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(budget, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies nodus's default action Refuse (a Budget caps spending), and nothing else", () => {
    const admission = admitSpec(budget, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") assert.deepStrictEqual(admission.spec, { ...base, action: "Refuse" })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ amountUSD: "0", period: "Total", action: "Notify" }),
      spec({ amountUSD: "1000000.123456", period: "Daily", thresholds: [1, 10, 20, 30, 40, 50, 60, 70, 80, 100] }),
      spec({
        period: "Weekly",
        selector: {
          projects: Array.from({ length: 256 }, (_, i) => `p${i}`),
          labels: { "nodus.dev/team": "ml", tier: "" }
        }
      }),
      spec({ selector: {}, thresholds: [] })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(budget, edge)._tag, "Admitted", JSON.stringify(admitSpec(budget, edge)))
    }
  })
})

describe("Budget updates", () => {
  const created = spec({ thresholds: [50, 80, 100], selector: { projects: ["ml"] } })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["amountUSD lowered", { amountUSD: "100" }],
    ["amountUSD raised", { amountUSD: "1000" }],
    ["period", { period: "Weekly" }],
    ["selector", { selector: { labels: { team: "ml" } } }],
    ["thresholds", { thresholds: [90] }],
    ["action", { action: "Notify" }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(budget, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }
})

describe("Budget status", () => {
  const envelope = Schema.Struct({ status: budget.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "budgets" }, "Budget")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits what the service writes", () => {
    assert.deepStrictEqual(
      statusRefusals({
        spentUSD: "412.50",
        heldUSD: "30.000001",
        periodStart: "2026-01-01T00:00:00Z",
        periodEnd: "2026-02-01T00:00:00Z",
        thresholdsCrossed: [50, 80],
        observedGeneration: 1
      }),
      []
    )
  })

  it("refuses amounts that are not USD strings", () => {
    assert.include(statusRefusals({ spentUSD: 412.5 }), "status.spentUSD")
    assert.include(statusRefusals({ heldUSD: "-1" }), "status.heldUSD")
  })
})
