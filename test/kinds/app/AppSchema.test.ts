/**
 * The App's admission rules (spec: App in the Areas table; Function.code.blob, "the App's members";
 * Function.status.appVersion), one row per rule, then its update rules: every field may change after create.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { app } from "../../../src/kinds/app/AppSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const blob = `sha256:${"e".repeat(64)}`
const base = { code: { blob } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no code", { functions: ["embed"] }, "spec.code"],
  ["code without blob", { code: {} }, "spec.code.blob"],
  ["a blob that is not a content address", { code: { blob: "e".repeat(64) } }, "spec.code.blob"],
  ["a blob with upper-case hex", { code: { blob: `sha256:${"E".repeat(64)}` } }, "spec.code.blob"],
  ["a member name that is no object name", spec({ functions: ["Embed"] }), "spec.functions[0]"],
  ["an empty member name", spec({ functions: [""] }), "spec.functions[0]"],
  ["a member named twice", spec({ functions: ["embed", "rank", "embed"] }), "spec.functions[2]"],
  ["an unknown field", spec({ version: 2 }), "spec.version"],
  ["an unknown code field", { code: { blob, module: "app" } }, "spec.code.module"]
]

describe("App admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(app, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("admits an App as written, with no defaults of its own", () => {
    for (const input of [base, spec({ functions: [] }), spec({ functions: ["embed", "rank.v2", "a"] })]) {
      const admission = admitSpec(app, input)
      assert.strictEqual(admission._tag, "Admitted", JSON.stringify(admission))
      if (admission._tag === "Admitted") assert.deepStrictEqual(admission.spec, input)
    }
  })
})

describe("App updates", () => {
  it("accepts a new archive and a new member list", () => {
    const created = spec({ functions: ["embed"] })
    assert.deepStrictEqual(
      updateRefusals(app, created, { code: { blob: `sha256:${"f".repeat(64)}` }, functions: ["embed", "rank"] }),
      { immutable: [], invalid: [] }
    )
  })
})

describe("App status", () => {
  const decode = Schema.decodeUnknownExit(app.status, { errors: "all", onExcessProperty: "error" })

  it("holds the version and the members' versions", () => {
    const status = {
      version: 3,
      observedGeneration: 3,
      conditions: [{
        type: "Ready",
        status: "False",
        lastTransitionTime: "2026-01-02T15:00:00Z",
        reason: "RollingOut",
        message: "1 of 2 members run version 3."
      }],
      message: "rolling out",
      functions: [{ name: "embed", appVersion: 3, phase: "Running" }, { name: "rank", appVersion: 2, phase: "Running" }]
    }
    assert.isTrue(decode(status)._tag === "Success")
  })

  for (
    const [rule, status] of [
      ["a negative version", { version: -1 }],
      ["a member phase outside the long-running vocabulary", { functions: [{ name: "embed", phase: "Succeeded" }] }],
      ["a member listed twice", { functions: [{ name: "embed" }, { name: "embed" }] }]
    ] as const
  ) {
    it(`refuses ${rule}`, () => {
      assert.isTrue(decode(status)._tag === "Failure", rule)
    })
  }
})
