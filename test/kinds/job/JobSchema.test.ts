/**
 * The Job's admission rules (spec: Job, Shared types, Limits), one row per rule: the spec as written, and either the
 * field path admission refuses or what the admitted spec holds. Then its update rules: what may change after create.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { job } from "../../../src/kinds/job/JobSchema.ts"
import { admitSpec, jobDefaults, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { image: "python:3.12", command: ["python", "train.py"] }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["completions below 1", spec({ completions: 0 }), "spec.completions"],
  ["completions above 10000", spec({ completions: 10_001 }), "spec.completions"],
  ["parallelism above 256", spec({ completions: 1_000, parallelism: 257 }), "spec.parallelism"],
  ["parallelism above completions", spec({ completions: 3, parallelism: 4 }), "spec.parallelism"],
  ["backoffLimit above 100", spec({ backoffLimit: 101 }), "spec.backoffLimit"],
  ["negative backoffLimit", spec({ backoffLimit: -1 }), "spec.backoffLimit"],
  ["maxAttempts above 32", spec({ recovery: { maxAttempts: 33 } }), "spec.recovery.maxAttempts"],
  ["maxAttempts below 1", spec({ recovery: { maxAttempts: 0 } }), "spec.recovery.maxAttempts"],
  [
    "checkpoint interval below 1m",
    spec({ recovery: { checkpoint: { interval: "30s" } } }),
    "spec.recovery.checkpoint.interval"
  ],
  [
    "checkpoint interval above 6h",
    spec({ recovery: { checkpoint: { interval: "7h" } } }),
    "spec.recovery.checkpoint.interval"
  ],
  [
    "checkpoint maxSize above 2Ti",
    spec({ recovery: { checkpoint: { maxSize: "3Ti" } } }),
    "spec.recovery.checkpoint.maxSize"
  ],
  [
    "65 checkpoint paths",
    spec({ recovery: { checkpoint: { paths: Array.from({ length: 65 }, (_, i) => `/p/${i}`) } } }),
    "spec.recovery.checkpoint.paths"
  ],
  [
    "a relative checkpoint path",
    spec({ recovery: { checkpoint: { paths: ["state"] } } }),
    "spec.recovery.checkpoint.paths[0]"
  ],
  ["an unknown continuity", spec({ recovery: { continuity: "Sometimes" } }), "spec.recovery.continuity"],
  [
    "a queueTimeout that is not a duration",
    spec({ placement: { queueTimeout: "forever" } }),
    "spec.placement.queueTimeout"
  ],
  ["an unknown interruptible", spec({ placement: { interruptible: "Maybe" } }), "spec.placement.interruptible"],
  ["dedicated false", spec({ placement: { dedicated: false } }), "spec.placement.dedicated"],
  [
    "a maxRateUSDPerHour with 7 decimals",
    spec({ placement: { maxRateUSDPerHour: "1.0000001" } }),
    "spec.placement.maxRateUSDPerHour"
  ],
  [
    "9 gpu types",
    spec({ resources: { gpu: { type: ["a", "b", "c", "d", "e", "f", "g", "h", "i"] } } }),
    "spec.resources.gpu.type"
  ],
  ["no gpu types", spec({ resources: { gpu: { type: [] } } }), "spec.resources.gpu.type"],
  ["3 GPUs per node", spec({ resources: { gpu: { count: 3 } } }), "spec.resources.gpu.count"],
  ["gang of 1", spec({ distributed: { nodes: 1 } }), "spec.distributed.nodes"],
  ["gang of 9 (beta cap 8)", spec({ distributed: { nodes: 9 } }), "spec.distributed.nodes"],
  ["gang of 17", spec({ distributed: { nodes: 17 } }), "spec.distributed.nodes"],
  ["resources.nodes above the beta cap", spec({ resources: { nodes: 9 } }), "spec.resources.nodes"],
  ["totalGPUs 65", spec({ distributed: { totalGPUs: 65 } }), "spec.distributed.totalGPUs"],
  ["nodes and totalGPUs", spec({ distributed: { nodes: 2, totalGPUs: 16 } }), "spec.distributed"],
  ["neither nodes nor totalGPUs", spec({ distributed: { launcher: "Torchrun" } }), "spec.distributed"],
  [
    "gpusPerNode unlike resources.gpu.count",
    spec({ resources: { gpu: { count: 8 } }, distributed: { nodes: 2, gpusPerNode: 4 } }),
    "spec.distributed.gpusPerNode"
  ],
  [
    "startupTimeout below 5m",
    spec({ distributed: { nodes: 2, startupTimeout: "4m" } }),
    "spec.distributed.startupTimeout"
  ],
  [
    "startupTimeout above 60m",
    spec({ distributed: { nodes: 2, startupTimeout: "61m" } }),
    "spec.distributed.startupTimeout"
  ],
  [
    "maxAssemblyRetries 6",
    spec({ distributed: { nodes: 2, maxAssemblyRetries: 6 } }),
    "spec.distributed.maxAssemblyRetries"
  ],
  [
    "initCommand timeout above 30m",
    spec({ initCommand: { command: ["make"], timeout: "31m" } }),
    "spec.initCommand.timeout"
  ],
  ["an empty initCommand", spec({ initCommand: { command: [] } }), "spec.initCommand.command"],
  ["scaledownWindow above 20m", spec({ scaledownWindow: "21m" }), "spec.scaledownWindow"],
  [
    "129 egress hosts",
    spec({
      network: { egress: { policy: "AllowList", allow: Array.from({ length: 129 }, (_, i) => `h${i}.example.com`) } }
    }),
    "spec.network.egress.allow"
  ],
  [
    "egress allow without AllowList",
    spec({ network: { egress: { policy: "Open", allow: ["example.com"] } } }),
    "spec.network.egress.allow"
  ],
  [
    "an egress host that is no DNS name",
    spec({ network: { egress: { policy: "AllowList", allow: ["exa mple"] } } }),
    "spec.network.egress.allow[0]"
  ],
  ["an env name with a dash", spec({ env: [{ name: "MY-VAR", value: "1" }] }), "spec.env[0].name"],
  [
    "an env name with the PLATFORM_ prefix",
    spec({ env: [{ name: "PLATFORM_INDEX", value: "1" }] }),
    "spec.env[0].name"
  ],
  [
    "env value and valueFrom",
    spec({ env: [{ name: "A", value: "1", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }),
    "spec.env[0].valueFrom"
  ],
  [
    "a secretKeyRef without key",
    spec({ env: [{ name: "A", valueFrom: { secretKeyRef: { name: "s" } } }] }),
    "spec.env[0].valueFrom.secretKeyRef.key"
  ],
  [
    "9 inputs",
    spec({ inputs: Array.from({ length: 9 }, (_, i) => ({ name: `in${i}`, volume: { name: "v" } })) }),
    "spec.inputs"
  ],
  [
    "an input name starting with a digit",
    spec({ inputs: [{ name: "1data", volume: { name: "v" } }] }),
    "spec.inputs[0].name"
  ],
  [
    "an input with two forms",
    spec({ inputs: [{ name: "data", volume: { name: "v" }, url: { url: "https://x/y", sha256: "a".repeat(64) } }] }),
    "spec.inputs[0]"
  ],
  ["an input with no form", spec({ inputs: [{ name: "data" }] }), "spec.inputs[0]"],
  [
    "an http url input",
    spec({ inputs: [{ name: "data", url: { url: "http://x/y", sha256: "a".repeat(64) } }] }),
    "spec.inputs[0].url.url"
  ],
  [
    "a url input without sha256",
    spec({ inputs: [{ name: "data", url: { url: "https://x/y" } }] }),
    "spec.inputs[0].url.sha256"
  ],
  [
    "a bucket uri that is not s3",
    spec({ inputs: [{ name: "data", bucket: { uri: "gs://b/k", connection: "c" } }] }),
    "spec.inputs[0].bucket.uri"
  ],
  [
    "two inputs with one name",
    spec({ inputs: [{ name: "data", volume: { name: "v" } }, { name: "data", volume: { name: "w" } }] }),
    "spec.inputs[1]"
  ],
  [
    "33 outputs",
    spec({ outputs: Array.from({ length: 33 }, (_, i) => ({ name: `out${i}`, path: "/out" })) }),
    "spec.outputs"
  ],
  ["an output name with capitals", spec({ outputs: [{ name: "Model", path: "/out" }] }), "spec.outputs[0].name"],
  [
    "an output with the platform. prefix",
    spec({ outputs: [{ name: "platform.logs", path: "/out" }] }),
    "spec.outputs[0].name"
  ],
  ["a relative output path", spec({ outputs: [{ name: "model", path: "out" }] }), "spec.outputs[0].path"],
  [
    "an output sink without table",
    spec({ outputs: [{ name: "rows", path: "/out.csv", sink: { connection: "db" } }] }),
    "spec.outputs[0].sink.table"
  ],
  ["two sidecars with one name", spec({ sidecars: [{ name: "log" }, { name: "log" }] }), "spec.sidecars[1]"],
  [
    "a volume mounted over /etc",
    spec({ volumes: [{ volume: "v", mountPath: "/etc/app" }] }),
    "spec.volumes[0].mountPath"
  ],
  [
    "a volume revision without readOnly",
    spec({ volumes: [{ volume: "v", mountPath: "/data", revision: 3 }] }),
    "spec.volumes[0].revision"
  ],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "ten" }), "spec.maxCostUSD"],
  ["a negative maxCostUSD", spec({ maxCostUSD: "-1" }), "spec.maxCostUSD"],
  ["an unknown state", spec({ state: "Paused" }), "spec.state"],
  ["a timeout that is not a duration", spec({ timeout: "1 day" }), "spec.timeout"],
  [
    "timeout and activeDeadlineSeconds",
    spec({ timeout: "1h", activeDeadlineSeconds: 60 }),
    "spec.activeDeadlineSeconds"
  ],
  ["no image and no imageRef", { command: ["x"] }, "spec.image"],
  ["image and imageRef", spec({ imageRef: "my-image" }), "spec.imageRef"],
  ["completeByTime that is not RFC 3339", spec({ completeByTime: "tomorrow" }), "spec.completeByTime"],
  ["an unknown field", spec({ replicas: 3 }), "spec.replicas"],
  ["an unknown nested field", spec({ recovery: { retries: 3 } }), "spec.recovery.retries"]
]

describe("Job admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(job, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states (and nodus's own), visible on read", () => {
    const admission = admitSpec(job, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, { ...base, ...jobDefaults })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        completions: 10_000,
        parallelism: 256,
        backoffLimit: 100,
        recovery: {
          maxAttempts: 32,
          checkpoint: { interval: "6h", maxSize: "2Ti", paths: Array.from({ length: 64 }, (_, i) => `/p/${i}`) }
        }
      }),
      spec({
        completions: 1,
        parallelism: 1,
        backoffLimit: 0,
        recovery: { maxAttempts: 1, checkpoint: { interval: "1m" } }
      }),
      spec({
        recovery: { checkpoint: { interval: "auto" } },
        placement: { queueTimeout: "0s" },
        scaledownWindow: "20m"
      }),
      spec({ distributed: { nodes: 8, startupTimeout: "60m", maxAssemblyRetries: 5 } }),
      spec({
        distributed: { totalGPUs: 64, gpusPerNode: 8, startupTimeout: "5m", maxAssemblyRetries: 0 },
        resources: { gpu: { count: 8 } }
      }),
      spec({
        initCommand: { command: ["make"], timeout: "30m" },
        resources: { gpu: { type: ["a", "b", "c", "d", "e", "f", "g", "h"] } }
      }),
      spec({
        inputs: Array.from({ length: 8 }, (_, i) => ({ name: `in${i}`, volume: { name: "v" } })),
        outputs: Array.from({ length: 32 }, (_, i) => ({ name: `out${i}`, path: "/out" }))
      }),
      spec({
        network: {
          egress: { policy: "AllowList", allow: Array.from({ length: 128 }, (_, i) => `*.h${i}.example.com`) }
        }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(job, edge)._tag, "Admitted", JSON.stringify(admitSpec(job, edge)))
    }
  })

  it("folds activeDeadlineSeconds into timeout and resources.nodes into distributed.nodes, with the gang's defaults", () => {
    const admission = admitSpec(job, spec({ activeDeadlineSeconds: 3600, resources: { nodes: 4, gpu: { count: 8 } } }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.strictEqual(admission.spec["timeout"], "3600s")
    assert.isUndefined(admission.spec["activeDeadlineSeconds"])
    assert.deepStrictEqual(admission.spec["resources"], { gpu: { count: 8 } })
    assert.deepStrictEqual(admission.spec["distributed"], { nodes: 4, startupTimeout: "15m", maxAssemblyRetries: 2 })
    assert.strictEqual((admission.spec["recovery"] as { checkpoint: { format: string } }).checkpoint.format, "Dcp")
  })

  it("accepts a bare Secret name and stores the object form", () => {
    const admission = admitSpec(job, spec({ secrets: ["hf-token", { name: "wandb", version: 3 }] }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec["secrets"], [{ name: "hf-token" }, { name: "wandb", version: 3 }])
    }
  })

  it("keeps a format the caller chose", () => {
    const admission = admitSpec(
      job,
      spec({ distributed: { nodes: 2 }, recovery: { checkpoint: { format: "Snapshot" } } })
    )
    assert.strictEqual(
      admission._tag === "Admitted" &&
        (admission.spec["recovery"] as { checkpoint: { format: string } }).checkpoint.format,
      "Snapshot"
    )
  })
})

describe("Job updates", () => {
  const created = spec({ completions: 10, parallelism: 2, maxCostUSD: "10.00", recovery: { maxAttempts: 3 } })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  /** Changes the spec lists as mutable (spec: Job, Immutability), each accepted. */
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["parallelism", { parallelism: 5 }],
    ["backoffLimit", { backoffLimit: 3 }],
    ["timeout", { timeout: "2h" }],
    ["maxCostUSD raised", { maxCostUSD: "25" }],
    ["recovery.maxAttempts", { recovery: { maxAttempts: 10 } }],
    ["recovery.checkpoint.interval", { recovery: { maxAttempts: 3, checkpoint: { interval: "10m" } } }],
    ["recovery.checkpoint.retainAfterFinish", {
      recovery: { maxAttempts: 3, checkpoint: { retainAfterFinish: "24h" } }
    }],
    ["ttlSecondsAfterFinished", { ttlSecondsAfterFinished: 600 }],
    ["state", { state: "Suspended" }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(job, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["image", { image: "python:3.13" }, "spec.image"],
    ["command", { command: ["python", "other.py"] }, "spec.command"],
    ["completions", { completions: 20 }, "spec.completions"],
    ["env", { env: [{ name: "A", value: "1" }] }, "spec.env"],
    ["placement.queueTimeout", { placement: { queueTimeout: "1h" } }, "spec.placement.queueTimeout"],
    ["recovery.continuity", { recovery: { maxAttempts: 3, continuity: "Ephemeral" } }, "spec.recovery.continuity"],
    [
      "recovery.checkpoint.paths",
      { recovery: { maxAttempts: 3, checkpoint: { paths: ["/other"] } } },
      "spec.recovery.checkpoint.paths"
    ]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(job, created, changed(fields)).immutable, path)
    })
  }

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(job, created, changed({ maxCostUSD: "9.99" })).invalid, ["spec.maxCostUSD"])
    assert.deepStrictEqual(updateRefusals(job, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(job, created, uncapped).invalid, [])
  })

  it("keeps a Cancelled Job cancelled: state cannot move back to Running or Suspended", () => {
    const cancelled = changed({ state: "Cancelled" })
    assert.deepStrictEqual(updateRefusals(job, created, cancelled), { immutable: [], invalid: [] })
    for (const state of ["Running", "Suspended"]) {
      assert.deepStrictEqual(updateRefusals(job, cancelled, changed({ state })).invalid, ["spec.state"], state)
    }
    assert.deepStrictEqual(updateRefusals(job, cancelled, changed({ state: "Cancelled", parallelism: 1 })).invalid, [])
  })
})
