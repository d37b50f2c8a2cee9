/**
 * The CloudAccount's admission rules (nodus's own schema; docs/kinds/CloudAccount.md), one row per rule, and its update
 * rule: the provider is immutable.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { cloudAccount } from "../../../src/kinds/cloudaccount/CloudAccountSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { provider: "aws", credentials: { secretRef: { namespace: "infra", name: "aws-keys" } } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no provider", { credentials: base.credentials }, "spec.provider"],
  ["a provider with capitals", spec({ provider: "AWS" }), "spec.provider"],
  ["a provider of 64 characters", spec({ provider: `a${"b".repeat(63)}` }), "spec.provider"],
  ["no credentials", { provider: "aws" }, "spec.credentials"],
  ["credentials without secretRef", spec({ credentials: {} }), "spec.credentials.secretRef"],
  [
    "literal credentials",
    spec({ credentials: { accessKeyId: "AKIA…", secretAccessKey: "…" } }),
    "spec.credentials.accessKeyId"
  ],
  [
    "a secretRef without namespace",
    spec({ credentials: { secretRef: { name: "aws-keys" } } }),
    "spec.credentials.secretRef.namespace"
  ],
  [
    "a secretRef without name",
    spec({ credentials: { secretRef: { namespace: "infra" } } }),
    "spec.credentials.secretRef.name"
  ],
  [
    "a secretRef version 0",
    spec({ credentials: { secretRef: { namespace: "infra", name: "aws-keys", version: 0 } } }),
    "spec.credentials.secretRef.version"
  ],
  ["65 regions", spec({ regions: Array.from({ length: 65 }, (_, i) => `region-${i}`) }), "spec.regions"],
  ["an empty region", spec({ regions: [""] }), "spec.regions[0]"],
  ["a region named twice", spec({ regions: ["us-east-1", "us-east-1"] }), "spec.regions[1]"],
  ["executeEnabled that is not a bool", spec({ executeEnabled: "true" }), "spec.executeEnabled"],
  ["an unknown field", spec({ apiKey: "sk-…" }), "spec.apiKey"]
]

describe("CloudAccount admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(cloudAccount, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("sets no defaults and admits every bound at its edge", () => {
    assert.deepStrictEqual(admitSpec(cloudAccount, base), { _tag: "Admitted", spec: base })
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        provider: `a${"b".repeat(62)}`,
        regions: Array.from({ length: 64 }, (_, i) => `region-${i}`),
        executeEnabled: true
      }),
      spec({
        provider: "x",
        regions: [],
        credentials: { secretRef: { namespace: "infra", name: "aws-keys", version: 1 } }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(cloudAccount, edge)._tag, "Admitted", JSON.stringify(admitSpec(cloudAccount, edge)))
    }
  })
})

describe("CloudAccount updates", () => {
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["credentials", { credentials: { secretRef: { namespace: "infra", name: "aws-keys-2" } } }],
    ["regions", { regions: ["eu-west-1"] }],
    ["executeEnabled", { executeEnabled: true }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(cloudAccount, base, spec(fields)), { immutable: [], invalid: [] })
    })
  }

  it("refuses a change of provider as immutable at spec.provider", () => {
    assert.include(updateRefusals(cloudAccount, base, spec({ provider: "gcp" })).immutable, "spec.provider")
  })
})

describe("CloudAccount status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(cloudAccount.status)(status))

  it("admits its fields", () => {
    assert.isTrue(decodes({
      phase: "Connected",
      reason: "Connected",
      message: "ok",
      observedGeneration: 1,
      conditions: [
        {
          type: "Verified",
          status: "True",
          lastTransitionTime: "2026-01-02T15:04:05Z",
          reason: "CredentialsAccepted",
          message: "ok"
        },
        {
          type: "Connected",
          status: "True",
          lastTransitionTime: "2026-01-02T15:04:05Z",
          reason: "Connected",
          message: "ok"
        }
      ],
      verifiedTime: "2026-01-02T15:04:05Z"
    }))
  })

  it("refuses an unknown phase", () => assert.isFalse(decodes({ phase: "Ready" })))
})
