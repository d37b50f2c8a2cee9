/**
 * The Node's admission rules (nodus's own schema; docs/kinds/Node.md), one row per rule, and its update rule: only
 * cordoned and drain change after enrollment.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { node } from "../../../src/kinds/node/NodeSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { pool: "lab", hostname: "gpu-01.lab.example.com" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no pool", { hostname: "gpu-01" }, "spec.pool"],
  ["an empty pool", spec({ pool: "" }), "spec.pool"],
  ["no hostname", { pool: "lab" }, "spec.hostname"],
  ["a hostname with a space", spec({ hostname: "gpu 01" }), "spec.hostname"],
  ["a hostname starting with a dash", spec({ hostname: "-gpu" }), "spec.hostname"],
  ["a hostname with an empty label", spec({ hostname: "gpu..lab" }), "spec.hostname"],
  [
    "a hostname of 254 characters",
    spec({ hostname: `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}` }),
    "spec.hostname"
  ],
  ["cordoned that is not a bool", spec({ cordoned: "yes" }), "spec.cordoned"],
  ["drain that is not a bool", spec({ drain: 1 }), "spec.drain"],
  ["an unknown field", spec({ capacity: { gpus: 8 } }), "spec.capacity"]
]

describe("Node admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(node, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("sets no defaults", () => {
    assert.deepStrictEqual(admitSpec(node, base), { _tag: "Admitted", spec: base })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        hostname: `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`,
        cordoned: true,
        drain: true
      }),
      spec({ hostname: "g", cordoned: false, drain: false }),
      spec({ hostname: "GPU-01" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(node, edge)._tag, "Admitted", JSON.stringify(admitSpec(node, edge)))
    }
  })
})

describe("Node updates", () => {
  const created = spec({})

  for (const [field, fields] of [["cordoned", { cordoned: true }], ["drain", { drain: true }]] as const) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(node, created, { ...created, ...fields }), { immutable: [], invalid: [] })
    })
  }

  for (
    const [field, fields, path] of [["pool", { pool: "other" }, "spec.pool"], [
      "hostname",
      { hostname: "gpu-02" },
      "spec.hostname"
    ]] as const
  ) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(node, created, { ...created, ...fields }).immutable, path)
    })
  }
})

describe("Node status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(node.status)(status))

  it("admits its fields", () => {
    assert.isTrue(decodes({
      phase: "Ready",
      reason: "AgentReporting",
      message: "ok",
      observedGeneration: 1,
      conditions: [],
      capacity: { cpu: "64", memory: "512Gi", disk: "2Ti", gpus: 8, models: ["H100-SXM-80GB"] },
      allocated: { gpus: 4 },
      enrolledTime: "2026-01-02T15:04:05Z",
      enrollmentToken: "lab-token",
      agentVersion: "1.2.3",
      lastHeartbeatTime: "2026-01-02T15:04:05.123Z"
    }))
  })

  for (
    const [rule, status] of [["an unknown phase", { phase: "Running" }], ["a memory that is no quantity", {
      capacity: { memory: "lots" }
    }]] as const
  ) {
    it(`refuses ${rule}`, () => assert.isFalse(decodes(status)))
  }
})
