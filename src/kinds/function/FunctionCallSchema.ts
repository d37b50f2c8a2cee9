/**
 * FunctionCall (spec: FunctionCall): one invocation of a Function; `.remote()` and `.spawn()` create one, `.map()` one
 * per input in batches of up to 1,000. The spec schema admits the call as written: the Function it invokes, its input
 * Payload, its place in a map, the caller's session, its state and its deadline. Everything but `state` is immutable
 * after create. Rules that need the Function itself (the call's timeout at most the Function's, and defaulting to it)
 * are the server's, not this pure schema's; docs/kinds/FunctionCall.md says which rules are whose.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  duration,
  nonEmpty,
  notEmpty,
  oneOf,
  onlyWith,
  optional,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, wide } from "../../core/meta/Kinds.ts"
import { LabelValue, ObjectName } from "../../core/meta/ObjectMeta.ts"
import { finalState, type KindDefinition, type ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, Estimate, NonNegativeInt, Payload, Timestamp } from "../../core/schemas/Shared.ts"

/** The state a caller writes to cancel a call (spec: "Running (default) or the cancel state"; nodus names it). */
export const functionCallCancelState = "Cancelled"

/** FunctionCall states a caller writes to `spec.state`. */
export const functionCallStates = ["Running", functionCallCancelState] as const

/**
 * FunctionCall phases in `status.phase` (spec: Queued | Running | Recovering | Succeeded | Failed | two cancel phases;
 * nodus names the cancel phases Cancelling and Cancelled).
 */
export const functionCallPhases = [
  "Queued",
  "Running",
  "Recovering",
  "Succeeded",
  "Failed",
  "Cancelling",
  "Cancelled"
] as const

/** The phases a call ends in: its result or error is final (the result long poll answers then). */
export const functionCallFinalPhases = ["Succeeded", "Failed", "Cancelled"] as const

/**
 * Why a call failed or stopped (spec: RemoteError | DeadlineExceeded | RecoveryLimitExceeded | FunctionDeleted | the
 * cancel reason).
 */
export const functionCallReasons = [
  "RemoteError",
  "DeadlineExceeded",
  "RecoveryLimitExceeded",
  "FunctionDeleted",
  "Cancelled"
] as const

/** A non-empty label value: the server copies mapId into the label {api_group}/map (spec: FunctionCall.mapId). */
const mapLabelValue = LabelValue.check(notEmpty)

// ---------------------------------------------------------------------------------------------------------------------
// Spec

const FunctionCallSpecFields = Schema.Struct({
  function: described(ObjectName, "The name of a Function in the project."),
  input: optional(Payload, "The call's arguments (exactly one of inline, at most 64 KiB base64, and blob)."),
  mapId: optional(
    mapLabelValue,
    "Groups the calls of one map; the server adds the label {api_group}/map with this value."
  ),
  mapIndex: optional(NonNegativeInt, "The input's position in its map (only with mapId)."),
  session: optional(nonEmpty, "The caller's session id; claims take turns between sessions."),
  state: defaulted(oneOf(functionCallStates), "Running", "Running, or Cancelled (stops the call for good)."),
  timeout: optional(
    duration({ minimumMs: Limits.functionTimeoutMsMin, maximumMs: Limits.functionTimeoutMsMax }),
    "Per-call deadline, at most the Function's timeout (checked by the server); unset takes the Function's."
  )
})

type FunctionCallSpecInput = typeof FunctionCallSpecFields.Type

// nodus: a map call carries both its map and its position in it (docs/kinds/FunctionCall.md).
const mapIndexWithMapId = onlyWith<FunctionCallSpecInput>("mapIndex", "mapId", (spec) => spec.mapId !== undefined)
const mapIdWithMapIndex = Schema.makeFilter<FunctionCallSpecInput>(
  (spec) =>
    spec.mapId !== undefined && spec.mapIndex === undefined
      ? { path: ["mapIndex"], issue: "Required value: a call of a map needs its mapIndex" }
      : undefined,
  { toJsonSchema: () => [{}, true] }
)

export const FunctionCallSpec = FunctionCallSpecFields
  .check(mapIndexWithMapId, mapIdWithMapIndex)
  .annotate({ identifier: "FunctionCallSpec", description: "One invocation of a Function (spec: FunctionCall)." })

// ---------------------------------------------------------------------------------------------------------------------
// Status

export const FunctionCallStatus = Schema.Struct({
  completionTime: optional(Timestamp, "When the call ended."),
  conditions: optional(Schema.Array(Condition), "Funded and Scheduled."),
  costUSD: optional(usd, "Worker time, whole seconds at the Function's per-call rate."),
  error: optional(
    Schema.Struct({
      type: optional(Schema.String, "The qualified exception name."),
      message: optional(Schema.String, "Scrubbed exception message."),
      traceback: optional(Schema.String, "Scrubbed traceback.")
    }),
    "What the function raised."
  ),
  estimate: optional(Estimate, "The estimate at create."),
  message: optional(Schema.String, "Details for humans."),
  phase: optional(
    oneOf(functionCallPhases),
    "Queued, Running, Recovering, Succeeded, Failed, Cancelling or Cancelled."
  ),
  reason: optional(
    oneOf(functionCallReasons),
    "RemoteError, DeadlineExceeded, RecoveryLimitExceeded, FunctionDeleted or Cancelled."
  ),
  recoveries: optional(NonNegativeInt, "Re-dispatches after worker loss."),
  result: optional(Payload, "The return value."),
  retries: optional(NonNegativeInt, "Exception retries used."),
  retryTime: optional(Timestamp, "nodus: when a call that raised is dispatched again (its retry's backoff ends)."),
  startTime: optional(Timestamp, "When a worker last started the call."),
  worker: optional(
    Schema.Struct({
      attempt: optional(Schema.String, "The worker's Attempt."),
      epoch: optional(NonNegativeInt, "The dispatch epoch; a result from another epoch is fenced.")
    }),
    "The worker running the call."
  )
}).annotate({ identifier: "FunctionCallStatus", description: "What the service observed of the call." })

export const functionCall: KindDefinition = {
  spec: FunctionCallSpec,
  status: FunctionCallStatus,
  // Spec: FunctionCall — everything in spec but state is immutable.
  updates: { mutable: ["state"] },
  // Cancelling a call is not undone (its worker is stopped and its result discarded).
  transitions: finalState(functionCallCancelState, "FunctionCall")
}

export type FunctionCallSpecType = typeof FunctionCallSpec.Type
export type FunctionCallStatusType = typeof FunctionCallStatus.Type

/**
 * How the API serves FunctionCall (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const functionCallServed: ServedKind = {
  info: kindInfo({
    kind: "FunctionCall",
    plural: "functioncalls",
    shortNames: ["fnc"],
    operations: fullOps,
    costPath: "status.costUSD",
    columns: [wide("Function", "spec.function", "The Function invoked")],
    description: "One invocation of a Function."
  }),
  definition: functionCall
}
