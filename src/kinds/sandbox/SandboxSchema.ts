/**
 * Sandbox (spec: Sandbox): an isolated CPU container for agents and untrusted code, driven by commands, with
 * /workspace kept across stops. The spec schema admits what clients write and applies the spec's defaults (continuity
 * Snapshotted, lifecycle 5m / 24h / Stop, state Running, workingDir /workspace); `normalize` stores bare Secret names
 * as {name}; `updates` lists what may change after create (the spec names state and maxCostUSD, raise only; the rest
 * of the list is nodus's decision, docs/kinds/Sandbox.md).
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  absolutePath,
  defaulted,
  described,
  duration,
  listOf,
  nonEmpty,
  oneOf,
  optional,
  uniqueBy,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, totalCost, wide } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import {
  bareSecretNames,
  Condition,
  Cost,
  EnvVar,
  Estimate,
  ImageStatus,
  longRunningPhases,
  longRunningStates,
  Network,
  NonNegativeInt,
  Resources,
  SecretMount,
  secretMountName,
  Timestamp
} from "../../core/schemas/Shared.ts"

/** Sandbox states a caller writes to `spec.state` (spec: Sandbox, state). */
export const sandboxStates = longRunningStates

/** Sandbox phases in `status.phase` (spec: Sandbox status; States and transitions). */
export const sandboxPhases = longRunningPhases

/** What happens when idleTimeout elapses (spec: Sandbox, lifecycle.onIdle). */
export const sandboxIdleActions = ["Stop", "Delete"] as const

/** What a stop keeps (spec: Sandbox, continuity.mode). */
export const sandboxContinuityModes = ["Snapshotted", "Ephemeral"] as const

/** The working directory when none is written (spec: Sandbox, workingDir "default /workspace"). */
export const sandboxWorkingDirDefault = "/workspace"

const SandboxContinuity = Schema.Struct({
  mode: defaulted(
    oneOf(sandboxContinuityModes),
    "Snapshotted",
    "Snapshotted (default: /workspace saved on stop, restored on start) or Ephemeral (every start begins from the image)."
  )
})

const SandboxLifecycle = Schema.Struct({
  idleTimeout: defaulted(
    duration({ minimumMs: Limits.sandboxIdleTimeoutMsMin, maximumMs: Limits.sandboxIdleTimeoutMsMax, zero: true }),
    Limits.sandboxIdleTimeoutDefault,
    "0s (never) or 1m to 24h, default 5m; counted from no running command, no file request and no terminal input (a silent open terminal is idle)."
  ),
  maxLifetime: defaulted(
    duration({ minimumMs: Limits.sandboxMaxLifetimeMsMin, maximumMs: Limits.sandboxMaxLifetimeMsMax }),
    Limits.sandboxMaxLifetimeDefault,
    "1m to 720h, default 24h; counted from creation including stopped time, after which the Sandbox is deleted."
  ),
  onIdle: defaulted(oneOf(sandboxIdleActions), "Stop", "What idleTimeout does: Stop (default) or Delete.")
})

const SandboxSpecFields = Schema.Struct({
  image: described(nonEmpty, "Container image reference (required); pinned to a digest at create."),
  command: optional(
    Schema.Array(Schema.String),
    "The main process (argv); without it the Sandbox idles and is driven by exec."
  ),
  args: optional(Schema.Array(Schema.String), "Arguments to the main process."),
  continuity: defaulted(SandboxContinuity, {}, "What a stop keeps."),
  env: optional(
    listOf(EnvVar, Limits.sandboxEnvMax),
    "Environment, at most 256; the PLATFORM_ prefix is reserved; applies at the next start."
  ),
  lifecycle: defaulted(SandboxLifecycle, {}, "When the Sandbox stops or is deleted on its own."),
  maxCostUSD: optional(usd, "Cap in USD across every start; can only be raised."),
  network: optional(Network, "Network policy; applies at the next start."),
  resources: optional(Resources, "Resource floors of the CPU container (no GPUs, one node)."),
  secrets: optional(
    listOf(SecretMount, Limits.sandboxSecretsMax).check(uniqueBy(secretMountName, "secret names")),
    "At most 32, mounted as env vars and 0400 files under /run/secrets/; each start pins the newest version or the version named (bare names accepted)."
  ),
  state: defaulted(
    oneOf(sandboxStates),
    "Running",
    "Running (default) or Stopped (compute released, /workspace saved when Snapshotted)."
  ),
  workingDir: defaulted(absolutePath, sandboxWorkingDirDefault, "Absolute working directory, default /workspace.")
})

type SandboxSpecInput = typeof SandboxSpecFields.Type

// Spec: a Sandbox is an "isolated CPU container" and has no gang (no distributed field for resources.nodes to fold
// into): nodus refuses GPUs and more than one node (docs/kinds/Sandbox.md).
const cpuContainer = Schema.makeFilter<SandboxSpecInput>(
  (spec) => {
    const issues: Array<{ readonly path: ReadonlyArray<PropertyKey>; readonly issue: string }> = []
    if (spec.resources?.gpu !== undefined) {
      issues.push({
        path: ["resources", "gpu"],
        issue: "Forbidden: a Sandbox is a CPU container; GPUs are not available to it"
      })
    }
    const nodes = spec.resources?.nodes
    if (nodes !== undefined && nodes > 1) {
      issues.push({ path: ["resources", "nodes"], issue: `Invalid value: ${nodes}: a Sandbox runs on one node` })
    }
    return issues
  },
  { toJsonSchema: () => [{}, true] }
)

export const SandboxSpec = SandboxSpecFields
  .check(cpuContainer)
  .annotate({ identifier: "SandboxSpec", description: "What the Sandbox runs and how long it lives (spec: Sandbox)." })

export const SandboxStatus = Schema.Struct({
  activity: optional(oneOf(["Busy", "Idle"]), "Busy (a command runs) or Idle."),
  attempt: optional(
    Schema.Struct({
      epoch: described(NonNegativeInt, "Grows on every start and recovery."),
      name: described(Schema.String, "The current Attempt.")
    }),
    "The current Attempt."
  ),
  conditions: optional(Schema.Array(Condition), "Scheduled, Funded, Ready and StateSaved."),
  cost: optional(Cost, "A display copy of the ledger."),
  estimate: optional(
    Estimate,
    "What a create would cost and where it would run (nodus: the Job's estimate, for Sandboxes too; docs/kinds/Sandbox.md)."
  ),
  expirationTime: optional(Timestamp, "When maxLifetime deletes the Sandbox."),
  handledRequests: optional(Schema.Record(Schema.String, Schema.String), "The last acted-on start-requested-at value."),
  image: optional(ImageStatus, "The image, pinned to a digest at create."),
  lastActivityTime: optional(Timestamp, "The last command, file request or terminal input."),
  message: optional(Schema.String, "Details for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  phase: optional(
    oneOf(sandboxPhases),
    "Pending, Starting, Running, Recovering, Stopping, Stopped, Terminating or Failed."
  ),
  reason: optional(Schema.String, "Why, e.g. StartupFailed or NodeLost."),
  secretVersions: optional(
    Schema.Record(Schema.String, Schema.Int),
    "Secret versions resolved at creation and pinned again at each start."
  ),
  secretVersionIDs: optional(
    Schema.Record(Schema.String, Schema.String),
    "Secret version ids resolved at creation and pinned again at each start."
  ),
  snapshot: optional(
    Schema.Struct({
      reason: described(oneOf(["Stop"]), "Why /workspace was saved: Stop."),
      time: described(Timestamp, "When it was saved.")
    }),
    "The last saved /workspace."
  ),
  stopReason: optional(Schema.String, "Why the Sandbox stopped; empty while running.")
}).annotate({ identifier: "SandboxStatus", description: "What the service observed of the Sandbox." })

export const sandbox: KindDefinition = {
  spec: SandboxSpec,
  status: SandboxStatus,
  // Bare Secret names are stored as {name}.
  normalize: bareSecretNames,
  // Spec: Sandbox — state moves it (States and transitions) and maxCostUSD is raise only (Conventions 4). nodus also
  // lets what each start picks up change (env, secrets, network: "each start pins the newest version") and the
  // lifecycle; image (pinned to a digest at create), command, args, continuity, resources and workingDir are fixed.
  updates: {
    mutable: ["state", "lifecycle", "env", "secrets", "network", "maxCostUSD"],
    raiseOnly: ["maxCostUSD"]
  }
}

export type SandboxSpecType = typeof SandboxSpec.Type
export type SandboxStatusType = typeof SandboxStatus.Type

/**
 * How the API serves Sandbox (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const sandboxServed: ServedKind = {
  info: kindInfo({
    kind: "Sandbox",
    plural: "sandboxes",
    shortNames: ["sbx"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Image", "spec.image", "Container image"), wide("Activity", "status.activity", "Busy or Idle")],
    description: "An isolated CPU container for agents and untrusted code, driven by commands."
  }),
  definition: sandbox
}
