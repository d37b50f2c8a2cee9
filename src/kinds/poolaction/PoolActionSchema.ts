/**
 * PoolAction (spec: Areas "Own and other capacity", Events pool.action_proposed, errors PoolActPaused,
 * PoolActionNotPending, PoolActionNotReversible): an action the service proposed or took on a Pool under its act
 * policies. The service creates it (the plural has list, read and patch, no create); the user approves, rejects or
 * reverts it by patching `spec.state`. The spec does not show its fields: this module's schema is nodus's own
 * (docs/kinds/PoolAction.md) — which action, on what, with which parameters, whether it can be reverted, its state —
 * plus `poolActionStateChange`, the rule for a user's change of state that the write path answers with the spec's
 * codes.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  duration,
  intAtLeast,
  nonEmpty,
  oneOf,
  onlyWith,
  optional,
  uniqueBy,
  usd
} from "../../core/meta/Fields.ts"
import { kindInfo, readOps } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, Timestamp } from "../../core/schemas/Shared.ts"
import { poolActions } from "../pool/PoolSchema.ts"

/** PoolAction states (nodus's own value set, docs/kinds/PoolAction.md). */
export const poolActionStates = ["Pending", "Approved", "Rejected", "Applied", "Reverted"] as const

export type PoolActionState = (typeof poolActionStates)[number]

type PoolActionKind = (typeof poolActions)[number]

const PoolActionSpecFields = Schema.Struct({
  pool: described(nonEmpty, "The Pool the action is on."),
  action: described(
    oneOf(poolActions),
    "IdleReclaim, Drain, Defragment, WaitTuning or Burst (the Pool's policy actions)."
  ),
  reversible: described(Schema.Boolean, "Whether the action can be reverted once applied (state Reverted)."),
  state: defaulted(
    oneOf(poolActionStates),
    "Pending",
    "Pending (default), Approved, Rejected, Applied or Reverted; the user approves, rejects or reverts."
  ),
  nodes: optional(
    Schema.Array(nonEmpty).check(uniqueBy((node: string) => node, "nodes")),
    "The Nodes it acts on (IdleReclaim and Drain: required; Defragment: optional)."
  ),
  gpus: optional(intAtLeast(1), "GPUs to add from the market (Burst only; required)."),
  rateUSDPerHour: optional(usd, "Highest hourly rate of the burst, a decimal USD string (Burst only)."),
  waitTimeout: optional(
    duration({ minimumMs: Limits.poolWaitTimeoutMsMin, maximumMs: Limits.poolWaitTimeoutMsMax }),
    "The routing.waitTimeout it sets, 1m to 24h (WaitTuning only; required)."
  ),
  startTime: optional(Timestamp, "When the Drain window opens (Drain only)."),
  duration: optional(
    duration({ minimumMs: Limits.poolPolicyDurationMsMin }),
    "How long the Drain window stays open, at least 1m (Drain only)."
  )
})

type PoolActionSpecInput = typeof PoolActionSpecFields.Type

const onlyFor = (field: string, actions: ReadonlyArray<PoolActionKind>) =>
  onlyWith<PoolActionSpecInput>(field, `action ${actions.join(" or ")}`, (spec) => actions.includes(spec.action))

/** The parameter each action cannot do without (nodus). */
const requiredParameter: Readonly<Partial<Record<PoolActionKind, keyof PoolActionSpecInput>>> = {
  IdleReclaim: "nodes",
  Drain: "nodes",
  Burst: "gpus",
  WaitTuning: "waitTimeout"
}

const actionHasItsParameter = Schema.makeFilter<PoolActionSpecInput>(
  (spec) => {
    const field = requiredParameter[spec.action]
    return field !== undefined && spec[field] === undefined
      ? { path: [field], issue: `Required value: action ${spec.action} needs ${field}` }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

export const PoolActionSpec = PoolActionSpecFields
  .check(
    onlyFor("nodes", ["IdleReclaim", "Drain", "Defragment"]),
    onlyFor("gpus", ["Burst"]),
    onlyFor("rateUSDPerHour", ["Burst"]),
    onlyFor("waitTimeout", ["WaitTuning"]),
    onlyFor("startTime", ["Drain"]),
    onlyFor("duration", ["Drain"]),
    actionHasItsParameter
  )
  .annotate({ identifier: "PoolActionSpec", description: "An action proposed or taken on a Pool, and its state." })

export const PoolActionStatus = Schema.Struct({
  reason: optional(
    Schema.String,
    "One CamelCase word: why it was proposed (e.g. IdleFor, ForecastShortfall) or canceled (Paused)."
  ),
  message: optional(Schema.String, "What the action does and what it is expected to change."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Conditions of the action."),
  decidedTime: optional(Timestamp, "When it was approved or rejected."),
  appliedTime: optional(Timestamp, "When it was applied."),
  revertedTime: optional(Timestamp, "When it was reverted.")
}).annotate({ identifier: "PoolActionStatus", description: "What the service observed of the action." })

export const poolAction: KindDefinition = {
  spec: PoolActionSpec,
  status: PoolActionStatus,
  // nodus: what the action is was decided by the service; only its state changes afterwards.
  updates: { mutable: ["state"] }
}

/** A refused change of state, with the spec's error code. */
export interface PoolActionRefusal {
  readonly code: "PoolActionNotPending" | "PoolActionNotReversible" | "PoolActPaused" | "Invalid"
  readonly message: string
}

/**
 * Whether a user may move a PoolAction from `from` to `to` (spec: PoolActionNotPending, PoolActionNotReversible,
 * PoolActPaused; the moves are nodus's own): Approved or Rejected only from Pending; approving is refused while the
 * Pool's act.paused is set; Reverted only from Applied and only when reversible; Pending and Applied are set by the
 * service alone. No change is always allowed. Undefined when the move is allowed.
 */
export const poolActionStateChange = (change: {
  readonly from: PoolActionState
  readonly to: PoolActionState
  readonly reversible: boolean
  readonly paused: boolean
}): PoolActionRefusal | undefined => {
  const { from, to } = change
  if (from === to) return undefined
  switch (to) {
    case "Approved":
    case "Rejected":
      if (from !== "Pending") {
        return {
          code: "PoolActionNotPending",
          message: `the action is ${from}; only a Pending action can be ${to.toLowerCase()}`
        }
      }
      return to === "Approved" && change.paused
        ? { code: "PoolActPaused", message: "the Pool's act.paused is set; unpause it to approve actions" }
        : undefined
    case "Reverted":
      if (!change.reversible) return { code: "PoolActionNotReversible", message: "the action cannot be reverted" }
      return from === "Applied"
        ? undefined
        : { code: "PoolActionNotReversible", message: `the action is ${from}; only an Applied action can be reverted` }
    case "Pending":
    case "Applied":
      return { code: "Invalid", message: `Forbidden: only the service sets state ${to}` }
  }
}

/**
 * How the API serves PoolAction (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const poolActionServed: ServedKind = {
  info: kindInfo({
    kind: "PoolAction",
    plural: "poolactions",
    shortNames: ["pa"],
    operations: [...readOps, "patch", "getStatus", "writeStatus"],
    description: "An action proposed or taken on a Pool."
  }),
  definition: poolAction
}
