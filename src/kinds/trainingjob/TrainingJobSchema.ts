/**
 * TrainingJob (Beta, v1beta1; spec: TrainingJob): pre-training, fine-tuning, post-training or RL run on a
 * TrainingRuntime; it compiles to one Job (a multi-node gang when more than one node is asked) and mirrors that Job's
 * phase. This module decides what a caller may write (model, data, environment, evaluation, grading, tracking and the
 * Job-like placement fields), the defaults that show on read, what may change after create, and the status the
 * controller reports (compiled Job, metrics, provenance, diagnostics, and the baseline/evaluation comparison).
 *
 * The spec does not show the value sets of `mode`, `task`, `runtime` and the `parameters` format: nodus accepts any
 * non-empty mode and task, a runtime reference, and parameters as a JSON object (docs/kinds.md).
 */
import { Schema } from "effect"
import { isObject, type JsonObject } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import {
  decimalString,
  defaulted,
  described,
  duration,
  exactlyOneOf,
  intAtLeast,
  intBetween,
  matching,
  nonEmpty,
  oneOf,
  optional,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, totalCost } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import {
  Condition,
  Cost,
  Distributed,
  Estimate,
  gangRules,
  Int32,
  NonNegativeInt,
  Placement,
  Resources,
  Sha256Hex
} from "../../core/schemas/Shared.ts"
import { EnvironmentReference } from "../environment/EnvironmentSchema.ts"
import { jobPhases, JobSpec, jobStates } from "../job/JobSchema.ts"
import { RuntimeReference } from "../trainingruntime/TrainingRuntimeSchema.ts"

// ---------------------------------------------------------------------------------------------------------------------
// Value grammars

/** A decimal string strictly between 0 and 1 (spec: data.validationFraction). */
const Fraction = matching(/^0?\.[0-9]+$/u, "must be a decimal string between 0 and 1, exclusive, such as 0.05").check(
  Schema.makeFilter(
    (text: string) =>
      Number(text) > 0
        ? undefined
        : `Invalid value: "${text}": must be a decimal string between 0 and 1, exclusive, such as 0.05`,
    { toJsonSchema: () => [{}, true] }
  )
)

const NonNegativeInt32 = Int32.check(Schema.makeFilter(
  (value: number) => value >= 0 ? undefined : `Invalid value: ${value}: must be greater than or equal to 0`,
  { toJsonSchema: () => ({ minimum: 0 }) }
))

// ---------------------------------------------------------------------------------------------------------------------
// Spec

export const dataFormats = ["Auto", "JSONL", "JSON", "CSV"] as const
export const trainingStages = ["Baseline", "Training", "Evaluating", "Exporting"] as const
export const comparisonReasons = [
  "Comparable",
  "SmallestStep",
  "TooFewTasks",
  "DifferentTasks",
  "NonePassed",
  "AllPassed",
  "IncompleteEvents"
] as const

/** A model or teacher: where its weights come from. nodus takes exactly one of uri and volume (docs/kinds.md). */
export const TrainingJobModel = Schema.Struct({
  uri: optional(nonEmpty, "A model URI (exactly one of uri and volume)."),
  secret: optional(nonEmpty, "A Secret in the project that grants access to the URI."),
  volume: optional(
    Schema.Struct({
      name: described(nonEmpty, "The Volume."),
      revision: optional(intAtLeast(1), "A revision of the Volume; the latest when unset.")
    }),
    "A Volume holding the weights (exactly one of uri and volume)."
  )
}).check(exactlyOneOf(["uri", "volume"])).annotate({
  identifier: "TrainingJobModel",
  description: "Where a model's weights come from."
})

const Columns = Schema.Struct({
  prompt: optional(nonEmpty, "The column holding prompts."),
  completion: optional(nonEmpty, "The column holding completions."),
  chosen: optional(nonEmpty, "The column holding chosen responses."),
  rejected: optional(nonEmpty, "The column holding rejected responses."),
  text: optional(nonEmpty, "The column holding plain text.")
})

export const trainingJobSpecFields = {
  runtime: described(RuntimeReference, "The TrainingRuntime it runs on, e.g. a catalog runtime reference."),
  mode: optional(nonEmpty, "The training mode; its value set is the runtime's."),
  task: optional(nonEmpty, "The task; its value set is the runtime's."),
  parameters: optional(
    Schema.Record(Schema.String, Schema.Json),
    "Runtime parameters as a JSON object; a Sweep addresses them by parameter path."
  ),
  state: optional(oneOf(jobStates), "Running, Suspended, or Cancelled (stops for good); passed to the compiled Job."),
  model: optional(TrainingJobModel, "The model to train."),
  teacher: optional(TrainingJobModel, "A teacher model (same shape as model)."),
  data: optional(
    Schema.Struct({
      volume: described(nonEmpty, "The Volume holding the dataset."),
      path: optional(nonEmpty, "The dataset's path in the Volume."),
      revision: optional(intAtLeast(1), "A revision of the Volume; the latest when unset."),
      format: defaulted(oneOf(dataFormats), "Auto", "Auto, JSONL, JSON or CSV."),
      columns: optional(Columns, "Map from role (prompt, completion, chosen, rejected, text) to dataset column."),
      validationFraction: defaulted(
        Fraction,
        Limits.trainingValidationFractionDefault,
        "Share held out for validation, a decimal string between 0 and 1."
      )
    }),
    "The dataset."
  ),
  environment: optional(
    Schema.Struct({
      name: described(EnvironmentReference, "platform/<name>@<version> or <name>@<version> in the project."),
      trainTasks: optional(NonNegativeInt32, "Tasks trained on."),
      heldOutTasks: optional(NonNegativeInt32, "Tasks evaluated before and after training."),
      seed: defaulted(Schema.Int, 0, "Seed of the task draw.")
    }),
    "The Environment to train on or evaluate with."
  ),
  evaluation: optional(
    Schema.Struct({
      baseline: defaulted(Schema.Boolean, true, "Evaluate the held-out tasks before training."),
      final: defaulted(Schema.Boolean, true, "Evaluate the held-out tasks after training."),
      minComparisonTasks: defaulted(
        intAtLeast(Limits.trainingMinComparisonTasks),
        Limits.trainingMinComparisonTasks,
        "Tasks the comparison needs, at least 16."
      )
    }),
    "Evaluation before and after training (defaulted when an environment is set)."
  ),
  expectedDuration: optional(duration(), "Overrides the estimate of steps x seconds per step."),
  exportTo: optional(
    Schema.Struct({ volume: described(nonEmpty, "The Volume the result is exported to.") }),
    "Where the result is exported."
  ),
  grading: optional(
    Schema.Struct({
      maxParallel: defaulted(
        intBetween(1, Limits.trainingGradingMaxParallelMax),
        Limits.trainingGradingMaxParallelDefault,
        "Grading Sandboxes at once, at most 32."
      )
    }),
    "Grading of environment tasks (defaulted when an environment is set)."
  ),
  maxCostUSD: optional(usd, "Reaching it suspends the TrainingJob; can only be raised."),
  distributed: optional(Distributed, "A gang of nodes (Beta)."),
  placement: defaulted(Placement, {}, "Where it may run."),
  resources: optional(Resources, "Resource floors."),
  tracking: optional(
    Schema.Struct({
      server: optional(
        Schema.Struct({
          uri: described(nonEmpty, "The tracking server's URI."),
          experiment: optional(nonEmpty, "The experiment runs are logged under."),
          secret: optional(nonEmpty, "A Secret holding the tracker's credentials.")
        }),
        "An experiment tracker addressed by URI."
      ),
      fromConnection: optional(
        Schema.Struct({
          connection: described(nonEmpty, "A Connection whose env and egress hosts reach the tracker.")
        }),
        "An experiment tracker reached through a Connection."
      )
    }),
    "Experiment tracking."
  )
}

const TrainingJobSpecFields = Schema.Struct(trainingJobSpecFields)

type TrainingJobSpecInput = typeof TrainingJobSpecFields.Type

export const TrainingJobSpec = TrainingJobSpecFields
  .check(gangRules<TrainingJobSpecInput>())
  .annotate({ identifier: "TrainingJobSpec", description: "What the TrainingJob trains and how (spec: TrainingJob)." })

// ---------------------------------------------------------------------------------------------------------------------
// Status

export const PhaseSummary = Schema.Struct({
  tasks: optional(NonNegativeInt, "Completed scored attempts."),
  passed: optional(NonNegativeInt, "Passed attempts."),
  passRate: optional(decimalString, "passed / tasks, a decimal string."),
  meanReward: optional(decimalString, "Mean finite reward, a decimal string."),
  errors: optional(NonNegativeInt, "Infrastructure or grading errors; never counted as failed."),
  inProgress: optional(NonNegativeInt, "Attempts still running.")
}).annotate({
  identifier: "TrainingJobPhaseSummary",
  description: "Scores of one evaluation phase (spec: PhaseSummary)."
})

export const Comparison = Schema.Struct({
  comparable: optional(Schema.Boolean, "Same tasks scored in baseline and evaluation, and no events missing."),
  measurable: optional(Schema.Boolean, "Comparable, and not all failed or all passed."),
  reason: optional(
    oneOf(comparisonReasons),
    "Comparable, SmallestStep, TooFewTasks, DifferentTasks, NonePassed, AllPassed or IncompleteEvents."
  ),
  note: optional(Schema.String, "One sentence."),
  changePP: optional(decimalString, "Pass-rate change in percentage points, a decimal string."),
  resolutionPP: optional(decimalString, "100 / tasks, a decimal string.")
}).annotate({
  identifier: "TrainingJobComparison",
  description: "Whether baseline and evaluation compare like for like, and the change (spec: Comparison)."
})

export const TrainingJobStatus = Schema.Struct({
  compiledJob: optional(JobSpec, "The Job spec the TrainingJob compiled to."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  cost: optional(Cost, "A display copy of the ledger."),
  estimate: optional(Estimate, "The estimate at create."),
  job: optional(Schema.String, "The compiled Job's name (label <api_group>/trainingjob)."),
  message: optional(Schema.String, "Details."),
  metrics: optional(
    Schema.Struct({
      step: optional(NonNegativeInt, "The current step."),
      totalSteps: optional(NonNegativeInt, "Steps in total."),
      loss: optional(decimalString, "Loss, a decimal string."),
      tokensPerSecond: optional(decimalString, "Throughput, a decimal string."),
      gpuMemoryBytes: optional(NonNegativeInt, "Peak GPU memory in bytes.")
    }),
    "Training metrics."
  ),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  outputs: optional(
    Schema.Array(Schema.Struct({
      name: described(Schema.String, "The output, e.g. results.json or the adapter."),
      sizeBytes: optional(NonNegativeInt, "Its size in bytes.")
    })),
    "Outputs."
  ),
  phase: optional(oneOf(jobPhases), "Mirrors the compiled Job's phase."),
  progress: optional(
    Schema.Struct({ stage: optional(oneOf(trainingStages), "Baseline, Training, Evaluating or Exporting.") }),
    "Progress."
  ),
  provenance: optional(
    Schema.Struct({
      environmentDigest: optional(Schema.String, "The Environment's digest."),
      managed: optional(Schema.Boolean, "True when a catalog runtime ran without image or command overrides."),
      modelRevision: optional(Schema.String, "The model revision trained."),
      parametersSHA256: optional(Sha256Hex, "SHA-256 of the parameters."),
      runtimeDigest: optional(Schema.String, "The runtime's digest.")
    }),
    "What exactly ran."
  ),
  reason: optional(Schema.String, "Why it failed, stopped or is suspended."),
  diagnostics: optional(
    Schema.Struct({
      rewardSignal: optional(Schema.String, "What the reward signal looked like (its value set is not shown)."),
      weightsChanged: optional(Schema.Boolean, "Whether training changed the weights.")
    }),
    "Diagnostics."
  ),
  summary: optional(
    Schema.Struct({
      baseline: optional(PhaseSummary, "Before training."),
      evaluation: optional(PhaseSummary, "After training."),
      comparison: optional(Comparison, "Baseline against evaluation.")
    }),
    "Evaluation summary."
  )
}).annotate({ identifier: "TrainingJobStatus", description: "What the service observed of the TrainingJob." })

// ---------------------------------------------------------------------------------------------------------------------
// Normalization and updates

/**
 * Applies what depends on other fields (spec: Resources, TrainingJob): resources.nodes > 1 is stored as
 * distributed.nodes; with an environment, evaluation and grading are defaulted so their defaults show on read.
 */
export const normalizeTrainingJob = (spec: JsonObject): JsonObject => {
  let next = spec
  const resources = next["resources"]
  if (
    isObject(resources) && typeof resources["nodes"] === "number" && resources["nodes"] > 1 &&
    next["distributed"] === undefined
  ) {
    const { nodes, ...rest } = resources
    next = { ...next, resources: rest, distributed: { nodes: nodes as number } }
  }
  if (next["environment"] !== undefined) {
    if (next["evaluation"] === undefined) next = { ...next, evaluation: {} }
    if (next["grading"] === undefined) next = { ...next, grading: {} }
  }
  return next
}

/**
 * nodus: a TrainingJob compiles once to a Job whose spec is immutable, so only state, maxCostUSD (raise only, spec:
 * Conventions 4) and grading.maxParallel may change after create (docs/kinds.md).
 */
export const trainingJobUpdates = {
  mutable: ["state", "maxCostUSD", "grading.maxParallel"],
  raiseOnly: ["maxCostUSD"]
} as const

export const trainingJob: KindDefinition = {
  spec: TrainingJobSpec,
  status: TrainingJobStatus,
  normalize: normalizeTrainingJob,
  updates: trainingJobUpdates
}

/**
 * How the API serves TrainingJob (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const trainingJobServed: ServedKind = {
  info: kindInfo({
    kind: "TrainingJob",
    plural: "trainingjobs",
    shortNames: ["tj"],
    version: "v1beta1",
    operations: fullOps,
    costPath: totalCost,
    description: "A pre-training, fine-tuning, post-training or RL run on a TrainingRuntime (Beta)."
  }),
  definition: trainingJob
}
