/**
 * AgentGroup (spec: AgentGroup): "many AgentRuns of one Agent with a concurrency limit, dependency graph, shared cost
 * cap"; member runs are AgentRuns created with spec.group. The spec schema admits the group's Agent, its limits (0
 * means the default: `normalize` stores 10 and 10000), the shared maxCostUSD, `sealed`, the state and an optional
 * evaluation. `updates`: maxCostUSD only rises (Conventions 4); agent and evaluation are fixed at create (nodus).
 * `agentGroupTransitions` holds the rules updates cannot express (sealed only moves false → true; the cancel state is
 * final), which the definition's `transitions` runs on every update.
 */
import { Schema } from "effect"
import { isObject, type JsonObject } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import { type Cause, fieldInvalid } from "../../core/meta/ApiError.ts"
import {
  decimalString,
  defaulted,
  described,
  duration,
  intAtLeast,
  intBetween,
  matching,
  oneOf,
  optional,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, totalCost, wide } from "../../core/meta/Kinds.ts"
import { finalState, type KindDefinition, type ServedKind } from "../../core/schemas/Kind.ts"
import { Cost, Timestamp } from "../../core/schemas/Shared.ts"
import { AgentReference } from "../agent/AgentSchema.ts"
import { EnvironmentReference } from "../environment/EnvironmentSchema.ts"

/** AgentGroup states a caller writes to `spec.state`: Running (default) | the cancel state (named Cancelled). */
export const agentGroupStates = ["Running", "Cancelled"] as const

/**
 * AgentGroup phases (spec: States and transitions — Running, then Succeeded, Failed (RunsFailed), or "canceling, then
 * canceled"; the spellings Cancelling and Cancelled are nodus's, as status.counts.cancelled writes it).
 */
export const agentGroupPhases = ["Running", "Cancelling", "Succeeded", "Failed", "Cancelled"] as const

export const agentGroupBlockedReasons = ["DependencyWait", "MaxActiveReached", "MaxCostReached"] as const

/** A decimal from 0 to 1. */
const fraction = matching(/^(0(\.[0-9]+)?|1(\.0+)?)$/u, "must be a decimal number from 0 to 1 such as 0.75")

const AgentGroupLimits = Schema.Struct({
  maxActive: defaulted(
    intBetween(0, Limits.agentGroupMaxActiveMax),
    Limits.agentGroupMaxActiveDefault,
    "Member runs active at once, 1 to 1000 (10 when zero)."
  ),
  maxPending: defaulted(
    intBetween(0, Limits.agentGroupMaxPendingMax),
    Limits.agentGroupMaxPendingDefault,
    "Unfinished member runs admitted, 1 to 10000 (10000 when zero)."
  )
})

const EvaluationFields = Schema.Struct({
  environment: described(
    EnvironmentReference,
    "The Environment: <name>@<version> in the project, or platform/<name>@<version>; resolved to an image digest."
  ),
  split: defaulted(oneOf(["train", "test"]), "test", "train or test."),
  tasks: described(intBetween(1, Limits.evaluationTasksMax), "The first N tasks in manifest order, 1 to 100."),
  repetitions: defaulted(
    intBetween(1, Limits.evaluationTaskRepetitionsMax),
    1,
    "Runs per task; tasks x repetitions at most 100."
  ),
  seed: optional(Schema.Int, "Seed passed to the Environment's tasks command."),
  timeout: defaulted(
    duration({ minimumMs: Limits.evaluationTimeoutMsMin, maximumMs: Limits.evaluationTimeoutMsMax }),
    Limits.evaluationTimeoutDefault,
    "From creation, preparation and queue time included; 1m to 24h."
  )
})

type EvaluationInput = typeof EvaluationFields.Type

// Spec: AgentGroup; Limits — tasks x repetitions at most 100.
const taskRepetitionsWithinLimit = Schema.makeFilter<EvaluationInput>(
  (evaluation) =>
    evaluation.tasks * evaluation.repetitions > Limits.evaluationTaskRepetitionsMax
      ? {
        path: ["repetitions"],
        issue:
          `Invalid value: ${evaluation.repetitions}: tasks x repetitions (${evaluation.tasks} x ${evaluation.repetitions}) must be at most ${Limits.evaluationTaskRepetitionsMax}`
      }
      : undefined,
  { toJsonSchema: () => [{}, true] }
)

const Evaluation = EvaluationFields.check(taskRepetitionsWithinLimit)

export const AgentGroupSpec = Schema.Struct({
  agent: described(
    AgentReference,
    "The Agent every member runs: an Agent in the project, or platform/<name> for a catalog template."
  ),
  limits: defaulted(AgentGroupLimits, {}, "Concurrency limits."),
  maxCostUSD: optional(
    usd,
    "One cap on model usage of all member runs together; none when empty. A member starts only while it fits; Sandbox cost is not counted; raise only."
  ),
  sealed: optional(
    Schema.Boolean,
    "False to true only: a sealed group admits no new members and finishes once every member is terminal."
  ),
  state: defaulted(
    oneOf(agentGroupStates),
    "Running",
    "Running, or Cancelled (the cancel state: cancels every unfinished member)."
  ),
  evaluation: optional(
    Evaluation,
    "Evaluate the Agent on an Environment's tasks; its compute is billed separately from maxCostUSD."
  )
}).annotate({
  identifier: "AgentGroupSpec",
  description: "The group's Agent, limits, cost cap and evaluation (spec: AgentGroup)."
})

const count = (description: string) => optional(intAtLeast(0), description)

export const AgentGroupStatus = Schema.Struct({
  phase: optional(oneOf(agentGroupPhases), "Running, Cancelling, then Succeeded, Failed or Cancelled."),
  reason: optional(Schema.String, "Why, e.g. RunsFailed."),
  message: optional(Schema.String, "Details for people."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  startTime: optional(Timestamp, "When the first member started."),
  completionTime: optional(Timestamp, "When the group finished."),
  cost: optional(Cost, "A display copy of the ledger."),
  cleanup: optional(
    oneOf(["Pending", "Complete"]),
    "Pending while canceled members are being cleaned up, then Complete."
  ),
  blockedReasons: optional(
    Schema.Array(Schema.Struct({
      reason: described(oneOf(agentGroupBlockedReasons), "DependencyWait, MaxActiveReached or MaxCostReached."),
      count: described(intAtLeast(0), "Member runs held back for this reason.")
    })),
    "Why queued members are not starting."
  ),
  counts: optional(
    Schema.Struct({
      total: count("Member runs."),
      queued: count("Queued."),
      active: count("Active."),
      waiting: count("Waiting."),
      succeeded: count("Succeeded."),
      failed: count("Failed."),
      cancelled: count("Cancelled.")
    }),
    "Member runs by phase."
  ),
  evaluation: optional(
    Schema.Struct({
      total: count("Task attempts (tasks x repetitions)."),
      pending: count("Not yet scored."),
      passed: count("Passed."),
      incorrect: count("Answered, and graded incorrect."),
      failed: count("The run failed."),
      cancelled: count("The run was canceled."),
      infrastructureFailure: count("Failed because of the service."),
      invalidOutput: count("The answer could not be graded."),
      missingAnswer: count("The run ended without an answer."),
      passRate: optional(
        fraction,
        "passed / scored, decimal; absent when no scored verdicts (unscored failures excluded)."
      ),
      meanReward: optional(decimalString, "Mean reward of scored verdicts, decimal; absent when none."),
      initialized: optional(Schema.Boolean, "True once the tasks are materialized and member runs created."),
      agentUID: optional(Schema.String, "The evaluated Agent's uid."),
      agentRevision: optional(intAtLeast(1), "The evaluated Agent revision."),
      environmentDigest: optional(Schema.String, "The Environment's resolved image digest.")
    }),
    "Evaluation results."
  )
}).annotate({ identifier: "AgentGroupStatus", description: "What the service observed of the AgentGroup." })

/** Spec: limits — "10 when zero", "10000 when zero": a 0 is stored as the default, so reads show what applies. */
export const normalizeAgentGroup = (spec: JsonObject): JsonObject => {
  const limits = spec["limits"]
  if (!isObject(limits)) return spec
  const maxActive = limits["maxActive"] === 0 ? Limits.agentGroupMaxActiveDefault : limits["maxActive"]
  const maxPending = limits["maxPending"] === 0 ? Limits.agentGroupMaxPendingDefault : limits["maxPending"]
  if (maxActive === limits["maxActive"] && maxPending === limits["maxPending"]) return spec
  return {
    ...spec,
    limits: {
      ...limits,
      ...(maxActive === undefined ? {} : { maxActive }),
      ...(maxPending === undefined ? {} : { maxPending })
    }
  }
}

/**
 * The update rules `updates` cannot express (spec: AgentGroup): `sealed` moves from false to true only (absent is
 * false), and the cancel state is final (nodus: "canceling, then canceled" has no way back). Causes at the field;
 * empty when the move is allowed.
 */
export const agentGroupTransitions = (before: JsonObject, after: JsonObject): ReadonlyArray<Cause> => [
  ...(before["sealed"] === true && after["sealed"] !== true
    ? [
      fieldInvalid(
        "spec.sealed",
        `Invalid value: ${
          JSON.stringify(after["sealed"] ?? false)
        }: a sealed AgentGroup stays sealed (sealed only moves from false to true)`
      )
    ]
    : []),
  ...finalState("Cancelled", "AgentGroup")(before, after)
]

export const agentGroup: KindDefinition = {
  spec: AgentGroupSpec,
  status: AgentGroupStatus,
  normalize: normalizeAgentGroup,
  // Spec: Conventions 4 — maxCostUSD only rises. nodus: the Agent and the evaluation are fixed at create, so every
  // member runs one Agent and the evaluation's results describe one task set.
  updates: { immutable: ["agent", "evaluation"], raiseOnly: ["maxCostUSD"] },
  transitions: agentGroupTransitions
}

/**
 * How the API serves AgentGroup (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const agentGroupServed: ServedKind = {
  info: kindInfo({
    kind: "AgentGroup",
    plural: "agentgroups",
    shortNames: ["agg"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Agent", "spec.agent", "The Agent every member run runs")],
    description: "Many AgentRuns of one Agent with a concurrency limit, dependency graph and shared cost cap."
  }),
  definition: agentGroup
}
