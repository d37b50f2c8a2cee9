/**
 * The EnrollmentToken's admission rules (nodus's own schema and bounds; docs/kinds/EnrollmentToken.md), one row per
 * rule, its defaults, and its update rule: nothing changes after create.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { enrollmentToken } from "../../../src/kinds/enrollmenttoken/EnrollmentTokenSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { pool: "lab" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no pool", {}, "spec.pool"],
  ["an empty pool", { pool: "" }, "spec.pool"],
  ["expiresAfter below 1m", spec({ expiresAfter: "59s" }), "spec.expiresAfter"],
  ["expiresAfter above 720h", spec({ expiresAfter: "721h" }), "spec.expiresAfter"],
  ["expiresAfter that is not a duration", spec({ expiresAfter: "1 day" }), "spec.expiresAfter"],
  ["maxUses 0", spec({ maxUses: 0 }), "spec.maxUses"],
  ["maxUses above 1000", spec({ maxUses: 1_001 }), "spec.maxUses"],
  ["maxUses that is not an integer", spec({ maxUses: 1.5 }), "spec.maxUses"],
  ["an unknown field", spec({ token: "abc" }), "spec.token"]
]

describe("EnrollmentToken admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(enrollmentToken, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies nodus's defaults (24h, one host), visible on read", () => {
    assert.deepStrictEqual(admitSpec(enrollmentToken, base), {
      _tag: "Admitted",
      spec: { pool: "lab", expiresAfter: "24h", maxUses: 1 }
    })
  })

  it("admits every bound at its edge", () => {
    for (const edge of [spec({ expiresAfter: "1m", maxUses: 1 }), spec({ expiresAfter: "720h", maxUses: 1_000 })]) {
      assert.strictEqual(
        admitSpec(enrollmentToken, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(enrollmentToken, edge))
      )
    }
  })
})

describe("EnrollmentToken updates", () => {
  const created = spec({ expiresAfter: "1h", maxUses: 5 })

  for (
    const [field, fields, path] of [
      ["pool", { pool: "other" }, "spec.pool"],
      ["expiresAfter", { expiresAfter: "2h" }, "spec.expiresAfter"],
      ["maxUses", { maxUses: 6 }, "spec.maxUses"]
    ] as const
  ) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(enrollmentToken, created, { ...created, ...fields }).immutable, path)
    })
  }
})

describe("EnrollmentToken status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(enrollmentToken.status)(status))

  it("admits its fields", () => {
    assert.isTrue(
      decodes({
        token: "nodus_et_abc",
        phase: "Active",
        expirationTime: "2026-01-03T15:04:05Z",
        uses: 1,
        nodes: ["gpu-01"]
      })
    )
  })

  for (
    const [rule, status] of [["an unknown phase", { phase: "Revoked" }], ["negative uses", { uses: -1 }], [
      "an empty token",
      { token: "" }
    ]] as const
  ) {
    it(`refuses ${rule}`, () => assert.isFalse(decodes(status)))
  }
})
