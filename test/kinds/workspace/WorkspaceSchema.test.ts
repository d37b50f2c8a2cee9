/**
 * The Workspace's admission rules (spec: Workspace, Shared types, Limits), one row per rule: the spec as written, and
 * either the field path admission refuses or what the admitted spec holds. Then its update rules (what may change after
 * create) and the clock-dependent readyBy lead the server checks with the request time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { readyByLeadCause, workspace } from "../../../src/kinds/workspace/WorkspaceSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { image: "platform/gpu-default", volume: "home-alice" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const names = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${i}`)
const env = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `VAR_${i}`, value: `${i}` }))

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["neither volume nor ephemeral", { image: "platform/cpu-default" }, "spec.volume"],
  ["ephemeral false without volume", { image: "platform/cpu-default", ephemeral: false }, "spec.volume"],
  ["volume and ephemeral true", spec({ ephemeral: true }), "spec.ephemeral"],
  ["an empty volume name", { volume: "" }, "spec.volume"],
  ["5 connections", spec({ connections: names("conn", 5) }), "spec.connections"],
  ["one connection twice", spec({ connections: ["s3", "s3"] }), "spec.connections[1]"],
  ["257 env vars", spec({ env: env(257) }), "spec.env"],
  [
    "an env name with the PLATFORM_ prefix",
    spec({ env: [{ name: "PLATFORM_HOME", value: "/x" }] }),
    "spec.env[0].name"
  ],
  ["5 imagePullSecrets", spec({ imagePullSecrets: names("pull", 5) }), "spec.imagePullSecrets"],
  ["one imagePullSecret twice", spec({ imagePullSecrets: ["ghcr", "ghcr"] }), "spec.imagePullSecrets[1]"],
  ["101 sshKeys", spec({ sshKeys: names("key", 101) }), "spec.sshKeys"],
  ["one sshKey twice", spec({ sshKeys: ["laptop", "laptop"] }), "spec.sshKeys[1]"],
  ["idleTimeout below 10m (and not 0s)", spec({ idleTimeout: "9m" }), "spec.idleTimeout"],
  ["idleTimeout above 24h", spec({ idleTimeout: "25h" }), "spec.idleTimeout"],
  ["idleTimeout that is not a duration", spec({ idleTimeout: "1 hour" }), "spec.idleTimeout"],
  ["an unknown state", spec({ state: "Suspended" }), "spec.state"],
  ["an unknown tool", spec({ tools: ["Emacs"] }), "spec.tools[0]"],
  ["one tool twice", spec({ tools: ["SSH", "SSH"] }), "spec.tools[1]"],
  ["an empty serviceAccountName", spec({ serviceAccountName: "" }), "spec.serviceAccountName"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "$5" }), "spec.maxCostUSD"],
  ["a schedule without readyBy", spec({ schedule: { stopAt: "2030-01-02T18:00:00Z" } }), "spec.schedule.readyBy"],
  ["a readyBy that is not RFC 3339", spec({ schedule: { readyBy: "tomorrow 9am" } }), "spec.schedule.readyBy"],
  ["a readyBy in month 13", spec({ schedule: { readyBy: "2030-13-02T09:00:00Z" } }), "spec.schedule.readyBy"],
  [
    "a stopAt that is not RFC 3339",
    spec({ schedule: { readyBy: "2030-01-02T09:00:00Z", stopAt: "18:00" } }),
    "spec.schedule.stopAt"
  ],
  [
    "stopAt before readyBy",
    spec({ schedule: { readyBy: "2030-01-02T09:00:00Z", stopAt: "2030-01-02T08:00:00Z" } }),
    "spec.schedule.stopAt"
  ],
  [
    "stopAt equal to readyBy (in another offset)",
    spec({ schedule: { readyBy: "2030-01-02T09:00:00Z", stopAt: "2030-01-02T10:00:00+01:00" } }),
    "spec.schedule.stopAt"
  ],
  [
    "an unknown placement interruptible",
    spec({ placement: { interruptible: "Maybe" } }),
    "spec.placement.interruptible"
  ],
  ["a placement community that is not a bool", spec({ placement: { community: "yes" } }), "spec.placement.community"],
  ["two nodes", spec({ resources: { nodes: 2 } }), "spec.resources.nodes"],
  ["3 GPUs", spec({ resources: { gpu: { count: 3 } } }), "spec.resources.gpu.count"],
  [
    "egress allow without AllowList",
    spec({ network: { egress: { policy: "Open", allow: ["example.com"] } } }),
    "spec.network.egress.allow"
  ],
  ["one secret mounted twice", spec({ secrets: ["hf", { name: "hf" }] }), "spec.secrets[1]"],
  ["a field the spec does not give a Workspace", spec({ command: ["bash"] }), "spec.command"],
  ["an unknown field", spec({ replicas: 1 }), "spec.replicas"],
  [
    "an unknown schedule field",
    spec({ schedule: { readyBy: "2030-01-02T09:00:00Z", cron: "0 9 * * *" } }),
    "spec.schedule.cron"
  ]
]

describe("Workspace admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(workspace, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(workspace, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag !== "Admitted") return
    assert.deepStrictEqual(admission.spec, {
      ...base,
      idleTimeout: "1h",
      placement: { queueTimeout: "24h" },
      serviceAccountName: "default",
      state: "Running",
      tools: ["VSCode", "Jupyter", "SSH"]
    })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({
        connections: names("conn", 4),
        imagePullSecrets: names("pull", 4),
        sshKeys: names("key", 100),
        env: env(256),
        idleTimeout: "0s"
      }),
      spec({ idleTimeout: "10m", tools: [], state: "Stopped", sshKeys: [] }),
      { ephemeral: true, idleTimeout: "24h", tools: ["SSH"], placement: { community: true, interruptible: "Prefer" } },
      {
        ephemeral: false,
        volume: "home",
        resources: { nodes: 1, gpu: { count: 8, type: ["H100"] } },
        maxCostUSD: "100"
      },
      spec({ schedule: { readyBy: "2030-01-02T09:00:00Z", stopAt: "2030-01-02T09:00:00.001Z" } }),
      spec({ schedule: { readyBy: "2030-01-02T09:00:00+02:00" } }),
      spec({
        secrets: ["hf", { name: "wandb", version: 2 }],
        serviceAccountName: "builder",
        network: { egress: { policy: "Deny" } }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(workspace, edge)._tag, "Admitted", JSON.stringify(admitSpec(workspace, edge)))
    }
  })

  it("admits a Workspace without an image (the service resolves a catalog default)", () => {
    assert.strictEqual(admitSpec(workspace, { volume: "home" })._tag, "Admitted")
  })

  it("accepts a bare Secret name and stores the object form", () => {
    const admission = admitSpec(workspace, spec({ secrets: ["hf-token", { name: "wandb", version: 3 }] }))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec["secrets"], [{ name: "hf-token" }, { name: "wandb", version: 3 }])
    }
  })

  it("admits the status the spec describes and refuses an unknown phase", () => {
    const decode = Schema.decodeUnknownExit(workspace.status as Schema.Codec<unknown, unknown>)
    const status = {
      phase: "Running",
      connect: {
        ssh: { command: "ssh ws-alice", host: "ws-alice.example", hostKey: "ssh-ed25519 AAAA" },
        vscode: { url: "https://v" },
        jupyter: { url: "https://j" }
      },
      endpoints: [{ name: "app", port: 8080, url: "https://p" }],
      home: { volume: "home-alice", revision: 0 },
      lastSession: { attempt: "ws-alice-1", billedSeconds: 3600, chargeUSD: "1.20", stopReason: "IdleTimeout" },
      session: { attempt: "ws-alice-2", offering: "h100", regionClass: "eu", rateUSDPerHour: "2.50" },
      startEstimate: { p50: "2m", p90: "5m" },
      nextScheduledStartTime: "2030-01-02T08:45:00Z"
    }
    assert.isTrue(decode(status)._tag === "Success")
    assert.isTrue(decode({ ...status, phase: "Suspended" })._tag === "Failure")
    assert.isTrue(decode({ ...status, home: { revision: -1 } })._tag === "Failure")
    assert.isTrue(decode({ ...status, session: { rateUSDPerHour: "cheap" } })._tag === "Failure")
  })
})

describe("Workspace readyBy lead (checked by the server with the request time)", () => {
  const now = Date.parse("2030-01-02T09:00:00Z")
  const scheduled = (readyBy: string): JsonObject => spec({ schedule: { readyBy } })

  it("refuses a readyBy less than 15 minutes after the request", () => {
    assert.strictEqual(readyByLeadCause(scheduled("2030-01-02T09:14:59Z"), now)?.field, "spec.schedule.readyBy")
    assert.strictEqual(readyByLeadCause(scheduled("2030-01-02T08:00:00Z"), now)?.field, "spec.schedule.readyBy")
  })

  it("accepts a readyBy 15 minutes or more after the request, and a spec without a schedule", () => {
    assert.isUndefined(readyByLeadCause(scheduled("2030-01-02T09:15:00Z"), now))
    assert.isUndefined(readyByLeadCause(scheduled("2030-01-02T10:15:00+01:00"), now))
    assert.isUndefined(readyByLeadCause(base, now))
  })

  it("does not check a readyBy an update leaves unchanged, and checks a changed one", () => {
    const previous = scheduled("2030-01-02T08:00:00Z")
    assert.isUndefined(readyByLeadCause(scheduled("2030-01-02T08:00:00Z"), now, previous))
    assert.strictEqual(
      readyByLeadCause(scheduled("2030-01-02T09:10:00Z"), now, previous)?.field,
      "spec.schedule.readyBy"
    )
  })
})

describe("Workspace updates", () => {
  const created = spec({ maxCostUSD: "10.00", sshKeys: ["laptop", "desktop"] })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  /** Changes nodus lets through (spec: image, state, sshKeys, maxCostUSD; docs/kinds/Workspace.md), each accepted. */
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["state", { state: "Stopped" }],
    ["maxCostUSD raised", { maxCostUSD: "25" }],
    ["image (applies at the next start)", { image: "platform/rocm-default" }],
    ["sshKeys (a removed key's sessions end)", { sshKeys: ["laptop"] }],
    ["idleTimeout", { idleTimeout: "0s" }],
    ["schedule", { schedule: { readyBy: "2030-01-02T09:00:00Z", stopAt: "2030-01-02T18:00:00Z" } }],
    ["resources", { resources: { gpu: { count: 2 } } }],
    ["placement", { placement: { community: true } }],
    ["tools", { tools: ["SSH"] }],
    ["env", { env: [{ name: "A", value: "1" }] }],
    ["connections", { connections: ["s3"] }],
    ["secrets", { secrets: ["hf"] }],
    ["serviceAccountName", { serviceAccountName: "builder" }],
    ["network", { network: { egress: { policy: "Deny" } } }],
    ["imagePullSecrets", { imagePullSecrets: ["ghcr"] }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(workspace, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, Json, string]> = [
    ["volume", changed({ volume: "home-bob" }), "spec.volume"],
    [
      "volume to ephemeral",
      { image: base.image, ephemeral: true, maxCostUSD: "10.00", sshKeys: ["laptop", "desktop"] },
      "spec.ephemeral"
    ]
  ]

  for (const [field, after, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(workspace, created, after).immutable, path)
    })
  }

  it("refuses a change of ephemeral to volume as immutable", () => {
    const refusals = updateRefusals(workspace, { ephemeral: true }, { volume: "home" }).immutable
    assert.includeMembers([...refusals], ["spec.ephemeral", "spec.volume"])
  })

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(workspace, created, changed({ maxCostUSD: "9.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(workspace, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(workspace, created, uncapped).invalid, [])
  })
})
