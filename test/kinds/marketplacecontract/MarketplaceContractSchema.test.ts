/**
 * The MarketplaceContract's admission rules (nodus's own schema; docs/kinds/MarketplaceContract.md), one row per rule,
 * and its update rule: the terms are fixed, only state moves.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { marketplaceContract } from "../../../src/kinds/marketplacecontract/MarketplaceContractSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = {
  demand: "train-h100",
  supply: "eu-h100",
  quantity: 8,
  startsAt: "2026-03-01T00:00:00Z",
  endsAt: "2026-03-08T00:00:00Z",
  hours: 168,
  demandRateUSDPerUnitHour: "2.10",
  supplyRateUSDPerUnitHour: "1.80",
  state: "Active"
}
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ...Object.keys(base).map((field): readonly [string, JsonObject, string] => {
    const { [field as keyof typeof base]: _dropped, ...rest } = base
    return [`no ${field}`, rest, `spec.${field}`]
  }),
  ["an empty demand", spec({ demand: "" }), "spec.demand"],
  ["an empty supply", spec({ supply: "" }), "spec.supply"],
  ["quantity 0", spec({ quantity: 0 }), "spec.quantity"],
  ["a startsAt that is not UTC", spec({ startsAt: "2026-03-01T00:00:00-05:00" }), "spec.startsAt"],
  ["an endsAt that is not a timestamp", spec({ endsAt: "next week" }), "spec.endsAt"],
  ["endsAt equal to startsAt", spec({ endsAt: "2026-03-01T00:00:00Z" }), "spec.endsAt"],
  ["hours 0", spec({ hours: 0 }), "spec.hours"],
  ["hours beyond the interval", spec({ hours: 169 }), "spec.hours"],
  ["a demand rate of 0", spec({ demandRateUSDPerUnitHour: "0.00" }), "spec.demandRateUSDPerUnitHour"],
  ["a supply rate that is not USD", spec({ supplyRateUSDPerUnitHour: "1.8 USD" }), "spec.supplyRateUSDPerUnitHour"],
  ["an unknown state", spec({ state: "Open" }), "spec.state"],
  ["an unknown field", spec({ price: "2" }), "spec.price"]
]

describe("MarketplaceContract admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(marketplaceContract, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("sets no defaults and admits every bound at its edge", () => {
    assert.deepStrictEqual(admitSpec(marketplaceContract, base), { _tag: "Admitted", spec: base })
    const edge = spec({
      quantity: 1,
      hours: 1,
      endsAt: "2026-03-01T01:00:00Z",
      demandRateUSDPerUnitHour: "0.000001",
      supplyRateUSDPerUnitHour: "0.000001"
    })
    assert.strictEqual(
      admitSpec(marketplaceContract, edge)._tag,
      "Admitted",
      JSON.stringify(admitSpec(marketplaceContract, edge))
    )
  })
})

describe("MarketplaceContract updates", () => {
  for (const state of ["Completed", "Cancelled"]) {
    it(`accepts a change of state to ${state}`, () => {
      assert.deepStrictEqual(updateRefusals(marketplaceContract, base, spec({ state })), { immutable: [], invalid: [] })
    })
  }

  for (
    const [field, fields, path] of [
      ["quantity", { quantity: 4 }, "spec.quantity"],
      ["demandRateUSDPerUnitHour", { demandRateUSDPerUnitHour: "2.20" }, "spec.demandRateUSDPerUnitHour"],
      ["supply", { supply: "us-h100" }, "spec.supply"]
    ] as const
  ) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(marketplaceContract, base, spec(fields)).immutable, path)
    })
  }
})

describe("MarketplaceContract status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(marketplaceContract.status)(status))
  it("admits its fields", () => assert.isTrue(decodes({ message: "Active", observedGeneration: 1, conditions: [] })))
  it("refuses a malformed condition", () => assert.isFalse(decodes({ conditions: [{ type: "Ready" }] })))
})
