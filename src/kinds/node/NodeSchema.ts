/**
 * Node (spec: Areas "Own and other capacity", Events pool.node_offline): a customer host enrolled in a Pool. The
 * service creates it when a host enrolls with an EnrollmentToken (the plural has list, read, delete and patch, no
 * create); the user may patch `cordoned` and `drain`. The spec does not show its fields: this schema is nodus's own
 * (docs/kinds/Node.md). What the host has (CPU, memory, GPUs and their models) is measured, so it is status.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, matching, nonEmpty, oneOf, optional, quantity } from "../../core/meta/Fields.ts"
import { kindInfo, readOps } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt, Timestamp } from "../../core/schemas/Shared.ts"

/** Node phases in `status.phase` (nodus's own value set, docs/kinds/Node.md). */
export const nodePhases = ["Pending", "Ready", "NotReady", "Draining", "Offline"] as const

const hostnamePattern = /^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$/u

/** An RFC 1123 host name of at most 253 characters. */
const hostname = matching(
  hostnamePattern,
  "must be a host name (RFC 1123): DNS labels of letters, digits and '-', separated by '.'"
).check(Schema.makeFilter(
  (text: string) =>
    text.length <= Limits.nodeHostnameMax
      ? undefined
      : `Too long: may not be longer than ${Limits.nodeHostnameMax} characters`,
  { toJsonSchema: () => ({ maxLength: Limits.nodeHostnameMax }) }
))

export const NodeSpec = Schema.Struct({
  pool: described(nonEmpty, "The Pool the host is enrolled in; fixed at enrollment."),
  hostname: described(hostname, "The host's name as it enrolled; fixed at enrollment."),
  cordoned: optional(Schema.Boolean, "No new work is placed on the Node while true; running work stays."),
  drain: optional(
    Schema.Boolean,
    "Running work is moved off the Node at its next safe point and no new work is placed while true."
  )
}).annotate({ identifier: "NodeSpec", description: "A host enrolled in a Pool, and whether it takes work." })

export const NodeStatus = Schema.Struct({
  phase: optional(
    oneOf(nodePhases),
    "Pending (enrolled, not yet reported), Ready, NotReady, Draining or Offline (event pool.node_offline)."
  ),
  reason: optional(Schema.String, "One CamelCase word: why the Node is not Ready."),
  message: optional(Schema.String, "A sentence for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Conditions of the Node (e.g. Ready)."),
  capacity: optional(
    Schema.Struct({
      cpu: optional(quantity(), "vCPUs."),
      memory: optional(quantity(), "Host memory."),
      disk: optional(quantity(), "Disk for workloads."),
      gpus: optional(NonNegativeInt, "GPUs."),
      models: optional(Schema.Array(Schema.String), "Accelerator ids of its GPUs.")
    }),
    "What the host has, as measured."
  ),
  allocated: optional(Schema.Struct({ gpus: optional(NonNegativeInt, "GPUs in use.") }), "What is in use."),
  enrolledTime: optional(Timestamp, "When the host enrolled."),
  enrollmentToken: optional(Schema.String, "The EnrollmentToken it enrolled with."),
  agentVersion: optional(Schema.String, "Version of the node agent."),
  lastHeartbeatTime: optional(Timestamp, "When the node agent last reported.")
}).annotate({ identifier: "NodeStatus", description: "What the service observed of the Node." })

export const node: KindDefinition = {
  spec: NodeSpec,
  status: NodeStatus,
  // nodus: the Pool and host name are fixed at enrollment; the user patches cordoned and drain.
  updates: { mutable: ["cordoned", "drain"] }
}

/**
 * How the API serves Node (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
// The spec leaves the scope of nodes blank. A Node is a host of a customer Pool, and Pools are project kinds, so
// nodes are namespaced too (docs/kinds.md).
export const nodeServed: ServedKind = {
  info: kindInfo({
    kind: "Node",
    plural: "nodes",
    shortNames: ["no"],
    operations: [...readOps, "delete", "patch", "getStatus", "writeStatus"],
    description: "A host enrolled in a Pool."
  }),
  definition: node
}
