/**
 * AgentRun (spec: AgentRun): "one durable execution of an Agent revision; survives restarts by replaying its journal
 * and never repeats a recorded model call or tool call", in its own Sandbox. The spec schema admits what clients write
 * (the Agent, the first prompt of at most 256 KiB, the group task it is, its dependencies and team sizing); `updates`
 * keeps everything but `state` immutable after create (spec: AgentRun). `agentRunTransitions` holds the state rule
 * the update rules cannot express (the cancel state is final), which the definition's `transitions` runs on every
 * update.
 */
import { Schema } from "effect"
import type { Json } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  duration,
  intAtLeast,
  intBetween,
  oneOf,
  onlyWith,
  optional,
  uniqueBy,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, totalCost, wide } from "../../core/meta/Kinds.ts"
import { dns1123SubdomainMaxLength, utf8Length } from "../../core/meta/Names.ts"
import { Dns1123Label, ObjectName } from "../../core/meta/ObjectMeta.ts"
import { finalState, type KindDefinition, type ServedKind } from "../../core/schemas/Kind.ts"
import { Cost, Sha256Hex, Timestamp } from "../../core/schemas/Shared.ts"
import { AgentReference } from "../agent/AgentSchema.ts"

/**
 * AgentRun states a caller writes to `spec.state`: Running (default) | the cancel state (named Cancelled, as Job's).
 */
export const agentRunStates = ["Running", "Cancelled"] as const

/**
 * AgentRun phases in `status.phase` (spec: "Queued, Running, Waiting for a message or funds, then a terminal phase";
 * the terminal phases' names are nodus's: Succeeded, Failed, Cancelled, as the agentrun.* events name them).
 */
export const agentRunPhases = ["Queued", "Running", "Waiting", "Succeeded", "Failed", "Cancelled"] as const

/** How a turn's model was chosen (spec: turns[].routedBy). */
export const agentRunRoutings = ["jev", "fallback", "fixed"] as const

/** The bytes of a JSON value's text as the run stores it (compact JSON, UTF-8). */
export const jsonBytes = (value: Json): number => utf8Length(JSON.stringify(value))

// Spec: input is a JSON string or any JSON value, up to 256 KiB (Limits: AgentRun) — measured on its UTF-8 JSON text.
const input = Schema.Json.check(Schema.makeFilter(
  (value: Json) => {
    const bytes = jsonBytes(value)
    return bytes > Limits.agentRunInputBytesMax
      ? `Invalid value: ${bytes} bytes: the input's JSON text must be at most 256 KiB`
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
))

const AgentRunSpecFields = Schema.Struct({
  agent: described(
    AgentReference,
    "An Agent in the project, or platform/<name> for a template in the shared catalog project; with group, the group's Agent."
  ),
  input: optional(input, "First prompt: a JSON string or any JSON value, up to 256 KiB."),
  keepAlive: optional(Schema.Boolean, "Stay Waiting for messages after each turn instead of succeeding."),
  deadline: optional(
    duration({ minimumMs: Limits.secondMs }),
    "Fails the run with DeadlineExceeded once this long has passed since creation (at least 1s)."
  ),
  group: optional(
    ObjectName,
    "The AgentGroup the run is a task of; the run then runs the group's Agent, starts when the group releases it, and is named <group>-<taskKey>."
  ),
  taskKey: optional(Dns1123Label, "DNS label unique in the group; required with group (and only with it)."),
  dependsOn: optional(
    Schema.Array(Dns1123Label).check(uniqueBy((key: string) => key, "dependsOn task keys")),
    "Task keys of the group, each already in the group or earlier in the same AgentRunList; the run is canceled when one fails or is canceled. Only with group."
  ),
  parallelism: optional(
    intBetween(0, Limits.agentRunParallelismMax),
    "0 = automatic team sizing; 1 to 32 = ceiling within the Agent's cap."
  ),
  state: defaulted(
    oneOf(agentRunStates),
    "Running",
    "Running, or Cancelled (the cancel state: stops the run for good)."
  )
})

type AgentRunSpecInput = typeof AgentRunSpecFields.Type

// Spec: taskKey is "required with group".
const taskKeyRequiredWithGroup = Schema.makeFilter<AgentRunSpecInput>(
  (spec) =>
    spec.group !== undefined && spec.taskKey === undefined
      ? { path: ["taskKey"], issue: "Required value: taskKey is required with group" }
      : undefined,
  { toJsonSchema: () => ({ anyOf: [{ not: { required: ["group"] } }, { required: ["taskKey"] }] }) }
)

// Spec: the run is named <group>-<taskKey>, which must be an object name (at most 253 characters).
const runNameFits = Schema.makeFilter<AgentRunSpecInput>(
  (spec) => {
    if (spec.group === undefined || spec.taskKey === undefined) return undefined
    const name = `${spec.group}-${spec.taskKey}`
    return name.length > dns1123SubdomainMaxLength
      ? {
        path: ["taskKey"],
        issue:
          `Invalid value: "${spec.taskKey}": the run's name ${spec.group}-${spec.taskKey} must be no more than ${dns1123SubdomainMaxLength} characters`
      }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

// A run cannot wait for itself (nodus: a cycle of one; longer cycles need the group's other runs to see).
const notItsOwnDependency = Schema.makeFilter<AgentRunSpecInput>(
  (spec) =>
    (spec.dependsOn ?? []).flatMap((key, index) =>
      key === spec.taskKey
        ? [{ path: ["dependsOn", index], issue: `Invalid value: "${key}": a run cannot depend on its own taskKey` }]
        : []
    ),
  { toJsonSchema: () => [{}, true] }
)

export const AgentRunSpec = AgentRunSpecFields
  .check(
    // nodus: taskKey and dependsOn name tasks of a group, so neither means anything without one.
    onlyWith<AgentRunSpecInput>("taskKey", "group", (spec) => spec.group !== undefined),
    onlyWith<AgentRunSpecInput>("dependsOn", "group", (spec) => spec.group !== undefined),
    taskKeyRequiredWithGroup,
    runNameFits,
    notItsOwnDependency
  )
  .annotate({
    identifier: "AgentRunSpec",
    description:
      "What the AgentRun runs: an Agent revision, its first prompt and its place in a group (spec: AgentRun)."
  })

const answerPreview = Schema.String.check(Schema.makeFilter(
  (text: string) => {
    const bytes = utf8Length(text)
    return bytes > Limits.agentRunAnswerPreviewBytes
      ? `Invalid value: ${bytes} bytes: the preview is the first 4 KiB of the answer`
      : undefined
  },
  { toJsonSchema: () => ({ maxLength: Limits.agentRunAnswerPreviewBytes }) }
))

const Turn = Schema.Struct({
  prompt: described(Schema.String, "What started the turn: input or a message key."),
  model: described(Schema.String, "The model the turn used (chosen once per turn)."),
  family: optional(Schema.String, "The model's family."),
  routedBy: described(oneOf(agentRunRoutings), "jev (the router chose), fallback (with fallbackReason) or fixed."),
  fallbackReason: optional(Schema.String, "Why the router's choice was not used (routedBy fallback only)."),
  modelCalls: described(intAtLeast(0), "Model calls in the turn."),
  toolCalls: described(intAtLeast(0), "Tool calls in the turn."),
  inputTokens: described(intAtLeast(0), "Input tokens, cache reads and writes included."),
  outputTokens: described(intAtLeast(0), "Output tokens."),
  costUSD: optional(usd, "What the turn's model usage cost.")
}).check(onlyWith("fallbackReason", "routedBy fallback", (turn) => turn.routedBy === "fallback"))

export const AgentRunStatus = Schema.Struct({
  phase: optional(
    oneOf(agentRunPhases),
    "Queued, Running, Waiting (for a message or funds), then Succeeded, Failed or Cancelled."
  ),
  reason: optional(Schema.String, "Why, e.g. WaitingForMessage, MaxCostReached, DeadlineExceeded."),
  message: optional(Schema.String, "Details for people."),
  answer: optional(
    Schema.Struct({
      preview: described(answerPreview, "The first 4 KiB of the answer."),
      sha256: described(Sha256Hex, "Digest of the whole answer."),
      size: described(intAtLeast(0), "The answer's size in bytes.")
    }),
    "The run's answer."
  ),
  completionTime: optional(Timestamp, "When the run reached a terminal phase."),
  startTime: optional(Timestamp, "When the run started."),
  cost: optional(Cost, "A display copy of the ledger."),
  dispatches: optional(intAtLeast(0), "Times the run was dispatched; more than one means it was recovered."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  revision: optional(intAtLeast(1), "The Agent revision pinned at admission."),
  sandbox: optional(Schema.String, "The run's Sandbox (deleted when the run ends)."),
  steps: optional(Schema.Struct({ total: optional(intAtLeast(0), "Steps taken.") }), "Steps."),
  turns: optional(Schema.Array(Turn), "One entry per turn.")
}).annotate({ identifier: "AgentRunStatus", description: "What the service observed of the AgentRun." })

/** The state rule `updates` cannot express: the cancel state is final (spec: AgentRun, "canceled"). */
export const agentRunTransitions = finalState("Cancelled", "AgentRun")

export const agentRun: KindDefinition = {
  spec: AgentRunSpec,
  status: AgentRunStatus,
  // Spec: AgentRun — "Everything is immutable after create except state".
  updates: { mutable: ["state"] },
  transitions: agentRunTransitions
}

/**
 * How the API serves AgentRun (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const agentRunServed: ServedKind = {
  info: kindInfo({
    kind: "AgentRun",
    plural: "agentruns",
    shortNames: ["ar"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Agent", "spec.agent", "The Agent this run executes")],
    description: "A durable conversation of an Agent revision in its own Sandbox."
  }),
  definition: agentRun
}
