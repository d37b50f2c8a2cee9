/**
 * Sweep (spec: Sweep): fans a Job or TrainingJob template over a matrix (GPU requests, parameters, regions, repeated
 * `repetitions` times) and reports cost, wall time and throughput per cell. This module decides what a caller may
 * write: the template is a union keyed by `template.kind` (a Job template's spec is a JobSpec, a TrainingJob template's
 * spec a TrainingJobSpec; both take a CommunityPlacement), the matrix is checked against the template it fans out, and
 * only maxParallel, maxCostUSD (raise only) and state may change after create.
 */
import { Schema } from "effect"
import { isObject, type JsonObject } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import {
  decimalString,
  defaulted,
  described,
  intBetween,
  listOf,
  nonEmpty,
  oneOf,
  optional,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, totalCost } from "../../core/meta/Kinds.ts"
import { finalState, type KindDefinition, type ServedKind } from "../../core/schemas/Kind.ts"
import { CommunityPlacement, Condition, Cost, Estimate, GpuRequest, NonNegativeInt } from "../../core/schemas/Shared.ts"
import { jobPhases, JobSpec, normalizeJob } from "../job/JobSchema.ts"
import { normalizeTrainingJob, TrainingJobSpec } from "../trainingjob/TrainingJobSchema.ts"

/**
 * Sweep states (spec: "Running (default) | Suspended | the cancel state"; nodus names it Cancelled, as the Job does).
 */
export const sweepStates = ["Running", "Suspended", "Cancelled"] as const

/** Sweep phases (the spec leaves them open; docs/kinds.md). */
export const sweepPhases = [
  "Pending",
  "Running",
  "Suspending",
  "Suspended",
  "Succeeded",
  "Failed",
  "Cancelled"
] as const

const templatePlacement = defaulted(CommunityPlacement, {}, "Where cells may run; may also use community offerings.")

/** A Job template's spec: the JobSpec with its rules, whose placement may use `community` (spec: Placement). */
export const SweepJobTemplateSpec = JobSpec
  .mapFields((fields) => ({ ...fields, placement: templatePlacement }), { unsafePreserveChecks: true })
  .annotate({
    identifier: "SweepJobTemplateSpec",
    description: "The spec of every Job cell: a JobSpec whose placement may use community offerings."
  })

/** A TrainingJob template's spec: the TrainingJobSpec with its rules, whose placement may use `community`. */
export const SweepTrainingJobTemplateSpec = TrainingJobSpec
  .mapFields((fields) => ({ ...fields, placement: templatePlacement }), { unsafePreserveChecks: true })
  .annotate({
    identifier: "SweepTrainingJobTemplateSpec",
    description: "The spec of every TrainingJob cell: a TrainingJobSpec whose placement may use community offerings."
  })

export const SweepTemplate = Schema.Union([
  Schema.Struct({
    kind: described(Schema.Literal("Job"), "Job: every cell is a Job."),
    spec: described(SweepJobTemplateSpec, "A JobSpec.")
  }),
  Schema.Struct({
    kind: described(Schema.Literal("TrainingJob"), "TrainingJob: every cell is a TrainingJob."),
    spec: described(SweepTrainingJobTemplateSpec, "A TrainingJobSpec.")
  })
]).annotate({ message: `Unsupported value: template.kind: supported values: "Job", "TrainingJob"` })

/**
 * A GPU value of the matrix: the GpuRequest under its own name, since a definition reached both as a list item and as
 * an optional field would be emitted twice in OpenAPI (GpuRequest and GpuRequest_1).
 */
const SweepGpuValue = GpuRequest.annotate({
  identifier: "SweepGpuValue",
  description: "One cell's override of resources.gpu (spec: Resources.gpu)."
})

const paramNames = Schema.makeFilter(
  (params: { readonly [name: string]: ReadonlyArray<string> }) => {
    const names = Object.keys(params)
    if (names.length > Limits.sweepParamNamesMax) {
      return `Too many: ${names.length}: must have at most ${Limits.sweepParamNamesMax} names`
    }
    return names.includes("") ? { path: [""], issue: "Required value: a parameter name must not be empty" } : undefined
  },
  { toJsonSchema: () => ({ maxProperties: Limits.sweepParamNamesMax }) }
)

const Matrix = Schema.Struct({
  gpu: optional(listOf(SweepGpuValue, Limits.sweepGpuValuesMax), "Per-cell overrides of resources.gpu, at most 16."),
  params: optional(
    Schema.Record(Schema.String, listOf(Schema.String, Limits.sweepParamValuesMax)).check(paramNames),
    "Name to values, at most 16 names with 64 values each; a Job gets PLATFORM_PARAM_<name>, a TrainingJob the parameter path <name> (values are JSON encoded as strings)."
  ),
  regions: optional(
    Schema.Array(nonEmpty),
    "One region class per cell; narrows the template's placement.regions, never widens them."
  )
})

const SweepSpecFields = Schema.Struct({
  matrix: defaulted(Matrix, {}, "The dimensions; an empty dimension keeps the template's value."),
  maxCostUSD: optional(
    usd,
    "One cap shared by all cells; reaching it suspends every running cell; can only be raised."
  ),
  maxParallel: defaulted(
    intBetween(1, Limits.sweepMaxParallelMax),
    Limits.sweepMaxParallelDefault,
    "Cells running at once, 1 to 256."
  ),
  repetitions: defaulted(
    intBetween(1, Limits.sweepRepetitionsMax),
    Limits.sweepRepetitionsDefault,
    "Runs of every cell, 1 to 64."
  ),
  state: defaulted(
    oneOf(sweepStates),
    "Running",
    "Running, Suspended, or Cancelled (stops every cell for good); propagates to cells."
  ),
  template: described(SweepTemplate, "The object every cell creates: kind Job or TrainingJob, and its spec.")
})

type SweepSpecInput = typeof SweepSpecFields.Type

type Issue = { readonly path: ReadonlyArray<PropertyKey>; readonly issue: string }

/** A parameter becomes the env variable PLATFORM_PARAM_<name> of a Job cell (spec: Sweep; EnvVar name rule). */
const envSuffix = /^[A-Za-z0-9_]+$/u

const isJsonText = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

// Spec: Sweep.matrix — params reach a Job as env variables and a TrainingJob as parameter paths with JSON values;
// regions may narrow the template's placement.regions, never widen them. nodus: a GPU override must agree with the
// template's gang (Distributed.gpusPerNode equals resources.gpu.count), so every cell is admissible.
const matrixFitsTemplate = Schema.makeFilter<SweepSpecInput>(
  (spec) => {
    const issues: Array<Issue> = []
    const template = spec.template
    for (const [name, values] of Object.entries(spec.matrix.params ?? {})) {
      if (template.kind === "Job" && !envSuffix.test(name)) {
        issues.push({
          path: ["matrix", "params", name],
          issue:
            `Invalid value: "${name}": a Job parameter becomes PLATFORM_PARAM_<name> and must match ^[A-Za-z0-9_]+$`
        })
      }
      if (template.kind === "TrainingJob") {
        values.forEach((value, index) => {
          if (!isJsonText(value)) {
            issues.push({
              path: ["matrix", "params", name, index],
              issue: `Invalid value: ${
                JSON.stringify(value)
              }: a TrainingJob parameter value must be JSON encoded as a string`
            })
          }
        })
      }
    }
    const allowed = template.spec.placement.regions ?? []
    const regions = allowed.length > 0 ? spec.matrix.regions ?? [] : []
    regions.forEach((region, index) => {
      if (!allowed.includes(region)) {
        issues.push({
          path: ["matrix", "regions", index],
          issue: `Invalid value: "${region}": must be one of the template's placement.regions (${
            allowed.join(", ")
          }); a matrix may narrow them, never widen`
        })
      }
    })
    const perNode = template.spec.distributed?.gpusPerNode
    const gpus = perNode !== undefined ? spec.matrix.gpu ?? [] : []
    gpus.forEach((gpu, index) => {
      if (gpu.count !== undefined && gpu.count !== perNode) {
        issues.push({
          path: ["matrix", "gpu", index, "count"],
          issue: `Invalid value: ${gpu.count}: must equal the template's distributed.gpusPerNode (${perNode})`
        })
      }
    })
    return issues
  },
  { toJsonSchema: () => [{}, true] }
)

export const SweepSpec = SweepSpecFields
  .check(matrixFitsTemplate)
  .annotate({ identifier: "SweepSpec", description: "A template fanned out over a matrix (spec: Sweep)." })

export const SweepStatus = Schema.Struct({
  best: optional(
    Schema.Struct({
      byCost: optional(NonNegativeInt, "The index of the cheapest cell."),
      byThroughput: optional(NonNegativeInt, "The index of the fastest cell.")
    }),
    "The best cells."
  ),
  cells: optional(
    Schema.Array(Schema.Struct({
      index: optional(NonNegativeInt, "The cell's index in the matrix."),
      repetition: optional(NonNegativeInt, "Which repetition of the cell."),
      gpu: optional(GpuRequest, "The cell's GPU request."),
      region: optional(Schema.String, "The cell's region class."),
      params: optional(Schema.Record(Schema.String, Schema.String), "The cell's parameters."),
      object: optional(Schema.String, "The created object's name."),
      phase: optional(oneOf(jobPhases), "The created object's phase."),
      wallSeconds: optional(NonNegativeInt, "Wall-clock seconds."),
      costUSD: optional(usd, "What the cell cost."),
      unitsPerSecond: optional(decimalString, "Throughput, a decimal string.")
    })),
    "One entry per cell and repetition."
  ),
  completionTime: optional(Schema.String, "When the last cell finished."),
  startTime: optional(Schema.String, "When the first cell started."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  cost: optional(Cost, "A display copy of the ledger, all cells together."),
  estimate: optional(Estimate, "The estimate at create."),
  message: optional(Schema.String, "Details."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  phase: optional(oneOf(sweepPhases), "The Sweep's phase (docs/kinds.md)."),
  reason: optional(Schema.String, "Why, e.g. MaxCostReached."),
  templateETags: optional(Schema.Array(Schema.String), "ETags of the template the cells were created from.")
}).annotate({ identifier: "SweepStatus", description: "What the service observed of the Sweep." })

/** Normalizes the template's spec as its own kind normalizes it (aliases folded, dependent defaults applied). */
export const normalizeSweep = (spec: JsonObject): JsonObject => {
  const template = spec["template"]
  if (!isObject(template) || !isObject(template["spec"])) return spec
  const normalize = template["kind"] === "Job"
    ? normalizeJob
    : template["kind"] === "TrainingJob"
    ? normalizeTrainingJob
    : undefined
  return normalize === undefined ? spec : { ...spec, template: { ...template, spec: normalize(template["spec"]) } }
}

export const sweep: KindDefinition = {
  spec: SweepSpec,
  status: SweepStatus,
  normalize: normalizeSweep,
  // Spec: Sweep — immutable after create except maxParallel, maxCostUSD (raise only) and state.
  updates: {
    mutable: ["maxParallel", "maxCostUSD", "state"],
    raiseOnly: ["maxCostUSD"]
  },
  // The cancel state propagates to the cells and is final, as a Job's is.
  transitions: finalState("Cancelled", "Sweep")
}

/**
 * How the API serves Sweep (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const sweepServed: ServedKind = {
  info: kindInfo({
    kind: "Sweep",
    plural: "sweeps",
    shortNames: ["swp"],
    operations: fullOps,
    costPath: totalCost,
    description: "A Job or TrainingJob template fanned out over a matrix."
  }),
  definition: sweep
}
