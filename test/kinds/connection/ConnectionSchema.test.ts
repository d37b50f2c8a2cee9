/**
 * The Connection's admission rules (spec: Other kinds — injects env and egress hosts, object-storage or database;
 * Conventions 6; nodus's schema in docs/kinds/Connection.md), one row per rule, then its update rules (the type is
 * fixed) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { connection } from "../../../src/kinds/connection/ConnectionSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const ref = (name: string, key: string) => ({ secretKeyRef: { name, key } })
const storage = {
  type: "ObjectStorage",
  uri: "https://s3.eu-central-1.amazonaws.com",
  region: "eu-central-1",
  credentials: { accessKeyId: ref("aws", "id"), secretAccessKey: ref("aws", "secret") }
}
const database = {
  type: "Database",
  uri: "postgresql://app@db.example.com:5432/warehouse",
  credentials: { password: ref("db", "password") }
}
const spec = (fields: JsonObject): JsonObject => ({ ...storage, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  // The spec is a union keyed by type (as Sweep's template by kind): no or an unknown type is refused at spec, the
  // message naming the field and the supported values.
  ["no type", { uri: "https://api.example.com" }, "spec.type"],
  ["an unknown type", spec({ type: "Queue" }), "spec.type"],
  ["a Database without uri", { type: "Database" }, "spec.uri"],
  ["an Http Connection without uri", { type: "Http" }, "spec.uri"],
  ["an http endpoint for object storage", spec({ uri: "http://minio.example.com" }), "spec.uri"],
  ["an http URL for an Http Connection", { type: "Http", uri: "http://api.example.com" }, "spec.uri"],
  ["a database URI that is an https URL", { type: "Database", uri: "https://db.example.com" }, "spec.uri"],
  ["a database URI without a scheme", { type: "Database", uri: "db.example.com:5432" }, "spec.uri"],
  [
    "a password in a database URI",
    { type: "Database", uri: "postgresql://app:hunter2@db.example.com/warehouse" },
    "spec.uri"
  ],
  ["a password in an https URI", { type: "Http", uri: "https://user:token@api.example.com" }, "spec.uri"],
  ["an empty uri", spec({ uri: "" }), "spec.uri"],
  ["a uri with a trailing space", spec({ uri: "https://minio.example.com " }), "spec.uri"],
  ["a uri with a space in the host", { type: "Http", uri: "https://api example.com" }, "spec.uri"],
  ["an https uri without a host", { type: "Http", uri: "https:///v1" }, "spec.uri"],
  ["a uri whose port is out of range", { type: "Http", uri: "https://api.example.com:65536/" }, "spec.uri"],
  ["a uri whose host ends in a number", { type: "Http", uri: "https://api.example.1/" }, "spec.uri"],
  ["a database URI with an upper-case http scheme", { type: "Database", uri: "HTTP://db.example.com" }, "spec.uri"],
  ["a database URI with a bad IPv4 address", { type: "Database", uri: "postgresql://10.0.0.256/app" }, "spec.uri"],
  // region is a field of ObjectStorage only: on another type it is an unknown field.
  ["region on a Database", { ...database, region: "eu" }, "spec.region"],
  ["region on an Http Connection", { type: "Http", uri: "https://api.example.com", region: "eu" }, "spec.region"],
  ["a literal credential", spec({ credentials: { secretAccessKey: "AKIA…" } }), "spec.credentials.secretAccessKey"],
  [
    "a credential with a literal value",
    spec({ credentials: { password: { value: "hunter2" } } }),
    "spec.credentials.password.value"
  ],
  [
    "a credential without key",
    spec({ credentials: { password: { secretKeyRef: { name: "db" } } } }),
    "spec.credentials.password.secretKeyRef.key"
  ],
  [
    "a credential name with a dash",
    spec({ credentials: { "access-key": ref("aws", "id") } }),
    "spec.credentials.access-key"
  ],
  [
    "17 credentials",
    spec({ credentials: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, ref("s", "k")])) }),
    "spec.credentials"
  ],
  [
    "an env name with the PLATFORM_ prefix",
    spec({ env: [{ name: "PLATFORM_BUCKET", value: "b" }] }),
    "spec.env[0].name"
  ],
  [
    "env value and valueFrom",
    spec({ env: [{ name: "A", value: "1", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }),
    "spec.env[0].valueFrom"
  ],
  ["257 env vars", spec({ env: Array.from({ length: 257 }, (_, i) => ({ name: `V${i}`, value: "1" })) }), "spec.env"],
  ["an egress host that is no DNS name", spec({ egress: ["https://s3.amazonaws.com"] }), "spec.egress[0]"],
  ["129 egress hosts", spec({ egress: Array.from({ length: 129 }, (_, i) => `h${i}.example.com`) }), "spec.egress"],
  ["an unknown field", spec({ password: "hunter2" }), "spec.password"]
]

describe("Connection admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(connection, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults", () => {
    const admission = admitSpec(connection, database)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, database)
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      // AWS S3 needs no endpoint.
      { type: "ObjectStorage", credentials: { accessKeyId: ref("aws", "id"), secretAccessKey: ref("aws", "secret") } },
      {
        type: "Http",
        uri: "https://api.example.com/v1",
        credentials: { token: ref("api", "token") },
        egress: ["api.example.com"]
      },
      { type: "Database", uri: "mysql://db.example.com/app" },
      { type: "Database", uri: "postgresql://app@10.0.0.5:5432/app?sslmode=require" },
      { type: "Database", uri: "postgresql://[fd00::5]:5432/app" },
      { type: "Database", uri: "mongodb+srv://cluster0.example.net/app" },
      { type: "Http", uri: "https://[2001:db8::1]:65535/v1#x" },
      { type: "Http", uri: "https://api.example.com./v1?q=a:b@c" },
      spec({ credentials: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`c${i}`, ref("s", "k")])) }),
      spec({
        env: Array.from(
          { length: 256 },
          (_, i) => ({ name: `V${i}`, valueFrom: { secretKeyRef: { name: "s", key: "k" } } })
        ),
        egress: Array.from({ length: 128 }, (_, i) => `*.h${i}.example.com`)
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(connection, edge)._tag, "Admitted", JSON.stringify(admitSpec(connection, edge)))
    }
  })

  it("names the type and its supported values when the type is unknown", () => {
    const admission = admitSpec(connection, spec({ type: "Queue" }))
    assert.deepStrictEqual(admission._tag === "Refused" ? admission.causes.map((cause) => cause.message) : admission, [
      `Unsupported value: "Queue": supported values: "ObjectStorage", "Database", "Http"`
    ])
  })

  it("never repeats a password in its message", () => {
    const admission = admitSpec(connection, {
      type: "Database",
      uri: "postgresql://app:hunter2@db.example.com/warehouse"
    })
    const messages = admission._tag === "Refused" ? admission.causes.map((cause) => cause.message) : []
    assert.deepStrictEqual(messages, [
      `Invalid value: "postgresql://app:***@db.example.com/warehouse": must not carry a password: put it in credentials as a secretKeyRef`
    ])
  })

  it("drops region from a Database with a warning under fieldValidation Warn", () => {
    const envelope = Schema.Struct({ spec: connection.spec }) as unknown as Schema.Codec<unknown, unknown>
    const result = admit(
      envelope,
      { spec: { ...database, region: "eu" } },
      "Warn",
      { kind: "connections" },
      "Connection"
    )
    assert.isTrue(Result.isSuccess(result))
    if (!Result.isSuccess(result)) return
    assert.deepStrictEqual(result.success.warnings, ["unknown field \"spec.region\""])
    assert.deepStrictEqual(result.success.object["spec"], database)
  })
})

describe("Connection updates", () => {
  const changed = (fields: JsonObject): Json => ({ ...storage, ...fields })

  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["uri", { uri: "https://s3.us-east-1.amazonaws.com" }],
    ["region", { region: "us-east-1" }],
    ["credentials", { credentials: { accessKeyId: ref("aws2", "id"), secretAccessKey: ref("aws2", "secret") } }],
    ["env", { env: [{ name: "BUCKET", value: "data" }] }],
    ["egress", { egress: ["*.amazonaws.com"] }]
  ]
  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(connection, storage, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  it("refuses a change of type as immutable at spec.type", () => {
    assert.include(
      updateRefusals(connection, storage, { type: "Http", uri: "https://api.example.com" }).immutable,
      "spec.type"
    )
  })
})

describe("Connection status", () => {
  const envelope = Schema.Struct({ status: connection.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "connections" }, "Connection")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits a Ready condition and refuses a condition without status", () => {
    assert.deepStrictEqual(
      statusRefusals({
        conditions: [{
          type: "Ready",
          status: "False",
          lastTransitionTime: "2026-01-02T15:04:05Z",
          reason: "CredentialsRejected",
          message: "403 from the endpoint"
        }],
        lastCheckTime: "2026-01-02T15:04:05Z"
      }),
      []
    )
    assert.include(
      statusRefusals({ conditions: [{ type: "Ready", lastTransitionTime: "t", reason: "r", message: "m" }] }),
      "status.conditions[0].status"
    )
  })
})
