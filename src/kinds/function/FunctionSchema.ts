/**
 * Function (spec: Function): a deployed function served by a pool of warm workers; FunctionCalls invoke it. The spec
 * schema admits what clients write: the code to call (a module and a qualname or a class), the interpreter minor, the
 * retry and scaling policies with their stated defaults, and the Job-like workload fields built from the shared types.
 * Every spec field may change after create (a change to code, image or resources rolls workers); only maxCostUSD is
 * held to rising. Rules the spec leaves open are nodus's own and are listed in docs/kinds/Function.md.
 */
import { Decimal } from "decimal.js"
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  absolutePath,
  defaulted,
  described,
  duration,
  exactlyOneOf,
  intBetween,
  listOf,
  matching,
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
  BlobReference,
  Condition,
  Cost,
  EnvVar,
  Estimate,
  ImageStatus,
  InitCommand,
  longRunningPhases,
  longRunningStates,
  Network,
  NonNegativeInt,
  Placement,
  Recovery,
  Resources,
  SecretMount,
  Sidecar,
  uniqueNames,
  VolumeMount
} from "../../core/schemas/Shared.ts"
import { parseDurationMs } from "../../core/Units.ts"

/** Function states a caller writes to `spec.state` (spec: Function — Running (default) | Stopped). */
export const functionStates = longRunningStates

/**
 * Function phases in `status.phase`. The spec says the Function's phase vocabulary "is the long-running one": nodus
 * takes the long-running kinds' phases (Sandbox, Workspace) word for word (docs/kinds/Function.md).
 */
export const functionPhases = longRunningPhases

// ---------------------------------------------------------------------------------------------------------------------
// Local helpers (candidates for Fields.ts)

const decimalText = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/u

/**
 * A non-negative decimal string ("2", "2.0", "1.5") from `minimum` to `maximum` inclusive, compared exactly (spec:
 * Conventions 2 writes decimals as strings). JSON Schema carries the grammar as `pattern` and the bounds as
 * `x-nodus-decimal` {minimum, maximum}, since a string's numeric range has no keyword of its own.
 */
export const decimalBetween = (minimum: number, maximum: number) =>
  Schema.String.check(Schema.makeFilter(
    (text: string) => {
      if (!decimalText.test(text)) return `Invalid value: "${text}": must be a decimal string such as 2.0`
      const value = new Decimal(text)
      return value.lessThan(minimum) || value.greaterThan(maximum)
        ? `Invalid value: "${text}": must be between ${minimum} and ${maximum}, inclusive`
        : undefined
    },
    { toJsonSchema: () => ({ pattern: decimalText.source, "x-nodus-decimal": { minimum, maximum } }) }
  ))

const pythonIdentifier = "[A-Za-z_][A-Za-z0-9_]*"
const dottedIdentifier = matching(
  new RegExp(`^${pythonIdentifier}(\\.${pythonIdentifier})*$`, "u"),
  "must be a dotted Python name such as pkg.module"
)
const identifier = matching(
  new RegExp(`^${pythonIdentifier}$`, "u"),
  `must be a Python identifier (^${pythonIdentifier}$)`
)

// ---------------------------------------------------------------------------------------------------------------------
// Spec

const FunctionClass = Schema.Struct({
  name: described(dottedIdentifier, "The class's qualified name in the module."),
  methods: described(
    listOf(identifier, Limits.functionClassMethodsMax)
      .check(Schema.makeFilter(
        (methods: ReadonlyArray<string>) =>
          methods.length > 0 ? undefined : "Required value: name at least one method a call may name",
        { toJsonSchema: () => ({ minItems: 1 }) }
      ))
      .check(uniqueBy((method: string) => method, "method names")),
    "The methods a call may name, 1 to 128, unique."
  )
})

const FunctionCode = Schema.Struct({
  module: described(dottedIdentifier, "The Python module that defines the function or class, e.g. app.handlers."),
  qualname: optional(
    dottedIdentifier,
    "The function's qualified name in the module (exactly one of qualname and cls)."
  ),
  blob: optional(
    BlobReference,
    "The content-addressed code archive (sha256:<hex>) shared by the App's members; unset when the image holds the code."
  ),
  cls: optional(FunctionClass, "A class whose methods calls name (exactly one of qualname and cls).")
}).check(exactlyOneOf(["qualname", "cls"]))

// Spec: Function.cluster (Beta) {launcher Plain, network, size, transport}. A cluster is a gang: nodus bounds its size
// as Distributed.nodes is bounded (2 to 16, the beta caps it at 8).
const clusterSize = Schema.Int.check(Schema.makeFilter(
  (nodes: number) => {
    if (nodes < Limits.gangNodesMin || nodes > Limits.gangNodesMax) {
      return `Invalid value: ${nodes}: must be between ${Limits.gangNodesMin} and ${Limits.gangNodesMax}, inclusive`
    }
    return nodes > Limits.gangNodesBetaMax
      ? `Invalid value: ${nodes}: the Function cluster option is Beta and capped at ${Limits.gangNodesBetaMax} nodes`
      : undefined
  },
  { toJsonSchema: () => ({ minimum: Limits.gangNodesMin, maximum: Limits.gangNodesBetaMax }) }
))

const FunctionCluster = Schema.Struct({
  launcher: optional(oneOf(["Plain"]), "Plain: the env contract only."),
  network: optional(
    oneOf(["Colocated", "Regional", "Global"]),
    "Colocated (one provider and region), Regional (one region class) or Global."
  ),
  size: described(clusterSize, "Nodes per worker, 2 to 16 (the beta caps it at 8)."),
  transport: optional(
    oneOf(["Direct", "Auto"]),
    "Direct (private or direct paths only) or Auto (relayed paths allowed)."
  )
})

const FunctionRetriesFields = Schema.Struct({
  maxRetries: optional(intBetween(0, Limits.functionRetriesMax), "Retries of a call whose function raised, 0 to 10."),
  backoffCoefficient: defaulted(
    decimalBetween(Limits.functionBackoffCoefficientMin, Limits.functionBackoffCoefficientMax),
    Limits.functionBackoffCoefficientDefault,
    "Growth of the delay between retries, a decimal string from 1 to 10."
  ),
  initialDelay: defaulted(duration(), Limits.functionInitialDelayDefault, "Delay before the first retry."),
  maxDelay: defaulted(duration(), Limits.functionMaxDelayDefault, "Longest delay between retries.")
})

// nodus: the first delay may not exceed the longest one (docs/kinds/Function.md).
const initialDelayWithinMaxDelay = Schema.makeFilter<typeof FunctionRetriesFields.Type>(
  (retries) => {
    const initial = parseDurationMs(retries.initialDelay)
    const longest = parseDurationMs(retries.maxDelay)
    return initial !== undefined && longest !== undefined && initial > longest
      ? {
        path: ["initialDelay"],
        issue: `Invalid value: "${retries.initialDelay}": must be at most maxDelay (${retries.maxDelay})`
      }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

const FunctionScalingFields = Schema.Struct({
  minWorkers: optional(
    intBetween(0, Limits.functionWorkersMax),
    "Workers kept warm, 0 to maxWorkers; idle ones are billed as warm capacity."
  ),
  maxWorkers: defaulted(
    intBetween(1, Limits.functionWorkersMax),
    Limits.functionMaxWorkersDefault,
    "Most workers at once, 1 to 1000."
  ),
  scaledownWindow: defaulted(
    duration({ maximumMs: Limits.scaledownWindowMsMax }),
    Limits.functionScaledownWindowDefault,
    "How long an idle worker stays before it is released, 0s to 20m."
  ),
  targetConcurrency: defaulted(
    intBetween(1, Limits.functionTargetConcurrencyMax),
    Limits.functionTargetConcurrencyDefault,
    "Calls a worker takes at once, 1 to 1000."
  )
})

// Spec: Function.scaling — minWorkers is 0 to maxWorkers.
const minWorkersWithinMaxWorkers = Schema.makeFilter<typeof FunctionScalingFields.Type>(
  (scaling) =>
    scaling.minWorkers !== undefined && scaling.minWorkers > scaling.maxWorkers
      ? {
        path: ["minWorkers"],
        issue: `Invalid value: ${scaling.minWorkers}: must be at most maxWorkers (${scaling.maxWorkers})`
      }
      : undefined,
  { toJsonSchema: () => [{}, true] }
)

const FunctionSpecFields = Schema.Struct({
  args: optional(Schema.Array(Schema.String), "Arguments to the worker's command."),
  cluster: optional(FunctionCluster, "Each worker is a gang of nodes (Beta)."),
  code: described(FunctionCode, "What a call runs: a module and a function, or a class and its methods."),
  command: optional(Schema.Array(Schema.String), "The worker's command (argv)."),
  connections: optional(Schema.Array(nonEmpty), "Connections whose env and egress hosts the workers get."),
  env: optional(Schema.Array(EnvVar), "Environment; secrets come through valueFrom.secretKeyRef."),
  image: optional(nonEmpty, "Container image reference (exactly one of image and imageRef)."),
  imagePullSecrets: optional(Schema.Array(nonEmpty), "Secrets for pulling the image."),
  imageRef: optional(nonEmpty, "An Image object in the project (exactly one of image and imageRef)."),
  initCommand: optional(InitCommand, "Preflight before a worker starts serving."),
  maxCostUSD: optional(usd, "A cap on the Function's spending; can only be raised."),
  network: optional(Network, "Network policy."),
  placement: defaulted(Placement, {}, "Where workers may run."),
  python: optional(
    oneOf(Limits.functionPythonMinors),
    "Interpreter minor version, 3.10 to 3.13; a caller on another minor gets Invalid."
  ),
  recovery: optional(Recovery, "Recovery from worker loss; maxAttempts is the recovery limit of each call."),
  resources: optional(Resources, "Resource floors of each worker."),
  retries: optional(FunctionRetriesFields.check(initialDelayWithinMaxDelay), "Retries of calls whose function raised."),
  scaling: defaulted(FunctionScalingFields.check(minWorkersWithinMaxWorkers), {}, "How many workers serve calls."),
  secrets: optional(Schema.Array(SecretMount), "Secrets mounted into every worker (bare names accepted)."),
  serviceAccountName: optional(nonEmpty, "The ServiceAccount the workers call the service as."),
  sidecars: optional(
    Schema.Array(Sidecar).check(uniqueNames("sidecar names")),
    "Processes beside each worker; names unique."
  ),
  state: defaulted(oneOf(functionStates), "Running", "Running, or Stopped (drains workers to zero; new calls queue)."),
  timeout: defaulted(
    duration({ minimumMs: Limits.functionTimeoutMsMin, maximumMs: Limits.functionTimeoutMsMax }),
    Limits.functionTimeoutDefault,
    "Per-call deadline, 1s to 24h."
  ),
  volumes: optional(Schema.Array(VolumeMount), "Volumes to mount."),
  workingDir: optional(absolutePath, "Working directory.")
})

type FunctionSpecInput = typeof FunctionSpecFields.Type

// Workers must come from an image; nodus takes exactly one of image and imageRef, as for Job (docs/kinds/Function.md).
const oneImage = Schema.makeFilter<FunctionSpecInput>(
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

// A multi-node worker is written as cluster.size; resources.nodes (Job's shorthand for a gang) is refused above 1.
const nodesInCluster = Schema.makeFilter<FunctionSpecInput>(
  (spec) => {
    const nodes = spec.resources?.nodes
    return nodes !== undefined && nodes > 1
      ? {
        path: ["resources", "nodes"],
        issue: `Forbidden: ${nodes} nodes: a multi-node worker is set with cluster.size`
      }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

export const FunctionSpec = FunctionSpecFields
  .check(oneImage, nodesInCluster)
  .annotate({
    identifier: "FunctionSpec",
    description: "What the Function runs and how its workers scale (spec: Function)."
  })

// ---------------------------------------------------------------------------------------------------------------------
// Status

export const FunctionStatus = Schema.Struct({
  appVersion: optional(NonNegativeInt, "The version of the App whose code archive the workers run."),
  conditions: optional(Schema.Array(Condition), "Ready (reason WorkersReady) and Funded."),
  cost: optional(Cost, "A display copy of the ledger."),
  estimate: optional(Estimate, "The estimate at create."),
  handledRequests: optional(
    Schema.Record(Schema.String, Schema.String),
    "Restart requests acted on: last handled *-requested-at annotation per action."
  ),
  image: optional(ImageStatus, "The resolved image."),
  message: optional(Schema.String, "Details for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  phase: optional(
    oneOf(functionPhases),
    "Long-running phase: Pending, Starting, Running, Recovering, Stopping, Stopped, Terminating or Failed."
  ),
  queue: optional(
    Schema.Struct({
      queued: optional(NonNegativeInt, "Calls waiting for a worker."),
      running: optional(NonNegativeInt, "Calls a worker is running.")
    }),
    "Calls in flight."
  ),
  reason: optional(Schema.String, "One CamelCase word: why the Function is in its phase."),
  workerTemplate: optional(
    Schema.Struct({
      template: described(
        nonEmpty,
        "A hash of what the workers run (code, image, resources and the rest of the worker's program)."
      ),
      firstWorker: described(
        NonNegativeInt,
        "The number of the first worker that runs it; workers numbered below drain."
      )
    }),
    "nodus: the template workers run now, for rolling a change (docs/kinds/Function.md)."
  ),
  workers: optional(
    Schema.Struct({
      starting: optional(NonNegativeInt, "Workers starting."),
      ready: optional(NonNegativeInt, "Workers ready to take calls."),
      busy: optional(NonNegativeInt, "Workers running calls."),
      idle: optional(NonNegativeInt, "Workers without a call (warm capacity)."),
      draining: optional(
        NonNegativeInt,
        "Workers finishing in-flight calls before they go (rollout, scale-down or Stopped)."
      )
    }),
    "Worker counts."
  )
}).annotate({ identifier: "FunctionStatus", description: "What the service observed of the Function." })

// ---------------------------------------------------------------------------------------------------------------------
// Normalization and updates

/** The Function's definition (`function` is a reserved word, hence the name). */
export const functionKind: KindDefinition = {
  spec: FunctionSpec,
  status: FunctionStatus,
  // Bare Secret names are stored as {name}.
  normalize: bareSecretNames,
  // Spec: Function — every spec field is mutable; maxCostUSD only rises (Conventions 4).
  updates: { immutable: [], raiseOnly: ["maxCostUSD"] }
}

export type FunctionSpecType = typeof FunctionSpec.Type
export type FunctionStatusType = typeof FunctionStatus.Type

/**
 * How the API serves Function (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const functionServed: ServedKind = {
  info: kindInfo({
    kind: "Function",
    plural: "functions",
    shortNames: ["fn"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Image", "spec.image", "Container image")],
    description: "A deployed function served by warm workers."
  }),
  definition: functionKind
}
