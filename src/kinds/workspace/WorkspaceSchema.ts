/**
 * Workspace (spec: Workspace): a GPU or CPU development machine with SSH, browser IDE, notebook, a persistent home
 * Volume and schedules. The spec schema admits what clients write and applies the spec's defaults (idleTimeout 1h,
 * serviceAccountName default, state Running, tools VSCode, Jupyter and SSH, placement queueTimeout 24h); `normalize`
 * stores bare Secret names as {name}; `updates` keeps the home (volume, ephemeral) fixed after create and lets the
 * rest change, applied at the next start (spec: image "may change while stopped, applies at next start").
 * `readyByLeadCause` is the clock-dependent rule of schedule.readyBy, for the server to check with the request time.
 */
import { Schema } from "effect"
import { isObject, type Json } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import { type Cause, fieldInvalid } from "../../core/meta/ApiError.ts"
import {
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
  CommunityPlacement,
  Condition,
  Cost,
  DurationBand,
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
import { formatDurationMs } from "../../core/Units.ts"

/** Workspace states a caller writes to `spec.state` (spec: Workspace, state). */
export const workspaceStates = longRunningStates

/** Workspace phases in `status.phase` (spec: Workspace status; States and transitions). */
export const workspacePhases = longRunningPhases

/** The tools a Workspace serves (spec: Workspace, tools "default VSCode, Jupyter and SSH"; status.connect). */
export const workspaceTools = ["VSCode", "Jupyter", "SSH"] as const

/** The ServiceAccount when none is named (spec: Workspace, serviceAccountName "default default"). */
export const workspaceServiceAccountDefault = "default"

/** Where the home Volume is mounted (spec: Workspace, volume). */
export const workspaceHomePath = "/home/platform"

const unique = (what: string) => uniqueBy<string>((name) => name, what)

/** RFC 3339 and a real instant (the Timestamp pattern alone admits month 13). */
const instant = Timestamp.check(Schema.makeFilter(
  (text: string) =>
    Number.isNaN(Date.parse(text)) ? `Invalid value: "${text}": must be a valid date and time` : undefined,
  { toJsonSchema: () => [{}, true] }
))

const WorkspaceScheduleFields = Schema.Struct({
  readyBy: described(
    instant,
    "When the Workspace must be ready (at least 15 minutes after the request); it starts 15 minutes earlier."
  ),
  stopAt: optional(instant, "When the Workspace stops; after readyBy.")
})

// Spec: Workspace, schedule — stopAt is after readyBy.
const stopAfterReady = Schema.makeFilter<typeof WorkspaceScheduleFields.Type>(
  (schedule) =>
    schedule.stopAt !== undefined && Date.parse(schedule.stopAt) <= Date.parse(schedule.readyBy)
      ? { path: ["stopAt"], issue: `Invalid value: "${schedule.stopAt}": must be after readyBy (${schedule.readyBy})` }
      : undefined,
  { toJsonSchema: () => [{}, true] }
)

const WorkspaceSchedule = WorkspaceScheduleFields.check(stopAfterReady)

const WorkspaceSpecFields = Schema.Struct({
  connections: optional(
    listOf(nonEmpty, Limits.workspaceConnectionsMax).check(unique("connection names")),
    "Connections whose env and egress hosts the Workspace gets, at most 4."
  ),
  env: optional(listOf(EnvVar, Limits.workspaceEnvMax), "Environment, at most 256; the PLATFORM_ prefix is reserved."),
  ephemeral: optional(
    Schema.Boolean,
    "No home Volume: local files are lost on stop (exactly one of volume and ephemeral: true)."
  ),
  idleTimeout: defaulted(
    duration({ minimumMs: Limits.workspaceIdleTimeoutMsMin, maximumMs: Limits.workspaceIdleTimeoutMsMax, zero: true }),
    Limits.workspaceIdleTimeoutDefault,
    "Default 1h; 0s never; otherwise 10m to 24h. Idle = no SSH session, tool traffic or Process."
  ),
  image: optional(
    nonEmpty,
    "A catalog image (a GPU default, a CPU default, a ROCm variant) or your own; may change while stopped and applies at the next start."
  ),
  imagePullSecrets: optional(
    listOf(nonEmpty, Limits.workspaceImagePullSecretsMax).check(unique("image pull secret names")),
    "Secrets for pulling the image, at most 4."
  ),
  maxCostUSD: optional(usd, "Cap in USD; can only be raised."),
  network: optional(Network, "Network policy."),
  placement: defaulted(CommunityPlacement, {}, "Where it may run, community offerings included when allowed."),
  resources: optional(Resources, "Resource floors of the machine (one node)."),
  schedule: optional(WorkspaceSchedule, "Start so as to be ready by readyBy, and stop at stopAt."),
  secrets: optional(
    Schema.Array(SecretMount).check(uniqueBy(secretMountName, "secret names")),
    "Secrets mounted into the Workspace (bare names accepted)."
  ),
  serviceAccountName: defaulted(
    nonEmpty,
    workspaceServiceAccountDefault,
    "The ServiceAccount the Workspace calls the service as, default \"default\"."
  ),
  sshKeys: optional(
    listOf(nonEmpty, Limits.workspaceSshKeysMax).check(unique("SSH key names")),
    "Names of SSHKeys allowed to log in, at most 100; empty = every key of org members who may use the project; removing a key ends its sessions."
  ),
  state: defaulted(
    oneOf(workspaceStates),
    "Running",
    "Running (default) or Stopped (home saved, session capacity released)."
  ),
  tools: defaulted(
    listOf(oneOf(workspaceTools), workspaceTools.length).check(uniqueBy<string>((tool) => tool, "tools")),
    [...workspaceTools],
    "The tools served: VSCode, Jupyter and SSH (default all three)."
  ),
  volume: optional(
    nonEmpty,
    "A ReadWriteOnce Volume mounted at /home/platform, saved on every stop (exactly one of volume and ephemeral: true)."
  )
})

type WorkspaceSpecInput = typeof WorkspaceSpecFields.Type

// Spec: Workspace — exactly one of volume and ephemeral: true.
const oneHome = Schema.makeFilter<WorkspaceSpecInput>(
  (spec) => {
    const ephemeral = spec.ephemeral === true
    if (spec.volume !== undefined && ephemeral) {
      return {
        path: ["ephemeral"],
        issue: "Forbidden: ephemeral: true may not be set with volume (exactly one of volume and ephemeral: true)"
      }
    }
    return spec.volume === undefined && !ephemeral
      ? { path: ["volume"], issue: "Required value: exactly one of volume and ephemeral: true must be set" }
      : undefined
  },
  {
    toJsonSchema: () => ({
      oneOf: [
        { required: ["volume"], not: { required: ["ephemeral"], properties: { ephemeral: { enum: [true] } } } },
        { required: ["ephemeral"], properties: { ephemeral: { enum: [true] } }, not: { required: ["volume"] } }
      ]
    })
  }
)

// A Workspace is one machine and has no gang: resources.nodes above 1 (shorthand for distributed.nodes) is refused.
const oneMachine = Schema.makeFilter<WorkspaceSpecInput>(
  (spec) => {
    const nodes = spec.resources?.nodes
    return nodes !== undefined && nodes > 1
      ? { path: ["resources", "nodes"], issue: `Invalid value: ${nodes}: a Workspace runs on one node` }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

export const WorkspaceSpec = WorkspaceSpecFields
  .check(oneHome, oneMachine)
  .annotate({
    identifier: "WorkspaceSpec",
    description: "The development machine, its home, tools and schedule (spec: Workspace)."
  })

export const WorkspaceStatus = Schema.Struct({
  conditions: optional(
    Schema.Array(Condition),
    "Scheduled, Funded, Ready, Stopped, NodeUnreachable, SetupComplete and StateSaved."
  ),
  connect: optional(
    Schema.Struct({
      ssh: optional(
        Schema.Struct({
          command: optional(Schema.String, "The command that connects."),
          host: optional(Schema.String, "The host."),
          hostKey: optional(Schema.String, "The host key, stable across sessions.")
        }),
        "SSH."
      ),
      vscode: optional(Schema.Struct({ url: optional(Schema.String, "The browser IDE.") }), "VSCode."),
      jupyter: optional(Schema.Struct({ url: optional(Schema.String, "The notebook.") }), "Jupyter.")
    }),
    "How to connect to each tool."
  ),
  cost: optional(Cost, "A display copy of the ledger."),
  endpoints: optional(
    Schema.Array(Schema.Struct({
      name: optional(Schema.String, "The endpoint."),
      port: optional(Schema.Int, "The port in the Workspace."),
      url: optional(Schema.String, "The preview URL.")
    })),
    "Preview URLs."
  ),
  estimate: optional(Estimate, "The estimate at create."),
  handledRequests: optional(
    Schema.Record(Schema.String, Schema.String),
    "Last handled *-requested-at annotation per action."
  ),
  home: optional(
    Schema.Struct({
      volume: optional(Schema.String, "The home Volume."),
      revision: optional(NonNegativeInt, "The last committed revision; 0 before the first save."),
      savedTime: optional(Timestamp, "When it was last saved.")
    }),
    "The home Volume."
  ),
  image: optional(ImageStatus, "The resolved image."),
  lastActivityTime: optional(Timestamp, "The last SSH session, tool traffic or Process."),
  lastSession: optional(
    Schema.Struct({
      attempt: optional(Schema.String, "The session's Attempt."),
      startTime: optional(Timestamp, "When it started."),
      endTime: optional(Timestamp, "When it ended."),
      billedSeconds: optional(NonNegativeInt, "Supplier billing start to confirmed deletion."),
      chargeUSD: optional(usd, "What the session was charged."),
      stopReason: optional(Schema.String, "Why it stopped.")
    }),
    "The receipt of the last session."
  ),
  message: optional(Schema.String, "Details for humans."),
  nextScheduledStartTime: optional(Timestamp, "The next start of the schedule (15 minutes before readyBy)."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  phase: optional(
    oneOf(workspacePhases),
    "Pending, Starting, Running, Recovering, Stopping, Stopped, Terminating or Failed."
  ),
  reason: optional(Schema.String, "Why, in one CamelCase word."),
  session: optional(
    Schema.Struct({
      attempt: optional(Schema.String, "The session's Attempt."),
      offering: optional(Schema.String, "The offering."),
      regionClass: optional(Schema.String, "The region class."),
      rateUSDPerHour: optional(usd, "Frozen at placement."),
      startTime: optional(Timestamp, "When it started; empty while starting.")
    }),
    "The current session."
  ),
  startEstimate: optional(DurationBand, "How long a start is expected to take."),
  stopByTime: optional(Timestamp, "Funded edge while Funded is False."),
  stopReason: optional(Schema.String, "Why the Workspace stopped.")
}).annotate({ identifier: "WorkspaceStatus", description: "What the service observed of the Workspace." })

/**
 * The clock-dependent rule of schedule.readyBy (spec: Workspace, schedule; Limits): at least 15 minutes after the
 * request. Admission is pure and has no clock, so the server checks it with the request time, on create and whenever
 * an update changes readyBy (an unchanged readyBy is not checked again: it is bound to pass into the past).
 */
export const readyByLeadCause = (spec: Json | undefined, nowMs: number, previous?: Json): Cause | undefined => {
  const readyBy = isObject(spec) && isObject(spec["schedule"]) ? spec["schedule"]["readyBy"] : undefined
  if (typeof readyBy !== "string") return undefined
  const before = isObject(previous) && isObject(previous["schedule"]) ? previous["schedule"]["readyBy"] : undefined
  if (before === readyBy) return undefined
  const at = Date.parse(readyBy)
  return !Number.isNaN(at) && at - nowMs < Limits.workspaceReadyByLeadMs
    ? fieldInvalid(
      "spec.schedule.readyBy",
      `Invalid value: "${readyBy}": must be at least ${
        formatDurationMs(Limits.workspaceReadyByLeadMs)
      } after the request (${new Date(nowMs).toISOString()})`
    )
    : undefined
}

export const workspace: KindDefinition = {
  spec: WorkspaceSpec,
  status: WorkspaceStatus,
  // Bare Secret names are stored as {name}.
  normalize: bareSecretNames,
  // Spec: Workspace — maxCostUSD is raise only (Conventions 4); image may change (applies at the next start). nodus
  // keeps the home fixed: which Volume holds /home/platform, or that there is none, is decided at create.
  updates: {
    immutable: ["volume", "ephemeral"],
    raiseOnly: ["maxCostUSD"]
  },
  timeRules: (spec, nowMs, previous) => {
    const lead = readyByLeadCause(spec, nowMs, previous)
    return lead === undefined ? [] : [lead]
  }
}

/**
 * How the API serves Workspace (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const workspaceServed: ServedKind = {
  info: kindInfo({
    kind: "Workspace",
    plural: "workspaces",
    shortNames: ["ws"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Image", "spec.image", "Container image")],
    description: "A GPU or CPU development machine with SSH, browser IDE, notebook and a persistent home volume."
  }),
  definition: workspace
}
