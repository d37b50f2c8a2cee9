/**
 * The MarketplaceEntry's admission rules (spec: MarketplaceEntry; required fields and text bounds are nodus's own,
 * docs/kinds/MarketplaceEntry.md), one row per rule; its default state; and its update rule: intent is immutable.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Result, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { marketplaceEntry } from "../../../src/kinds/marketplaceentry/MarketplaceEntrySchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const demand = {
  intent: "Demand",
  title: "64 H100 for a training run",
  hardware: "H100-SXM-80GB",
  quantity: 64,
  startsAt: "2026-03-01T00:00:00Z",
  endsAt: "2026-03-31T00:00:00Z",
  rateUSDPerUnitHour: "2.10"
}
const supply = { ...demand, intent: "Supply", title: "32 H100 in eu", quantity: 32, authorityConfirmed: true }
const spec = (fields: JsonObject): JsonObject => ({ ...demand, ...fields })

const required = ["intent", "title", "hardware", "quantity", "startsAt", "endsAt", "rateUSDPerUnitHour"] as const

/** Rows written as objects; a field set to undefined is left out of the spec. */
const rows: ReadonlyArray<readonly [string, object, string]> = [
  ...required.map((field): readonly [string, object, string] => {
    const { [field]: _dropped, ...rest } = demand
    return [`no ${field}`, rest, `spec.${field}`]
  }),
  // The spec is a union keyed by intent; admission reports a value no member takes at the discriminator.
  ["an unknown intent", spec({ intent: "Offer" }), "spec.intent"],
  ["an empty title", spec({ title: "" }), "spec.title"],
  ["a title of 201 characters", spec({ title: "t".repeat(201) }), "spec.title"],
  ["an empty hardware", spec({ hardware: "" }), "spec.hardware"],
  ["a hardware of 201 characters", spec({ hardware: "h".repeat(201) }), "spec.hardware"],
  ["quantity 0", spec({ quantity: 0 }), "spec.quantity"],
  ["a fractional quantity", spec({ quantity: 1.5 }), "spec.quantity"],
  ["memoryGiB 0", spec({ memoryGiB: 0 }), "spec.memoryGiB"],
  ["a network of 201 characters", spec({ network: "n".repeat(201) }), "spec.network"],
  ["an empty region", spec({ region: "" }), "spec.region"],
  ["a startsAt that is not a timestamp", spec({ startsAt: "March 1st" }), "spec.startsAt"],
  ["a startsAt that is not UTC", spec({ startsAt: "2026-03-01T00:00:00+01:00" }), "spec.startsAt"],
  ["an endsAt with month 13", spec({ endsAt: "2026-13-01T00:00:00Z" }), "spec.endsAt"],
  ["endsAt equal to startsAt (exclusive end)", spec({ endsAt: "2026-03-01T00:00:00Z" }), "spec.endsAt"],
  ["endsAt before startsAt", spec({ endsAt: "2026-02-28T00:00:00Z" }), "spec.endsAt"],
  ["minimumHours 0", spec({ minimumHours: 0 }), "spec.minimumHours"],
  [
    "minimumHours longer than the interval",
    spec({ endsAt: "2026-03-02T00:00:00Z", minimumHours: 25 }),
    "spec.minimumHours"
  ],
  ["a rate of 0", spec({ rateUSDPerUnitHour: "0" }), "spec.rateUSDPerUnitHour"],
  ["a rate of 0.000000", spec({ rateUSDPerUnitHour: "0.000000" }), "spec.rateUSDPerUnitHour"],
  ["a negative rate", spec({ rateUSDPerUnitHour: "-1.00" }), "spec.rateUSDPerUnitHour"],
  ["a rate with 7 decimals", spec({ rateUSDPerUnitHour: "1.0000001" }), "spec.rateUSDPerUnitHour"],
  ["a rate that is a number", spec({ rateUSDPerUnitHour: 2.1 }), "spec.rateUSDPerUnitHour"],
  ["notes of 4097 characters", spec({ notes: "n".repeat(4_097) }), "spec.notes"],
  ["a company of 201 characters", spec({ company: "c".repeat(201) }), "spec.company"],
  ["a contactEmail without @", spec({ contactEmail: "ops.example.com" }), "spec.contactEmail"],
  ["a contactEmail without a domain dot", spec({ contactEmail: "ops@localhost" }), "spec.contactEmail"],
  ["a contactEmail with a space", spec({ contactEmail: "o ps@example.com" }), "spec.contactEmail"],
  ["authorityConfirmed that is not a bool", spec({ authorityConfirmed: "yes" }), "spec.authorityConfirmed"],
  [
    "a supply entry without authorityConfirmed",
    { ...supply, authorityConfirmed: undefined },
    "spec.authorityConfirmed"
  ],
  ["a supply entry with authorityConfirmed false", { ...supply, authorityConfirmed: false }, "spec.authorityConfirmed"],
  // publish is a field of a Supply entry only: on a Demand entry it is an unknown field.
  ["publish on a demand entry", spec({ publish: true }), "spec.publish"],
  ["publish false on a demand entry", spec({ publish: false }), "spec.publish"],
  [
    "a supply entry with authorityConfirmed \"true\"",
    { ...supply, authorityConfirmed: "true" },
    "spec.authorityConfirmed"
  ],
  ["a supply entry breaking a common bound", { ...supply, quantity: 0 }, "spec.quantity"],
  ["a supply entry with endsAt before startsAt", { ...supply, endsAt: "2026-02-28T00:00:00Z" }, "spec.endsAt"],
  ["an unknown state", spec({ state: "Closed" }), "spec.state"],
  ["an unknown field (credentials have no field)", spec({ password: "hunter2" }), "spec.password"]
]

const refused = rows.map(([rule, input, field]) =>
  [rule, JSON.parse(JSON.stringify(input)) as JsonObject, field] as const
)

describe("MarketplaceEntry admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(marketplaceEntry, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("defaults state to Open (nodus), visible on read", () => {
    assert.deepStrictEqual(admitSpec(marketplaceEntry, demand), {
      _tag: "Admitted",
      spec: { ...demand, state: "Open" }
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        title: "t".repeat(200),
        hardware: "h".repeat(200),
        network: "n".repeat(200),
        region: "r".repeat(200),
        company: "c".repeat(200),
        notes: "n".repeat(4_096),
        quantity: 1,
        memoryGiB: 1,
        rateUSDPerUnitHour: "0.000001",
        contactEmail: "first.last+market@mail.example.co.uk",
        authorityConfirmed: false,
        state: "Withdrawn"
      }),
      spec({ startsAt: "2026-03-01T00:00:00Z", endsAt: "2026-03-01T00:00:00.001Z" }),
      spec({ startsAt: "2026-03-01T00:00:00Z", endsAt: "2026-03-02T00:00:00Z", minimumHours: 24 }),
      { ...supply, publish: true },
      { ...supply, publish: false, company: "Example GmbH", contactEmail: "ops@example.com" }
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(marketplaceEntry, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(marketplaceEntry, edge))
      )
    }
  })

  it("says why: an unknown intent names the supported values, a supply entry without confirmation asks for true", () => {
    const messages = (input: JsonObject) => {
      const admission = admitSpec(marketplaceEntry, input)
      return admission._tag === "Refused" ? admission.causes.map((cause) => `${cause.field}: ${cause.message}`) : []
    }
    assert.deepStrictEqual(messages(spec({ intent: "Offer" })), [
      `spec.intent: Unsupported value: "Offer": supported values: "Demand", "Supply"`
    ])
    assert.deepStrictEqual(messages({ ...supply, authorityConfirmed: false }), [
      "spec.authorityConfirmed: Required value: a Supply entry must set authorityConfirmed: true"
    ])
  })

  it("drops publish from a demand entry with a warning under fieldValidation Warn", () => {
    const envelope = Schema.Struct({ spec: marketplaceEntry.spec }) as unknown as Schema.Codec<unknown, unknown>
    const result = admit(
      envelope,
      { spec: spec({ publish: true }) },
      "Warn",
      { kind: "marketplaceentries" },
      "MarketplaceEntry"
    )
    assert.isTrue(Result.isSuccess(result))
    if (!Result.isSuccess(result)) return
    assert.deepStrictEqual(result.success.warnings, ["unknown field \"spec.publish\""])
    assert.deepStrictEqual(result.success.object["spec"], { ...demand, state: "Open" })
  })
})

describe("MarketplaceEntry updates", () => {
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["state", { state: "Withdrawn" }],
    ["rateUSDPerUnitHour", { rateUSDPerUnitHour: "2.50" }],
    ["quantity and the interval", { quantity: 16, endsAt: "2026-04-30T00:00:00Z" }],
    ["authorityConfirmed", { authorityConfirmed: true }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(marketplaceEntry, demand, { ...demand, ...fields }), {
        immutable: [],
        invalid: []
      })
    })
  }

  it("refuses a change of intent as immutable at spec.intent", () => {
    assert.include(
      updateRefusals(marketplaceEntry, { ...demand, authorityConfirmed: true }, supply).immutable,
      "spec.intent"
    )
  })
})

describe("MarketplaceEntry status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(marketplaceEntry.status)(status))

  it("admits every field the spec lists", () => {
    assert.isTrue(decodes({
      review: "Approved",
      reviewedAt: "2026-02-01T10:00:00Z",
      observedGeneration: 2,
      message: "Listed",
      validUntil: "2026-02-08T10:00:00Z",
      costAllowanceUSDPerUnitHour: "1.80",
      customerRateUSDPerUnitHour: "2.05",
      lastReservation: { contract: "mc-1", quantity: 8, time: "2026-02-02T00:00:00Z" }
    }))
  })

  for (
    const [rule, status] of [["an unknown review", { review: "Maybe" }], ["a rate that is not USD", {
      customerRateUSDPerUnitHour: "2,05"
    }]] as const
  ) {
    it(`refuses ${rule}`, () => assert.isFalse(decodes(status)))
  }
})
