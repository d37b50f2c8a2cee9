/**
 * The Agent's admission rules, one row per rule. The spec does not show the Agent's fields (spec: Other kinds); the
 * rules here are nodus's small schema built from what the spec states about Agents (docs/kinds/Agent.md): its
 * reference form, model routing (routedBy jev | fallback | fixed), the team-size cap AgentRun.parallelism sits within,
 * the per-run cost cap AgentGroups count, its Sandbox (Sandbox bounds) and the Stopped state behind AgentStopped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import * as Limits from "../../../src/core/Limits.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { agent, AgentStatus } from "../../../src/kinds/agent/AgentSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { instructions: "You are a careful research assistant." }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  [
    "instructions over 256 KiB",
    spec({ instructions: "x".repeat(Limits.agentInstructionsBytesMax + 1) }),
    "spec.instructions"
  ],
  [
    "multi-byte instructions over 256 KiB",
    spec({ instructions: "é".repeat(Limits.agentInstructionsBytesMax / 2 + 1) }),
    "spec.instructions"
  ],
  ["an empty fixed model", spec({ model: { fixed: "" } }), "spec.model.fixed"],
  ["allow beside a fixed model", spec({ model: { fixed: "m-large", allow: ["m-small"] } }), "spec.model.allow"],
  ["fallback beside a fixed model", spec({ model: { fixed: "m-large", fallback: "m-small" } }), "spec.model.fallback"],
  ["an allowed model twice", spec({ model: { allow: ["m-small", "m-small"] } }), "spec.model.allow[1]"],
  [
    "too many allowed models",
    spec({ model: { allow: Array.from({ length: Limits.agentAllowedModelsMax + 1 }, (_, i) => `m-${i}`) } }),
    "spec.model.allow"
  ],
  ["an unknown model field", spec({ model: { router: "jev" } }), "spec.model.router"],
  ["a tool named twice", spec({ tools: ["shell", "shell"] }), "spec.tools[1]"],
  ["an empty tool name", spec({ tools: [""] }), "spec.tools[0]"],
  [
    "too many tools",
    spec({ tools: Array.from({ length: Limits.agentToolsMax + 1 }, (_, i) => `tool-${i}`) }),
    "spec.tools"
  ],
  ["maxParallelism 0", spec({ maxParallelism: 0 }), "spec.maxParallelism"],
  ["maxParallelism above 32", spec({ maxParallelism: 33 }), "spec.maxParallelism"],
  ["a maxRunCostUSD that is not a decimal", spec({ maxRunCostUSD: "5 dollars" }), "spec.maxRunCostUSD"],
  ["an empty sandbox image", spec({ sandbox: { image: "" } }), "spec.sandbox.image"],
  ["a sandbox cpu that is no quantity", spec({ sandbox: { resources: { cpu: "two" } } }), "spec.sandbox.resources.cpu"],
  [
    "a GPU for the sandbox (a CPU container)",
    spec({ sandbox: { resources: { gpu: { count: 1 } } } }),
    "spec.sandbox.resources.gpu"
  ],
  [
    "257 sandbox env entries",
    spec({ sandbox: { env: Array.from({ length: 257 }, (_, i) => ({ name: `V${i}`, value: "1" })) } }),
    "spec.sandbox.env"
  ],
  [
    "a sandbox env name with the PLATFORM_ prefix",
    spec({ sandbox: { env: [{ name: "PLATFORM_X", value: "1" }] } }),
    "spec.sandbox.env[0].name"
  ],
  [
    "a sandbox env name twice",
    spec({ sandbox: { env: [{ name: "A", value: "1" }, { name: "A", value: "2" }] } }),
    "spec.sandbox.env[1]"
  ],
  [
    "sandbox egress allow without AllowList",
    spec({ sandbox: { network: { egress: { policy: "Deny", allow: ["example.com"] } } } }),
    "spec.sandbox.network.egress.allow"
  ],
  ["an unknown state", spec({ state: "Paused" }), "spec.state"],
  ["an unknown field", spec({ systemPrompt: "hi" }), "spec.systemPrompt"]
]

describe("Agent admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(agent, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission).slice(0, 400)}`)
    })
  }

  it("applies its one default (state Running), visible on read", () => {
    const admission = admitSpec(agent, {})
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") assert.deepStrictEqual(admission.spec, { state: "Running" })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ instructions: "x".repeat(Limits.agentInstructionsBytesMax), maxParallelism: 32, state: "Stopped" }),
      spec({
        instructions: "é".repeat(Limits.agentInstructionsBytesMax / 2),
        maxParallelism: 1,
        maxRunCostUSD: "2.50"
      }),
      spec({ model: { fixed: "m-large" }, tools: Array.from({ length: Limits.agentToolsMax }, (_, i) => `tool-${i}`) }),
      spec({
        model: { allow: Array.from({ length: Limits.agentAllowedModelsMax }, (_, i) => `m-${i}`), fallback: "m-small" }
      }),
      spec({
        sandbox: {
          image: "ghcr.io/acme/agent-tools:1",
          resources: { cpu: "2", memory: "4Gi", disk: "20Gi" },
          env: Array.from({ length: 256 }, (_, i) => ({ name: `V${i}`, value: "1" })),
          network: { egress: { policy: "AllowList", allow: ["api.github.com", "*.pypi.org"] } }
        }
      })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(agent, edge)._tag, "Admitted", JSON.stringify(admitSpec(agent, edge)).slice(0, 400))
    }
  })
})

describe("Agent status", () => {
  const admitStatus = (status: Json) => admit(AgentStatus, status, "Strict", { kind: "agents" }, "Agent")

  it("admits what the service writes", () => {
    const status = {
      revision: 4,
      observedGeneration: 5,
      image: { reference: "ghcr.io/acme/agent-tools:1", digest: `sha256:${"c".repeat(64)}` }
    }
    assert.isTrue(Result.isSuccess(admitStatus(status)), JSON.stringify(admitStatus(status)))
  })

  it("refuses a revision below 1", () => {
    const result = admitStatus({ revision: 0 })
    assert.isTrue(Result.isFailure(result))
    if (Result.isFailure(result)) assert.include((result.failure.causes ?? []).map((cause) => cause.field), "revision")
  })
})

describe("Agent updates", () => {
  const created = spec({ model: { allow: ["m-small"] }, maxParallelism: 4, maxRunCostUSD: "5" })

  /** Every field may change (nodus: each change is a new revision; runs keep the revision they pinned). */
  const changes: ReadonlyArray<readonly [string, JsonObject]> = [
    ["instructions", { instructions: "Be brief." }],
    ["model", { model: { fixed: "m-large" } }],
    ["maxParallelism", { maxParallelism: 8 }],
    ["maxRunCostUSD lowered", { maxRunCostUSD: "1" }],
    ["sandbox", { sandbox: { image: "python:3.12" } }],
    ["state", { state: "Stopped" }]
  ]

  for (const [field, fields] of changes) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(agent, created, { ...created, ...fields }), { immutable: [], invalid: [] })
    })
  }
})
