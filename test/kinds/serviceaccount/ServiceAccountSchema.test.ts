/**
 * The ServiceAccount's admission rules (spec: Authentication; scopes are the known vocabulary of
 * src/core/meta/Scopes.ts — who may grant them is the server's, src/apiserver/Auth.ts), one row per rule, then its
 * update rules and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { knownScopes } from "../../../src/core/meta/Scopes.ts"
import { serviceAccount } from "../../../src/kinds/serviceaccount/ServiceAccountSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { scopes: ["jobs:write", "billing:read"] }

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["scopes that are not a list", { scopes: "jobs:write" }, "spec.scopes"],
  ["an empty scope", { scopes: ["jobs:read", ""] }, "spec.scopes[1]"],
  ["a scope that is not a string", { scopes: [3] }, "spec.scopes[0]"],
  ["a scope twice", { scopes: ["jobs:read", "jobs:read"] }, "spec.scopes[1]"],
  ["an unknown scope", { scopes: ["jobs:read", "not-a-scope"] }, "spec.scopes[1]"],
  ["an access level that does not exist", { scopes: ["jobs:admin"] }, "spec.scopes[0]"],
  ["an unknown field", { ...base, roles: ["admin"] }, "spec.roles"]
]

describe("ServiceAccount admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(serviceAccount, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults: an account without scopes holds none", () => {
    const admission = admitSpec(serviceAccount, {})
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, {})
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      { scopes: [] },
      { scopes: [...knownScopes] },
      { scopes: ["admin", "*:read", "billing:write", "namespaces:read"] }
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(serviceAccount, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(serviceAccount, edge))
      )
    }
  })
})

describe("ServiceAccount updates", () => {
  it("accepts a change of scopes", () => {
    assert.deepStrictEqual(updateRefusals(serviceAccount, base, { scopes: ["jobs:read"] }), {
      immutable: [],
      invalid: []
    })
    assert.deepStrictEqual(updateRefusals(serviceAccount, base, {}), { immutable: [], invalid: [] })
  })
})

describe("ServiceAccount status", () => {
  const envelope = Schema.Struct({ status: serviceAccount.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "serviceaccounts" }, "ServiceAccount")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits what the service writes and refuses a negative count", () => {
    assert.deepStrictEqual(statusRefusals({ tokensIssued: 2, lastUsedTime: "2026-01-02T15:04:05Z" }), [])
    assert.include(statusRefusals({ tokensIssued: -1 }), "status.tokensIssued")
  })
})
