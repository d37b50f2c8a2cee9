/**
 * The ReservedHost's admission rules (nodus's own schema; docs/kinds/ReservedHost.md), one row per rule, and its
 * update rule: a reservation's terms never change.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { reservedHost } from "../../../src/kinds/reservedhost/ReservedHostSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = {
  offering: "h100x8-eu",
  quantity: 2,
  startsAt: "2026-03-01T00:00:00Z",
  endsAt: "2026-06-01T00:00:00Z",
  rateUSDPerHour: "14.40"
}
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ...Object.keys(base).map((field): readonly [string, JsonObject, string] => {
    const { [field as keyof typeof base]: _dropped, ...rest } = base
    return [`no ${field}`, rest, `spec.${field}`]
  }),
  ["an empty offering", spec({ offering: "" }), "spec.offering"],
  ["quantity 0", spec({ quantity: 0 }), "spec.quantity"],
  ["a startsAt that is not UTC", spec({ startsAt: "2026-03-01T00:00:00+00:00" }), "spec.startsAt"],
  ["endsAt before startsAt", spec({ endsAt: "2026-02-01T00:00:00Z" }), "spec.endsAt"],
  ["a rate of 0", spec({ rateUSDPerHour: "0" }), "spec.rateUSDPerHour"],
  ["an empty contract", spec({ contract: "" }), "spec.contract"],
  ["an unknown field", spec({ provider: "somecloud" }), "spec.provider"]
]

describe("ReservedHost admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(reservedHost, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("sets no defaults and admits every bound at its edge", () => {
    assert.deepStrictEqual(admitSpec(reservedHost, base), { _tag: "Admitted", spec: base })
    const edge = spec({ quantity: 1, endsAt: "2026-03-01T00:00:01Z", rateUSDPerHour: "0.000001", contract: "mc-1" })
    assert.strictEqual(admitSpec(reservedHost, edge)._tag, "Admitted", JSON.stringify(admitSpec(reservedHost, edge)))
  })
})

describe("ReservedHost updates", () => {
  for (
    const [field, fields, path] of [
      ["quantity", { quantity: 3 }, "spec.quantity"],
      ["endsAt", { endsAt: "2026-07-01T00:00:00Z" }, "spec.endsAt"],
      ["rateUSDPerHour", { rateUSDPerHour: "1" }, "spec.rateUSDPerHour"]
    ] as const
  ) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(reservedHost, base, spec(fields)).immutable, path)
    })
  }
})

describe("ReservedHost status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(reservedHost.status)(status))
  it("admits its fields", () =>
    assert.isTrue(decodes({ phase: "Active", readyHosts: 2, message: "ok", observedGeneration: 1, conditions: [] })))
  it("refuses an unknown phase", () => assert.isFalse(decodes({ phase: "Running" })))
})
