/**
 * The TrainingJob's admission rules (spec: TrainingJob, Shared types, Limits), one row per rule: the spec as written,
 * and either the field path admission refuses or what the admitted spec holds. Then its status grammar, and its update
 * rules (nodus: it compiles once to a Job, so only state, maxCostUSD raised and grading.maxParallel may change).
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { trainingJob } from "../../../src/kinds/trainingjob/TrainingJobSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { runtime: "platform/trl@0.19.0", model: { uri: "hf://Qwen/Qwen3-0.6B" } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const environment = { name: "platform/gsm8k@1.0.0" }

/** Rows whose spec is refused, with the field a cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no runtime", { model: base.model }, "spec.runtime"],
  ["a runtime that is no reference", spec({ runtime: "TRL runtime" }), "spec.runtime"],
  ["a runtime in another namespace form", spec({ runtime: "acme/trl@1" }), "spec.runtime"],
  ["a runtime name that is no object name (empty label)", spec({ runtime: "platform/trl..x@1" }), "spec.runtime"],
  ["an empty mode", spec({ mode: "" }), "spec.mode"],
  ["an empty task", spec({ task: "" }), "spec.task"],
  ["parameters that are no object", spec({ parameters: "lr=1e-4" }), "spec.parameters"],
  ["an unknown state", spec({ state: "Paused" }), "spec.state"],
  ["a model with uri and volume", spec({ model: { uri: "hf://x", volume: { name: "weights" } } }), "spec.model"],
  ["a model with neither uri nor volume", spec({ model: { secret: "hf-token" } }), "spec.model"],
  ["a model volume without name", spec({ model: { volume: { revision: 2 } } }), "spec.model.volume.name"],
  [
    "a model volume revision 0",
    spec({ model: { volume: { name: "weights", revision: 0 } } }),
    "spec.model.volume.revision"
  ],
  ["a teacher with uri and volume", spec({ teacher: { uri: "hf://t", volume: { name: "t" } } }), "spec.teacher"],
  ["data without volume", spec({ data: { path: "train.jsonl" } }), "spec.data.volume"],
  ["an unknown data format", spec({ data: { volume: "d", format: "Parquet" } }), "spec.data.format"],
  ["a data revision 0", spec({ data: { volume: "d", revision: 0 } }), "spec.data.revision"],
  [
    "a column role the spec does not name",
    spec({ data: { volume: "d", columns: { answer: "a" } } }),
    "spec.data.columns.answer"
  ],
  ["an empty column name", spec({ data: { volume: "d", columns: { prompt: "" } } }), "spec.data.columns.prompt"],
  ["validationFraction 0", spec({ data: { volume: "d", validationFraction: "0" } }), "spec.data.validationFraction"],
  [
    "validationFraction 0.0",
    spec({ data: { volume: "d", validationFraction: "0.0" } }),
    "spec.data.validationFraction"
  ],
  ["validationFraction 1", spec({ data: { volume: "d", validationFraction: "1" } }), "spec.data.validationFraction"],
  [
    "validationFraction 1.5",
    spec({ data: { volume: "d", validationFraction: "1.5" } }),
    "spec.data.validationFraction"
  ],
  [
    "validationFraction as a number",
    spec({ data: { volume: "d", validationFraction: 0.1 } }),
    "spec.data.validationFraction"
  ],
  ["an environment without name", spec({ environment: { trainTasks: 10 } }), "spec.environment.name"],
  ["an environment name without version", spec({ environment: { name: "gsm8k" } }), "spec.environment.name"],
  [
    "an environment version that is not SemVer",
    spec({ environment: { name: "platform/gsm8k@1.0" } }),
    "spec.environment.name"
  ],
  [
    "an environment name that is no object name",
    spec({ environment: { name: "gsm..8k@1.0.0" } }),
    "spec.environment.name"
  ],
  [
    "an environment of another publisher prefix",
    spec({ environment: { name: "acme/gsm8k@1.0.0" } }),
    "spec.environment.name"
  ],
  ["negative trainTasks", spec({ environment: { ...environment, trainTasks: -1 } }), "spec.environment.trainTasks"],
  [
    "heldOutTasks beyond int32",
    spec({ environment: { ...environment, heldOutTasks: 2_147_483_648 } }),
    "spec.environment.heldOutTasks"
  ],
  ["a fractional seed", spec({ environment: { ...environment, seed: 1.5 } }), "spec.environment.seed"],
  [
    "minComparisonTasks below 16",
    spec({ evaluation: { minComparisonTasks: 15 } }),
    "spec.evaluation.minComparisonTasks"
  ],
  ["a baseline that is no bool", spec({ evaluation: { baseline: "yes" } }), "spec.evaluation.baseline"],
  ["grading maxParallel above 32", spec({ grading: { maxParallel: 33 } }), "spec.grading.maxParallel"],
  ["grading maxParallel below 1", spec({ grading: { maxParallel: 0 } }), "spec.grading.maxParallel"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "ten" }), "spec.maxCostUSD"],
  ["an expectedDuration that is not a duration", spec({ expectedDuration: "2 hours" }), "spec.expectedDuration"],
  ["exportTo without volume", spec({ exportTo: {} }), "spec.exportTo.volume"],
  ["a tracking server without uri", spec({ tracking: { server: { experiment: "e" } } }), "spec.tracking.server.uri"],
  [
    "a tracking connection without connection",
    spec({ tracking: { fromConnection: {} } }),
    "spec.tracking.fromConnection.connection"
  ],
  ["an unknown tracker", spec({ tracking: { wandb: { project: "p" } } }), "spec.tracking.wandb"],
  ["a gang of 9 (beta cap 8)", spec({ distributed: { nodes: 9 } }), "spec.distributed.nodes"],
  ["nodes and totalGPUs", spec({ distributed: { nodes: 2, totalGPUs: 16 } }), "spec.distributed"],
  [
    "gpusPerNode unlike resources.gpu.count",
    spec({ resources: { gpu: { count: 8 } }, distributed: { nodes: 2, gpusPerNode: 4 } }),
    "spec.distributed.gpusPerNode"
  ],
  [
    "resources.nodes and distributed",
    spec({ resources: { nodes: 2 }, distributed: { nodes: 2 } }),
    "spec.resources.nodes"
  ],
  ["resources.nodes above the beta cap", spec({ resources: { nodes: 9 } }), "spec.resources.nodes"],
  ["3 GPUs per node", spec({ resources: { gpu: { count: 3 } } }), "spec.resources.gpu.count"],
  [
    "community placement (only a Sweep template takes it)",
    spec({ placement: { community: true } }),
    "spec.placement.community"
  ],
  ["an unknown interruptible", spec({ placement: { interruptible: "Maybe" } }), "spec.placement.interruptible"],
  ["a Job field", spec({ image: "python:3.12" }), "spec.image"],
  ["an unknown nested field", spec({ data: { volume: "d", shuffle: true } }), "spec.data.shuffle"]
]

describe("TrainingJob admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(trainingJob, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(trainingJob, spec({ data: { volume: "d" }, environment }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      ...base,
      data: { volume: "d", format: "Auto", validationFraction: "0.05" },
      environment: { ...environment, seed: 0 },
      evaluation: { baseline: true, final: true, minComparisonTasks: 16 },
      grading: { maxParallel: 4 },
      placement: { queueTimeout: "24h" }
    })
  })

  it("leaves evaluation and grading unset without an environment", () => {
    const admission = admitSpec(trainingJob, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec, { ...base, placement: { queueTimeout: "24h" } })
    }
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ grading: { maxParallel: 32 }, evaluation: { minComparisonTasks: 16, baseline: false, final: false } }),
      spec({ grading: { maxParallel: 1 }, evaluation: { minComparisonTasks: 10_000 } }),
      spec({
        data: {
          volume: "d",
          path: "sets/train.jsonl",
          revision: 1,
          format: "CSV",
          validationFraction: "0.999999",
          columns: { prompt: "q", completion: "a", chosen: "c", rejected: "r", text: "t" }
        }
      }),
      spec({ data: { volume: "d", validationFraction: ".5" } }),
      spec({
        environment: { name: "gsm8k@1.2.3-rc.1+build.5", trainTasks: 0, heldOutTasks: 2_147_483_647, seed: -42 }
      }),
      spec({ environment: { name: "platform/swe.bench@10.0.0", seed: 9_007_199_254_740_991 } }),
      spec({
        runtime: "my-runtime",
        model: { volume: { name: "weights", revision: 3 } },
        teacher: { uri: "hf://big", secret: "hf-token" }
      }),
      spec({
        runtime: "platform/verl",
        mode: "GRPO",
        task: "CausalLM",
        parameters: { lr: 0.0001, lora: { r: 16 } },
        state: "Suspended"
      }),
      spec({
        tracking: {
          server: { uri: "https://mlflow.example.com", experiment: "e", secret: "mlflow" },
          fromConnection: { connection: "wandb" }
        }
      }),
      spec({
        distributed: { nodes: 8, gpusPerNode: 8, launcher: "Verl" },
        resources: { gpu: { count: 8, type: ["H100"] } },
        maxCostUSD: "250.000001",
        expectedDuration: "6h",
        exportTo: { volume: "out" }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(trainingJob, edge)._tag, "Admitted", JSON.stringify(admitSpec(trainingJob, edge)))
    }
  })

  it("stores resources.nodes above 1 as distributed.nodes, with the gang's defaults", () => {
    const admission = admitSpec(trainingJob, spec({ resources: { nodes: 4, gpu: { count: 8 } } }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec["resources"], { gpu: { count: 8 } })
    assert.deepStrictEqual(admission.spec["distributed"], { nodes: 4, startupTimeout: "15m", maxAssemblyRetries: 2 })
  })
})

describe("TrainingJob status", () => {
  const statusCauses = (status: Json): ReadonlyArray<string> => {
    const result = admit(
      Schema.Struct({ status: trainingJob.status }),
      { status },
      "Strict",
      { kind: "trainingjobs" },
      "TrainingJob"
    )
    return result._tag === "Failure" ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }
  const summary = { tasks: 50, passed: 20, passRate: "0.4", meanReward: "-0.125", errors: 1, inProgress: 0 }

  it("accepts what the controller reports", () => {
    assert.deepStrictEqual(
      statusCauses({
        compiledJob: { image: "registry/trl@sha256:" + "a".repeat(64), command: ["trl", "sft"] },
        job: "tj-1",
        phase: "Running",
        metrics: {
          step: 10,
          totalSteps: 100,
          loss: "1.2345",
          tokensPerSecond: "5120.5",
          gpuMemoryBytes: 40_000_000_000
        },
        outputs: [{ name: "results.json", sizeBytes: 1024 }],
        progress: { stage: "Evaluating" },
        provenance: {
          environmentDigest: "sha256:x",
          managed: true,
          modelRevision: "b".repeat(40),
          parametersSHA256: "c".repeat(64),
          runtimeDigest: "sha256:y"
        },
        diagnostics: { rewardSignal: "Varied", weightsChanged: true },
        summary: {
          baseline: summary,
          evaluation: { ...summary, passed: 30, passRate: "0.6" },
          comparison: {
            comparable: true,
            measurable: true,
            reason: "Comparable",
            note: "Like for like.",
            changePP: "20",
            resolutionPP: "2"
          }
        }
      }),
      []
    )
  })

  const refusedStatus: ReadonlyArray<readonly [string, Json, string]> = [
    ["an unknown stage", { progress: { stage: "Warmup" } }, "status.progress.stage"],
    [
      "an unknown comparison reason",
      { summary: { comparison: { reason: "Noisy" } } },
      "status.summary.comparison.reason"
    ],
    ["a loss that is no decimal string", { metrics: { loss: 1.5 } }, "status.metrics.loss"],
    [
      "a passRate that is no decimal",
      { summary: { baseline: { passRate: "40%" } } },
      "status.summary.baseline.passRate"
    ],
    ["an unknown phase", { phase: "Training" }, "status.phase"],
    ["a compiled Job without image", { compiledJob: { command: ["x"] } }, "status.compiledJob.image"]
  ]

  for (const [rule, status, field] of refusedStatus) {
    it(`refuses ${rule} at ${field}`, () => {
      assert.include(statusCauses(status), field)
    })
  }
})

describe("TrainingJob updates", () => {
  const created = spec({ maxCostUSD: "50", environment, data: { volume: "d" } })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["state", { state: "Suspended" }],
    ["maxCostUSD raised", { maxCostUSD: "75" }],
    ["grading.maxParallel", { grading: { maxParallel: 16 } }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(trainingJob, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["runtime", { runtime: "platform/verl@0.4.0" }, "spec.runtime"],
    ["model.uri", { model: { uri: "hf://Qwen/Qwen3-8B" } }, "spec.model.uri"],
    ["data.volume", { data: { volume: "other" } }, "spec.data.volume"],
    ["environment.name", { environment: { name: "platform/gsm8k@1.1.0" } }, "spec.environment.name"],
    ["evaluation.minComparisonTasks", { evaluation: { minComparisonTasks: 32 } }, "spec.evaluation.minComparisonTasks"],
    ["placement.queueTimeout", { placement: { queueTimeout: "1h" } }, "spec.placement.queueTimeout"],
    ["expectedDuration", { expectedDuration: "1h" }, "spec.expectedDuration"]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(trainingJob, created, changed(fields)).immutable, path)
    })
  }

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(trainingJob, created, changed({ maxCostUSD: "49.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(trainingJob, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(trainingJob, created, uncapped).invalid, [])
  })
})
