/**
 * The Sweep's admission rules (spec: Sweep, Limits), one row per rule: the spec as written, and either the field path
 * admission refuses or what the admitted spec holds. Then its update rules: only maxParallel, maxCostUSD (raise only)
 * and state may change after create.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { sweep } from "../../../src/kinds/sweep/SweepSchema.ts"
import { admitSpec, jobDefaults, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const jobTemplate = { kind: "Job", spec: { image: "python:3.12", command: ["python", "bench.py"] } }
const trainingTemplate = {
  kind: "TrainingJob",
  spec: { runtime: "platform/trl@0.19.0", model: { uri: "hf://Qwen/Qwen3-0.6B" } }
}
const base = { template: jobTemplate }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const training = (fields: JsonObject): JsonObject => ({ template: trainingTemplate, ...fields })
const withJob = (fields: JsonObject): JsonObject => ({
  template: { kind: "Job", spec: { ...jobTemplate.spec, ...fields } }
})
const withTraining = (fields: JsonObject): JsonObject => ({
  template: { kind: "TrainingJob", spec: { ...trainingTemplate.spec, ...fields } }
})
const names = (count: number): JsonObject =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`p${i}`, ["1"]]))
const values = (count: number): ReadonlyArray<string> => Array.from({ length: count }, (_, i) => `${i}`)
const gpus = (count: number): ReadonlyArray<JsonObject> => Array.from({ length: count }, () => ({ count: 1 }))

/** Rows whose spec is refused, with the field a cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["maxParallel below 1", spec({ maxParallel: 0 }), "spec.maxParallel"],
  ["maxParallel above 256", spec({ maxParallel: 257 }), "spec.maxParallel"],
  ["repetitions below 1", spec({ repetitions: 0 }), "spec.repetitions"],
  ["repetitions above 64", spec({ repetitions: 65 }), "spec.repetitions"],
  ["an unknown state", spec({ state: "Paused" }), "spec.state"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "ten" }), "spec.maxCostUSD"],
  ["a negative maxCostUSD", spec({ maxCostUSD: "-1" }), "spec.maxCostUSD"],
  ["17 gpu values", spec({ matrix: { gpu: gpus(17) } }), "spec.matrix.gpu"],
  ["a gpu value with 3 GPUs per node", spec({ matrix: { gpu: [{ count: 3 }] } }), "spec.matrix.gpu[0].count"],
  [
    "a gpu value with 9 types",
    spec({ matrix: { gpu: [{ type: ["a", "b", "c", "d", "e", "f", "g", "h", "i"] }] } }),
    "spec.matrix.gpu[0].type"
  ],
  ["17 param names", spec({ matrix: { params: names(17) } }), "spec.matrix.params"],
  ["65 values of one param", spec({ matrix: { params: { lr: values(65) } } }), "spec.matrix.params.lr"],
  ["an empty param name", spec({ matrix: { params: { "": ["1"] } } }), "spec.matrix.params[]"],
  [
    "a Job param name that is no env suffix",
    spec({ matrix: { params: { "learning-rate": ["1"] } } }),
    "spec.matrix.params.learning-rate"
  ],
  [
    "a TrainingJob param value that is not JSON",
    training({ matrix: { params: { "optimizer.lr": ["1e-4", "fast"] } } }),
    "spec.matrix.params[optimizer.lr][1]"
  ],
  ["a region that widens the template's regions", {
    ...withJob({ placement: { regions: ["us", "eu"] } }),
    matrix: { regions: ["eu", "asia"] }
  }, "spec.matrix.regions[1]"],
  ["a gpu count unlike the template's gpusPerNode", {
    ...withJob({ distributed: { nodes: 2, gpusPerNode: 8 } }),
    matrix: { gpu: [{ count: 8 }, { count: 4 }] }
  }, "spec.matrix.gpu[1].count"],
  ["a TrainingJob gpu count unlike the template's gpusPerNode", {
    ...withTraining({ distributed: { nodes: 2, gpusPerNode: 8 } }),
    matrix: { gpu: [{ count: 4 }] }
  }, "spec.matrix.gpu[0].count"],
  ["no template", { maxParallel: 2 }, "spec.template"],
  [
    "a template kind that is neither Job nor TrainingJob",
    { template: { kind: "Pod", spec: {} } },
    "spec.template.kind"
  ],
  ["a template without kind", { template: { spec: jobTemplate.spec } }, "spec.template.kind"],
  ["a Job template without image", { template: { kind: "Job", spec: { command: ["x"] } } }, "spec.template.spec.image"],
  ["a Job template with completions 0", withJob({ completions: 0 }), "spec.template.spec.completions"],
  [
    "a Job template with parallelism above completions",
    withJob({ completions: 2, parallelism: 3 }),
    "spec.template.spec.parallelism"
  ],
  ["a Job template with a TrainingJob field", withJob({ runtime: "trl" }), "spec.template.spec.runtime"],
  [
    "a Job template with an unknown interruptible",
    withJob({ placement: { interruptible: "Maybe" } }),
    "spec.template.spec.placement.interruptible"
  ],
  [
    "a TrainingJob template without runtime",
    { template: { kind: "TrainingJob", spec: { model: { uri: "hf://x" } } } },
    "spec.template.spec.runtime"
  ],
  ["a TrainingJob template with a Job-only field", withTraining({ completions: 4 }), "spec.template.spec.completions"],
  [
    "a TrainingJob template with grading above 32",
    withTraining({ grading: { maxParallel: 33 } }),
    "spec.template.spec.grading.maxParallel"
  ],
  [
    "a template community that is not a bool",
    withJob({ placement: { community: "yes" } }),
    "spec.template.spec.placement.community"
  ],
  ["an unknown field", spec({ replicas: 3 }), "spec.replicas"],
  ["an unknown matrix dimension", spec({ matrix: { nodes: [1, 2] } }), "spec.matrix.nodes"]
]

describe("Sweep admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(sweep, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, and the template's own, visible on read", () => {
    const admission = admitSpec(sweep, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      matrix: {},
      maxParallel: 4,
      repetitions: 1,
      state: "Running",
      template: {
        kind: "Job",
        spec: { ...jobTemplate.spec, ...jobDefaults }
      }
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        maxParallel: 256,
        repetitions: 64,
        matrix: {
          gpu: gpus(16),
          params: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`P_${i}`, values(64)]))
        }
      }),
      spec({
        maxParallel: 1,
        repetitions: 1,
        maxCostUSD: "0.000001",
        state: "Cancelled",
        matrix: { gpu: [], params: { lr: [] }, regions: [] }
      }),
      { ...withJob({ placement: { regions: ["us", "eu"], community: true } }), matrix: { regions: ["us", "eu"] } },
      spec({ matrix: { regions: ["asia"] } }),
      {
        ...withJob({ distributed: { nodes: 2, gpusPerNode: 8 } }),
        matrix: { gpu: [{ count: 8, type: ["H100"] }, { type: ["A100"] }] }
      },
      training({
        state: "Suspended",
        matrix: { params: { "optimizer.lr": ["1e-4", "0.001"], "lora": ["{\"r\": 16}", "null", "\"text\""] } }
      }),
      withTraining({
        placement: { community: true },
        environment: { name: "platform/gsm8k@1.0.0" },
        grading: { maxParallel: 32 }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(sweep, edge)._tag, "Admitted", JSON.stringify(admitSpec(sweep, edge)))
    }
  })

  it("normalizes a Job template as a Job: activeDeadlineSeconds folds into timeout, bare secrets become objects", () => {
    const admission = admitSpec(
      sweep,
      withJob({ activeDeadlineSeconds: 600, secrets: ["hf-token"], resources: { nodes: 2 } })
    )
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    const template = admission.spec["template"] as { spec: JsonObject }
    assert.strictEqual(template.spec["timeout"], "600s")
    assert.isUndefined(template.spec["activeDeadlineSeconds"])
    assert.deepStrictEqual(template.spec["secrets"], [{ name: "hf-token" }])
    assert.deepStrictEqual(template.spec["distributed"], { nodes: 2, startupTimeout: "15m", maxAssemblyRetries: 2 })
  })

  it("normalizes a TrainingJob template as a TrainingJob: evaluation and grading defaults with an environment", () => {
    const admission = admitSpec(sweep, withTraining({ environment: { name: "gsm8k@1.2.3" } }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec["template"], {
      kind: "TrainingJob",
      spec: {
        ...trainingTemplate.spec,
        environment: { name: "gsm8k@1.2.3", seed: 0 },
        evaluation: { baseline: true, final: true, minComparisonTasks: 16 },
        grading: { maxParallel: 4 },
        placement: { queueTimeout: "24h" }
      }
    })
  })
})

describe("Sweep status", () => {
  const statusCauses = (status: Json): ReadonlyArray<string> => {
    const result = admit(Schema.Struct({ status: sweep.status }), { status }, "Strict", { kind: "sweeps" }, "Sweep")
    return result._tag === "Failure" ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("accepts what the controller reports", () => {
    assert.deepStrictEqual(
      statusCauses({
        best: { byCost: 0, byThroughput: 1 },
        cells: [{
          index: 0,
          repetition: 0,
          gpu: { count: 1, type: ["H100"] },
          region: "us",
          params: { lr: "0.1" },
          object: "s-0-0",
          phase: "Succeeded",
          wallSeconds: 61,
          costUSD: "0.42",
          unitsPerSecond: "1250.5"
        }],
        phase: "Suspended",
        reason: "MaxCostReached",
        templateETags: ["\"abc\""],
        cost: { totalUSD: "1.00" }
      }),
      []
    )
  })

  it("refuses a phase, a cell phase and a cost outside their grammars", () => {
    assert.include(statusCauses({ phase: "Paused" }), "status.phase")
    assert.include(statusCauses({ cells: [{ phase: "Done" }] }), "status.cells[0].phase")
    assert.include(statusCauses({ cells: [{ costUSD: "1.1234567" }] }), "status.cells[0].costUSD")
  })
})

describe("Sweep updates", () => {
  const created = spec({ maxParallel: 4, maxCostUSD: "100", matrix: { params: { LR: ["0.1", "0.01"] } } })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  /** Changes the spec lists as mutable (spec: Sweep), each accepted. */
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["maxParallel", { maxParallel: 16 }],
    ["maxCostUSD raised", { maxCostUSD: "150.5" }],
    ["state", { state: "Suspended" }],
    ["state to the cancel state", { state: "Cancelled" }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(sweep, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  it("refuses leaving the cancel state at spec.state", () => {
    for (const state of ["Running", "Suspended"]) {
      assert.deepStrictEqual(updateRefusals(sweep, changed({ state: "Cancelled" }), changed({ state })).invalid, [
        "spec.state"
      ], state)
    }
  })

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["repetitions", { repetitions: 3 }, "spec.repetitions"],
    ["matrix.params", { matrix: { params: { LR: ["0.5"] } } }, "spec.matrix.params.LR"],
    ["matrix.regions", { matrix: { params: { LR: ["0.1", "0.01"] }, regions: ["us"] } }, "spec.matrix.regions"],
    [
      "template.spec.image",
      { template: { kind: "Job", spec: { ...jobTemplate.spec, image: "python:3.13" } } },
      "spec.template.spec.image"
    ],
    ["template.spec.parallelism", {
      template: { kind: "Job", spec: { ...jobTemplate.spec, parallelism: 1, completions: 2 } }
    }, "spec.template.spec.completions"],
    ["template.kind", { template: trainingTemplate }, "spec.template.kind"]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(sweep, created, changed(fields)).immutable, path)
    })
  }

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(sweep, created, changed({ maxCostUSD: "99.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(sweep, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(sweep, created, uncapped).invalid, [])
  })
})
