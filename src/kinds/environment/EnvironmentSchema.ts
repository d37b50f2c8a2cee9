/**
 * Environment (spec: Environment): an RL and evaluation environment, an OCI image with two entrypoints (a tasks command
 * writing JSONL tasks without answers, and a grade command scoring completions); every Environment has a grader. This
 * module decides what a caller may write: a SemVer version, exactly one package form, graders, the grading sandbox
 * (whose egress is always denied, so it has no network field), splits and measured examples; and what the service
 * reports.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  duration,
  exactlyOneOf,
  intAtLeast,
  matching,
  nonEmpty,
  oneOf,
  optional,
  quantity,
  uniqueBy
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, wide } from "../../core/meta/Kinds.ts"
import { dns1123SubdomainFormat, utf8Length } from "../../core/meta/Names.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { BlobReference, Condition, GpuRequest, NonNegativeInt, uniqueNames } from "../../core/schemas/Shared.ts"

// ---------------------------------------------------------------------------------------------------------------------
// Value grammars

/** SemVer 2.0.0 (semver.org), without anchors, for composing references such as <name>@<version>. */
export const semVerSource = "(?:0|[1-9][0-9]*)\\.(?:0|[1-9][0-9]*)\\.(?:0|[1-9][0-9]*)" +
  "(?:-(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?" +
  "(?:\\+[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*)?"

export const SemVer = matching(new RegExp(`^${semVerSource}$`, "u"), "must be a SemVer version such as 1.2.0")

/**
 * How TrainingJob and AgentGroup name an Environment (spec: "project or platform/<name>@<version>"): <name>@<version>
 * in the project, or platform/<name>@<version> from the platform's catalog.
 */
export const EnvironmentReference = matching(
  new RegExp(`^(?:platform/)?${dns1123SubdomainFormat}@${semVerSource}$`, "u"),
  "must be platform/<name>@<version> or <name>@<version>, with a SemVer version"
)

/** A digest-pinned OCI reference: <repository>[:<tag>]@sha256:<64 lowercase hex>. */
const DigestPinnedImage = matching(
  /^[A-Za-z0-9][A-Za-z0-9._\-/:]*@sha256:[0-9a-f]{64}$/u,
  "must be a digest-pinned OCI reference such as registry.example.com/env@sha256:<64 lowercase hex digits>"
)

/** A Python package name (PEP 508). */
const PipName = matching(/^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/u, "must be a Python package name such as my-env")

/** An exact version, not a specifier: no operators, ranges or wildcards (PEP 440 characters only). */
const ExactVersion = matching(
  /^[0-9A-Za-z][0-9A-Za-z.+!_-]*$/u,
  "must be an exact version such as 1.4.2 (no specifiers such as >=, ~= or *)"
)

const HttpUrl = matching(/^https?:\/\/[^\s/]+\S*$/u, "must be an http or https URL")

const pythonIdentifier = "[A-Za-z_][A-Za-z0-9_]*"

/** <module>[:<factory>]: a dotted Python module and an optional factory function. */
const ModuleReference = matching(
  new RegExp(`^${pythonIdentifier}(\\.${pythonIdentifier})*(:${pythonIdentifier})?$`, "u"),
  "must be <module>[:<factory>], e.g. my_env.main:make_env"
)

const FunctionName = matching(new RegExp(`^${pythonIdentifier}$`, "u"), "must be a Python function name")

/** An SPDX license id (e.g. MIT, Apache-2.0, CC-BY-4.0, LicenseRef-custom). */
const SpdxId = matching(/^[A-Za-z0-9][A-Za-z0-9.+-]*$/u, "must be an SPDX license id such as Apache-2.0")

/** A model URI pinned to a revision: ends in @<40 lowercase hex>. */
const PinnedModelUri = matching(
  /^\S+@[0-9a-f]{40}$/u,
  "must be a model URI pinned to a revision, ending in @<40 lowercase hex digits>"
)

const CalendarDate = matching(/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/u, "must be a date YYYY-MM-DD").check(Schema.makeFilter(
  (text: string) => {
    const date = new Date(`${text}T00:00:00Z`)
    return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(text)
      ? undefined
      : `Invalid value: "${text}": must be a calendar date`
  },
  { toJsonSchema: () => [{}, true] }
))

/** A pass rate: a number from 0 to 1. */
const PassRate = Schema.Finite.check(Schema.makeFilter(
  (rate: number) => rate >= 0 && rate <= 1 ? undefined : `Invalid value: ${rate}: must be between 0 and 1, inclusive`,
  { toJsonSchema: () => ({ minimum: 0, maximum: 1 }) }
))

const SampleTask = Schema.String.check(Schema.makeFilter(
  (text: string) => {
    const bytes = utf8Length(text)
    return bytes <= Limits.environmentSampleTaskBytesMax
      ? undefined
      : `Invalid value: ${bytes} bytes: must be at most 4 KiB`
  },
  { toJsonSchema: () => ({ maxLength: Limits.environmentSampleTaskBytesMax }) }
))

// ---------------------------------------------------------------------------------------------------------------------
// Spec

export const environmentCategories = ["Reasoning", "Math", "Code", "Games", "Control", "Custom"] as const
export const environmentModes = ["Train", "Evaluate"] as const
export const environmentPhases = ["Pending", "Ready", "Failed"] as const

const EnvironmentPackage = Schema.Struct({
  image: optional(DigestPinnedImage, "A digest-pinned OCI reference (exactly one of image, pip and source)."),
  pip: optional(
    Schema.Struct({
      name: described(PipName, "The package name."),
      version: described(ExactVersion, "The exact version."),
      index: optional(HttpUrl, "The package index URL; the default index when unset.")
    }),
    "A Python package from an index (exactly one of image, pip and source)."
  ),
  source: optional(
    Schema.Struct({
      blob: described(BlobReference, "A gzipped tar uploaded through /blobs/v1: sha256:<64 lowercase hex>."),
      module: described(ModuleReference, "<module>[:<factory>].")
    }),
    "Uploaded source (exactly one of image, pip and source)."
  ),
  loader: defaulted(FunctionName, "load_environment", "The function name that loads a verifier package.")
}).check(exactlyOneOf(["image", "pip", "source"]))

const Grader = Schema.Struct({
  name: described(nonEmpty, "The grader's name, unique within the environment."),
  kind: described(oneOf(["Program", "ExactMatch"]), "Program or ExactMatch."),
  description: optional(Schema.String, "What it checks.")
})

/**
 * nodus names the default grader after the image's grade command (the spec says only "the image's own Program grader").
 */
export const defaultGraders = [{ name: "grade", kind: "Program" }] as const

const Graders = Schema.Array(Grader).check(
  Schema.makeFilter(
    (graders: ReadonlyArray<unknown>) =>
      graders.length > 0 ? undefined : "Required value: every Environment has a grader",
    { toJsonSchema: () => ({ minItems: 1 }) }
  ),
  uniqueNames("grader names")
)

const Modes = Schema.Array(oneOf(environmentModes)).check(
  Schema.makeFilter(
    (modes: ReadonlyArray<string>) => modes.length > 0 ? undefined : "Required value: Train and/or Evaluate",
    { toJsonSchema: () => ({ minItems: 1, maxItems: environmentModes.length }) }
  ),
  uniqueBy<string>((mode) => mode, "modes")
)

const Split = Schema.Struct({ size: described(NonNegativeInt, "Tasks in the split.") })

const Example = Schema.Struct({
  name: described(nonEmpty, "Unique within the environment."),
  mode: described(oneOf(environmentModes), "Train or Evaluate."),
  runtime: described(nonEmpty, "The TrainingRuntime the example ran on."),
  model: optional(PinnedModelUri, "The model, pinned: a URI ending in @<40-hex revision>."),
  parameters: optional(Schema.Record(Schema.String, Schema.Json), "The TrainingJob parameters it ran with."),
  tasks: optional(intAtLeast(1), "Tasks measured."),
  baseline: optional(
    Schema.Struct({ passRate: described(PassRate, "A number from 0 to 1.") }),
    "The pass rate before training."
  ),
  trained: optional(
    Schema.Struct({ passRate: described(PassRate, "A number from 0 to 1.") }),
    "The pass rate after training."
  ),
  changePP: optional(Schema.Finite, "The pass-rate change in percentage points."),
  runtimeSeconds: optional(NonNegativeInt, "How long it ran, in seconds."),
  measuredOn: optional(
    Schema.Struct({
      date: optional(CalendarDate, "YYYY-MM-DD."),
      offering: optional(Schema.String, "The offering it ran on.")
    }),
    "When and where it was measured."
  )
})

const EnvironmentSpecFields = Schema.Struct({
  version: described(SemVer, "SemVer; references use platform/<name>@<version> or <name>@<version>."),
  package: described(EnvironmentPackage, "What the environment runs: exactly one of image, pip and source."),
  category: optional(oneOf(environmentCategories), "Reasoning, Math, Code, Games, Control or Custom."),
  modes: defaulted(Modes, ["Evaluate"], "Train and/or Evaluate."),
  graders: defaulted(Graders, defaultGraders, "Graders; default: the image's own Program grader."),
  heldOutMeasures: defaulted(
    oneOf(["TrainedTask", "Transfer"]),
    "TrainedTask",
    "What the held-out split measures: TrainedTask or Transfer."
  ),
  licenses: optional(
    Schema.Struct({
      code: optional(SpdxId, "SPDX id of the code's license."),
      data: optional(SpdxId, "SPDX id of the data's license.")
    }),
    "Licenses as SPDX ids."
  ),
  publisher: optional(Schema.String, "Who publishes it."),
  readiness: defaulted(oneOf(["Research", "Stable"]), "Research", "Research or Stable."),
  requirements: optional(
    Schema.Struct({
      gpu: optional(GpuRequest, "GPUs a run on the environment needs."),
      memory: optional(quantity(), "Memory a run on the environment needs.")
    }),
    "What a run on the environment needs."
  ),
  rewardType: defaulted(oneOf(["Binary", "Scalar"]), "Binary", "Binary or Scalar."),
  sampleTask: optional(SampleTask, "A sample task, at most 4 KiB."),
  sandbox: defaulted(
    Schema.Struct({
      cpu: defaulted(quantity(), Limits.environmentSandboxCpuDefault, "vCPU of a grading Sandbox."),
      image: optional(nonEmpty, "The grading image; the environment image when unset."),
      memory: defaulted(quantity(), Limits.environmentSandboxMemoryDefault, "Memory of a grading Sandbox."),
      timeout: defaulted(
        duration({ maximumMs: Limits.environmentGradingTimeoutMsMax }),
        Limits.environmentGradingTimeoutDefault,
        "Per grading batch, at most 10m."
      )
    }),
    {},
    "Where grading runs; egress is always denied and candidate code runs as an unprivileged user."
  ),
  sourceURL: optional(HttpUrl, "Where its source is published."),
  splits: optional(
    Schema.Struct({
      train: optional(Split, "The train split."),
      test: optional(Split, "The test split.")
    }),
    "Split sizes."
  ),
  summary: optional(Schema.String, "A summary."),
  examples: optional(Schema.Array(Example).check(uniqueNames("example names")), "Measured runs; names unique.")
})

type EnvironmentSpecInput = typeof EnvironmentSpecFields.Type

// nodus: an example measures a mode the environment offers.
const examplesInModes = Schema.makeFilter<EnvironmentSpecInput>(
  (spec) =>
    (spec.examples ?? []).flatMap((example, index) =>
      spec.modes.includes(example.mode)
        ? []
        : [{
          path: ["examples", index, "mode"],
          issue: `Invalid value: "${example.mode}": must be one of the environment's modes (${spec.modes.join(", ")})`
        }]
    ),
  { toJsonSchema: () => [{}, true] }
)

export const EnvironmentSpec = EnvironmentSpecFields
  .check(examplesInModes)
  .annotate({
    identifier: "EnvironmentSpec",
    description: "What the environment is and how it grades (spec: Environment)."
  })

export const EnvironmentStatus = Schema.Struct({
  conditions: optional(Schema.Array(Condition), "Verified: digest resolved; managed environments signature-checked."),
  digest: optional(Schema.String, "The resolved digest."),
  image: optional(Schema.String, "The digest-pinned base image a source package runs on."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  phase: optional(oneOf(environmentPhases), "Pending, Ready or Failed."),
  splits: optional(
    Schema.Struct({
      train: described(NonNegativeInt, "Materialized train tasks."),
      test: described(NonNegativeInt, "Materialized test tasks.")
    }),
    "Materialized split counts."
  )
}).annotate({ identifier: "EnvironmentStatus", description: "What the service observed of the Environment." })

/** Spec: Environment states no immutability, so every field may change (status.digest is resolved again). */
export const environment: KindDefinition = {
  spec: EnvironmentSpec,
  status: EnvironmentStatus
}

/**
 * How the API serves Environment (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const environmentServed: ServedKind = {
  info: kindInfo({
    kind: "Environment",
    plural: "environments",
    shortNames: ["env"],
    operations: fullOps,
    columns: [wide("Version", "spec.version", "SemVer version")],
    description: "An RL and evaluation environment: a tasks command and a grader."
  }),
  definition: environment
}
