/**
 * The AgentRun's admission rules (spec: AgentRun, Limits), one row per rule: the spec as written, and either the field
 * path admission refuses or what the admitted spec holds. Then its update rules: only `state` may change, and the
 * cancel state is final.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import * as Limits from "../../../src/core/Limits.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { agentRun, AgentRunStatus, agentRunTransitions, jsonBytes } from "../../../src/kinds/agentrun/AgentRunSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { agent: "researcher" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const member = (fields: JsonObject): JsonObject => spec({ group: "batch", taskKey: "t1", ...fields })

/** A JSON string whose JSON text (quotes included) is exactly `bytes` UTF-8 bytes. */
const stringOfBytes = (bytes: number): string => "x".repeat(bytes - 2)

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no agent", { input: "hi" }, "spec.agent"],
  ["an empty agent", { agent: "" }, "spec.agent"],
  ["an agent name with capitals", { agent: "Researcher" }, "spec.agent"],
  ["an agent in another project than the catalog", { agent: "other/researcher" }, "spec.agent"],
  ["an agent name longer than 253", { agent: "a".repeat(254) }, "spec.agent"],
  [
    "an input string over 256 KiB of JSON text",
    spec({ input: stringOfBytes(Limits.agentRunInputBytesMax + 1) }),
    "spec.input"
  ],
  [
    "an input object over 256 KiB of JSON text",
    spec({ input: { prompt: "x".repeat(Limits.agentRunInputBytesMax) } }),
    "spec.input"
  ],
  [
    "an input whose multi-byte text is over 256 KiB",
    spec({ input: "é".repeat(Limits.agentRunInputBytesMax / 2) }),
    "spec.input"
  ],
  ["keepAlive that is not a bool", spec({ keepAlive: "yes" }), "spec.keepAlive"],
  ["a deadline that is not a duration", spec({ deadline: "tomorrow" }), "spec.deadline"],
  ["a deadline of 0s", spec({ deadline: "0s" }), "spec.deadline"],
  ["a group that is not an object name", member({ group: "My_Group" }), "spec.group"],
  ["group without taskKey", spec({ group: "batch" }), "spec.taskKey"],
  ["taskKey without group", spec({ taskKey: "t1" }), "spec.taskKey"],
  ["a taskKey with a dot (not a DNS label)", member({ taskKey: "t.1" }), "spec.taskKey"],
  ["a taskKey with capitals", member({ taskKey: "T1" }), "spec.taskKey"],
  ["a taskKey of 64 characters", member({ taskKey: "a".repeat(64) }), "spec.taskKey"],
  ["a taskKey ending with a dash", member({ taskKey: "t-" }), "spec.taskKey"],
  [
    "a run name <group>-<taskKey> over 253 characters",
    member({ group: "g".repeat(200), taskKey: "k".repeat(53) }),
    "spec.taskKey"
  ],
  ["dependsOn without group", spec({ dependsOn: ["t0"] }), "spec.dependsOn"],
  ["a dependsOn entry that is not a DNS label", member({ dependsOn: ["T0"] }), "spec.dependsOn[0]"],
  ["a dependsOn entry twice", member({ dependsOn: ["t0", "t0"] }), "spec.dependsOn[1]"],
  ["a run that depends on itself", member({ dependsOn: ["t0", "t1"] }), "spec.dependsOn[1]"],
  ["parallelism above 32", spec({ parallelism: 33 }), "spec.parallelism"],
  ["negative parallelism", spec({ parallelism: -1 }), "spec.parallelism"],
  ["fractional parallelism", spec({ parallelism: 1.5 }), "spec.parallelism"],
  ["an unknown state", spec({ state: "Suspended" }), "spec.state"],
  ["the other spelling of the cancel state", spec({ state: "Canceled" }), "spec.state"],
  ["an unknown field", spec({ maxCostUSD: "5" }), "spec.maxCostUSD"]
]

describe("AgentRun admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(agentRun, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission).slice(0, 400)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(agentRun, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") assert.deepStrictEqual(admission.spec, { ...base, state: "Running" })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ input: stringOfBytes(Limits.agentRunInputBytesMax), parallelism: 32, deadline: "1s" }),
      spec({
        input: { messages: ["a", "b"], n: 1, nested: { ok: true, none: null } },
        parallelism: 0,
        keepAlive: true,
        state: "Cancelled"
      }),
      spec({ input: 42 }),
      spec({ input: null }),
      spec({ agent: "platform/deep-research", deadline: "72h" }),
      spec({ agent: "a".repeat(253) }),
      member({ taskKey: "a".repeat(63), dependsOn: ["t0", "b".repeat(63)] }),
      member({ group: "g".repeat(200), taskKey: "k".repeat(52) }),
      member({ group: "evals.v2", taskKey: "0" })
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(agentRun, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(agentRun, edge)).slice(0, 400)
      )
    }
  })

  it("measures input as the UTF-8 bytes of its JSON text", () => {
    assert.strictEqual(jsonBytes("hi"), 4)
    assert.strictEqual(jsonBytes("é"), 4)
    assert.strictEqual(jsonBytes({ a: [1, null] }), 14)
    // 2 quotes + 131071 two-byte characters = 262144 bytes: exactly the limit.
    assert.strictEqual(
      admitSpec(agentRun, spec({ input: "é".repeat(Limits.agentRunInputBytesMax / 2 - 1) }))._tag,
      "Admitted"
    )
  })

  it("keeps the input as written", () => {
    const input = { task: "summarize", urls: ["https://example.com"] }
    const admission = admitSpec(agentRun, spec({ input }))
    assert.strictEqual(admission._tag === "Admitted" && JSON.stringify(admission.spec["input"]), JSON.stringify(input))
  })
})

describe("AgentRun status", () => {
  const admitStatus = (status: Json) => admit(AgentRunStatus, status, "Strict", { kind: "agentruns" }, "AgentRun")
  const turn = {
    prompt: "input",
    model: "m-large",
    routedBy: "jev",
    modelCalls: 3,
    toolCalls: 2,
    inputTokens: 1200,
    outputTokens: 300
  }
  const { model: _model, ...turnWithoutModel } = turn

  it("admits what the service writes", () => {
    const status = {
      phase: "Succeeded",
      reason: "Completed",
      answer: { preview: "x".repeat(Limits.agentRunAnswerPreviewBytes), sha256: "a".repeat(64), size: 10_000 },
      startTime: "2026-01-02T15:04:05Z",
      completionTime: "2026-01-02T15:09:05Z",
      dispatches: 2,
      revision: 3,
      sandbox: "researcher-x7k2p",
      steps: { total: 12 },
      turns: [turn, {
        ...turn,
        prompt: "msg-1",
        routedBy: "fallback",
        fallbackReason: "RouterUnavailable",
        costUSD: "0.0125"
      }],
      cost: { totalUSD: "0.05" }
    }
    assert.isTrue(Result.isSuccess(admitStatus(status)), JSON.stringify(admitStatus(status)))
  })

  const refusedStatus: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["an unknown phase", { phase: "Done" }, "phase"],
    ["an answer preview over 4 KiB", {
      answer: { preview: "x".repeat(Limits.agentRunAnswerPreviewBytes + 1), sha256: "a".repeat(64), size: 1 }
    }, "answer.preview"],
    ["an answer without sha256", { answer: { preview: "", size: 0 } }, "answer.sha256"],
    ["an unknown routedBy", { turns: [{ ...turn, routedBy: "random" }] }, "turns[0].routedBy"],
    ["a turn without model", { turns: [turnWithoutModel] }, "turns[0].model"],
    ["a fallbackReason on a routed turn", { turns: [{ ...turn, fallbackReason: "x" }] }, "turns[0].fallbackReason"],
    ["negative outputTokens", { turns: [{ ...turn, outputTokens: -1 }] }, "turns[0].outputTokens"],
    ["revision 0", { revision: 0 }, "revision"],
    ["a startTime that is not RFC 3339", { startTime: "now" }, "startTime"]
  ]

  for (const [rule, status, field] of refusedStatus) {
    it(`refuses ${rule} at ${field}`, () => {
      const result = admitStatus(status)
      assert.isTrue(Result.isFailure(result), rule)
      if (Result.isFailure(result)) assert.include((result.failure.causes ?? []).map((cause) => cause.field), field)
    })
  }
})

describe("AgentRun updates", () => {
  const created = member({ input: "go", keepAlive: true, deadline: "1h", dependsOn: ["t0"], parallelism: 4 })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  it("accepts a change of state", () => {
    assert.deepStrictEqual(updateRefusals(agentRun, created, changed({ state: "Cancelled" })), {
      immutable: [],
      invalid: []
    })
  })

  /** Everything but state is immutable after create (spec: AgentRun). */
  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["agent", { agent: "writer" }, "spec.agent"],
    ["input", { input: "other" }, "spec.input"],
    ["keepAlive", { keepAlive: false }, "spec.keepAlive"],
    ["deadline", { deadline: "2h" }, "spec.deadline"],
    ["group", { group: "other" }, "spec.group"],
    ["taskKey", { taskKey: "t2" }, "spec.taskKey"],
    ["dependsOn", { dependsOn: ["t0", "t3"] }, "spec.dependsOn"],
    ["parallelism", { parallelism: 8 }, "spec.parallelism"]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(agentRun, created, changed(fields)).immutable, path)
    })
  }

  it("refuses removing an immutable field", () => {
    const { keepAlive: _keepAlive, ...without } = created
    assert.include(updateRefusals(agentRun, created, without).immutable, "spec.keepAlive")
  })

  it("keeps a Cancelled run cancelled (transition rule)", () => {
    assert.deepStrictEqual(agentRunTransitions({ state: "Running" }, { state: "Cancelled" }), [])
    assert.deepStrictEqual(agentRunTransitions({ state: "Cancelled" }, { state: "Cancelled" }), [])
    assert.deepStrictEqual(
      agentRunTransitions({ state: "Cancelled" }, { state: "Running" }).map((cause) => cause.field),
      ["spec.state"]
    )
  })
})
