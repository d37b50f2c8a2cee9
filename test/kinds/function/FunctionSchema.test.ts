/**
 * The Function's admission rules (spec: Function, Shared types, Limits), one row per rule: the spec as written, and
 * either the field path admission refuses or what the admitted spec holds. Then its update rules: every field may
 * change after create, and maxCostUSD only rises.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { functionKind } from "../../../src/kinds/function/FunctionSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { image: "python:3.12-slim", code: { module: "app.handlers", qualname: "embed" } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const blob = `sha256:${"a".repeat(64)}`
const methods = (count: number) => Array.from({ length: count }, (_, i) => `m${i}`)

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  // code
  ["no code", { image: "python:3.12" }, "spec.code"],
  ["code without module", spec({ code: { qualname: "embed" } }), "spec.code.module"],
  [
    "a module that is not a dotted Python name",
    spec({ code: { module: "app/handlers", qualname: "embed" } }),
    "spec.code.module"
  ],
  [
    "a qualname that is not a dotted Python name",
    spec({ code: { module: "app", qualname: "embed()" } }),
    "spec.code.qualname"
  ],
  ["neither qualname nor cls", spec({ code: { module: "app" } }), "spec.code"],
  [
    "qualname and cls",
    spec({ code: { module: "app", qualname: "embed", cls: { name: "Model", methods: ["run"] } } }),
    "spec.code"
  ],
  [
    "a code blob that is not a content address",
    spec({ code: { module: "app", qualname: "embed", blob: "sha256:abc" } }),
    "spec.code.blob"
  ],
  ["a class without methods", spec({ code: { module: "app", cls: { name: "Model" } } }), "spec.code.cls.methods"],
  [
    "a class with an empty method list",
    spec({ code: { module: "app", cls: { name: "Model", methods: [] } } }),
    "spec.code.cls.methods"
  ],
  [
    "129 class methods",
    spec({ code: { module: "app", cls: { name: "Model", methods: methods(129) } } }),
    "spec.code.cls.methods"
  ],
  [
    "a method that is not an identifier",
    spec({ code: { module: "app", cls: { name: "Model", methods: ["run-fast"] } } }),
    "spec.code.cls.methods[0]"
  ],
  [
    "a method named twice",
    spec({ code: { module: "app", cls: { name: "Model", methods: ["run", "run"] } } }),
    "spec.code.cls.methods[1]"
  ],
  ["a class without name", spec({ code: { module: "app", cls: { methods: ["run"] } } }), "spec.code.cls.name"],
  [
    "an unknown code field",
    spec({ code: { module: "app", qualname: "embed", entrypoint: "main" } }),
    "spec.code.entrypoint"
  ],
  // python
  ["python 3.9", spec({ python: "3.9" }), "spec.python"],
  ["python 3.14", spec({ python: "3.14" }), "spec.python"],
  ["python as a number", spec({ python: 3.12 }), "spec.python"],
  // cluster (Beta)
  [
    "a cluster launcher other than Plain",
    spec({ cluster: { size: 2, launcher: "Torchrun" } }),
    "spec.cluster.launcher"
  ],
  ["an unknown cluster network", spec({ cluster: { size: 2, network: "Local" } }), "spec.cluster.network"],
  ["an unknown cluster transport", spec({ cluster: { size: 2, transport: "Relayed" } }), "spec.cluster.transport"],
  ["a cluster of 1", spec({ cluster: { size: 1 } }), "spec.cluster.size"],
  ["a cluster above the beta cap of 8", spec({ cluster: { size: 9 } }), "spec.cluster.size"],
  ["a cluster above 16", spec({ cluster: { size: 17 } }), "spec.cluster.size"],
  ["a cluster without size", spec({ cluster: { launcher: "Plain" } }), "spec.cluster.size"],
  ["resources.nodes above 1", spec({ resources: { nodes: 2 } }), "spec.resources.nodes"],
  // retries
  ["maxRetries above 10", spec({ retries: { maxRetries: 11 } }), "spec.retries.maxRetries"],
  ["negative maxRetries", spec({ retries: { maxRetries: -1 } }), "spec.retries.maxRetries"],
  ["backoffCoefficient below 1", spec({ retries: { backoffCoefficient: "0.99" } }), "spec.retries.backoffCoefficient"],
  [
    "backoffCoefficient above 10",
    spec({ retries: { backoffCoefficient: "10.01" } }),
    "spec.retries.backoffCoefficient"
  ],
  ["backoffCoefficient as a number", spec({ retries: { backoffCoefficient: 2 } }), "spec.retries.backoffCoefficient"],
  [
    "backoffCoefficient that is not a decimal",
    spec({ retries: { backoffCoefficient: "2x" } }),
    "spec.retries.backoffCoefficient"
  ],
  [
    "backoffCoefficient with an exponent",
    spec({ retries: { backoffCoefficient: "2e0" } }),
    "spec.retries.backoffCoefficient"
  ],
  ["an initialDelay that is not a duration", spec({ retries: { initialDelay: "soon" } }), "spec.retries.initialDelay"],
  ["a maxDelay that is not a duration", spec({ retries: { maxDelay: "1 minute" } }), "spec.retries.maxDelay"],
  [
    "initialDelay above maxDelay",
    spec({ retries: { initialDelay: "2m", maxDelay: "1m" } }),
    "spec.retries.initialDelay"
  ],
  ["initialDelay above the default maxDelay", spec({ retries: { initialDelay: "61s" } }), "spec.retries.initialDelay"],
  // scaling
  ["maxWorkers 0", spec({ scaling: { maxWorkers: 0 } }), "spec.scaling.maxWorkers"],
  ["maxWorkers above 1000", spec({ scaling: { maxWorkers: 1_001 } }), "spec.scaling.maxWorkers"],
  ["negative minWorkers", spec({ scaling: { minWorkers: -1 } }), "spec.scaling.minWorkers"],
  ["minWorkers above maxWorkers", spec({ scaling: { minWorkers: 5, maxWorkers: 4 } }), "spec.scaling.minWorkers"],
  ["minWorkers above the default maxWorkers", spec({ scaling: { minWorkers: 11 } }), "spec.scaling.minWorkers"],
  ["a fractional minWorkers", spec({ scaling: { minWorkers: 1.5 } }), "spec.scaling.minWorkers"],
  ["scaledownWindow above 20m", spec({ scaling: { scaledownWindow: "21m" } }), "spec.scaling.scaledownWindow"],
  ["targetConcurrency 0", spec({ scaling: { targetConcurrency: 0 } }), "spec.scaling.targetConcurrency"],
  ["targetConcurrency above 1000", spec({ scaling: { targetConcurrency: 1_001 } }), "spec.scaling.targetConcurrency"],
  // state and timeout
  ["an unknown state", spec({ state: "Suspended" }), "spec.state"],
  ["timeout below 1s", spec({ timeout: "500ms" }), "spec.timeout"],
  ["timeout 0s", spec({ timeout: "0s" }), "spec.timeout"],
  ["timeout above 24h", spec({ timeout: "24h1s" }), "spec.timeout"],
  ["a timeout that is not a duration", spec({ timeout: "5 minutes" }), "spec.timeout"],
  // the Job-like fields, through the shared types
  ["no image and no imageRef", { code: base.code }, "spec.image"],
  ["image and imageRef", spec({ imageRef: "my-image" }), "spec.imageRef"],
  ["an empty image", spec({ image: "" }), "spec.image"],
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
  ["an empty secret name", spec({ secrets: [""] }), "spec.secrets[0]"],
  [
    "egress allow without AllowList",
    spec({ network: { egress: { policy: "Deny", allow: ["example.com"] } } }),
    "spec.network.egress.allow"
  ],
  ["an unknown interruptible", spec({ placement: { interruptible: "Maybe" } }), "spec.placement.interruptible"],
  ["recovery.maxAttempts above 32", spec({ recovery: { maxAttempts: 33 } }), "spec.recovery.maxAttempts"],
  ["3 GPUs per node", spec({ resources: { gpu: { count: 3 } } }), "spec.resources.gpu.count"],
  [
    "initCommand timeout above 30m",
    spec({ initCommand: { command: ["make"], timeout: "31m" } }),
    "spec.initCommand.timeout"
  ],
  ["two sidecars with one name", spec({ sidecars: [{ name: "log" }, { name: "log" }] }), "spec.sidecars[1]"],
  [
    "a volume mounted over /usr",
    spec({ volumes: [{ volume: "v", mountPath: "/usr/lib/x" }] }),
    "spec.volumes[0].mountPath"
  ],
  ["a relative workingDir", spec({ workingDir: "app" }), "spec.workingDir"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "ten" }), "spec.maxCostUSD"],
  ["an empty connection name", spec({ connections: [""] }), "spec.connections[0]"],
  ["an unknown field", spec({ replicas: 3 }), "spec.replicas"],
  ["an unknown nested field", spec({ scaling: { minReplicas: 1 } }), "spec.scaling.minReplicas"]
]

describe("Function admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(functionKind, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(functionKind, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      ...base,
      placement: { queueTimeout: "24h" },
      scaling: { maxWorkers: 10, scaledownWindow: "60s", targetConcurrency: 1 },
      state: "Running",
      timeout: "300s"
    })
  })

  it("fills the retry defaults once retries are written", () => {
    const admission = admitSpec(functionKind, spec({ retries: { maxRetries: 3 } }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec["retries"], {
        maxRetries: 3,
        backoffCoefficient: "2.0",
        initialDelay: "1s",
        maxDelay: "60s"
      })
    }
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        python: "3.10",
        timeout: "1s",
        retries: { maxRetries: 0, backoffCoefficient: "1" },
        scaling: { minWorkers: 0, maxWorkers: 1, scaledownWindow: "0s", targetConcurrency: 1 }
      }),
      spec({
        python: "3.13",
        timeout: "24h",
        retries: { maxRetries: 10, backoffCoefficient: "10.000" },
        scaling: { minWorkers: 1_000, maxWorkers: 1_000, scaledownWindow: "20m", targetConcurrency: 1_000 }
      }),
      spec({ retries: { backoffCoefficient: "1.5", initialDelay: "60s" }, scaling: { minWorkers: 10 } }),
      spec({ retries: { initialDelay: "0s", maxDelay: "0s" } }),
      spec({ code: { module: "app.models", blob, cls: { name: "Outer.Model", methods: methods(128) } } }),
      spec({ code: { module: "app", cls: { name: "Model", methods: ["run"] } } }),
      spec({ cluster: { size: 2, launcher: "Plain", network: "Colocated", transport: "Direct" } }),
      spec({ cluster: { size: 8, network: "Global", transport: "Auto" }, resources: { nodes: 1, gpu: { count: 8 } } }),
      { imageRef: "my-image", code: { module: "_private.mod", qualname: "_Impl.__call__" } }
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(functionKind, edge)._tag, "Admitted", JSON.stringify(admitSpec(functionKind, edge)))
    }
  })

  it("accepts every Job-like field the spec lists", () => {
    const admission = admitSpec(
      functionKind,
      spec({
        args: ["--port", "8000"],
        command: ["python", "-m", "worker"],
        connections: ["s3-data"],
        env: [{ name: "MODEL", value: "small" }, {
          name: "TOKEN",
          valueFrom: { secretKeyRef: { name: "hf", key: "token" } }
        }],
        imagePullSecrets: ["registry"],
        initCommand: { command: ["pip", "install", "-e", "."], timeout: "10m" },
        maxCostUSD: "100.00",
        network: { egress: { policy: "AllowList", allow: ["*.huggingface.co"] } },
        placement: { interruptible: "Allow", regions: ["eu"], queueTimeout: "1h" },
        recovery: { maxAttempts: 3 },
        resources: { cpu: "4", memory: "16Gi", gpu: { count: 1, type: ["H100"] } },
        secrets: [{ name: "wandb", version: 2 }],
        serviceAccountName: "worker",
        sidecars: [{ name: "metrics", command: ["exporter"] }],
        volumes: [{ volume: "weights", mountPath: "/weights", readOnly: true, revision: 4 }],
        workingDir: "/app"
      })
    )
    assert.strictEqual(admission._tag, "Admitted", JSON.stringify(admission))
  })

  it("accepts a bare Secret name and stores the object form", () => {
    const admission = admitSpec(functionKind, spec({ secrets: ["hf-token", { name: "wandb", version: 3 }] }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec["secrets"], [{ name: "hf-token" }, { name: "wandb", version: 3 }])
    }
  })
})

describe("Function updates", () => {
  const created = spec({ maxCostUSD: "10.00", python: "3.12", scaling: { minWorkers: 1 }, retries: { maxRetries: 2 } })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  /** Every spec field is mutable (spec: Function); a change to code, image or resources rolls workers. */
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["code", { code: { module: "app.v2", cls: { name: "Model", methods: ["run"] }, blob } }],
    ["image", { image: "python:3.13-slim" }],
    ["image to imageRef", { image: undefined as unknown as Json, imageRef: "built" }],
    ["python", { python: "3.13" }],
    ["resources", { resources: { gpu: { count: 2 } } }],
    ["scaling", { scaling: { minWorkers: 0, maxWorkers: 100, targetConcurrency: 8 } }],
    ["retries", { retries: { maxRetries: 5, backoffCoefficient: "3" } }],
    ["timeout", { timeout: "1h" }],
    ["state", { state: "Stopped" }],
    ["env", { env: [{ name: "A", value: "1" }] }],
    ["placement", { placement: { queueTimeout: "0s" } }],
    ["cluster", { cluster: { size: 4 } }],
    ["maxCostUSD raised", { maxCostUSD: "25" }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      const after = JSON.parse(JSON.stringify(changed(fields))) as Json
      assert.deepStrictEqual(updateRefusals(functionKind, created, after), { immutable: [], invalid: [] })
    })
  }

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(functionKind, created, changed({ maxCostUSD: "9.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(functionKind, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(functionKind, created, uncapped).invalid, [])
  })
})
