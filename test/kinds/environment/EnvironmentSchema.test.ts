/**
 * The Environment's admission rules (spec: Environment, Limits), one row per rule: the spec as written, and either the
 * field path admission refuses or what the admitted spec holds. Then its status grammar; the spec states no
 * immutability, so every field may change.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { environment } from "../../../src/kinds/environment/EnvironmentSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const image = `registry.example.com/envs/gsm8k@sha256:${"a".repeat(64)}`
const base = { version: "1.0.0", package: { image } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const blob = `sha256:${"b".repeat(64)}`
const example = { name: "qwen-grpo", mode: "Evaluate", runtime: "platform/trl@0.19.0" }
const withExample = (fields: JsonObject, modes: ReadonlyArray<string> = ["Train", "Evaluate"]): JsonObject =>
  spec({ modes, examples: [{ ...example, ...fields }] })

/** Rows whose spec is refused, with the field a cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no version", { package: { image } }, "spec.version"],
  ["a version that is not SemVer", spec({ version: "1.0" }), "spec.version"],
  ["a version with a v prefix", spec({ version: "v1.0.0" }), "spec.version"],
  ["a version with a leading zero", spec({ version: "01.0.0" }), "spec.version"],
  ["no package", { version: "1.0.0" }, "spec.package"],
  ["an empty package", spec({ package: {} }), "spec.package"],
  ["image and pip", spec({ package: { image, pip: { name: "env", version: "1.0" } } }), "spec.package"],
  [
    "pip and source",
    spec({ package: { pip: { name: "env", version: "1.0" }, source: { blob, module: "env" } } }),
    "spec.package"
  ],
  [
    "an image that is not digest-pinned",
    spec({ package: { image: "registry.example.com/env:latest" } }),
    "spec.package.image"
  ],
  ["an image with a short digest", spec({ package: { image: `env@sha256:${"a".repeat(63)}` } }), "spec.package.image"],
  ["a pip package without name", spec({ package: { pip: { version: "1.0" } } }), "spec.package.pip.name"],
  ["a pip package without version", spec({ package: { pip: { name: "env" } } }), "spec.package.pip.version"],
  [
    "a pip version that is a specifier",
    spec({ package: { pip: { name: "env", version: ">=1.0" } } }),
    "spec.package.pip.version"
  ],
  [
    "a pip version that is a wildcard",
    spec({ package: { pip: { name: "env", version: "1.*" } } }),
    "spec.package.pip.version"
  ],
  ["a pip name with spaces", spec({ package: { pip: { name: "my env", version: "1.0" } } }), "spec.package.pip.name"],
  [
    "a pip index that is no URL",
    spec({ package: { pip: { name: "env", version: "1.0", index: "ftp://pypi" } } }),
    "spec.package.pip.index"
  ],
  ["a source without blob", spec({ package: { source: { module: "env" } } }), "spec.package.source.blob"],
  [
    "a source blob with uppercase hex",
    spec({ package: { source: { blob: `sha256:${"B".repeat(64)}`, module: "env" } } }),
    "spec.package.source.blob"
  ],
  ["a source without module", spec({ package: { source: { blob } } }), "spec.package.source.module"],
  ["a module with a dash", spec({ package: { source: { blob, module: "my-env" } } }), "spec.package.source.module"],
  [
    "a module with two factories",
    spec({ package: { source: { blob, module: "env:make:now" } } }),
    "spec.package.source.module"
  ],
  [
    "a loader that is no function name",
    spec({ package: { pip: { name: "env", version: "1.0" }, loader: "load-env" } }),
    "spec.package.loader"
  ],
  ["an unknown category", spec({ category: "Chess" }), "spec.category"],
  ["no modes", spec({ modes: [] }), "spec.modes"],
  ["an unknown mode", spec({ modes: ["Deploy"] }), "spec.modes[0]"],
  ["a mode twice", spec({ modes: ["Train", "Train"] }), "spec.modes[1]"],
  ["no graders", spec({ graders: [] }), "spec.graders"],
  ["a grader without name", spec({ graders: [{ kind: "Program" }] }), "spec.graders[0].name"],
  ["a grader without kind", spec({ graders: [{ name: "g" }] }), "spec.graders[0].kind"],
  ["an unknown grader kind", spec({ graders: [{ name: "g", kind: "LLMJudge" }] }), "spec.graders[0].kind"],
  [
    "two graders with one name",
    spec({ graders: [{ name: "g", kind: "Program" }, { name: "g", kind: "ExactMatch" }] }),
    "spec.graders[1]"
  ],
  ["an unknown heldOutMeasures", spec({ heldOutMeasures: "Both" }), "spec.heldOutMeasures"],
  ["an unknown readiness", spec({ readiness: "Beta" }), "spec.readiness"],
  ["an unknown rewardType", spec({ rewardType: "Continuous" }), "spec.rewardType"],
  ["a license that is no SPDX id", spec({ licenses: { code: "MIT License" } }), "spec.licenses.code"],
  ["a requirements memory that is no quantity", spec({ requirements: { memory: "lots" } }), "spec.requirements.memory"],
  ["a requirements gpu with 3 GPUs", spec({ requirements: { gpu: { count: 3 } } }), "spec.requirements.gpu.count"],
  ["a sampleTask above 4 KiB", spec({ sampleTask: "x".repeat(4097) }), "spec.sampleTask"],
  ["a sampleTask above 4 KiB in UTF-8 bytes", spec({ sampleTask: "é".repeat(2049) }), "spec.sampleTask"],
  ["a grading timeout above 10m", spec({ sandbox: { timeout: "11m" } }), "spec.sandbox.timeout"],
  ["a grading timeout that is no duration", spec({ sandbox: { timeout: "a minute" } }), "spec.sandbox.timeout"],
  ["a sandbox cpu that is no quantity", spec({ sandbox: { cpu: "two" } }), "spec.sandbox.cpu"],
  ["a sandbox memory that is no quantity", spec({ sandbox: { memory: "1 GB" } }), "spec.sandbox.memory"],
  [
    "a sandbox network (egress is always denied)",
    spec({ sandbox: { network: { egress: { policy: "Open" } } } }),
    "spec.sandbox.network"
  ],
  ["a sourceURL that is no URL", spec({ sourceURL: "github.com/acme/env" }), "spec.sourceURL"],
  ["a split without size", spec({ splits: { train: {} } }), "spec.splits.train.size"],
  ["a negative split size", spec({ splits: { test: { size: -1 } } }), "spec.splits.test.size"],
  ["an example without name", spec({ examples: [{ mode: "Evaluate", runtime: "r" }] }), "spec.examples[0].name"],
  ["an example without mode", spec({ examples: [{ name: "e", runtime: "r" }] }), "spec.examples[0].mode"],
  ["an example without runtime", spec({ examples: [{ name: "e", mode: "Evaluate" }] }), "spec.examples[0].runtime"],
  ["an unknown example mode", withExample({ mode: "Deploy" }), "spec.examples[0].mode"],
  ["an example of a mode the environment lacks", withExample({ mode: "Train" }, ["Evaluate"]), "spec.examples[0].mode"],
  ["two examples with one name", spec({ examples: [example, example] }), "spec.examples[1]"],
  ["an unpinned example model", withExample({ model: "hf://Qwen/Qwen3-0.6B" }), "spec.examples[0].model"],
  [
    "an example model pinned to 39 hex",
    withExample({ model: `hf://Qwen/Qwen3-0.6B@${"c".repeat(39)}` }),
    "spec.examples[0].model"
  ],
  ["a baseline without passRate", withExample({ baseline: {} }), "spec.examples[0].baseline.passRate"],
  ["a baseline passRate above 1", withExample({ baseline: { passRate: 1.5 } }), "spec.examples[0].baseline.passRate"],
  ["a trained passRate below 0", withExample({ trained: { passRate: -0.1 } }), "spec.examples[0].trained.passRate"],
  ["a passRate as a string", withExample({ baseline: { passRate: "0.5" } }), "spec.examples[0].baseline.passRate"],
  ["a changePP as a string", withExample({ changePP: "12.5" }), "spec.examples[0].changePP"],
  ["negative runtimeSeconds", withExample({ runtimeSeconds: -1 }), "spec.examples[0].runtimeSeconds"],
  ["example tasks 0", withExample({ tasks: 0 }), "spec.examples[0].tasks"],
  [
    "a measuredOn date in another form",
    withExample({ measuredOn: { date: "2025/06/01" } }),
    "spec.examples[0].measuredOn.date"
  ],
  [
    "a measuredOn date that does not exist",
    withExample({ measuredOn: { date: "2025-02-30" } }),
    "spec.examples[0].measuredOn.date"
  ],
  ["an unknown field", spec({ network: { egress: { policy: "Open" } } }), "spec.network"]
]

describe("Environment admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(environment, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states (and names the default grader), visible on read", () => {
    const admission = admitSpec(environment, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      version: "1.0.0",
      package: { image, loader: "load_environment" },
      modes: ["Evaluate"],
      graders: [{ name: "grade", kind: "Program" }],
      heldOutMeasures: "TrainedTask",
      readiness: "Research",
      rewardType: "Binary",
      sandbox: { cpu: "1", memory: "1Gi", timeout: "60s" }
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        version: "2.10.3-rc.1+build.7",
        sampleTask: "x".repeat(4096),
        sandbox: { timeout: "10m", cpu: "500m", memory: "512Mi", image: "python:3.12" }
      }),
      spec({
        sampleTask: "é".repeat(2048),
        modes: ["Train", "Evaluate"],
        graders: [{ name: "exact", kind: "ExactMatch", description: "Compares answers." }, {
          name: "tests",
          kind: "Program"
        }]
      }),
      {
        version: "0.1.0",
        package: {
          pip: { name: "gsm8k.env_v2", version: "1.4.2.post1", index: "https://pypi.example.com/simple" },
          loader: "make_env"
        }
      },
      {
        version: "0.0.0",
        package: { source: { blob, module: "envs.gsm8k:make_environment" } },
        category: "Math",
        heldOutMeasures: "Transfer",
        readiness: "Stable",
        rewardType: "Scalar"
      },
      spec({
        licenses: { code: "Apache-2.0", data: "CC-BY-4.0" },
        publisher: "acme",
        requirements: { gpu: { count: 1, type: ["H100"] }, memory: "16Gi" },
        sourceURL: "https://github.com/acme/env",
        summary: "Grade school math."
      }),
      spec({ splits: { train: { size: 0 }, test: { size: 1319 } } }),
      withExample({
        mode: "Train",
        model: `hf://Qwen/Qwen3-0.6B@${"0123456789abcdef0123".repeat(2)}`,
        parameters: { lr: 0.0001 },
        tasks: 1,
        baseline: { passRate: 0 },
        trained: { passRate: 1 },
        changePP: -12.5,
        runtimeSeconds: 0,
        measuredOn: { date: "2024-02-29", offering: "h100-x1" }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(environment, edge)._tag, "Admitted", JSON.stringify(admitSpec(environment, edge)))
    }
  })
})

describe("Environment status", () => {
  const statusCauses = (status: Json): ReadonlyArray<string> => {
    const result = admit(
      Schema.Struct({ status: environment.status }),
      { status },
      "Strict",
      { kind: "environments" },
      "Environment"
    )
    return result._tag === "Failure" ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("accepts what the controller reports", () => {
    assert.deepStrictEqual(
      statusCauses({
        phase: "Ready",
        digest: `sha256:${"d".repeat(64)}`,
        image,
        observedGeneration: 2,
        splits: { train: 7473, test: 1319 },
        conditions: [{
          type: "Verified",
          status: "True",
          lastTransitionTime: "2026-01-02T15:04:05Z",
          reason: "DigestResolved",
          message: "Resolved."
        }]
      }),
      []
    )
  })

  it("refuses a phase outside Pending, Ready, Failed and splits without both counts", () => {
    assert.include(statusCauses({ phase: "Verified" }), "status.phase")
    assert.include(statusCauses({ splits: { train: 10 } }), "status.splits.test")
  })
})

describe("Environment updates", () => {
  it("lets every field change (the spec states no immutability)", () => {
    const created = spec({ category: "Math" })
    const next = {
      version: "1.1.0",
      package: { pip: { name: "env", version: "1.1.0" } },
      category: "Reasoning",
      readiness: "Stable"
    }
    assert.deepStrictEqual(updateRefusals(environment, created, next), { immutable: [], invalid: [] })
  })
})
