/**
 * The Volume's admission rules (spec: Other kinds — a Volume has revisions; VolumeMount; VolumeBusy; nodus's schema in
 * docs/kinds/Volume.md), one row per rule, then its update rules (size and access mode fixed) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { volume } from "../../../src/kinds/volume/VolumeSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { size: "100Gi" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no size", { accessMode: "ReadWriteOnce" }, "spec.size"],
  ["a size that is not a quantity", spec({ size: "100 GB" }), "spec.size"],
  ["a size of 0", spec({ size: "0" }), "spec.size"],
  ["a size below one byte", spec({ size: "500m" }), "spec.size"],
  ["a size above 64Ti", spec({ size: "65Ti" }), "spec.size"],
  ["a size as a number", spec({ size: 100 }), "spec.size"],
  ["an unknown access mode", spec({ accessMode: "ReadWriteMany" }), "spec.accessMode"],
  ["an unknown field", spec({ storageClass: "fast" }), "spec.storageClass"]
]

describe("Volume admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(volume, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies nodus's default access mode ReadWriteOnce", () => {
    const admission = admitSpec(volume, base)
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, {
      ...base,
      accessMode: "ReadWriteOnce"
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ size: "64Ti" }),
      spec({ size: "1" }),
      spec({ size: "1Ki", accessMode: "ReadOnlyMany" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(volume, edge)._tag, "Admitted", JSON.stringify(admitSpec(volume, edge)))
    }
  })
})

describe("Volume updates", () => {
  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["size", spec({ size: "200Gi" }), "spec.size"],
    ["accessMode", spec({ accessMode: "ReadOnlyMany" }), "spec.accessMode"]
  ]
  for (const [field, after, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(volume, base, after).immutable, path)
    })
  }

  it("accepts writing the same spec again", () => {
    assert.deepStrictEqual(updateRefusals(volume, base, spec({ accessMode: "ReadWriteOnce" })), {
      immutable: [],
      invalid: []
    })
  })
})

describe("Volume status", () => {
  const envelope = Schema.Struct({ status: volume.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "volumes" }, "Volume")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits revisions and a writer, and refuses an unknown phase", () => {
    assert.deepStrictEqual(
      statusRefusals({
        phase: "InUse",
        revision: 3,
        revisions: [{
          revision: 3,
          createdTime: "2026-01-02T15:04:05Z",
          sizeBytes: 1_024,
          committedBy: { kind: "Workspace", name: "dev" }
        }],
        boundTo: { kind: "Workspace", name: "dev", uid: "u-1", attempt: "dev-a7" },
        usedBytes: 1_024
      }),
      []
    )
    assert.include(statusRefusals({ phase: "Bound" }), "status.phase")
    assert.include(statusRefusals({ revision: -1 }), "status.revision")
  })
})
