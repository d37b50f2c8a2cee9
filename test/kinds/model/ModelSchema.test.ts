/**
 * The Model's admission rules (a read-only kind the service writes; nodus's schema in docs/kinds/Model.md), one row per
 * rule, then its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { model } from "../../../src/kinds/model/ModelSchema.ts"
import { admitSpec, refusedFields } from "../../support/KindRules.ts"

const base = {
  uri: "hf://meta-llama/Llama-3.1-8B-Instruct",
  family: "llama",
  revision: "0e9e39f249a16976918f6564b8830bc894c89659",
  contextWindow: 131_072,
  pricing: { inputUSDPerMillionTokens: "0.10", outputUSDPerMillionTokens: "0.20" }
}
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no uri", { family: "llama" }, "spec.uri"],
  ["an empty uri", spec({ uri: "" }), "spec.uri"],
  ["a short revision", spec({ revision: "0e9e39f" }), "spec.revision"],
  ["a revision with capitals", spec({ revision: "0E9E39F249A16976918F6564B8830BC894C89659" }), "spec.revision"],
  ["a context window of 0", spec({ contextWindow: 0 }), "spec.contextWindow"],
  ["a fractional context window", spec({ contextWindow: 1.5 }), "spec.contextWindow"],
  [
    "a price as a number",
    spec({ pricing: { inputUSDPerMillionTokens: 0.1 } }),
    "spec.pricing.inputUSDPerMillionTokens"
  ],
  [
    "a price with 7 decimals",
    spec({ pricing: { outputUSDPerMillionTokens: "0.0000001" } }),
    "spec.pricing.outputUSDPerMillionTokens"
  ],
  ["a per-token price field", spec({ pricing: { inputUSDPerToken: "0.0000001" } }), "spec.pricing.inputUSDPerToken"],
  ["an unknown field", spec({ license: "llama3.1" }), "spec.license"]
]

describe("Model admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(model, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults", () => {
    const admission = admitSpec(model, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, base)
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      { uri: "hf://org/tiny" },
      spec({
        contextWindow: 1,
        pricing: {
          inputUSDPerMillionTokens: "0",
          cachedInputUSDPerMillionTokens: "0.000001",
          outputUSDPerMillionTokens: "75.00"
        }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(model, edge)._tag, "Admitted", JSON.stringify(admitSpec(model, edge)))
    }
  })

  it("has no update rules: the service rewrites any field", () => {
    assert.isUndefined(model.updates)
  })
})

describe("Model status", () => {
  const envelope = Schema.Struct({ status: model.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "models" }, "Model")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits Available and Deprecated and refuses another phase", () => {
    assert.deepStrictEqual(statusRefusals({ phase: "Available" }), [])
    assert.deepStrictEqual(statusRefusals({ phase: "Deprecated" }), [])
    assert.include(statusRefusals({ phase: "Retired" }), "status.phase")
  })
})
