/**
 * The TrainingRuntime's admission rules (nodus's schema on the spec's facts: a catalog runtime reference, image or
 * command overrides, a digest), one row per rule. The spec states no immutability, so every field may change.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { runtimeLaunchers, trainingRuntime } from "../../../src/kinds/trainingruntime/TrainingRuntimeSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { catalog: "platform/trl@0.19.0" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

/** Rows whose spec is refused, with the field a cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["neither catalog nor image", { command: ["python", "train.py"] }, "spec.image"],
  ["a catalog reference outside platform/", spec({ catalog: "trl@0.19.0" }), "spec.catalog"],
  ["a catalog reference with capitals", spec({ catalog: "platform/TRL" }), "spec.catalog"],
  ["an empty image", { image: "" }, "spec.image"],
  ["an unknown launcher", spec({ launcher: "Mpi" }), "spec.launcher"],
  ["an env name with the PLATFORM_ prefix", spec({ env: [{ name: "PLATFORM_X", value: "1" }] }), "spec.env[0].name"],
  [
    "two env entries with one name",
    spec({ env: [{ name: "A", value: "1" }, { name: "A", value: "2" }] }),
    "spec.env[1]"
  ],
  ["a mode twice", spec({ modes: ["SFT", "SFT"] }), "spec.modes[1]"],
  ["an empty task", spec({ tasks: [""] }), "spec.tasks[0]"],
  ["parameters that are no object", spec({ parameters: ["lr"] }), "spec.parameters"],
  ["a command that is no argv", spec({ command: "python train.py" }), "spec.command"],
  ["an unknown field", spec({ nodes: 2 }), "spec.nodes"]
]

describe("TrainingRuntime admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(trainingRuntime, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("has no defaults: the admitted spec is the spec as written", () => {
    const admission = admitSpec(trainingRuntime, base)
    assert.deepStrictEqual(admission, { _tag: "Admitted", spec: base })
  })

  it("admits a catalog runtime, an own image, overrides and every launcher", () => {
    const edges: ReadonlyArray<JsonObject> = [
      { catalog: "platform/verl" },
      { image: "ghcr.io/acme/trainer:1.2", command: ["python", "-m", "trainer"], args: ["--bf16"] },
      spec({
        image: "ghcr.io/acme/trl-patched:1",
        env: [{ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf", key: "token" } } }]
      }),
      spec({
        modes: ["SFT", "DPO", "GRPO"],
        tasks: ["CausalLM"],
        parameters: { lr: 0.0001, lora: { r: 16 } },
        description: "TRL."
      }),
      ...runtimeLaunchers.map((launcher) => spec({ launcher }))
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(trainingRuntime, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(trainingRuntime, edge))
      )
    }
  })
})

describe("TrainingRuntime status", () => {
  const statusCauses = (status: Json): ReadonlyArray<string> => {
    const result = admit(Schema.Struct({ status: trainingRuntime.status }), { status }, "Strict", {
      kind: "trainingruntimes"
    }, "TrainingRuntime")
    return result._tag === "Failure" ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("accepts what the controller reports and refuses an unknown phase", () => {
    assert.deepStrictEqual(
      statusCauses({
        phase: "Ready",
        digest: `sha256:${"e".repeat(64)}`,
        managed: true,
        image: { reference: "trl", digest: "sha256:x" },
        observedGeneration: 1
      }),
      []
    )
    assert.include(statusCauses({ phase: "Building" }), "status.phase")
  })
})

describe("TrainingRuntime updates", () => {
  it("lets every field change (the spec states no immutability)", () => {
    assert.deepStrictEqual(
      updateRefusals(trainingRuntime, base, { catalog: "platform/trl@0.20.0", image: "ghcr.io/acme/trl:2" }),
      { immutable: [], invalid: [] }
    )
  })
})
