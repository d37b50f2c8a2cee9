/**
 * The Pipeline's admission rules (spec: JobInput.fromStage; nodus's schema in docs/kinds/Pipeline.md): stage names,
 * kinds and specs (a Job stage is admitted with the Job's rules), and the graph rules — dependsOn names stages, no
 * cycles, fromStage names an upstream stage's output. Then its update rules (stages fixed) and its status.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { pipeline } from "../../../src/kinds/pipeline/PipelineSchema.ts"
import { admitSpec, jobDefaults, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const job = (fields: JsonObject = {}): JsonObject => ({
  image: "python:3.12",
  command: ["python", "run.py"],
  ...fields
})
const prepare = { name: "prepare", kind: "Job", spec: job({ outputs: [{ name: "shards", path: "/data/shards" }] }) }
const fromPrepare = (output: string, stage = "prepare") => ({
  inputs: [{ name: "data", fromStage: { stage, output } }]
})
const train = { name: "train", kind: "Job", dependsOn: ["prepare"], spec: job(fromPrepare("shards")) }
const base = { stages: [prepare, train] }
const stages = (...list: ReadonlyArray<JsonObject>): JsonObject => ({ stages: list })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no stages", {}, "spec.stages"],
  ["an empty stage list", stages(), "spec.stages"],
  [
    "65 stages",
    stages(...Array.from({ length: 65 }, (_, i) => ({ name: `s${i}`, kind: "Job", spec: job() }))),
    "spec.stages"
  ],
  ["a stage name with capitals", stages({ ...prepare, name: "Prepare" }), "spec.stages[0].name"],
  ["a stage name of 64 characters", stages({ ...prepare, name: "s".repeat(64) }), "spec.stages[0].name"],
  ["a stage name ending with a dash", stages({ ...prepare, name: "prep-" }), "spec.stages[0].name"],
  ["two stages with one name", stages(prepare, { ...prepare }), "spec.stages[1]"],
  // A stage is a union keyed by kind (as Sweep's template): no or an unknown kind is refused at the stage, the message
  // naming the field and the supported values.
  ["a stage without kind", stages({ name: "a", spec: job() }), "spec.stages[0].kind"],
  ["an unknown stage kind", stages({ name: "a", kind: "Sweep", spec: job() }), "spec.stages[0].kind"],
  ["a stage without spec", stages({ name: "a", kind: "Job" }), "spec.stages[0].spec"],
  ["a stage spec that is no object", stages({ name: "a", kind: "Job", spec: "python:3.12" }), "spec.stages[0].spec"],
  [
    "a Job stage breaking a Job bound",
    stages({ name: "a", kind: "Job", spec: job({ completions: 0 }) }),
    "spec.stages[0].spec.completions"
  ],
  [
    "a Job stage without image",
    stages({ name: "a", kind: "Job", spec: { command: ["x"] } }),
    "spec.stages[0].spec.image"
  ],
  [
    "a Job stage input without name",
    stages({ name: "a", kind: "Job", spec: job({ inputs: [{ volume: { name: "v" } }] }) }),
    "spec.stages[0].spec.inputs[0].name"
  ],
  [
    "a Job stage with an unknown field",
    stages({ name: "a", kind: "Job", spec: job({ replicas: 2 }) }),
    "spec.stages[0].spec.replicas"
  ],
  [
    "a TrainingJob stage without runtime",
    stages({ name: "a", kind: "TrainingJob", spec: { mode: "SFT" } }),
    "spec.stages[0].spec.runtime"
  ],
  [
    "a TrainingJob stage with a Job's field",
    stages({ name: "a", kind: "TrainingJob", spec: { runtime: "platform/trl@1", image: "python:3.12" } }),
    "spec.stages[0].spec.image"
  ],
  [
    "a TrainingJob stage breaking a TrainingJob bound",
    stages({ name: "a", kind: "TrainingJob", spec: { runtime: "platform/trl@1", grading: { maxParallel: 33 } } }),
    "spec.stages[0].spec.grading.maxParallel"
  ],
  [
    "a TrainingJob stage breaking a TrainingJob rule",
    stages({
      name: "a",
      kind: "TrainingJob",
      spec: { runtime: "platform/trl@1", resources: { gpu: { count: 2 } }, distributed: { nodes: 2, gpusPerNode: 4 } }
    }),
    "spec.stages[0].spec.distributed.gpusPerNode"
  ],
  [
    "a Job stage spec under a TrainingJob kind",
    stages({ name: "a", kind: "TrainingJob", spec: job() }),
    "spec.stages[0].spec.runtime"
  ],
  ["dependsOn naming no stage", stages(prepare, { ...train, dependsOn: ["prep"] }), "spec.stages[1].dependsOn[0]"],
  ["dependsOn naming the stage itself", stages({ ...prepare, dependsOn: ["prepare"] }), "spec.stages[0].dependsOn[0]"],
  [
    "dependsOn naming a stage twice",
    stages(prepare, { ...train, dependsOn: ["prepare", "prepare"] }),
    "spec.stages[1].dependsOn[1]"
  ],
  ["a cycle of two", stages({ ...prepare, dependsOn: ["train"] }, train), "spec.stages[0].dependsOn"],
  [
    "a cycle of three",
    stages({ name: "a", kind: "Job", spec: job(), dependsOn: ["c"] }, {
      name: "b",
      kind: "Job",
      spec: job(),
      dependsOn: ["a"]
    }, { name: "c", kind: "Job", spec: job(), dependsOn: ["b"] }),
    "spec.stages[0].dependsOn"
  ],
  [
    "fromStage naming a stage it does not depend on",
    stages(prepare, { ...train, dependsOn: [] }),
    "spec.stages[1].spec.inputs[0].fromStage.stage"
  ],
  [
    "fromStage naming a later stage",
    stages({ ...prepare, spec: job(fromPrepare("outputs", "train")) }, train),
    "spec.stages[0].spec.inputs[0].fromStage.stage"
  ],
  [
    "fromStage naming no stage",
    stages(prepare, { ...train, spec: job(fromPrepare("shards", "nowhere")) }),
    "spec.stages[1].spec.inputs[0].fromStage.stage"
  ],
  [
    "fromStage naming the stage itself",
    stages({ ...prepare, spec: job({ ...fromPrepare("shards") }) }),
    "spec.stages[0].spec.inputs[0].fromStage.stage"
  ],
  [
    "fromStage naming an output the stage lacks",
    stages(prepare, { ...train, spec: job(fromPrepare("model")) }),
    "spec.stages[1].spec.inputs[0].fromStage.output"
  ],
  ["an unknown stage field", stages({ ...prepare, retries: 2 }), "spec.stages[0].retries"],
  ["an unknown field", { ...base, state: "Running" }, "spec.state"]
]

describe("Pipeline admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(pipeline, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("admits a Job stage's spec as a Job's and a TrainingJob stage's as a TrainingJob's: their defaults and aliases are stored", () => {
    const tune = { name: "tune", kind: "TrainingJob", dependsOn: ["prepare"], spec: { runtime: "platform/trl@1" } }
    const admission = admitSpec(
      pipeline,
      stages({ ...prepare, spec: job({ activeDeadlineSeconds: 600, secrets: ["hf-token"] }) }, tune)
    )
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, {
      stages: [
        {
          ...prepare,
          spec: {
            ...job(),
            ...jobDefaults,
            secrets: [{ name: "hf-token" }],
            timeout: "600s"
          }
        },
        { ...tune, spec: { ...tune.spec, placement: { queueTimeout: "24h" } } }
      ]
    })
  })

  it("folds a TrainingJob stage's aliases and applies its dependent defaults, as a TrainingJob's", () => {
    const tune = {
      name: "tune",
      kind: "TrainingJob",
      spec: { runtime: "platform/trl@1.0.0", resources: { nodes: 2 }, environment: { name: "platform/arith@1.0.0" } }
    }
    const admission = admitSpec(pipeline, stages(tune))
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, {
      stages: [{
        ...tune,
        spec: {
          runtime: "platform/trl@1.0.0",
          environment: { name: "platform/arith@1.0.0", seed: 0 },
          evaluation: { baseline: true, final: true, minComparisonTasks: 16 },
          grading: { maxParallel: 4 },
          distributed: { nodes: 2, startupTimeout: "15m", maxAssemblyRetries: 2 },
          placement: { queueTimeout: "24h" },
          resources: {}
        }
      }]
    })
  })

  it("names the stage kind and its supported values when the kind is unknown", () => {
    const admission = admitSpec(pipeline, stages({ name: "a", kind: "Sweep", spec: job() }))
    assert.deepStrictEqual(
      admission._tag === "Refused" ? admission.causes.map((cause) => `${cause.field}: ${cause.message}`) : admission,
      [
        `spec.stages[0].kind: Unsupported value: "Sweep": supported values: "Job", "TrainingJob"`
      ]
    )
  })

  it("drops an unknown field of a Job stage's spec with a warning under fieldValidation Warn", () => {
    const envelope = Schema.Struct({ spec: pipeline.spec }) as unknown as Schema.Codec<unknown, unknown>
    const result = admit(envelope, { spec: stages({ ...prepare, spec: job({ replicas: 2 }) }) }, "Warn", {
      kind: "pipelines"
    }, "Pipeline")
    assert.isTrue(Result.isSuccess(result))
    if (!Result.isSuccess(result)) return
    assert.deepStrictEqual(result.success.warnings, ["unknown field \"spec.stages[0].spec.replicas\""])
    const stored = (result.success.object["spec"] as { stages: ReadonlyArray<{ spec: JsonObject }> }).stages[0]?.spec
    assert.isUndefined(stored?.["replicas"])
  })

  it("admits every bound at its edge", () => {
    const chain = Array.from(
      { length: 64 },
      (_, i) => ({ name: `s${i}`, kind: "Job", spec: job(), ...(i === 0 ? {} : { dependsOn: [`s${i - 1}`] }) })
    )
    const edges: ReadonlyArray<JsonObject> = [
      stages(...chain),
      stages({ name: "s".repeat(63), kind: "Job", spec: job() }),
      // A diamond: fan out and in, no cycle; evaluate reads prepare's output through train (upstream, not direct).
      stages(
        prepare,
        train,
        { name: "tune", kind: "TrainingJob", dependsOn: ["prepare"], spec: { runtime: "platform/trl@1", mode: "SFT" } },
        {
          name: "evaluate",
          kind: "Job",
          dependsOn: ["train", "tune"],
          spec: job({
            inputs: [{ name: "data", fromStage: { stage: "prepare", output: "shards" } }, {
              name: "adapter",
              fromStage: { stage: "tune", output: "adapter" }
            }]
          })
        }
      ),
      // Every Job collects /platform/outputs as the output named outputs.
      stages(prepare, { ...train, spec: job(fromPrepare("outputs")) })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(pipeline, edge)._tag, "Admitted", JSON.stringify(admitSpec(pipeline, edge)))
    }
  })
})

describe("Pipeline updates", () => {
  it("refuses a change of stages as immutable at spec.stages", () => {
    assert.include(
      updateRefusals(
        pipeline,
        base,
        stages(prepare, { ...train, spec: job({ ...fromPrepare("shards"), completions: 2 }) })
      ).immutable,
      "spec.stages"
    )
    assert.include(updateRefusals(pipeline, base, stages(prepare)).immutable, "spec.stages")
  })

  it("accepts writing the same spec again", () => {
    assert.deepStrictEqual(updateRefusals(pipeline, base, base), { immutable: [], invalid: [] })
  })
})

describe("Pipeline status", () => {
  const envelope = Schema.Struct({ status: pipeline.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "pipelines" }, "Pipeline")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits each stage's progress and refuses an unknown phase", () => {
    assert.deepStrictEqual(
      statusRefusals({
        phase: "Running",
        stages: [
          {
            name: "prepare",
            phase: "Succeeded",
            object: "etl-prepare",
            startTime: "2026-01-02T15:04:05Z",
            completionTime: "2026-01-02T15:14:05Z"
          },
          { name: "train", phase: "Running", object: "etl-train", startTime: "2026-01-02T15:14:06Z" }
        ],
        cost: { totalUSD: "1.20" }
      }),
      []
    )
    assert.include(statusRefusals({ phase: "Waiting" }), "status.phase")
    assert.include(statusRefusals({ stages: [{ phase: "Running" }] }), "status.stages[0].name")
  })
})
