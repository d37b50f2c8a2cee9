/**
 * The Secret's admission rules (spec: Other kinds — addressed by name and version; SecretMount; nodus's schema in
 * docs/kinds/Secret.md), one row per rule, then its update rules (data writes a new version, the type is fixed) and its
 * status (keys and versions, never values).
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { secret } from "../../../src/kinds/secret/SecretSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { data: { HF_TOKEN: "hf_abc", "config.json": "{}" } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const dockerConfig = JSON.stringify({ auths: { "ghcr.io": { auth: "dXNlcjpwYXNz" } } })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["data that is not a map", { data: ["a"] }, "spec.data"],
  ["a value that is not a string", { data: { TOKEN: 42 } }, "spec.data.TOKEN"],
  ["a key with a space", { data: { "my key": "v" } }, "spec.data[my key]"],
  ["a key with a slash", { data: { "a/b": "v" } }, "spec.data[a/b]"],
  ["the key .", { data: { ".": "v" } }, "spec.data[.]"],
  ["the key ..", { data: { "..": "v" } }, "spec.data[..]"],
  ["an empty key", { data: { "": "v" } }, "spec.data[]"],
  ["a key of 254 characters", { data: { ["k".repeat(254)]: "v" } }, `spec.data.${"k".repeat(254)}`],
  ["data over 1 MiB", { data: { a: "x".repeat(1_048_576) } }, "spec.data"],
  ["an unknown type", spec({ type: "kubernetes.io/tls" }), "spec.type"],
  [
    "a DockerConfigJson Secret without .dockerconfigjson",
    { type: "DockerConfigJson", data: { config: dockerConfig } },
    "spec.data"
  ],
  ["a DockerConfigJson Secret whose value is no JSON object", {
    type: "DockerConfigJson",
    data: { ".dockerconfigjson": "[]" }
  }, "spec.data[.dockerconfigjson]"],
  ["a DockerConfigJson Secret whose value is no JSON", {
    type: "DockerConfigJson",
    data: { ".dockerconfigjson": "user:pass" }
  }, "spec.data[.dockerconfigjson]"],
  ["stringData (nodus has data only)", { stringData: { a: "b" } }, "spec.stringData"],
  ["an unknown field", spec({ immutable: true }), "spec.immutable"]
]

describe("Secret admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(secret, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission).slice(0, 500)}`)
    })
  }

  it("applies nodus's default type Opaque and keeps the data for the server to store", () => {
    const admission = admitSpec(secret, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, { ...base, type: "Opaque" })
  })

  it("admits every bound at its edge", () => {
    const key253 = "k".repeat(253)
    const edges: ReadonlyArray<JsonObject> = [
      {},
      { data: {} },
      { data: { [key253]: "", "-._aZ09": "v", ".env": "A=1" } },
      // 1 MiB of keys and values together.
      { data: { a: "x".repeat(1_048_575) } },
      { type: "DockerConfigJson", data: { ".dockerconfigjson": dockerConfig } },
      // A read-back DockerConfigJson Secret carries no data.
      { type: "DockerConfigJson" }
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(secret, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(secret, edge)).slice(0, 500)
      )
    }
  })
})

describe("Secret updates", () => {
  const created = spec({ type: "Opaque" })

  it("accepts new data (a new version) and a write without data", () => {
    assert.deepStrictEqual(updateRefusals(secret, created, { data: { HF_TOKEN: "hf_new" }, type: "Opaque" }), {
      immutable: [],
      invalid: []
    })
    assert.deepStrictEqual(updateRefusals(secret, created, { type: "Opaque" }), { immutable: [], invalid: [] })
  })

  it("refuses a change of type as immutable at spec.type", () => {
    assert.include(
      updateRefusals(secret, created, { type: "DockerConfigJson", data: { ".dockerconfigjson": dockerConfig } })
        .immutable,
      "spec.type"
    )
  })
})

describe("Secret status", () => {
  const envelope = Schema.Struct({ status: secret.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "secrets" }, "Secret")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits versions with keys and latestVersion 0, and refuses version 0, a negative latestVersion and values", () => {
    assert.deepStrictEqual(
      statusRefusals({
        latestVersion: 2,
        versions: [
          { version: 1, keys: ["HF_TOKEN"], createdTime: "2026-01-01T00:00:00Z", id: "sv-1" },
          { version: 2, keys: ["HF_TOKEN", "config.json"], createdTime: "2026-01-02T00:00:00Z", id: "sv-2" }
        ]
      }),
      []
    )
    // The server writes latestVersion 0 for a Secret created without data (src/runtime/Secrets.ts).
    assert.deepStrictEqual(statusRefusals({ latestVersion: 0, versions: [] }), [])
    assert.include(statusRefusals({ latestVersion: -1 }), "status.latestVersion")
    assert.include(statusRefusals({ versions: [{ version: 0, keys: [] }] }), "status.versions[0].version")
    assert.include(
      statusRefusals({ versions: [{ version: 1, keys: ["a"], data: { a: "secret" } }] }),
      "status.versions[0].data"
    )
  })
})
