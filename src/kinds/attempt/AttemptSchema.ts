/**
 * Attempt (spec: Areas — History: "one run of capacity for a workload; a Workspace session is an Attempt with a
 * receipt"; Other kinds — "an Attempt carries a placement explanation and a receipt"; Job "every index runs as
 * Attempts"; Estimate.placementPreview.explain "same shape as the Attempt placement explanation"): a read-only record
 * the service writes for each run of capacity. The spec does not show its fields; this module decides a small schema
 * (docs/kinds/Attempt.md): which workload, index and epoch it ran for, and what it ran on, how it ended and what it
 * cost. Nothing in its spec changes after create.
 */
import { Schema } from "effect"
import { described, intAtLeast, nonEmpty, oneOf, optional, usd } from "../../core/meta/Fields.ts"
import { kindInfo, readOps, totalCost } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, Cost, CostSegments, Int32, NonNegativeInt } from "../../core/schemas/Shared.ts"

/** Kinds whose runs are Attempts (nodus: the kinds that take capacity; a TrainingJob runs as its compiled Job). */
export const attemptWorkloadKinds = ["Job", "Sandbox", "Workspace", "Function", "InferenceEndpoint"] as const

/**
 * Attempt phases (nodus). Interrupted: the capacity was lost (preemption, node loss) — the workload's recovery starts
 * a new Attempt; Failed: the program or its start failed.
 */
export const attemptPhases = [
  "Pending",
  "Provisioning",
  "Running",
  "Terminating",
  "Succeeded",
  "Failed",
  "Interrupted"
] as const

export const AttemptSpec = Schema.Struct({
  workload: described(
    Schema.Struct({
      kind: described(oneOf(attemptWorkloadKinds), "The workload's kind."),
      name: described(nonEmpty, "The workload's name."),
      uid: described(nonEmpty, "The workload's uid (a workload re-created under the same name has another).")
    }),
    "The workload this Attempt ran for."
  ),
  index: optional(intAtLeast(0), "The completion index of a Job (PLATFORM_INDEX)."),
  rank: optional(intAtLeast(0), "The rank of a multi-node gang member."),
  epoch: optional(intAtLeast(0), "The workload's epoch: grows on every start and recovery (gangs: every restart).")
}).annotate({ identifier: "AttemptSpec", description: "Which run of which workload this is (written by the service)." })

const AttemptReceipt = Schema.Struct({
  segments: optional(CostSegments, "Charged and covered time and USD by segment (Boot, Running, Restore, Teardown)."),
  totalUSD: optional(usd, "The final charge."),
  billedSeconds: optional(NonNegativeInt, "Seconds billed, supplier billing start to confirmed deletion.")
}).annotate({ identifier: "AttemptReceipt", description: "What the Attempt cost, once final." })

const AttemptCheckpoint = Schema.Struct({
  seq: described(intAtLeast(1), "Its number among the workload's checkpoints (they grow across every run)."),
  sizeBytes: described(intAtLeast(0), "Its archive's size."),
  time: described(Schema.String, "When the server received it.")
}).annotate({
  identifier: "AttemptCheckpoint",
  description: "A checkpoint a run saved; read back after a restart or a takeover."
})

export const AttemptStatus = Schema.Struct({
  phase: optional(
    oneOf(attemptPhases),
    "Pending, Provisioning, Running, Terminating, Succeeded, Failed or Interrupted."
  ),
  reason: optional(Schema.String, "Why it ended, e.g. Completed, Error, Preempted, NodeLost, Stopped."),
  message: optional(Schema.String, "Details, scrubbed."),
  placement: optional(
    Schema.Record(Schema.String, Schema.Json),
    "The scheduler's placement explanation (candidates, filters and why this offering won)."
  ),
  offering: optional(Schema.String, "The offering it ran on."),
  regionClass: optional(Schema.String, "The region class."),
  interruptible: optional(Schema.Boolean, "Whether the capacity was interruptible."),
  rateUSDPerHour: optional(usd, "The hourly rate, frozen at placement."),
  recovery: optional(Schema.Boolean, "This run replaces one that lost its capacity: its boot is billed as Restore."),
  startTime: optional(Schema.String, "When billing started."),
  endTime: optional(Schema.String, "When deletion was confirmed."),
  exitCode: optional(Int32, "The main process's exit code."),
  checkpoint: optional(
    AttemptCheckpoint,
    "The latest checkpoint (a Sandbox's /workspace snapshot) this run saved: what a replacement restores."
  ),
  cost: optional(Cost, "A display copy of the ledger while it runs."),
  receipt: optional(AttemptReceipt, "The receipt once the final charge is posted."),
  conditions: optional(Schema.Array(Condition), "Conditions.")
}).annotate({ identifier: "AttemptStatus", description: "Where the Attempt ran, how it ended and its receipt." })

export const attempt: KindDefinition = {
  spec: AttemptSpec,
  status: AttemptStatus,
  // nodus: an Attempt is history; its spec never changes after create (users only read attempts).
  updates: { mutable: [] }
}

/**
 * How the API serves Attempt (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const attemptServed: ServedKind = {
  info: kindInfo({
    kind: "Attempt",
    plural: "attempts",
    shortNames: ["att"],
    operations: readOps,
    hasSpec: false,
    costPath: totalCost,
    description: "One run of capacity for a workload, with its placement explanation and receipt."
  }),
  definition: attempt
}
