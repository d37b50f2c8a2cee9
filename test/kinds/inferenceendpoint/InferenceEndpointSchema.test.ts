/**
 * The InferenceEndpoint's admission rules (shared types Resources and Placement; nodus's schema in
 * docs/kinds/InferenceEndpoint.md), one row per rule, then its update rules (every field may change, maxCostUSD only
 * rises) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { inferenceEndpoint } from "../../../src/kinds/inferenceendpoint/InferenceEndpointSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { model: "llama-3-1-8b" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no model", { state: "Running" }, "spec.model"],
  ["an empty model", spec({ model: "" }), "spec.model"],
  ["minReplicas below 0", spec({ scaling: { minReplicas: -1 } }), "spec.scaling.minReplicas"],
  ["maxReplicas 0", spec({ scaling: { minReplicas: 0, maxReplicas: 0 } }), "spec.scaling.maxReplicas"],
  ["maxReplicas above 64", spec({ scaling: { maxReplicas: 65 } }), "spec.scaling.maxReplicas"],
  ["minReplicas above maxReplicas", spec({ scaling: { minReplicas: 3, maxReplicas: 2 } }), "spec.scaling.minReplicas"],
  ["minReplicas above the default maxReplicas", spec({ scaling: { minReplicas: 2 } }), "spec.scaling.minReplicas"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "ten" }), "spec.maxCostUSD"],
  ["an unknown state", spec({ state: "Suspended" }), "spec.state"],
  ["3 GPUs per replica", spec({ resources: { gpu: { count: 3 } } }), "spec.resources.gpu.count"],
  ["an unknown interruptible", spec({ placement: { interruptible: "Maybe" } }), "spec.placement.interruptible"],
  ["an unknown scaling field", spec({ scaling: { targetConcurrency: 4 } }), "spec.scaling.targetConcurrency"],
  ["an unknown field", spec({ replicas: 2 }), "spec.replicas"]
]

describe("InferenceEndpoint admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(inferenceEndpoint, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the Placement default and nodus's defaults: one replica, Running", () => {
    const admission = admitSpec(inferenceEndpoint, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, {
      ...base,
      placement: { queueTimeout: "24h" },
      scaling: { minReplicas: 1, maxReplicas: 1 },
      state: "Running"
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ scaling: { minReplicas: 0, maxReplicas: 64 } }),
      spec({ scaling: { minReplicas: 64, maxReplicas: 64 }, maxCostUSD: "0", state: "Stopped" }),
      spec({
        resources: { gpu: { count: 8, type: ["H100"] }, memory: "64Gi" },
        placement: { interruptible: "Prefer", queueTimeout: "0s" }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(inferenceEndpoint, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(inferenceEndpoint, edge))
      )
    }
  })
})

describe("InferenceEndpoint updates", () => {
  const created = spec({ maxCostUSD: "100.00", scaling: { minReplicas: 1, maxReplicas: 4 } })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["model", { model: "qwen-2-5-7b" }],
    ["resources", { resources: { gpu: { count: 2 } } }],
    ["placement", { placement: { regions: ["eu"] } }],
    ["scaling", { scaling: { minReplicas: 0, maxReplicas: 8 } }],
    ["maxCostUSD raised", { maxCostUSD: "250" }],
    ["state", { state: "Stopped" }]
  ]
  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(inferenceEndpoint, created, changed(fields)), {
        immutable: [],
        invalid: []
      })
    })
  }

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(inferenceEndpoint, created, changed({ maxCostUSD: "99.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(inferenceEndpoint, base, spec({ maxCostUSD: "5" })).invalid, [
      "spec.maxCostUSD"
    ])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(inferenceEndpoint, created, uncapped).invalid, [])
  })
})

describe("InferenceEndpoint status", () => {
  const envelope = Schema.Struct({ status: inferenceEndpoint.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "inferenceendpoints" }, "InferenceEndpoint")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits what the service writes and refuses an unknown phase", () => {
    assert.deepStrictEqual(
      statusRefusals({
        phase: "Running",
        url: "https://llama.ml.example.com/v1",
        replicas: { desired: 2, ready: 2 },
        cost: { totalUSD: "3.20", rateUSDPerHour: "4.10" },
        estimate: { rateUSDPerHour: "4.10", holdUSD: "4.10" },
        reason: "MaxCostReached"
      }),
      []
    )
    assert.include(statusRefusals({ phase: "Serving" }), "status.phase")
  })
})
