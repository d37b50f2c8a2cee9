/**
 * The PoolAction's admission rules (nodus's own schema; docs/kinds/PoolAction.md), one row per rule; its update rule
 * (only state changes); and the rule for a user's change of state, with the spec's error codes (PoolActionNotPending,
 * PoolActionNotReversible, PoolActPaused).
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import {
  poolAction,
  type PoolActionState,
  poolActionStateChange
} from "../../../src/kinds/poolaction/PoolActionSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { pool: "lab", action: "Defragment", reversible: true }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no pool", { action: "Defragment", reversible: true }, "spec.pool"],
  ["an empty pool", spec({ pool: "" }), "spec.pool"],
  ["no action", { pool: "lab", reversible: true }, "spec.action"],
  ["an unknown action", spec({ action: "Shrink" }), "spec.action"],
  ["no reversible", { pool: "lab", action: "Defragment" }, "spec.reversible"],
  ["an unknown state", spec({ state: "Cancelled" }), "spec.state"],
  ["nodes on a Burst", spec({ action: "Burst", gpus: 8, nodes: ["n1"] }), "spec.nodes"],
  ["an empty node name", spec({ nodes: [""] }), "spec.nodes[0]"],
  ["a node named twice", spec({ nodes: ["n1", "n1"] }), "spec.nodes[1]"],
  ["IdleReclaim without nodes", spec({ action: "IdleReclaim" }), "spec.nodes"],
  ["Drain without nodes", spec({ action: "Drain" }), "spec.nodes"],
  ["gpus on a Drain", spec({ action: "Drain", nodes: ["n1"], gpus: 2 }), "spec.gpus"],
  ["gpus 0", spec({ action: "Burst", gpus: 0 }), "spec.gpus"],
  ["Burst without gpus", spec({ action: "Burst" }), "spec.gpus"],
  ["rateUSDPerHour on a Defragment", spec({ rateUSDPerHour: "2" }), "spec.rateUSDPerHour"],
  ["a rateUSDPerHour that is not USD", spec({ action: "Burst", gpus: 1, rateUSDPerHour: "-2" }), "spec.rateUSDPerHour"],
  ["waitTimeout on a Defragment", spec({ waitTimeout: "10m" }), "spec.waitTimeout"],
  ["WaitTuning without waitTimeout", spec({ action: "WaitTuning" }), "spec.waitTimeout"],
  ["a waitTimeout below 1m", spec({ action: "WaitTuning", waitTimeout: "59s" }), "spec.waitTimeout"],
  ["a waitTimeout above 24h", spec({ action: "WaitTuning", waitTimeout: "25h" }), "spec.waitTimeout"],
  ["startTime on a Defragment", spec({ startTime: "2026-01-02T02:00:00Z" }), "spec.startTime"],
  [
    "a startTime that is not RFC 3339",
    spec({ action: "Drain", nodes: ["n1"], startTime: "tonight" }),
    "spec.startTime"
  ],
  ["duration on a Defragment", spec({ duration: "1h" }), "spec.duration"],
  ["a Drain duration below 1m", spec({ action: "Drain", nodes: ["n1"], duration: "10s" }), "spec.duration"],
  ["an unknown field", spec({ target: { nodes: ["n1"] } }), "spec.target"]
]

describe("PoolAction admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(poolAction, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("defaults state to Pending", () => {
    assert.deepStrictEqual(admitSpec(poolAction, base), { _tag: "Admitted", spec: { ...base, state: "Pending" } })
  })

  it("admits each action with its parameters, at the edges", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ action: "IdleReclaim", nodes: ["n1", "n2"], state: "Applied" }),
      spec({ action: "Drain", nodes: ["n1"], startTime: "2026-01-02T02:00:00Z", duration: "1m" }),
      spec({ action: "Defragment", nodes: ["n1"] }),
      spec({ action: "WaitTuning", waitTimeout: "1m" }),
      spec({ action: "WaitTuning", waitTimeout: "24h", reversible: false }),
      spec({ action: "Burst", gpus: 1, rateUSDPerHour: "0" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(poolAction, edge)._tag, "Admitted", JSON.stringify(admitSpec(poolAction, edge)))
    }
  })
})

describe("PoolAction updates", () => {
  const created = spec({ action: "Drain", nodes: ["n1"], duration: "2h" })

  for (const state of ["Approved", "Rejected", "Applied", "Reverted"]) {
    it(`accepts a change of state to ${state}`, () => {
      assert.deepStrictEqual(updateRefusals(poolAction, created, { ...created, state }), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, Readonly<Record<string, unknown>>, string]> = [
    ["pool", { pool: "other" }, "spec.pool"],
    ["action", { action: "Defragment", duration: undefined }, "spec.action"],
    ["reversible", { reversible: false }, "spec.reversible"],
    ["nodes", { nodes: ["n2"] }, "spec.nodes"],
    ["duration", { duration: "3h" }, "spec.duration"]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      // A field set to undefined is left out (the changed spec must itself be admissible).
      const after = JSON.parse(JSON.stringify({ ...created, ...fields })) as JsonObject
      assert.include(updateRefusals(poolAction, created, after).immutable, path)
    })
  }
})

describe("PoolAction state changes by the user", () => {
  const rows: ReadonlyArray<
    readonly [PoolActionState, PoolActionState, { reversible?: boolean; paused?: boolean }, string | undefined]
  > = [
    ["Pending", "Approved", {}, undefined],
    ["Pending", "Rejected", {}, undefined],
    ["Pending", "Rejected", { paused: true }, undefined],
    ["Pending", "Approved", { paused: true }, "PoolActPaused"],
    ["Approved", "Rejected", {}, "PoolActionNotPending"],
    ["Applied", "Approved", {}, "PoolActionNotPending"],
    ["Rejected", "Approved", {}, "PoolActionNotPending"],
    ["Applied", "Reverted", {}, undefined],
    ["Applied", "Reverted", { paused: true }, undefined],
    ["Applied", "Reverted", { reversible: false }, "PoolActionNotReversible"],
    ["Pending", "Reverted", {}, "PoolActionNotReversible"],
    ["Approved", "Applied", {}, "Invalid"],
    ["Rejected", "Pending", {}, "Invalid"],
    ["Applied", "Applied", { reversible: false, paused: true }, undefined]
  ]

  for (const [from, to, flags, code] of rows) {
    it(`${from} → ${to} ${JSON.stringify(flags)}: ${code ?? "allowed"}`, () => {
      const refusal = poolActionStateChange({
        from,
        to,
        reversible: flags.reversible ?? true,
        paused: flags.paused ?? false
      })
      assert.strictEqual(refusal?.code, code)
    })
  }
})

describe("PoolAction status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(poolAction.status)(status))

  it("admits its fields", () => {
    assert.isTrue(decodes({
      reason: "IdleFor",
      message: "n1 idle for 2h",
      observedGeneration: 2,
      conditions: [],
      decidedTime: "2026-01-02T15:04:05Z",
      appliedTime: "2026-01-02T15:05:00Z",
      revertedTime: "2026-01-02T16:00:00Z"
    }))
  })

  it("refuses a time that is not RFC 3339", () => assert.isFalse(decodes({ appliedTime: "yesterday" })))
})
