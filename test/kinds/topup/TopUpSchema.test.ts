/**
 * The TopUp's admission rules (nodus's schema, docs/kinds/TopUp.md; events topup.*; errors PaymentMethodRequired,
 * TopUpLimitReached, PromoCodeExpired, PromoCodeUsed are the server's), one row per rule, then its update rules (a
 * payment never changes) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { topUp } from "../../../src/kinds/topup/TopUpSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { amountUSD: "50.00" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no amountUSD", { paymentMethod: "pm_1" }, "spec.amountUSD"],
  ["a zero amount", spec({ amountUSD: "0" }), "spec.amountUSD"],
  ["a zero amount with decimals", spec({ amountUSD: "0.00" }), "spec.amountUSD"],
  ["a negative amount", spec({ amountUSD: "-50" }), "spec.amountUSD"],
  ["an amount with 7 decimals", spec({ amountUSD: "50.0000001" }), "spec.amountUSD"],
  ["an amount as a number", spec({ amountUSD: 50 }), "spec.amountUSD"],
  ["an empty payment method", spec({ paymentMethod: "" }), "spec.paymentMethod"],
  ["a promo code with a space", spec({ promoCode: "SPRING 25" }), "spec.promoCode"],
  ["a promo code starting with a dash", spec({ promoCode: "-SPRING" }), "spec.promoCode"],
  ["a promo code of 65 characters", spec({ promoCode: "P".repeat(65) }), "spec.promoCode"],
  ["an empty promo code", spec({ promoCode: "" }), "spec.promoCode"],
  ["an unknown field", spec({ currency: "USD" }), "spec.currency"]
]

describe("TopUp admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(topUp, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults (an unset paymentMethod means the default one on file)", () => {
    const admission = admitSpec(topUp, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, base)
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ amountUSD: "0.000001" }),
      spec({ amountUSD: "10000", paymentMethod: "pm_1Nv0", promoCode: "P".repeat(64) }),
      spec({ promoCode: "a" }),
      spec({ promoCode: "SPRING_25-off" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(topUp, edge)._tag, "Admitted", JSON.stringify(admitSpec(topUp, edge)))
    }
  })
})

describe("TopUp updates", () => {
  const created = spec({ paymentMethod: "pm_1", promoCode: "SPRING25" })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["amountUSD", { amountUSD: "75" }, "spec.amountUSD"],
    ["paymentMethod", { paymentMethod: "pm_2" }, "spec.paymentMethod"],
    ["promoCode", { promoCode: "SUMMER" }, "spec.promoCode"]
  ]
  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(topUp, created, changed(fields)).immutable, path)
    })
  }

  it("accepts writing the same spec again", () => {
    assert.deepStrictEqual(updateRefusals(topUp, created, created), { immutable: [], invalid: [] })
  })
})

describe("TopUp status", () => {
  const envelope = Schema.Struct({ status: topUp.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "topups" }, "TopUp")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits every phase the topup.* events name and refuses another", () => {
    for (const phase of ["Pending", "Succeeded", "Failed", "Refunded"]) {
      assert.deepStrictEqual(statusRefusals({ phase }), [], phase)
    }
    assert.deepStrictEqual(
      statusRefusals({ phase: "Succeeded", creditGrant: "topup-7f3k2", completionTime: "2026-01-02T15:04:05Z" }),
      []
    )
    assert.include(statusRefusals({ phase: "Disputed" }), "status.phase")
  })
})
