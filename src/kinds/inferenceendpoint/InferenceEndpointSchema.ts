/**
 * InferenceEndpoint (spec: Areas — Models and agents; Estimate for every compute kind; Conventions 3 and 4): a served
 * model behind a URL, running on replicas the service places like any compute workload. The spec does not show its
 * fields; this module decides a small schema (docs/kinds/InferenceEndpoint.md): the model, resources and placement,
 * replica scaling, a maxCostUSD cap that can only be raised, and Running or Stopped. Every field may change after
 * create, as a Function's may (a change rolls the replicas).
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { defaulted, described, intBetween, nonEmpty, oneOf, optional, usd } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, totalCost } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import {
  Condition,
  Cost,
  Estimate,
  longRunningPhases,
  longRunningStates,
  Placement,
  Resources
} from "../../core/schemas/Shared.ts"

/** States a caller writes (nodus, as Sandbox and Workspace write theirs). */
export const inferenceEndpointStates = longRunningStates

/** Phases (nodus: the long-running vocabulary of Sandbox and Workspace). */
export const inferenceEndpointPhases = longRunningPhases

const ScalingFields = Schema.Struct({
  minReplicas: defaulted(
    intBetween(0, Limits.inferenceReplicasMax),
    1,
    `Replicas kept running (billed while idle), 0 to maxReplicas; default 1.`
  ),
  maxReplicas: defaulted(
    intBetween(1, Limits.inferenceReplicasMax),
    1,
    `Most replicas under load, 1 to ${Limits.inferenceReplicasMax}; default 1.`
  )
})

const InferenceEndpointScaling = ScalingFields.check(Schema.makeFilter<typeof ScalingFields.Type>(
  (scaling) =>
    scaling.minReplicas > scaling.maxReplicas
      ? {
        path: ["minReplicas"],
        issue: `Invalid value: ${scaling.minReplicas}: must be at most maxReplicas (${scaling.maxReplicas})`
      }
      : undefined,
  { toJsonSchema: () => [{}, true] }
))

export const InferenceEndpointSpec = Schema.Struct({
  model: described(nonEmpty, "The Model to serve (its name)."),
  resources: optional(Resources, "Resource floors of each replica."),
  placement: defaulted(Placement, {}, "Where replicas may run."),
  scaling: defaulted(InferenceEndpointScaling, {}, "How many replicas run."),
  maxCostUSD: optional(usd, "Reaching it stops the endpoint; can only be raised."),
  state: defaulted(
    oneOf(inferenceEndpointStates),
    "Running",
    "Running (default) or Stopped (replicas released; the URL answers 503)."
  )
}).annotate({ identifier: "InferenceEndpointSpec", description: "A served model (spec: Areas)." })

export const InferenceEndpointStatus = Schema.Struct({
  phase: optional(
    oneOf(inferenceEndpointPhases),
    "Pending, Starting, Running, Recovering, Stopping, Stopped, Terminating or Failed."
  ),
  url: optional(Schema.String, "Where requests go."),
  replicas: optional(
    Schema.Struct({
      desired: optional(Schema.Int, "Replicas wanted now."),
      ready: optional(Schema.Int, "Replicas serving.")
    }),
    "Replica counts."
  ),
  cost: optional(Cost, "A display copy of the ledger."),
  estimate: optional(Estimate, "The estimate at create."),
  conditions: optional(Schema.Array(Condition), "Ready and Funded."),
  reason: optional(Schema.String, "Why it stopped or failed, e.g. MaxCostReached."),
  message: optional(Schema.String, "Details."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "InferenceEndpointStatus", description: "What the service observed of the endpoint." })

export const inferenceEndpoint: KindDefinition = {
  spec: InferenceEndpointSpec,
  status: InferenceEndpointStatus,
  // Every field may change; maxCostUSD only rises (Conventions 4, extended by nodus to this capped kind).
  updates: { immutable: [], raiseOnly: ["maxCostUSD"] }
}

/**
 * How the API serves InferenceEndpoint (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const inferenceEndpointServed: ServedKind = {
  info: kindInfo({
    kind: "InferenceEndpoint",
    plural: "inferenceendpoints",
    shortNames: ["ie"],
    operations: fullOps,
    costPath: totalCost,
    description: "A served model endpoint."
  }),
  definition: inferenceEndpoint
}
