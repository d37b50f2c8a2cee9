/**
 * The CreditGrant's admission rules (nodus's schema, docs/kinds/CreditGrant.md: grants are created by the service and
 * operators, read by users), one row per rule, then its update rules (amount and source fixed) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { creditGrant } from "../../../src/kinds/creditgrant/CreditGrantSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { amountUSD: "25.00", source: "Starter" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no amountUSD", { source: "Admin" }, "spec.amountUSD"],
  ["no source", { amountUSD: "5" }, "spec.source"],
  ["a zero amount", spec({ amountUSD: "0" }), "spec.amountUSD"],
  ["a zero amount with decimals", spec({ amountUSD: "0.000000" }), "spec.amountUSD"],
  ["a negative amount", spec({ amountUSD: "-1" }), "spec.amountUSD"],
  ["an amount that is not a decimal", spec({ amountUSD: "lots" }), "spec.amountUSD"],
  ["an unknown source", spec({ source: "Referral" }), "spec.source"],
  ["a reason over 1024 characters", spec({ reason: "r".repeat(1_025) }), "spec.reason"],
  ["an expiry that is not RFC 3339", spec({ expiresAt: "next year" }), "spec.expiresAt"],
  ["an unknown field", spec({ remainingUSD: "25" }), "spec.remainingUSD"]
]

describe("CreditGrant admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(creditGrant, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults", () => {
    const admission = admitSpec(creditGrant, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, base)
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ amountUSD: "0.000001", source: "Promo", reason: "r".repeat(1_024), expiresAt: "2026-12-31T23:59:59Z" }),
      spec({ amountUSD: "100000", source: "TopUp", reason: "" }),
      spec({ source: "Admin", expiresAt: "2026-12-31T23:59:59.5+02:00" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(creditGrant, edge)._tag, "Admitted", JSON.stringify(admitSpec(creditGrant, edge)))
    }
  })
})

describe("CreditGrant updates", () => {
  const created = spec({ reason: "welcome", expiresAt: "2026-12-31T23:59:59Z" })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["reason", { reason: "welcome credits" }],
    ["expiresAt", { expiresAt: "2027-06-30T23:59:59Z" }]
  ]
  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(creditGrant, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["amountUSD", { amountUSD: "50" }, "spec.amountUSD"],
    ["source", { source: "Admin" }, "spec.source"]
  ]
  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(creditGrant, created, changed(fields)).immutable, path)
    })
  }
})

describe("CreditGrant status", () => {
  const envelope = Schema.Struct({ status: creditGrant.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "creditgrants" }, "CreditGrant")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits what the service writes and refuses an unknown phase", () => {
    assert.deepStrictEqual(statusRefusals({ remainingUSD: "12.345678", phase: "Active" }), [])
    assert.include(statusRefusals({ phase: "Spent" }), "status.phase")
    assert.include(statusRefusals({ remainingUSD: "12.3456789" }), "status.remainingUSD")
  })
})
