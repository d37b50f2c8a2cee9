/**
 * TrainingRuntime (Beta, v1beta1; spec: Areas, TrainingJob, Other kinds): what a TrainingJob runs on. The spec does not
 * show its fields; it fixes only that a TrainingJob names its runtime ("a TrainingRuntime, e.g. a catalog runtime
 * reference"), that `provenance.managed` is true when a catalog runtime ran without image or command overrides, that
 * the runtime has a digest (`provenance.runtimeDigest`), and that a TrainingJob compiles to one Job (a gang when more
 * than one node is asked). This module is nodus's small schema built on those facts: a project runtime either builds
 * on a catalog runtime (optionally overriding its image or command, which makes runs unmanaged) or names its own image,
 * and says which modes and tasks it accepts and how a gang is launched.
 */
import { Schema } from "effect"
import { matching, nonEmpty, oneOf, optional, uniqueBy } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import { dns1123SubdomainFormat } from "../../core/meta/Names.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, EnvVar, ImageStatus, uniqueNames } from "../../core/schemas/Shared.ts"

/** Launchers of a gang (spec: Distributed.launcher). */
export const runtimeLaunchers = ["Plain", "Torchrun", "Ray", "Verl", "Accelerate", "Deepspeed"] as const

export const runtimePhases = ["Pending", "Ready", "Failed"] as const

/** A runtime's name, and optionally its version: <name>[@<version>] (nodus's grammar). */
const runtimeName = `${dns1123SubdomainFormat}(?:@[0-9A-Za-z][0-9A-Za-z.+_-]*)?`

/** A catalog runtime reference: platform/<name>[@<version>]. */
const CatalogReference = matching(
  new RegExp(`^platform/${runtimeName}$`, "u"),
  "must be a catalog runtime reference platform/<name>[@<version>]"
)

/**
 * How a TrainingJob names its runtime: a TrainingRuntime in the project, or a catalog runtime
 * platform/<name>[@<version>].
 */
export const RuntimeReference = matching(
  new RegExp(`^(?:platform/)?${runtimeName}$`, "u"),
  "must name a TrainingRuntime in the project or a catalog runtime such as platform/<name>@<version>"
)

const uniqueValues = (what: string) => uniqueBy<string>((value) => value, what)

const TrainingRuntimeSpecFields = Schema.Struct({
  catalog: optional(
    CatalogReference,
    "The catalog runtime this runtime builds on (at least one of catalog and image)."
  ),
  image: optional(
    nonEmpty,
    "The container image; overrides the catalog runtime's image (at least one of catalog and image)."
  ),
  command: optional(Schema.Array(Schema.String), "The command (argv); overrides the catalog runtime's command."),
  args: optional(Schema.Array(Schema.String), "Arguments to the command."),
  env: optional(Schema.Array(EnvVar).check(uniqueNames("env names")), "Environment of every run; names unique."),
  launcher: optional(oneOf(runtimeLaunchers), "How ranks of a multi-node run are launched."),
  modes: optional(
    Schema.Array(nonEmpty).check(uniqueValues("modes")),
    "The TrainingJob modes the runtime accepts; any when unset."
  ),
  tasks: optional(
    Schema.Array(nonEmpty).check(uniqueValues("tasks")),
    "The TrainingJob tasks the runtime accepts; any when unset."
  ),
  parameters: optional(
    Schema.Record(Schema.String, Schema.Json),
    "Default parameters; a TrainingJob's parameters are merged over them."
  ),
  description: optional(Schema.String, "What the runtime is for.")
})

type TrainingRuntimeSpecInput = typeof TrainingRuntimeSpecFields.Type

// nodus: a runtime must say what runs, through a catalog runtime or its own image.
const catalogOrImage = Schema.makeFilter<TrainingRuntimeSpecInput>(
  (spec) =>
    spec.catalog === undefined && spec.image === undefined
      ? { path: ["image"], issue: "Required value: catalog or image is required" }
      : undefined,
  { toJsonSchema: () => ({ anyOf: [{ required: ["catalog"] }, { required: ["image"] }] }) }
)

export const TrainingRuntimeSpec = TrainingRuntimeSpecFields
  .check(catalogOrImage)
  .annotate({
    identifier: "TrainingRuntimeSpec",
    description: "What a TrainingJob runs on (nodus's schema; the spec does not show the fields)."
  })

export const TrainingRuntimeStatus = Schema.Struct({
  conditions: optional(Schema.Array(Condition), "Conditions, e.g. Ready."),
  digest: optional(Schema.String, "The runtime's digest, recorded by TrainingJobs as provenance.runtimeDigest."),
  image: optional(ImageStatus, "The resolved image."),
  managed: optional(Schema.Boolean, "True when the runtime is a catalog runtime without image or command overrides."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  phase: optional(oneOf(runtimePhases), "Pending, Ready or Failed.")
}).annotate({ identifier: "TrainingRuntimeStatus", description: "What the service observed of the TrainingRuntime." })

/** The spec states no immutability: every field may change; TrainingJobs record the digest they ran. */
export const trainingRuntime: KindDefinition = {
  spec: TrainingRuntimeSpec,
  status: TrainingRuntimeStatus
}

/**
 * How the API serves TrainingRuntime (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const trainingRuntimeServed: ServedKind = {
  info: kindInfo({
    kind: "TrainingRuntime",
    plural: "trainingruntimes",
    shortNames: ["tr"],
    version: "v1beta1",
    operations: fullOps,
    description: "A training runtime TrainingJobs run on (Beta)."
  }),
  definition: trainingRuntime
}
