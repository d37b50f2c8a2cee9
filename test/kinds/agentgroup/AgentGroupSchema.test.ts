/**
 * The AgentGroup's admission rules (spec: AgentGroup, Limits, Conventions 4), one row per rule: the spec as written,
 * and either the field path admission refuses or what the admitted spec holds. Then its update rules: maxCostUSD only
 * rises, agent and evaluation are fixed at create, sealed only moves from false to true, the cancel state is final.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { agentGroup, AgentGroupStatus, agentGroupTransitions } from "../../../src/kinds/agentgroup/AgentGroupSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { agent: "researcher" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const evaluation = (fields: JsonObject): JsonObject =>
  spec({ evaluation: { environment: "platform/gsm8k@1.2.0", tasks: 10, ...fields } })

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no agent", { limits: { maxActive: 5 } }, "spec.agent"],
  ["an agent that is no name", { agent: "Research Bot" }, "spec.agent"],
  ["maxActive above 1000", spec({ limits: { maxActive: 1001 } }), "spec.limits.maxActive"],
  ["negative maxActive", spec({ limits: { maxActive: -1 } }), "spec.limits.maxActive"],
  ["maxPending above 10000", spec({ limits: { maxPending: 10_001 } }), "spec.limits.maxPending"],
  ["negative maxPending", spec({ limits: { maxPending: -1 } }), "spec.limits.maxPending"],
  ["an unknown limit", spec({ limits: { maxRuns: 5 } }), "spec.limits.maxRuns"],
  ["a maxCostUSD that is not a decimal", spec({ maxCostUSD: "ten" }), "spec.maxCostUSD"],
  ["an empty maxCostUSD string", spec({ maxCostUSD: "" }), "spec.maxCostUSD"],
  ["a maxCostUSD with 7 decimals", spec({ maxCostUSD: "1.0000001" }), "spec.maxCostUSD"],
  ["sealed that is not a bool", spec({ sealed: "true" }), "spec.sealed"],
  ["an unknown state", spec({ state: "Suspended" }), "spec.state"],
  ["evaluation without environment", spec({ evaluation: { tasks: 10 } }), "spec.evaluation.environment"],
  ["evaluation without tasks", spec({ evaluation: { environment: "gsm8k@1.0.0" } }), "spec.evaluation.tasks"],
  ["an environment without a version", evaluation({ environment: "platform/gsm8k" }), "spec.evaluation.environment"],
  [
    "an environment version that is not SemVer",
    evaluation({ environment: "gsm8k@1.2" }),
    "spec.evaluation.environment"
  ],
  // One Environment reference grammar for every kind that names one (Environment.ts): SemVer forbids leading zeros.
  [
    "an environment prerelease with a leading zero",
    evaluation({ environment: "gsm8k@1.2.0-01" }),
    "spec.evaluation.environment"
  ],
  [
    "an environment in another project than platform",
    evaluation({ environment: "other/gsm8k@1.0.0" }),
    "spec.evaluation.environment"
  ],
  ["an unknown split", evaluation({ split: "validation" }), "spec.evaluation.split"],
  ["the split in capitals", evaluation({ split: "Test" }), "spec.evaluation.split"],
  ["0 tasks", evaluation({ tasks: 0 }), "spec.evaluation.tasks"],
  ["101 tasks", evaluation({ tasks: 101 }), "spec.evaluation.tasks"],
  ["0 repetitions", evaluation({ repetitions: 0 }), "spec.evaluation.repetitions"],
  ["tasks x repetitions above 100", evaluation({ tasks: 34, repetitions: 3 }), "spec.evaluation.repetitions"],
  ["a seed that is not an integer", evaluation({ seed: 1.5 }), "spec.evaluation.seed"],
  ["an evaluation timeout below 1m", evaluation({ timeout: "59s" }), "spec.evaluation.timeout"],
  ["an evaluation timeout above 24h", evaluation({ timeout: "25h" }), "spec.evaluation.timeout"],
  ["an unknown evaluation field", evaluation({ grader: "exact" }), "spec.evaluation.grader"],
  ["an unknown field", spec({ parallelism: 3 }), "spec.parallelism"]
]

describe("AgentGroup admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(agentGroup, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states, visible on read", () => {
    const admission = admitSpec(agentGroup, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec, {
        ...base,
        limits: { maxActive: 10, maxPending: 10_000 },
        state: "Running"
      })
    }
  })

  it("stores zero limits as their defaults (10 and 10000 when zero)", () => {
    const admission = admitSpec(agentGroup, spec({ limits: { maxActive: 0, maxPending: 0 } }))
    assert.strictEqual(
      admission._tag === "Admitted" && JSON.stringify(admission.spec["limits"]),
      JSON.stringify({ maxActive: 10, maxPending: 10_000 })
    )
    const one = admitSpec(agentGroup, spec({ limits: { maxActive: 0, maxPending: 50 } }))
    assert.strictEqual(
      one._tag === "Admitted" && JSON.stringify(one.spec["limits"]),
      JSON.stringify({ maxActive: 10, maxPending: 50 })
    )
  })

  it("applies the evaluation's defaults", () => {
    const admission = admitSpec(agentGroup, evaluation({}))
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec["evaluation"], {
        environment: "platform/gsm8k@1.2.0",
        split: "test",
        tasks: 10,
        repetitions: 1,
        timeout: "30m"
      })
    }
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ limits: { maxActive: 1, maxPending: 1 }, maxCostUSD: "0.000001", sealed: true, state: "Cancelled" }),
      spec({ limits: { maxActive: 1000, maxPending: 10_000 }, maxCostUSD: "250" }),
      spec({ agent: "platform/swe-agent" }),
      evaluation({ tasks: 100, repetitions: 1, timeout: "1m", split: "train", seed: 7 }),
      evaluation({ tasks: 1, repetitions: 100, timeout: "24h" }),
      evaluation({ tasks: 50, repetitions: 2 }),
      evaluation({ environment: "my-env@0.1.0-rc.1+build.5" })
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(agentGroup, edge)._tag, "Admitted", JSON.stringify(admitSpec(agentGroup, edge)))
    }
  })
})

describe("AgentGroup status", () => {
  const admitStatus = (status: Json) => admit(AgentGroupStatus, status, "Strict", { kind: "agentgroups" }, "AgentGroup")

  it("admits what the service writes", () => {
    const status = {
      phase: "Failed",
      reason: "RunsFailed",
      startTime: "2026-01-02T15:04:05Z",
      completionTime: "2026-01-02T16:04:05Z",
      cleanup: "Complete",
      blockedReasons: [{ reason: "MaxActiveReached", count: 40 }, { reason: "DependencyWait", count: 2 }],
      counts: { total: 50, queued: 0, active: 0, waiting: 0, succeeded: 48, failed: 2, cancelled: 0 },
      evaluation: {
        total: 50,
        pending: 0,
        passed: 30,
        incorrect: 15,
        failed: 2,
        cancelled: 0,
        infrastructureFailure: 1,
        invalidOutput: 1,
        missingAnswer: 1,
        passRate: "0.625",
        meanReward: "-0.25",
        initialized: true,
        agentUID: "u-1",
        agentRevision: 4,
        environmentDigest: `sha256:${"b".repeat(64)}`
      }
    }
    assert.isTrue(Result.isSuccess(admitStatus(status)), JSON.stringify(admitStatus(status)))
  })

  const refusedStatus: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["an unknown phase", { phase: "Done" }, "phase"],
    ["an unknown cleanup", { cleanup: "Done" }, "cleanup"],
    ["an unknown blocked reason", { blockedReasons: [{ reason: "Paused", count: 1 }] }, "blockedReasons[0].reason"],
    ["a blocked reason without count", { blockedReasons: [{ reason: "MaxCostReached" }] }, "blockedReasons[0].count"],
    ["a negative count", { counts: { failed: -1 } }, "counts.failed"],
    ["a passRate above 1", { evaluation: { passRate: "1.5" } }, "evaluation.passRate"],
    ["a passRate that is a number", { evaluation: { passRate: 0.5 } }, "evaluation.passRate"],
    ["a meanReward that is no decimal", { evaluation: { meanReward: "high" } }, "evaluation.meanReward"]
  ]

  for (const [rule, status, field] of refusedStatus) {
    it(`refuses ${rule} at ${field}`, () => {
      const result = admitStatus(status)
      assert.isTrue(Result.isFailure(result), rule)
      if (Result.isFailure(result)) assert.include((result.failure.causes ?? []).map((cause) => cause.field), field)
    })
  }
})

describe("AgentGroup updates", () => {
  const created: JsonObject = { ...evaluation({}), limits: { maxActive: 5 }, maxCostUSD: "100" }
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  /** Changes that may be made after create, each accepted. */
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["limits.maxActive", { limits: { maxActive: 50 } }],
    ["limits.maxPending", { limits: { maxActive: 5, maxPending: 200 } }],
    ["maxCostUSD raised", { maxCostUSD: "100.01" }],
    ["sealed", { sealed: true }],
    ["state", { state: "Cancelled" }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(agentGroup, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }

  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["agent", { agent: "writer" }, "spec.agent"],
    ["evaluation.tasks", { evaluation: { environment: "platform/gsm8k@1.2.0", tasks: 20 } }, "spec.evaluation.tasks"],
    [
      "evaluation.environment",
      { evaluation: { environment: "platform/gsm8k@1.3.0", tasks: 10 } },
      "spec.evaluation.environment"
    ],
    [
      "evaluation.timeout",
      { evaluation: { environment: "platform/gsm8k@1.2.0", tasks: 10, timeout: "1h" } },
      "spec.evaluation.timeout"
    ]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(agentGroup, created, changed(fields)).immutable, path)
    })
  }

  it("refuses adding or removing an evaluation after create", () => {
    // Causes name the changed leaves.
    assert.include(updateRefusals(agentGroup, base, created).immutable, "spec.evaluation.environment")
    const { evaluation: _evaluation, ...without } = created
    assert.include(updateRefusals(agentGroup, created, without).immutable, "spec.evaluation.tasks")
  })

  it("refuses lowering maxCostUSD, and adding one after create; allows removing it", () => {
    assert.deepStrictEqual(updateRefusals(agentGroup, created, changed({ maxCostUSD: "99.99" })).invalid, [
      "spec.maxCostUSD"
    ])
    assert.deepStrictEqual(updateRefusals(agentGroup, base, spec({ maxCostUSD: "5" })).invalid, ["spec.maxCostUSD"])
    const { maxCostUSD: _cap, ...uncapped } = created
    assert.deepStrictEqual(updateRefusals(agentGroup, created, uncapped).invalid, [])
  })

  it("moves sealed from false to true only, and keeps a Cancelled group cancelled (transition rules)", () => {
    assert.deepStrictEqual(agentGroupTransitions({}, { sealed: true }), [])
    assert.deepStrictEqual(agentGroupTransitions({ sealed: false }, { sealed: true }), [])
    assert.deepStrictEqual(agentGroupTransitions({ sealed: true }, { sealed: true }), [])
    assert.deepStrictEqual(agentGroupTransitions({ sealed: true }, { sealed: false }).map((cause) => cause.field), [
      "spec.sealed"
    ])
    assert.deepStrictEqual(agentGroupTransitions({ sealed: true }, {}).map((cause) => cause.field), ["spec.sealed"])
    assert.deepStrictEqual(agentGroupTransitions({ state: "Running" }, { state: "Cancelled" }), [])
    assert.deepStrictEqual(
      agentGroupTransitions({ state: "Cancelled" }, { state: "Running" }).map((cause) => cause.field),
      ["spec.state"]
    )
  })
})
