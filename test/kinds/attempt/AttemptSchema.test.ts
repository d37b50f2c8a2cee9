/**
 * The Attempt's admission rules (a read-only kind the service writes: spec: Areas — History; Other kinds — placement
 * explanation and receipt; CostSegments; nodus's schema in docs/kinds/Attempt.md), one row per rule, then its update
 * rules (history never changes) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { attempt } from "../../../src/kinds/attempt/AttemptSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = {
  workload: { kind: "Job", name: "train", uid: "6f1c0e7a-0000-4000-8000-000000000001" },
  index: 3,
  epoch: 1
}
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no workload", { index: 0 }, "spec.workload"],
  ["a workload without uid", spec({ workload: { kind: "Job", name: "train" } }), "spec.workload.uid"],
  ["a workload without name", spec({ workload: { kind: "Job", uid: "u" } }), "spec.workload.name"],
  [
    "a workload kind that takes no capacity",
    spec({ workload: { kind: "Secret", name: "s", uid: "u" } }),
    "spec.workload.kind"
  ],
  [
    "a TrainingJob workload (it runs as its compiled Job)",
    spec({ workload: { kind: "TrainingJob", name: "t", uid: "u" } }),
    "spec.workload.kind"
  ],
  ["a negative index", spec({ index: -1 }), "spec.index"],
  ["a negative epoch", spec({ epoch: -1 }), "spec.epoch"],
  ["a fractional rank", spec({ rank: 0.5 }), "spec.rank"],
  ["an unknown field", spec({ node: "n1" }), "spec.node"]
]

describe("Attempt admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(attempt, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults", () => {
    const admission = admitSpec(attempt, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, base)
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ index: 0, epoch: 0, rank: 0 }),
      { workload: { kind: "Workspace", name: "dev", uid: "u" } },
      { workload: { kind: "Sandbox", name: "sbx", uid: "u" }, epoch: 12 },
      { workload: { kind: "Function", name: "fn", uid: "u" } },
      { workload: { kind: "InferenceEndpoint", name: "llama", uid: "u" } }
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(attempt, edge)._tag, "Admitted", JSON.stringify(admitSpec(attempt, edge)))
    }
  })
})

describe("Attempt updates", () => {
  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["workload.name", spec({ workload: { ...base.workload, name: "other" } }), "spec.workload.name"],
    ["index", spec({ index: 4 }), "spec.index"],
    ["epoch", spec({ epoch: 2 }), "spec.epoch"]
  ]
  for (const [field, after, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(attempt, base, after).immutable, path)
    })
  }
})

describe("Attempt status", () => {
  const envelope = Schema.Struct({ status: attempt.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "attempts" }, "Attempt")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits a finished Attempt with its placement explanation and receipt", () => {
    assert.deepStrictEqual(
      statusRefusals({
        phase: "Interrupted",
        reason: "Preempted",
        placement: {
          chosen: "gpu-h100-80g-x1",
          candidates: [{ offering: "gpu-h100-80g-x1", expectedCostUSD: "4.20" }],
          filtered: { maxRateUSDPerHour: 3 }
        },
        offering: "gpu-h100-80g-x1",
        regionClass: "eu",
        interruptible: true,
        rateUSDPerHour: "2.10",
        startTime: "2026-01-02T15:04:05Z",
        endTime: "2026-01-02T17:04:05Z",
        exitCode: 137,
        cost: { totalUSD: "4.25", final: true },
        receipt: {
          segments: {
            bootSeconds: 90,
            bootUSD: "0.05",
            runningSeconds: 7_110,
            runningUSD: "4.15",
            teardownSeconds: 30,
            teardownUSD: "0.05",
            coveredByNodus: ["Teardown"]
          },
          totalUSD: "4.25",
          billedSeconds: 7_230
        }
      }),
      []
    )
  })

  it("refuses an unknown phase, a placement explanation that is no object, a negative billedSeconds and an unknown segment", () => {
    assert.include(statusRefusals({ phase: "Preempted" }), "status.phase")
    assert.include(statusRefusals({ placement: "gpu-h100" }), "status.placement")
    assert.include(statusRefusals({ receipt: { billedSeconds: -1 } }), "status.receipt.billedSeconds")
    assert.include(
      statusRefusals({ receipt: { segments: { coveredByNodus: ["Queue"] } } }),
      "status.receipt.segments.coveredByNodus[0]"
    )
  })
})
