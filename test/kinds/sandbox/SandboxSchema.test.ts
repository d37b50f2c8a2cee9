/**
 * The Sandbox's admission rules (spec: Sandbox, Shared types, Limits), one row per rule: the spec as written, and
 * either the field path admission refuses or what the admitted spec holds. Then its update rules: what may change after
 * create.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { sandbox } from "../../../src/kinds/sandbox/SandboxSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { image: "ghcr.io/acme/tools:1" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const env = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `VAR_${i}`, value: `${i}` }))
const secrets = (count: number) => Array.from({ length: count }, (_, i) => `secret-${i}`)

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no image", { command: ["sleep", "infinity"] }, "spec.image"],
  ["an empty image", { image: "" }, "spec.image"],
  ["an unknown continuity mode", spec({ continuity: { mode: "Checkpointed" } }), "spec.continuity.mode"],
  ["257 env vars", spec({ env: env(257) }), "spec.env"],
  [
    "an env name with the PLATFORM_ prefix",
    spec({ env: [{ name: "PLATFORM_TOKEN", value: "1" }] }),
    "spec.env[0].name"
  ],
  ["an env name with a dash", spec({ env: [{ name: "MY-VAR", value: "1" }] }), "spec.env[0].name"],
  [
    "env value and valueFrom",
    spec({ env: [{ name: "A", value: "1", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }),
    "spec.env[0].valueFrom"
  ],
  ["33 secrets", spec({ secrets: secrets(33) }), "spec.secrets"],
  ["an empty secret name", spec({ secrets: [""] }), "spec.secrets[0]"],
  ["a secret version below 1", spec({ secrets: [{ name: "s", version: 0 }] }), "spec.secrets[0].version"],
  ["one secret mounted twice", spec({ secrets: ["hf-token", { name: "hf-token", version: 2 }] }), "spec.secrets[1]"],
  ["idleTimeout below 1m (and not 0s)", spec({ lifecycle: { idleTimeout: "59s" } }), "spec.lifecycle.idleTimeout"],
  ["idleTimeout above 24h", spec({ lifecycle: { idleTimeout: "25h" } }), "spec.lifecycle.idleTimeout"],
  [
    "idleTimeout that is not a duration",
    spec({ lifecycle: { idleTimeout: "five minutes" } }),
    "spec.lifecycle.idleTimeout"
  ],
  ["maxLifetime below 1m", spec({ lifecycle: { maxLifetime: "30s" } }), "spec.lifecycle.maxLifetime"],
  [
    "maxLifetime 0s (only idleTimeout means never)",
    spec({ lifecycle: { maxLifetime: "0s" } }),
    "spec.lifecycle.maxLifetime"
  ],
  ["maxLifetime above 720h", spec({ lifecycle: { maxLifetime: "721h" } }), "spec.lifecycle.maxLifetime"],
  ["an unknown onIdle", spec({ lifecycle: { onIdle: "Suspend" } }), "spec.lifecycle.onIdle"],
  ["an unknown state", spec({ state: "Suspended" }), "spec.state"],
  ["a relative workingDir", spec({ workingDir: "workspace" }), "spec.workingDir"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "five" }), "spec.maxCostUSD"],
  ["a maxCostUSD with 7 decimals", spec({ maxCostUSD: "1.0000001" }), "spec.maxCostUSD"],
  ["a GPU", spec({ resources: { gpu: { count: 1 } } }), "spec.resources.gpu"],
  ["two nodes", spec({ resources: { nodes: 2 } }), "spec.resources.nodes"],
  ["a memory that is not a quantity", spec({ resources: { memory: "lots" } }), "spec.resources.memory"],
  [
    "egress allow without AllowList",
    spec({ network: { egress: { policy: "Deny", allow: ["example.com"] } } }),
    "spec.network.egress.allow"
  ],
  [
    "129 egress hosts",
    spec({
      network: { egress: { policy: "AllowList", allow: Array.from({ length: 129 }, (_, i) => `h${i}.example.com`) } }
    }),
    "spec.network.egress.allow"
  ],
  ["a field the spec does not give a Sandbox", spec({ placement: { regions: ["eu"] } }), "spec.placement"],
  ["an unknown field", spec({ replicas: 2 }), "spec.replicas"],
  ["an unknown lifecycle field", spec({ lifecycle: { ttl: "1h" } }), "spec.lifecycle.ttl"]
]

describe("Sandbox admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(sandbox, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(sandbox, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      ...base,
      continuity: { mode: "Snapshotted" },
      lifecycle: { idleTimeout: "5m", maxLifetime: "24h", onIdle: "Stop" },
      state: "Running",
      workingDir: "/workspace"
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        env: env(256),
        secrets: secrets(32),
        lifecycle: { idleTimeout: "0s", maxLifetime: "720h", onIdle: "Delete" }
      }),
      spec({
        lifecycle: { idleTimeout: "1m", maxLifetime: "1m" },
        continuity: { mode: "Ephemeral" },
        state: "Stopped"
      }),
      spec({
        lifecycle: { idleTimeout: "24h" },
        workingDir: "/",
        maxCostUSD: "0.000001",
        resources: { cpu: "2", memory: "4Gi", nodes: 1 }
      }),
      spec({
        command: ["python", "agent.py"],
        args: ["--fast"],
        network: {
          egress: { policy: "AllowList", allow: Array.from({ length: 128 }, (_, i) => `*.h${i}.example.com`) }
        }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(sandbox, edge)._tag, "Admitted", JSON.stringify(admitSpec(sandbox, edge)))
    }
  })

  it("keeps values the caller chose over the defaults", () => {
    const admission = admitSpec(
      sandbox,
      spec({ continuity: { mode: "Ephemeral" }, lifecycle: { onIdle: "Delete" }, workingDir: "/src" })
    )
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec["continuity"], { mode: "Ephemeral" })
    assert.deepStrictEqual(admission.spec["lifecycle"], { idleTimeout: "5m", maxLifetime: "24h", onIdle: "Delete" })
    assert.strictEqual(admission.spec["workingDir"], "/src")
  })

  it("accepts a bare Secret name and stores the object form", () => {
    const admission = admitSpec(sandbox, spec({ secrets: ["hf-token", { name: "wandb", version: 3 }] }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec["secrets"], [{ name: "hf-token" }, { name: "wandb", version: 3 }])
    }
  })

  it("admits the status the spec describes and refuses an unknown phase or snapshot reason", () => {
    const decode = Schema.decodeUnknownExit(sandbox.status as Schema.Codec<unknown, unknown>)
    const status = {
      activity: "Idle",
      attempt: { epoch: 3, name: "sbx-1-3" },
      expirationTime: "2026-01-03T15:04:05Z",
      phase: "Stopped",
      snapshot: { reason: "Stop", time: "2026-01-02T15:04:05Z" },
      stopReason: "IdleTimeout"
    }
    assert.isTrue(decode(status)._tag === "Success")
    assert.isTrue(decode({ ...status, phase: "Suspended" })._tag === "Failure")
    assert.isTrue(decode({ ...status, activity: "Sleeping" })._tag === "Failure")
    assert.isTrue(decode({ ...status, snapshot: { reason: "Idle", time: "2026-01-02T15:04:05Z" } })._tag === "Failure")
    assert.isTrue(decode({ ...status, attempt: { epoch: 3 } })._tag === "Failure")
  })
})

describe("Sandbox updates", () => {
  const created = spec({ command: ["sleep", "infinity"], maxCostUSD: "10.00", env: [{ name: "A", value: "1" }] })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  /** Changes nodus lets through (spec: state and maxCostUSD; docs/kinds/Sandbox.md for the rest), each accepted. */
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["state", { state: "Stopped" }],
    ["maxCostUSD raised", { maxCostUSD: "25" }],
    ["lifecycle.idleTimeout", { lifecycle: { idleTimeout: "0s" } }],
    ["lifecycle.maxLifetime", { lifecycle: { maxLifetime: "72h" } }],
    ["lifecycle.onIdle", { lifecycle: { onIdle: "Delete" } }],
    ["env", { env: [{ name: "A", value: "2" }, { name: "B", value: "3" }] }],
    ["secrets", { secrets: ["hf-token"] }],
    ["network", { network: { egress: { policy: "Deny" } } }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(sandbox, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["image", { image: "ghcr.io/acme/tools:2" }, "spec.image"],
    ["command", { command: ["python", "agent.py"] }, "spec.command"],
    ["args", { args: ["--verbose"] }, "spec.args"],
    ["continuity.mode", { continuity: { mode: "Ephemeral" } }, "spec.continuity.mode"],
    ["resources", { resources: { cpu: "4" } }, "spec.resources.cpu"],
    ["workingDir", { workingDir: "/src" }, "spec.workingDir"]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(sandbox, created, changed(fields)).immutable, path)
    })
  }

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(sandbox, created, changed({ maxCostUSD: "9.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(sandbox, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(sandbox, created, uncapped).invalid, [])
  })
})
