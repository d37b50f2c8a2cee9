// Unit tests for src/core/meta/Admission.ts with a small schema: valid objects, schema issues turned into causes with
// their field paths and reasons, the three fieldValidation modes for unknown fields, objects that are both invalid
// and carry unknown fields, and the `fieldPath` rendering.

import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import {
  admit,
  type Admitted,
  fieldPath,
  type FieldValidation,
  fieldValidations
} from "../../../src/core/meta/Admission.ts"
import type { ApiError, Subject } from "../../../src/core/meta/ApiError.ts"
import { mapOf } from "../../../src/core/meta/Fields.ts"

const JobSchema = Schema.Struct({
  metadata: Schema.optionalKey(Schema.Struct({ name: Schema.optionalKey(Schema.String) })),
  spec: Schema.Struct({
    replicas: Schema.Int,
    env: Schema.optionalKey(Schema.Array(Schema.Struct({ name: Schema.String })))
  })
})

const subject: Subject = { group: "nodus.dev", kind: "jobs", name: "train" }

const run = (input: unknown, fieldValidation: FieldValidation): Result.Result<Admitted, ApiError> =>
  admit(JobSchema, input, fieldValidation, subject, "Job")

const admitted = (input: unknown, fieldValidation: FieldValidation): Admitted => {
  const result = run(input, fieldValidation)
  if (Result.isFailure(result)) assert.fail(`expected admission, got ${result.failure.code}: ${result.failure.message}`)
  return result.success
}

const rejected = (input: unknown, fieldValidation: FieldValidation): ApiError => {
  const result = run(input, fieldValidation)
  if (Result.isSuccess(result)) assert.fail(`expected a rejection, got ${JSON.stringify(result.success)}`)
  return result.failure
}

const causesOf = (error: ApiError): ReadonlyArray<readonly [string, string]> =>
  (error.causes ?? []).map((cause) => [cause.field, cause.reason])

// Freeze a value and everything inside it, so any mutation throws.
const deepFreeze = <A>(value: A): A => {
  if (typeof value === "object" && value !== null) {
    Object.values(value).forEach(deepFreeze)
    Object.freeze(value)
  }
  return value
}

const valid: JsonObject = { metadata: { name: "train" }, spec: { replicas: 2, env: [{ name: "A" }, { name: "B" }] } }
const withUnknown: JsonObject = { bogus: 1, metadata: { name: "train" }, spec: { replicas: 2, extra: true } }

describe("Admission.admit", () => {
  it("passes a valid object with no warnings, in every mode", () => {
    assert.deepStrictEqual(fieldValidations, ["Strict", "Warn", "Ignore"])
    for (const mode of fieldValidations) {
      const result = admitted(deepFreeze(valid), mode)
      assert.deepStrictEqual(result.object, valid, mode)
      assert.deepStrictEqual(result.warnings, [], mode)
    }
  })

  it("turns each schema issue into a cause with its path and reason", () => {
    const table: Record<
      string,
      { readonly input: unknown; readonly causes: ReadonlyArray<readonly [string, string]> }
    > = {
      "missing required field": { input: { metadata: { name: "train" } }, causes: [["spec", "FieldValueRequired"]] },
      "missing nested required field": { input: { spec: {} }, causes: [["spec.replicas", "FieldValueRequired"]] },
      "wrong type": { input: { spec: { replicas: "two" } }, causes: [["spec.replicas", "FieldValueTypeInvalid"]] },
      "right type, invalid value": {
        input: { spec: { replicas: 1.5 } },
        causes: [["spec.replicas", "FieldValueInvalid"]]
      },
      "array element paths": {
        input: { spec: { replicas: 1, env: [{ name: 3 }, { name: "ok" }, {}] } },
        causes: [["spec.env[0].name", "FieldValueTypeInvalid"], ["spec.env[2].name", "FieldValueRequired"]]
      },
      "not an object": { input: "train", causes: [["", "FieldValueTypeInvalid"]] },
      "every issue, not the first": {
        input: { metadata: { name: 1 }, spec: { replicas: "x" } },
        causes: [["metadata.name", "FieldValueTypeInvalid"], ["spec.replicas", "FieldValueTypeInvalid"]]
      }
    }
    for (const [label, row] of Object.entries(table)) {
      for (const mode of fieldValidations) {
        const error = rejected(row.input, mode)
        assert.strictEqual(error.code, "Invalid", `${label} (${mode})`)
        assert.deepStrictEqual(causesOf(error), row.causes, `${label} (${mode})`)
        assert.deepStrictEqual(error.subject, subject, `${label} (${mode})`)
      }
    }
  })

  it("words the Invalid message as Kubernetes does", () => {
    const missing = rejected({ metadata: { name: "train" } }, "Strict")
    assert.strictEqual(missing.message, `Job.nodus.dev "train" is invalid: spec: Required value`)
    assert.deepStrictEqual(missing.causes, [{ field: "spec", reason: "FieldValueRequired", message: "Required value" }])
  })

  it("refuses unknown fields under Strict (BadRequest naming each path)", () => {
    const error = rejected(withUnknown, "Strict")
    assert.strictEqual(error.code, "BadRequest")
    assert.deepStrictEqual(error.causes, [
      { field: "bogus", reason: "FieldValueUnknown", message: `unknown field "bogus"` },
      { field: "spec.extra", reason: "FieldValueUnknown", message: `unknown field "spec.extra"` }
    ])
    assert.strictEqual(error.message, `strict decoding error: unknown field "bogus", unknown field "spec.extra"`)
  })

  it("drops unknown fields with a warning each under Warn", () => {
    const result = admitted(deepFreeze(withUnknown), "Warn")
    assert.deepStrictEqual(result.object, { metadata: { name: "train" }, spec: { replicas: 2 } })
    assert.deepStrictEqual(result.warnings, [`unknown field "bogus"`, `unknown field "spec.extra"`])
  })

  it("drops unknown fields silently under Ignore", () => {
    const result = admitted(deepFreeze(withUnknown), "Ignore")
    assert.deepStrictEqual(result.object, { metadata: { name: "train" }, spec: { replicas: 2 } })
    assert.deepStrictEqual(result.warnings, [])
  })

  it("answers Invalid for an object both invalid and carrying unknown fields", () => {
    const input = { bogus: 1, spec: { replicas: "two", extra: true } }
    const table: Record<FieldValidation, ReadonlyArray<readonly [string, string]>> = {
      // Strict names the unknown fields too…
      Strict: [["bogus", "FieldValueUnknown"], ["spec.replicas", "FieldValueTypeInvalid"], [
        "spec.extra",
        "FieldValueUnknown"
      ]],
      // …the lenient modes only the invalid ones.
      Warn: [["spec.replicas", "FieldValueTypeInvalid"]],
      Ignore: [["spec.replicas", "FieldValueTypeInvalid"]]
    }
    for (const mode of fieldValidations) {
      const error = rejected(input, mode)
      assert.strictEqual(error.code, "Invalid", mode)
      assert.sameDeepMembers([...causesOf(error)], [...table[mode]], mode)
    }
  })

  it("decodes the same way on a second call with the same schema", () => {
    assert.deepStrictEqual(run(withUnknown, "Warn"), run(withUnknown, "Warn"))
    assert.strictEqual(rejected(withUnknown, "Strict").code, "BadRequest")
    assert.strictEqual(admitted(withUnknown, "Ignore").warnings.length, 0)
  })
})

describe("Admission.admit on unions and maps", () => {
  const Storage = Schema.Struct({ type: Schema.Literal("Storage"), bucket: Schema.String })
  const Database = Schema.Struct({ type: Schema.Literal("Database"), uri: Schema.String })
  const Connection = Schema.Struct({
    spec: Schema.Union([Storage, Database]),
    labels: Schema.optionalKey(
      mapOf(Schema.String, (key) => /^[a-z]+$/u.test(key) ? undefined : "must be lower-case letters")
    )
  })
  const admitConnection = (input: unknown, fieldValidation: FieldValidation) =>
    admit(Connection, input, fieldValidation, subject, "Connection")
  const causes = (input: unknown, fieldValidation: FieldValidation = "Strict") => {
    const result = admitConnection(input, fieldValidation)
    return Result.isFailure(result)
      ? (result.failure.causes ?? []).map((cause) => `${cause.field} ${cause.reason}: ${cause.message}`)
      : []
  }

  it("reports a member's own problem, not the union's, once the discriminator picked the member", () => {
    assert.deepStrictEqual(causes({ spec: { type: "Database" } }), ["spec.uri FieldValueRequired: Required value"])
  })

  it("reports a value no member takes at the discriminator, naming the supported values", () => {
    assert.deepStrictEqual(causes({ spec: { type: "Queue", uri: "x" } }), [
      `spec.type FieldValueNotSupported: Unsupported value: "Queue": supported values: "Storage", "Database"`
    ])
    assert.deepStrictEqual(causes({ spec: { uri: "x" } }), ["spec.type FieldValueRequired: Required value"])
  })

  it("treats an unknown field inside a union member as unknown: dropped with a warning under Warn", () => {
    const result = admitConnection({ spec: { type: "Storage", bucket: "b", region: "eu" } }, "Warn")
    if (Result.isFailure(result)) assert.fail(result.failure.message)
    assert.deepStrictEqual(result.success.object, { spec: { type: "Storage", bucket: "b" } })
    assert.deepStrictEqual(result.success.warnings, [`unknown field "spec.region"`])
  })

  it("refuses a map key that breaks its grammar under every fieldValidation, instead of dropping it", () => {
    for (const fieldValidation of fieldValidations) {
      assert.deepStrictEqual(
        causes({ spec: { type: "Storage", bucket: "b" }, labels: { ok: "1", "Not OK": "2" } }, fieldValidation),
        [
          `labels[Not OK] FieldValueInvalid: Invalid value: "Not OK": must be lower-case letters`
        ],
        fieldValidation
      )
    }
  })
})

describe("Admission.fieldPath", () => {
  const table: ReadonlyArray<readonly [ReadonlyArray<PropertyKey>, string]> = [
    [[], ""],
    [["spec"], "spec"],
    [["spec", "replicas"], "spec.replicas"],
    [["spec", "env", 0, "name"], "spec.env[0].name"],
    [["items", 0, 1], "items[0][1]"],
    [["metadata", "labels", "app.kubernetes.io/name"], "metadata.labels[app.kubernetes.io/name]"],
    [["metadata", "annotations", "team"], "metadata.annotations.team"],
    [["spec", "node-selector"], "spec.node-selector"],
    [["spec", "$ref", "_x"], "spec.$ref._x"],
    [["data", "0abc"], "data[0abc]"],
    [["data", "has space"], "data[has space]"],
    [[0], "[0]"]
  ]
  for (const [segments, expected] of table) {
    it(`${JSON.stringify(segments)} → ${JSON.stringify(expected)}`, () => {
      assert.strictEqual(fieldPath(segments), expected)
    })
  }
})
