/**
 * The Image's admission rules (spec: Job.imageRef, ImageStatus, Image* error codes; nodus's schema in
 * docs/kinds/Image.md), one row per rule, then its update rules (what is pulled or built is fixed) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { image } from "../../../src/kinds/image/ImageSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const blob = `sha256:${"a".repeat(64)}`
const pulled = { reference: "ghcr.io/acme/trainer:v1.2" }
const built = { build: { context: blob } }

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["neither reference nor build", {}, "spec"],
  ["reference and build", { ...pulled, ...built }, "spec"],
  ["an empty reference", { reference: "" }, "spec.reference"],
  ["a reference with capitals in the path", { reference: "ghcr.io/Acme/trainer:v1" }, "spec.reference"],
  ["a reference with a space", { reference: "python 3.12" }, "spec.reference"],
  ["a reference with an empty tag", { reference: "python:" }, "spec.reference"],
  ["a reference with a short digest", { reference: "python@sha256:abc" }, "spec.reference"],
  ["a reference with a tag of 129 characters", { reference: `python:${"t".repeat(129)}` }, "spec.reference"],
  ["a build without context", { build: { dockerfile: "Dockerfile" } }, "spec.build.context"],
  ["a build context that is no content address", { build: { context: "s3://bucket/ctx.tar" } }, "spec.build.context"],
  ["an absolute Dockerfile path", { build: { context: blob, dockerfile: "/Dockerfile" } }, "spec.build.dockerfile"],
  [
    "a Dockerfile path leaving the context",
    { build: { context: blob, dockerfile: "../Dockerfile" } },
    "spec.build.dockerfile"
  ],
  [
    "a Dockerfile path leaving the context midway",
    { build: { context: blob, dockerfile: "docker/../../Dockerfile" } },
    "spec.build.dockerfile"
  ],
  ["an empty target", { build: { context: blob, target: "" } }, "spec.build.target"],
  [
    "a build argument name with a dash",
    { build: { context: blob, buildArgs: { "PY-VERSION": "3.12" } } },
    "spec.build.buildArgs.PY-VERSION"
  ],
  ["65 build arguments", {
    build: { context: blob, buildArgs: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`A${i}`, "1"])) }
  }, "spec.build.buildArgs"],
  ["5 pull secrets", { ...pulled, imagePullSecrets: ["a", "b", "c", "d", "e"] }, "spec.imagePullSecrets"],
  ["an empty pull secret name", { ...pulled, imagePullSecrets: [""] }, "spec.imagePullSecrets[0]"],
  ["an unknown build field", { build: { context: blob, platform: "linux/arm64" } }, "spec.build.platform"],
  ["an unknown field", { ...pulled, digest: "sha256:abc" }, "spec.digest"]
]

describe("Image admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(image, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies no defaults to a pull, and nodus's Dockerfile default to a build", () => {
    const pull = admitSpec(image, pulled)
    assert.deepStrictEqual(pull._tag === "Admitted" ? pull.spec : pull, pulled)
    const build = admitSpec(image, built)
    assert.deepStrictEqual(build._tag === "Admitted" ? build.spec : build, {
      build: { context: blob, dockerfile: "Dockerfile" }
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      { reference: "python:3.12" },
      { reference: "ubuntu" },
      { reference: "localhost:5000/team/app_x__y-z.v2:latest" },
      { reference: `ghcr.io/acme/trainer:v1@sha256:${"0".repeat(64)}` },
      { reference: `registry.example.com/acme/trainer@sha256:${"f".repeat(64)}` },
      { reference: `python:${"t".repeat(128)}`, imagePullSecrets: ["a", "b", "c", "d"] },
      {
        build: {
          context: blob,
          dockerfile: "docker/train.Dockerfile",
          target: "runtime",
          buildArgs: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`A${i}`, "1"]))
        }
      },
      { build: { context: blob, dockerfile: "..Dockerfile" } }
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(image, edge)._tag, "Admitted", JSON.stringify(admitSpec(image, edge)))
    }
  })
})

describe("Image updates", () => {
  it("accepts a change of imagePullSecrets", () => {
    assert.deepStrictEqual(updateRefusals(image, pulled, { ...pulled, imagePullSecrets: ["ghcr"] }), {
      immutable: [],
      invalid: []
    })
  })

  const immutable: ReadonlyArray<readonly [string, JsonObject, JsonObject, string]> = [
    ["reference", pulled, { reference: "ghcr.io/acme/trainer:v1.3" }, "spec.reference"],
    ["build.context", built, { build: { context: `sha256:${"b".repeat(64)}` } }, "spec.build.context"],
    ["build.dockerfile", built, { build: { context: blob, dockerfile: "gpu.Dockerfile" } }, "spec.build.dockerfile"],
    ["a pull turned into a build", pulled, built, "spec.reference"]
  ]
  for (const [field, before, after, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(image, before, after).immutable, path)
    })
  }
})

describe("Image status", () => {
  const envelope = Schema.Struct({ status: image.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "images" }, "Image")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits every phase and a resolved image, and refuses another phase", () => {
    for (const phase of ["Pending", "Building", "Ready", "Failed"]) {
      assert.deepStrictEqual(statusRefusals({ phase }), [], phase)
    }
    assert.deepStrictEqual(
      statusRefusals({
        phase: "Ready",
        reference: `ghcr.io/acme/trainer@sha256:${"0".repeat(64)}`,
        digest: `sha256:${"0".repeat(64)}`,
        user: "root",
        sizeBytes: 1_000_000
      }),
      []
    )
    assert.include(statusRefusals({ phase: "Pulling" }), "status.phase")
  })
})
