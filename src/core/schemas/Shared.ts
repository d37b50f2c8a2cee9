/**
 * The spec's shared types (spec: Resources and their fields, Shared types), exactly as the spec writes them: field
 * names, value sets, ranges and "exactly one of" / "only with" rules. Every kind's schema is built from these.
 */
import { Schema } from "effect"
import type { Json, JsonObject } from "../Json.ts"
import * as Limits from "../Limits.ts"
import {
  absolutePath,
  defaulted,
  described,
  duration,
  exactlyOneOf,
  intAtLeast,
  intBetween,
  listOf,
  matching,
  nonEmpty,
  oneOf,
  onlyWith,
  optional,
  quantity,
  uniqueBy,
  usd
} from "../meta/Fields.ts"
import { parseQuantity } from "../Units.ts"

// ---------------------------------------------------------------------------------------------------------------------
// Scalars

/** RFC 3339 timestamps, as metav1.Time is written. */
export const Timestamp = matching(
  /^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$/u,
  "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"
)

export const Sha256Hex = matching(/^[0-9a-f]{64}$/u, "must be 64 lowercase hex digits (a SHA-256)")

/** A content address of an uploaded blob (spec: uploads through /blobs/v1). */
export const BlobReference = matching(
  /^sha256:[0-9a-f]{64}$/u,
  "must be a content address sha256:<64 lowercase hex digits>"
)

export const Int32 = intBetween(-2_147_483_648, 2_147_483_647)
export const NonNegativeInt = intAtLeast(0)

// ---------------------------------------------------------------------------------------------------------------------
// Conditions, money, estimates (status side)

export const Condition = Schema.Struct({
  type: described(Schema.String, "The condition's type, e.g. Funded, Ready, Scheduled."),
  status: described(oneOf(["True", "False", "Unknown"]), "True, False or Unknown."),
  lastTransitionTime: described(Schema.String, "When the status last changed."),
  reason: described(Schema.String, "One CamelCase word: why."),
  message: described(Schema.String, "A sentence for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this condition reflects.")
}).annotate({
  identifier: "Condition",
  description: "An observation of one aspect of an object (spec: Object envelope)."
})

export const USDBand = Schema.Struct({
  p50: optional(usd, "Median."),
  p90: optional(usd, "90th percentile.")
}).annotate({ identifier: "USDBand", description: "A USD amount as a p50/p90 band." })

export const DurationBand = Schema.Struct({
  p50: optional(duration(), "Median."),
  p90: optional(duration(), "90th percentile.")
}).annotate({ identifier: "DurationBand", description: "A duration as a p50/p90 band." })

const segmentNames = ["Boot", "Running", "Restore", "Teardown"] as const

const segmentFields = (segment: string) => {
  const prefix = segment.charAt(0).toLowerCase() + segment.slice(1)
  return {
    [`${prefix}Seconds`]: optional(
      NonNegativeInt,
      `${segment}: charged wall-clock seconds (parallel allocations counted once).`
    ),
    [`${prefix}USD`]: optional(usd, `${segment}: USD charged.`),
    [`${prefix}CoveredSeconds`]: optional(
      NonNegativeInt,
      `${segment}: seconds the service paid for instead of charging.`
    )
  }
}

export const CostSegments = Schema.Struct({
  ...segmentFields("Boot"),
  ...segmentFields("Running"),
  ...segmentFields("Restore"),
  ...segmentFields("Teardown"),
  coveredByNodus: optional(
    Schema.Array(oneOf(segmentNames)),
    "Segments whose time the service paid for instead of charging."
  )
}).annotate({
  identifier: "CostSegments",
  description:
    "Cost split by segment: Boot (billing start until the program started), Running, Restore (a replacement after capacity loss), Teardown (stop until deletion confirmed)."
})

export const Cost = Schema.Struct({
  totalUSD: optional(usd, "Charged so far."),
  heldUSD: optional(usd, "Currently held."),
  limitUSD: optional(usd, "The object's maxCostUSD, if any."),
  rateUSDPerHour: optional(usd, "Sum of hourly rates of capacity still billing."),
  fundedUntilTime: optional(Schema.String, "When current holds stop paying."),
  final: optional(Schema.Boolean, "True once the final charge is posted."),
  bySegment: optional(CostSegments, "Cost by segment.")
}).annotate({
  identifier: "Cost",
  description: "A display copy of the ledger for this object; nothing is charged from these fields."
})

export const Topology = Schema.Struct({
  accelerator: optional(Schema.String, "The accelerator of every node."),
  gpusPerNode: described(Schema.Int, "GPUs per node."),
  network: optional(Schema.String, "Colocated, Regional or Global."),
  nodes: described(Schema.Int, "Nodes in the gang."),
  resolvedFrom: optional(oneOf(["Nodes", "TotalGPUs"]), "Which field the topology was resolved from."),
  totalGPUs: described(Schema.Int, "nodes × gpusPerNode.")
}).annotate({
  identifier: "Topology",
  description: "The resolved topology of a gang Job; never changes across epochs."
})

export const Estimate = Schema.Struct({
  pricebookVersion: optional(Schema.String, "The pricebook the estimate used."),
  rateUSDPerHour: optional(usd, "Rate of the chosen capacity."),
  holdUSD: optional(usd, "First hold: must fit the balance, every matching Budget and the object's own cap."),
  minimumChargeUSD: optional(usd, "The minimum charge of the chosen offering."),
  concurrentHoldUSD: optional(usd, "Sum of holds for all slots that start at once."),
  gangHoldUSD: optional(usd, "Sum of member holds of a multi-node Job."),
  assemblyBoundUSD: optional(usd, "Most a multi-node Job can cost if members never assemble."),
  costUSD: optional(USDBand, "Expected cost."),
  overheadUSD: optional(USDBand, "Expected overhead (boot, restore, teardown)."),
  startup: optional(
    Schema.Struct({ cold: optional(DurationBand, "Cold start."), warm: optional(DurationBand, "Warm start.") }),
    "Expected startup."
  ),
  topology: optional(Topology, "Resolved topology of a gang Job."),
  placementPreview: optional(
    Schema.Struct({
      offering: optional(Schema.String, "Offering id."),
      regionClass: optional(Schema.String, "Region class."),
      interruptible: optional(Schema.Boolean, "Interruptible capacity."),
      warmReuse: optional(Schema.Boolean, "Reuses warm capacity."),
      explain: optional(Schema.Json, "The scheduler's explanation (the Attempt placement explanation's shape).")
    }),
    "Where it would be placed."
  ),
  validUntil: optional(Schema.String, "When the prices stop being current."),
  warnings: optional(
    Schema.Array(
      Schema.Struct({
        code: described(Schema.String, "CamelCase, e.g. ColdStart."),
        message: optional(Schema.String, "Details.")
      })
    ),
    "Warnings."
  ),
  blockingReasons: optional(
    Schema.Array(Schema.Struct({
      code: described(Schema.String, "The error code a real create would return, e.g. InsufficientCredits."),
      message: optional(Schema.String, "With amounts."),
      fix: optional(Schema.String, "What to do.")
    })),
    "Why a create would fail."
  )
}).annotate({
  identifier: "Estimate",
  description: "What a create would cost and where it would run (spec: Estimate)."
})

// ---------------------------------------------------------------------------------------------------------------------
// Workload fields (spec side)

const envVarName = /^[A-Za-z_][A-Za-z0-9_]*$/u

export const EnvVar = Schema.Struct({
  name: described(
    matching(envVarName, "must match ^[A-Za-z_][A-Za-z0-9_]*$").check(Schema.makeFilter(
      (name: string) =>
        name.startsWith(Limits.reservedEnvPrefix)
          ? `Invalid value: "${name}": the ${Limits.reservedEnvPrefix} prefix is reserved for the platform`
          : undefined,
      { toJsonSchema: () => ({ not: { pattern: `^${Limits.reservedEnvPrefix}` } }) }
    )),
    "Variable name; the PLATFORM_ prefix is reserved."
  ),
  value: optional(Schema.String, "A literal value. Secrets never go here: use valueFrom.secretKeyRef."),
  valueFrom: optional(
    Schema.Struct({
      secretKeyRef: described(
        Schema.Struct({
          key: described(nonEmpty, "The key in the Secret."),
          name: described(nonEmpty, "The Secret.")
        }),
        "A key of a Secret in the project."
      )
    }),
    "Where the value comes from."
  )
}).check(Schema.makeFilter(
  (variable) =>
    variable.value !== undefined && variable.valueFrom !== undefined
      ? { path: ["valueFrom"], issue: "Invalid value: value and valueFrom may not both be set" }
      : undefined,
  { toJsonSchema: () => ({ not: { required: ["value", "valueFrom"] } }) }
)).annotate({ identifier: "EnvVar", description: "An environment variable (spec: EnvVar)." })

/** What a caller writes to a long-running kind's `spec.state` (Sandbox, Workspace, Function, InferenceEndpoint). */
export const longRunningStates = ["Running", "Stopped"] as const

/**
 * The phases of the long-running kinds (spec: Sandbox and Workspace status, States and transitions; a Function's
 * vocabulary "is the long-running one").
 */
export const longRunningPhases = [
  "Pending",
  "Starting",
  "Running",
  "Recovering",
  "Stopping",
  "Stopped",
  "Terminating",
  "Failed"
] as const

/** The object form of a SecretMount, as stored. */
export const SecretMountObject = Schema.Struct({
  name: described(nonEmpty, "The Secret."),
  version: optional(intAtLeast(1), "The version to mount; unset pins the latest at admission.")
}).annotate({ identifier: "SecretMount", description: "A Secret mounted into the workload (spec: SecretMount)." })

/** A SecretMount as written: the object, or a bare Secret name (spec: "A bare name string is accepted on write"). */
export const SecretMount = Schema.Union([nonEmpty, SecretMountObject])

/** The Secret a SecretMount as written (bare name or object) names. */
export const secretMountName = (
  secret: string | { readonly name: string }
): string => (typeof secret === "string" ? secret : secret.name)

/** Stores bare Secret names as {name} (spec: SecretMount, "a bare name string is accepted on write"). */
export const bareSecretNames = (spec: JsonObject): JsonObject => {
  const secrets = spec["secrets"]
  return Array.isArray(secrets)
    ? {
      ...spec,
      secrets: (secrets as ReadonlyArray<Json>).map((
        secret
      ) => (typeof secret === "string" ? { name: secret } : secret))
    }
    : spec
}

/** Region classes and DNS patterns. */
const egressHost = matching(
  /^(\*\.)?([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u,
  "must be a DNS name or a *.suffix pattern"
)

export const Network = Schema.Struct({
  egress: optional(
    Schema.Struct({
      policy: optional(oneOf(["Deny", "AllowList", "Open"]), "Deny, AllowList or Open."),
      allow: optional(
        listOf(egressHost, Limits.egressAllowMax),
        "DNS names or *.suffix patterns (AllowList only; at most 128)."
      ),
      presets: optional(Schema.Array(nonEmpty), "Names of curated host lists.")
    }).check(onlyWith("allow", "policy AllowList", (egress) => egress.policy === "AllowList")),
    "Outbound traffic."
  )
}).annotate({ identifier: "Network", description: "Network policy (spec: Network)." })

const placementFields = {
  dedicated: optional(oneOf([true]), "Reserved; only true is accepted."),
  interruptible: optional(
    oneOf(["Never", "Allow", "Prefer"]),
    "Never, Allow (the scheduler decides by expected cost) or Prefer."
  ),
  maxRateUSDPerHour: optional(usd, "Filters out offerings above this customer rate."),
  offerings: optional(Schema.Array(nonEmpty), "Offering ids to choose from."),
  pool: optional(nonEmpty, "A customer Pool in the project."),
  profile: optional(oneOf(["Balanced", "Cost", "Speed"]), "Balanced, Cost or Speed."),
  queueTimeout: defaulted(
    duration(),
    Limits.queueTimeoutDefault,
    "How long to wait for capacity before failing with CapacityUnavailable; 0s waits forever."
  ),
  regions: optional(Schema.Array(nonEmpty), "Region classes (us, eu, …); empty = any.")
}

export const Placement = Schema.Struct(placementFields).annotate({
  identifier: "Placement",
  description: "Where a workload may run (spec: Placement)."
})

/** Workspace placement and Sweep template placement also take `community`. */
export const CommunityPlacement = Schema.Struct({
  ...placementFields,
  community: optional(Schema.Boolean, "Permits community provider offerings.")
}).annotate({ identifier: "CommunityPlacement", description: "Placement that may also use community offerings." })

export const GpuRequest = Schema.Struct({
  count: optional(oneOf([1, 2, 4, 8]), "GPUs per node: 1, 2, 4 or 8."),
  exact: optional(Schema.Boolean, "Pin the exact variant instead of the family."),
  interconnect: optional(oneOf(["Any", "NVLink"]), "Any or NVLink."),
  minMemory: optional(quantity(), "Per-GPU memory floor."),
  type: optional(
    listOf(nonEmpty, Limits.gpuTypesMax).check(Schema.makeFilter(
      (types: ReadonlyArray<string>) =>
        types.length >= Limits.gpuTypesMin ? undefined : "Required value: 1 to 8 accelerator ids or families",
      { toJsonSchema: () => ({ minItems: Limits.gpuTypesMin }) }
    )),
    "1 to 8 accelerator ids or families; a family (e.g. H100) matches any of its variants."
  )
}).annotate({ identifier: "GpuRequest", description: "GPUs per node (spec: Resources.gpu)." })

export const Resources = Schema.Struct({
  cpu: optional(quantity(), "vCPU floor."),
  disk: optional(quantity(), "Ephemeral disk floor."),
  memory: optional(quantity(), "Host memory floor."),
  nodes: optional(intBetween(1, Limits.gangNodesMax), "Above 1: shorthand for distributed.nodes, and stored that way."),
  gpu: optional(GpuRequest, "GPU request.")
}).annotate({
  identifier: "Resources",
  description: "Resource floors; for GPU work the offering's host shape applies if larger (spec: Resources)."
})

const checkpointInterval = Schema.Union([
  Schema.Literal("auto"),
  duration({ minimumMs: Limits.checkpointIntervalMsMin, maximumMs: Limits.checkpointIntervalMsMax })
])

export const Checkpoint = Schema.Struct({
  format: optional(oneOf(["Snapshot", "Dcp"]), "Snapshot or Dcp (Dcp is the default for distributed Jobs)."),
  integration: optional(oneOf(["Auto", "None", "HFTrainer"]), "Auto, None or HFTrainer."),
  interval: optional(checkpointInterval, "auto, or a duration from 1m to 6h."),
  maxSize: defaulted(
    quantity({ value: Limits.checkpointMaxSizeBytesMax, text: "2Ti" }),
    "1Ti",
    "Checked before upload; at most 2Ti."
  ),
  paths: defaulted(
    listOf(absolutePath, Limits.checkpointPathsMax),
    [Limits.checkpointPathDefault],
    "Saved together in one checkpoint; at most 64."
  ),
  retainAfterFinish: defaulted(
    duration(),
    Limits.checkpointRetainAfterFinishDefault,
    "How long checkpoints are kept after the Job ends."
  )
}).annotate({ identifier: "Checkpoint", description: "Checkpoint settings (spec: Recovery.checkpoint)." })

export const Recovery = Schema.Struct({
  checkpoint: defaulted(Checkpoint, {}, "Checkpoint settings."),
  continuity: optional(
    oneOf(["Checkpointed", "Restartable", "Ephemeral"]),
    "Checkpointed (restore the latest checkpoint), Restartable (progress cursor) or Ephemeral."
  ),
  maxAttempts: optional(
    intBetween(Limits.recoveryAttemptsMin, Limits.recoveryAttemptsMax),
    "Infrastructure replacements per index, 1 to 32 (gangs count restarts)."
  ),
  minProgressDuration: defaulted(duration(), Limits.minProgressDurationDefault, "Run time that counts as progress."),
  onInterruption: optional(oneOf(["Resume", "Fail"]), "Resume, or Fail instead of recovering or suspending.")
}).annotate({ identifier: "Recovery", description: "Recovery from preemption and node loss (spec: Recovery)." })

const gangNodes = Schema.Int.check(Schema.makeFilter(
  (nodes: number) => {
    if (nodes < Limits.gangNodesMin || nodes > Limits.gangNodesMax) {
      return `Invalid value: ${nodes}: must be between ${Limits.gangNodesMin} and ${Limits.gangNodesMax}, inclusive`
    }
    return nodes > Limits.gangNodesBetaMax
      ? `Invalid value: ${nodes}: multi-node gangs are Beta and capped at ${Limits.gangNodesBetaMax} nodes`
      : undefined
  },
  { toJsonSchema: () => ({ minimum: Limits.gangNodesMin, maximum: Limits.gangNodesBetaMax }) }
))

export const Distributed = Schema.Struct({
  nodes: optional(gangNodes, "Nodes, 2 to 16 (the beta caps it at 8)."),
  totalGPUs: optional(
    intBetween(Limits.gangTotalGpusMin, Limits.gangTotalGpusMax),
    "GPUs in total, 2 to 64; resolved into status.topology at admission."
  ),
  gpusPerNode: optional(oneOf([1, 2, 4, 8]), "1, 2, 4 or 8; equals resources.gpu.count when both are set."),
  launcher: optional(
    oneOf(["Plain", "Torchrun", "Ray", "Verl", "Accelerate", "Deepspeed"]),
    "How ranks are launched (Plain: the env contract only)."
  ),
  network: optional(
    oneOf(["Colocated", "Regional", "Global"]),
    "Colocated (one provider and region), Regional (one region class) or Global."
  ),
  transport: optional(
    oneOf(["Direct", "Auto"]),
    "Direct (private or direct paths only) or Auto (relayed paths allowed)."
  ),
  startupTimeout: defaulted(
    duration({ minimumMs: Limits.gangStartupTimeoutMsMin, maximumMs: Limits.gangStartupTimeoutMsMax }),
    Limits.gangStartupTimeoutDefault,
    "5m to 60m."
  ),
  maxAssemblyRetries: defaulted(
    intBetween(0, Limits.maxAssemblyRetriesMax),
    Limits.maxAssemblyRetriesDefault,
    "Times a timed-out assembly is re-placed, 0 to 5."
  )
}).check(exactlyOneOf(["nodes", "totalGPUs"])).annotate({
  identifier: "Distributed",
  description: "A gang of nodes that start and restart together (Beta; spec: Distributed)."
})

interface GangFields {
  readonly resources?: { readonly nodes?: number; readonly gpu?: { readonly count?: number } }
  readonly distributed?: { readonly gpusPerNode?: number }
}

/**
 * The rules a gang's fields keep across Resources and Distributed (spec: Distributed.gpusPerNode equals
 * resources.gpu.count when both are set; resources.nodes > 1 is shorthand for distributed.nodes, capped while Beta).
 * Shared by the Job and the TrainingJob that compiles to one.
 */
export const gangRules = <T extends GangFields>() =>
  Schema.makeFilter<T>(
    (spec) => {
      const issues: Array<{ readonly path: ReadonlyArray<PropertyKey>; readonly issue: string }> = []
      const count = spec.resources?.gpu?.count
      const perNode = spec.distributed?.gpusPerNode
      if (count !== undefined && perNode !== undefined && count !== perNode) {
        issues.push({
          path: ["distributed", "gpusPerNode"],
          issue: `Invalid value: ${perNode}: must equal resources.gpu.count (${count})`
        })
      }
      const nodes = spec.resources?.nodes
      if (nodes !== undefined && nodes > 1 && spec.distributed !== undefined) {
        issues.push({
          path: ["resources", "nodes"],
          issue: "Invalid value: set the gang in distributed, or resources.nodes, not both"
        })
      }
      if (nodes !== undefined && nodes > Limits.gangNodesBetaMax) {
        issues.push({
          path: ["resources", "nodes"],
          issue: `Invalid value: ${nodes}: multi-node gangs are Beta and capped at ${Limits.gangNodesBetaMax} nodes`
        })
      }
      return issues
    },
    { toJsonSchema: () => [{}, true] }
  )

export const InitCommand = Schema.Struct({
  command: described(
    Schema.Array(Schema.String).check(Schema.makeFilter(
      (argv: ReadonlyArray<string>) => argv.length > 0 ? undefined : "Required value: the argv must not be empty",
      { toJsonSchema: () => ({ minItems: 1 }) }
    )),
    "argv of the preflight."
  ),
  timeout: optional(duration({ maximumMs: Limits.initCommandTimeoutMsMax }), "At most 30m.")
}).annotate({ identifier: "InitCommand", description: "A preflight run before the command (spec: InitCommand)." })

export const Sidecar = Schema.Struct({
  name: described(nonEmpty, "Unique within the Job."),
  command: optional(Schema.Array(Schema.String), "argv."),
  env: optional(Schema.Array(EnvVar), "Environment."),
  image: optional(nonEmpty, "Defaults to the Job's image."),
  startupTimeout: optional(duration(), "How long the sidecar may take to start.")
}).annotate({ identifier: "Sidecar", description: "A process beside the main one (spec: Sidecar)." })

/** Paths a volume may not be mounted over: the system's own. */
export const systemPaths: ReadonlyArray<string> = [
  "/",
  "/bin",
  "/boot",
  "/dev",
  "/etc",
  "/lib",
  "/lib64",
  "/proc",
  "/run",
  "/sbin",
  "/sys",
  "/usr",
  "/platform"
]

const mountPath = absolutePath.check(Schema.makeFilter(
  (path: string) => {
    const normalized = path.length > 1 ? path.replace(/\/+$/u, "") : path
    return systemPaths.some((system) =>
        normalized === system || (system !== "/" && normalized.startsWith(`${system}/`))
      )
      ? `Invalid value: "${path}": system paths cannot be mount points`
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
))

export const VolumeMount = Schema.Struct({
  volume: described(nonEmpty, "The Volume."),
  mountPath: described(mountPath, "Absolute; system paths are refused."),
  readOnly: optional(Schema.Boolean, "Mount read-only."),
  revision: optional(intAtLeast(1), "A revision of the Volume (only with readOnly).")
}).check(onlyWith("revision", "readOnly: true", (mount) => mount.readOnly === true)).annotate({
  identifier: "VolumeMount",
  description: "A Volume mounted into the workload (spec: VolumeMount)."
})

export const ImageStatus = Schema.Struct({
  reference: optional(Schema.String, "As written."),
  digest: optional(Schema.String, "Pinned digest."),
  user: optional(Schema.String, "The user the image config runs as (root when none)."),
  process: optional(
    Schema.Struct({
      entrypoint: optional(Schema.Array(Schema.String), "ENTRYPOINT."),
      cmd: optional(Schema.Array(Schema.String), "CMD.")
    }),
    "On Sandbox and Workspace."
  )
}).annotate({ identifier: "ImageStatus", description: "The resolved image (spec: ImageStatus)." })

// ---------------------------------------------------------------------------------------------------------------------
// Job inputs and outputs

const inputForms = ["volume", "output", "bucket", "url", "fromWorkspace", "fromStage"] as const

export const JobInput = Schema.Struct({
  name: described(
    matching(/^[A-Za-z][A-Za-z0-9_]{0,63}$/u, "must match ^[A-Za-z][A-Za-z0-9_]{0,63}$"),
    "Mounted read-only at /platform/inputs/<name>; path in env PLATFORM_INPUT_<name>."
  ),
  volume: optional(
    Schema.Struct({ name: described(nonEmpty, "The Volume."), revision: optional(intAtLeast(1), "A revision.") }),
    "A Volume."
  ),
  output: optional(
    Schema.Struct({
      job: described(nonEmpty, "The Job."),
      name: described(nonEmpty, "The output."),
      index: defaulted(NonNegativeInt, 0, "The index.")
    }),
    "A committed output of another Job."
  ),
  bucket: optional(
    Schema.Struct({
      uri: described(matching(/^s3:\/\/[^/]+\/.+$/u, "must be s3://<bucket>/<key>"), "s3://<bucket>/<key>."),
      connection: described(nonEmpty, "An object-storage Connection that can read it."),
      sha256: optional(Sha256Hex, "Checked at end of stream.")
    }),
    "An object in a bucket."
  ),
  url: optional(
    Schema.Struct({
      url: described(matching(/^https:\/\/.+$/u, "must be an https URL"), "https only."),
      sha256: described(Sha256Hex, "Required for URLs.")
    }),
    "A download."
  ),
  fromWorkspace: optional(
    Schema.Struct({
      name: described(nonEmpty, "The Workspace."),
      path: optional(Schema.String, "Subdirectory of the home.")
    }),
    "Files of a Workspace's home."
  ),
  fromStage: optional(
    Schema.Struct({ stage: described(nonEmpty, "The Pipeline stage."), output: described(nonEmpty, "Its output.") }),
    "An output of a Pipeline stage."
  )
}).check(exactlyOneOf(inputForms)).annotate({
  identifier: "JobInput",
  description: "An input mounted read-only (spec: JobInput)."
})

const outputName = matching(/^[a-z0-9._-]{1,64}$/u, "must match ^[a-z0-9._-]{1,64}$").check(Schema.makeFilter(
  (name: string) =>
    name.startsWith(Limits.reservedOutputPrefix)
      ? `Invalid value: "${name}": the ${Limits.reservedOutputPrefix} prefix is reserved for the platform`
      : undefined,
  { toJsonSchema: () => ({ not: { pattern: "^platform\\." } }) }
))

export const JobOutput = Schema.Struct({
  name: described(outputName, "The platform. prefix is reserved."),
  path: described(absolutePath, "Absolute file or directory (directories archived as tar.zst)."),
  fromRanks: optional(oneOf(["Zero", "All"]), "Gang Jobs: rank 0 only, or every rank under rank-<n>/."),
  sink: optional(
    Schema.Struct({
      connection: described(nonEmpty, "A database Connection."),
      mode: defaulted(oneOf(["Append", "Replace"]), "Append", "Append or Replace."),
      table: described(nonEmpty, "The table.")
    }),
    "Load the output into a database table."
  )
}).annotate({ identifier: "JobOutput", description: "An output collected when an index succeeds (spec: JobOutput)." })

export const uniqueNames = <T extends { readonly name: string }>(what: string) => uniqueBy<T>((item) => item.name, what)

// ---------------------------------------------------------------------------------------------------------------------
// Payloads

const base64 = /^[A-Za-z0-9+/]*={0,2}$/u

/** Bytes a base64 text decodes to (without decoding it). */
export const base64Bytes = (text: string): number =>
  Math.floor((text.length * 3) / 4) - (text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0)

const inlinePayload = Schema.String.check(Schema.makeFilter(
  (text: string) => {
    if (text.length % 4 !== 0 || !base64.test(text)) return `Invalid value: inline must be base64`
    const bytes = base64Bytes(text)
    return bytes > Limits.payloadInlineBytesMax
      ? `Invalid value: ${bytes} bytes: inline payloads are at most 64 KiB; upload larger ones as a blob`
      : undefined
  },
  { toJsonSchema: () => ({ pattern: base64.source, maxLength: Math.ceil(Limits.payloadInlineBytesMax / 3) * 4 }) }
))

export const Payload = Schema.Struct({
  encoding: optional(oneOf(["Pickle", "JSON"]), "Pickle or JSON."),
  inline: optional(inlinePayload, "base64; at most 64 KiB."),
  blob: optional(BlobReference, "sha256:<hex> content address."),
  sha256: optional(Sha256Hex, "Hex digest, set on results.")
}).check(exactlyOneOf(["inline", "blob"])).annotate({
  identifier: "Payload",
  description: "A call's input or result (spec: Payload)."
})

/** The bytes a quantity stands for, for rules that compare sizes. */
export const quantityBytes = (
  text: string | undefined
): number | undefined => (text === undefined ? undefined : parseQuantity(text))
