/**
 * Job (spec: Job): a run-to-completion container with indexed completions, checkpoints, recovery from preemption and
 * multi-node gangs. The spec schema admits what clients write; `normalize` folds the spec's aliases
 * (`activeDeadlineSeconds` into `timeout`, `resources.nodes > 1` into `distributed.nodes`) and applies the defaults
 * that depend on other fields (Dcp checkpoints for distributed Jobs); `updates` lists what may change after create.
 */
import { Schema } from "effect"
import { isObject, type JsonObject } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import { type Cause, fieldInvalid } from "../../core/meta/ApiError.ts"
import {
  absolutePath,
  defaulted,
  described,
  duration,
  intAtLeast,
  intBetween,
  listOf,
  nonEmpty,
  oneOf,
  optional,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, shown, totalCost, wide } from "../../core/meta/Kinds.ts"
import { finalState, type KindDefinition, type ServedKind, type ServerSettings } from "../../core/schemas/Kind.ts"
import {
  bareSecretNames,
  BlobReference,
  Condition,
  Cost,
  Distributed,
  EnvVar,
  Estimate,
  gangRules,
  ImageStatus,
  InitCommand,
  JobInput,
  JobOutput,
  Network,
  Placement,
  Recovery,
  Resources,
  SecretMount,
  Sidecar,
  Timestamp,
  Topology,
  uniqueNames,
  VolumeMount
} from "../../core/schemas/Shared.ts"

/** Job states a caller writes to `spec.state` (the spec names Suspended and leaves the rest open; docs/kinds.md). */
export const jobStates = ["Running", "Suspended", "Cancelled"] as const

/** Job phases in `status.phase` (the spec leaves them open; docs/kinds.md). */
export const jobPhases = [
  "Pending",
  "Provisioning",
  "Running",
  "Recovering",
  "Suspending",
  "Suspended",
  "Succeeded",
  "Failed",
  "Cancelled"
] as const

const JobSpecFields = Schema.Struct({
  activeDeadlineSeconds: optional(intAtLeast(1), "Alias of timeout (seconds); folded into timeout on write."),
  args: optional(Schema.Array(Schema.String), "Arguments to the command."),
  backoffLimit: optional(
    intBetween(0, Limits.jobBackoffLimitMax),
    "Customer failures (non-zero exits, OOM) across all indexes retried before the Job fails, 0 to 100."
  ),
  command: optional(Schema.Array(Schema.String), "The command (argv)."),
  completeByTime: optional(Timestamp, "Finish-by hint for placement and checkpoint cadence; never stops the Job."),
  completions: defaulted(
    intBetween(Limits.jobCompletionsMin, Limits.jobCompletionsMax),
    1,
    "Indexes that must succeed, 1 to 10000; each index gets PLATFORM_INDEX and JOB_COMPLETION_INDEX."
  ),
  connections: optional(Schema.Array(nonEmpty), "Connections whose env and egress hosts the Job gets."),
  distributed: optional(Distributed, "A gang of nodes (Beta)."),
  env: optional(Schema.Array(EnvVar), "Environment; secrets come through valueFrom.secretKeyRef."),
  expectedDuration: optional(duration(), "Declared runtime the estimate uses first."),
  image: optional(nonEmpty, "Container image reference (exactly one of image and imageRef)."),
  imageRef: optional(nonEmpty, "An Image object in the project (exactly one of image and imageRef)."),
  imagePullSecrets: optional(Schema.Array(nonEmpty), "Secrets for pulling the image."),
  initCommand: optional(InitCommand, "Preflight before the command."),
  inputs: optional(listOf(JobInput, Limits.jobInputsMax).check(uniqueNames("input names")), "At most 8, unique names."),
  maxCostUSD: optional(usd, "Reaching it suspends the Job; can only be raised."),
  network: optional(Network, "Network policy."),
  outputs: optional(
    listOf(JobOutput, Limits.jobOutputsMax).check(uniqueNames("output names")),
    "At most 32, unique names."
  ),
  parallelism: defaulted(
    intBetween(1, Limits.jobParallelismMax),
    1,
    "Indexes running at once, 1 to min(completions, 256)."
  ),
  placement: defaulted(Placement, {}, "Where it may run."),
  recovery: defaulted(Recovery, {}, "Recovery from preemption and node loss."),
  resources: optional(Resources, "Resource floors."),
  scaledownWindow: optional(
    duration({ maximumMs: Limits.scaledownWindowMsMax }),
    "Keeps capacity warm for reuse after the Job ends, 0s to 20m."
  ),
  secrets: optional(Schema.Array(SecretMount), "Secrets mounted into every attempt (bare names accepted)."),
  serviceAccountName: optional(nonEmpty, "The ServiceAccount the workload calls the service as."),
  sidecars: optional(
    Schema.Array(Sidecar).check(uniqueNames("sidecar names")),
    "Processes beside the main one; names unique."
  ),
  source: optional(
    Schema.Struct({
      blob: optional(BlobReference, "An uploaded bundle."),
      git: optional(
        Schema.Struct({
          path: optional(Schema.String, "Subdirectory."),
          ref: optional(Schema.String, "Branch, tag or commit."),
          repo: described(nonEmpty, "Repository URL.")
        }),
        "A git checkout."
      )
    }),
    "Source to run."
  ),
  state: defaulted(oneOf(jobStates), "Running", "Running, Suspended, or Cancelled (stops for good)."),
  timeout: optional(
    duration(),
    "Wall-clock limit; the clock starts at first Provisioning and excludes suspended time."
  ),
  ttlSecondsAfterFinished: optional(intAtLeast(0), "Seconds after finishing before the Job is deleted."),
  volumes: optional(Schema.Array(VolumeMount), "Volumes to mount."),
  workingDir: optional(absolutePath, "Working directory.")
})

type JobSpecInput = typeof JobSpecFields.Type

// Spec: parallelism is 1 to min(completions, 256).
const parallelismWithinCompletions = Schema.makeFilter<JobSpecInput>(
  (spec) => {
    const completions = spec.completions
    return spec.parallelism > completions
      ? {
        path: ["parallelism"],
        issue: `Invalid value: ${spec.parallelism}: must be at most completions (${completions})`
      }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

// A Job must name what to run; nodus takes exactly one of image and imageRef (docs/kinds.md).
const oneImage = Schema.makeFilter<JobSpecInput>(
  (spec) => {
    if (spec.image !== undefined && spec.imageRef !== undefined) {
      return { path: ["imageRef"], issue: "Invalid value: exactly one of image and imageRef may be set" }
    }
    return spec.image === undefined && spec.imageRef === undefined
      ? { path: ["image"], issue: "Required value: image or imageRef is required" }
      : undefined
  },
  { toJsonSchema: () => ({ oneOf: [{ required: ["image"] }, { required: ["imageRef"] }] }) }
)

// activeDeadlineSeconds is an alias: both may be written only when they agree.
const deadlineAgreesWithTimeout = Schema.makeFilter<JobSpecInput>(
  (spec) =>
    spec.activeDeadlineSeconds !== undefined && spec.timeout !== undefined
      ? {
        path: ["activeDeadlineSeconds"],
        issue: "Invalid value: set timeout or activeDeadlineSeconds (its alias), not both"
      }
      : undefined,
  { toJsonSchema: () => ({ not: { required: ["activeDeadlineSeconds", "timeout"] } }) }
)

export const JobSpec = JobSpecFields
  .check(parallelismWithinCompletions, oneImage, gangRules<JobSpecInput>(), deadlineAgreesWithTimeout)
  .annotate({ identifier: "JobSpec", description: "What the Job runs and how (spec: Job)." })

const GangMember = Schema.Struct({
  rank: described(Schema.Int, "0 to size-1."),
  attempt: optional(Schema.String, "The member's Attempt."),
  offering: optional(Schema.String, "Offering key."),
  path: optional(oneOf(["Private", "Public", "Direct", "Relayed"]), "Network path."),
  phase: optional(Schema.String, "The member's phase."),
  regionClass: optional(Schema.String, "Region class.")
})

export const JobStatus = Schema.Struct({
  phase: optional(oneOf(jobPhases), "Run-to-completion phase (docs/kinds.md)."),
  reason: optional(Schema.String, "Why the Job failed, stopped for good or is suspended."),
  message: optional(Schema.String, "Scrubbed; at most three log lines for a customer exit."),
  fix: optional(Schema.String, "The reason's documented fix."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Funded is one (False while money is short)."),
  active: optional(Schema.Int, "Indexes running."),
  succeeded: optional(Schema.Int, "Indexes succeeded."),
  failed: optional(Schema.Int, "Customer failures."),
  attempts: optional(
    Schema.Struct({
      current: optional(Schema.Int, "Current."),
      max: optional(Schema.Int, "Maximum."),
      total: optional(Schema.Int, "Total.")
    }),
    "Attempts."
  ),
  checkpoint: optional(
    Schema.Struct({
      interval: optional(Schema.String, "Effective interval."),
      restoredFromSeq: optional(Schema.Int, "The checkpoint the current run restored."),
      seq: optional(Schema.Int, "Latest checkpoint."),
      size: optional(Schema.Int, "Its size in bytes."),
      time: optional(Schema.String, "When it was saved."),
      failures: optional(Schema.Int, "Checkpoints that could not be saved (nodus).")
    }),
    "Checkpoints."
  ),
  completedIndexes: optional(Schema.String, "Completed indexes, e.g. 0-3,7."),
  completionTime: optional(Schema.String, "When the Job finished."),
  startTime: optional(Schema.String, "First Running."),
  inputsReadyTime: optional(Schema.String, "When every input was materialized."),
  cost: optional(Cost, "A display copy of the ledger."),
  estimate: optional(Estimate, "The estimate at create."),
  gang: optional(
    Schema.Struct({
      epoch: optional(Schema.Int, "Restarts of the gang."),
      members: optional(Schema.Array(GangMember), "Members."),
      phase: optional(
        oneOf([
          "Queued",
          "Assembling",
          "Meshing",
          "Starting",
          "Running",
          "Recovering",
          "Stopping",
          "Releasing",
          "Done"
        ]),
        "Gang phase."
      ),
      probe: optional(
        Schema.Struct({
          busGbps: optional(Schema.String, "Measured bus bandwidth."),
          measuredTime: optional(Schema.String, "When."),
          path: optional(Schema.String, "Path."),
          rttMs: optional(Schema.String, "Round trip.")
        }),
        "Network probe."
      ),
      ready: optional(Schema.Int, "Ranks registered, meshed and probed."),
      rendezvous: optional(Schema.String, "Rank 0 address."),
      restarts: optional(Schema.Int, "Restarts."),
      size: optional(Schema.Int, "Members."),
      started: optional(Schema.String, "When the gang started."),
      transport: optional(Schema.String, "Weakest pair's path.")
    }),
    "Gang state of a multi-node Job."
  ),
  handledRequests: optional(
    Schema.Record(Schema.String, Schema.String),
    "Last handled *-requested-at annotation per action."
  ),
  image: optional(ImageStatus, "The resolved image."),
  inputs: optional(
    Schema.Array(Schema.Struct({
      name: described(Schema.String, "Input name."),
      sha256: optional(Schema.String, "Digest."),
      volumeName: optional(Schema.String, "Volume."),
      volumeRevision: optional(Schema.Int, "Volume revision."),
      volumeUID: optional(Schema.String, "Volume uid.")
    })),
    "Materialized inputs."
  ),
  links: optional(
    Schema.Array(
      Schema.Struct({ kind: described(Schema.String, "Link kind."), url: described(Schema.String, "URL.") })
    ),
    "Links."
  ),
  outputs: optional(
    Schema.Array(Schema.Struct({
      name: described(Schema.String, "Output name."),
      path: described(Schema.String, "Path."),
      sha256: described(Schema.String, "Digest."),
      size: described(Schema.Int, "Bytes."),
      index: optional(Schema.Int, "Index."),
      rank: optional(Schema.Int, "Rank."),
      sink: optional(
        Schema.Struct({
          phase: described(oneOf(["Pending", "Loading", "Loaded", "Failed"]), "Sink phase."),
          message: optional(Schema.String, "Details."),
          rows: optional(Schema.Int, "Rows loaded.")
        }),
        "Sink load."
      )
    })),
    "Collected outputs."
  ),
  placement: optional(
    Schema.Struct({
      offering: optional(Schema.String, "Offering."),
      regionClass: optional(Schema.String, "Region class."),
      interruptible: optional(Schema.Boolean, "Interruptible."),
      rateUSDPerHour: optional(usd, "Frozen at placement."),
      warmReuse: optional(Schema.Boolean, "Warm reuse.")
    }),
    "Current placement."
  ),
  progress: optional(
    Schema.Struct({
      stage: optional(Schema.String, "Stage."),
      metrics: optional(Schema.Record(Schema.String, Schema.String), "Latest scalar metrics as decimal strings."),
      units: optional(
        Schema.Struct({
          completed: described(Schema.Int, "Completed units."),
          total: optional(Schema.Int, "Total units.")
        }),
        "Units."
      )
    }),
    "Progress."
  ),
  secretVersions: optional(Schema.Record(Schema.String, Schema.Int), "Secret versions pinned at admission."),
  secretVersionIDs: optional(Schema.Record(Schema.String, Schema.String), "Secret version ids pinned at admission."),
  source: optional(
    Schema.Struct({ blob: optional(Schema.String, "Blob."), commit: optional(Schema.String, "Commit.") }),
    "Resolved source."
  ),
  stopByTime: optional(Schema.String, "Funded edge while Funded is False."),
  storage: optional(
    Schema.Struct({
      bytes: described(Schema.Int, "Checkpoints plus outputs."),
      billedBytes: described(Schema.Int, "Share above the free inclusion.")
    }),
    "Storage."
  ),
  suspendFailures: optional(Schema.Int, "Failed checkpoints of the current customer suspend."),
  suspendedDuration: optional(Schema.String, "Time spent suspended."),
  timeoutStartTime: optional(Schema.String, "First Provisioning."),
  timeoutTime: optional(Schema.String, "timeoutStartTime + timeout + suspendedDuration."),
  topology: optional(Topology, "Resolved gang topology."),
  unitMetrics: optional(
    Schema.Struct({
      completed: described(Schema.Int, "Units."),
      costPerUnitUSD: optional(usd, "Cost per unit."),
      p50Ms: optional(Schema.Int, "Median ms per unit."),
      p95Ms: optional(Schema.Int, "95th percentile ms per unit.")
    }),
    "Per-unit metrics."
  )
}).annotate({ identifier: "JobStatus", description: "What the service observed of the Job." })

const withoutKey = (object: JsonObject, key: string): JsonObject => {
  const { [key]: _dropped, ...rest } = object
  return rest
}

/**
 * Folds the spec's aliases into their canonical fields and applies defaults that depend on other fields (spec: Job,
 * Resources, Recovery): activeDeadlineSeconds → timeout; resources.nodes > 1 → distributed.nodes; checkpoint format Dcp
 * for distributed Jobs, Snapshot otherwise; bare secret names → {name}. The result is decoded again by admission.
 */
/** Folds the Job's aliases (activeDeadlineSeconds, resources.nodes) and bare secret names into their fields. */
export const foldJobAliases = (spec: JsonObject): JsonObject => {
  let next = spec
  const deadline = next["activeDeadlineSeconds"]
  if (typeof deadline === "number") next = { ...withoutKey(next, "activeDeadlineSeconds"), timeout: `${deadline}s` }
  const resources = next["resources"]
  if (isObject(resources) && typeof resources["nodes"] === "number" && resources["nodes"] > 1) {
    // Admission decodes a normalized spec again, so the gang's own defaults apply to it.
    next = { ...next, resources: withoutKey(resources, "nodes"), distributed: { nodes: resources["nodes"] } }
  }
  return bareSecretNames(next)
}

/**
 * The Job's defaults that depend on other fields, applied to a decoded spec; what they write is valid as written, so
 * no second decoding follows (Spec: Recovery.checkpoint.format — Dcp is the default for distributed Jobs, Snapshot
 * otherwise).
 */
export const completeJob = (spec: JsonObject): JsonObject => {
  const recovery = spec["recovery"]
  const checkpoint = isObject(recovery) ? recovery["checkpoint"] : undefined
  if (!isObject(recovery) || !isObject(checkpoint) || checkpoint["format"] !== undefined) return spec
  const format = spec["distributed"] !== undefined ? "Dcp" : "Snapshot"
  return { ...spec, recovery: { ...recovery, checkpoint: { ...checkpoint, format } } }
}

/** Both, as a template's Job spec is normalized (Sweep, Pipeline, scenarios). */
export const normalizeJob = (spec: JsonObject): JsonObject => completeJob(foldJobAliases(spec))

/**
 * A Job names what it runs where no image's default command is known (docs/jobs.md, "Admission"): on live hosts
 * programs run on the host's userland, so a Job with neither command nor args would only fail at every start.
 */
const commandRules = (spec: JsonObject, settings: ServerSettings): ReadonlyArray<Cause> => {
  const named = (field: string) => Array.isArray(spec[field]) && (spec[field] as ReadonlyArray<unknown>).length > 0
  if (settings.hostUserland !== true || named("command") || named("args")) return []
  return [
    fieldInvalid(
      "spec.command",
      "Required value: the command to run (argv), e.g. [\"python\", \"train.py\"]: this server runs programs on its hosts' own userland, where an image's default command is not known",
      "FieldValueRequired"
    )
  ]
}

export const job: KindDefinition = {
  spec: JobSpec,
  status: JobStatus,
  normalize: foldJobAliases,
  complete: completeJob,
  serverRules: commandRules,
  // Spec: Job, Immutability — everything else is immutable after create.
  updates: {
    mutable: [
      "parallelism",
      "backoffLimit",
      "timeout",
      "maxCostUSD",
      "recovery.maxAttempts",
      "recovery.checkpoint.interval",
      "recovery.checkpoint.retainAfterFinish",
      "ttlSecondsAfterFinished",
      "state"
    ],
    raiseOnly: ["maxCostUSD"]
  },
  // Spec: Job — Cancelled "stops for good".
  transitions: finalState("Cancelled", "Job")
}

export type JobSpecType = typeof JobSpec.Type
export type JobStatusType = typeof JobStatus.Type

/**
 * How the API serves Job (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const jobServed: ServedKind = {
  info: kindInfo({
    kind: "Job",
    plural: "jobs",
    shortNames: ["nj"],
    operations: fullOps,
    costPath: totalCost,
    columns: [
      shown("Succeeded", "status.succeeded", "Indexes succeeded", "integer"),
      wide("Indexes", "status.completedIndexes", "Completed indexes, e.g. 0-3,7"),
      wide("Image", "spec.image", "Container image"),
      wide("Offering", "status.placement.offering", "Offering of the current placement")
    ],
    description: "A run-to-completion container with indexed completions, checkpoints and recovery from preemption."
  }),
  definition: job
}
