/**
 * Image (spec: Areas — Files and state; Job.imageRef "an Image object in the project"; ImageStatus; errors
 * ImageNotFound, ImageNotReady, ImagePullFailed, ImageBuildUnavailable): a container image, pulled from a registry or
 * built from an uploaded context, pinned to a digest that workloads naming it through imageRef run. The spec does not
 * show its fields; this module decides a small schema (docs/kinds/Image.md): exactly one of a reference to pull and a
 * build, and pull secrets. What is pulled or built is fixed at create, so the digest workloads pinned keeps its
 * meaning.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  exactlyOneOf,
  listOf,
  mapOf,
  matching,
  nonEmpty,
  oneOf,
  optional
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { BlobReference, Condition, NonNegativeInt } from "../../core/schemas/Shared.ts"

/** Image phases (nodus's value set). */
export const imagePhases = ["Pending", "Building", "Ready", "Failed"] as const

const dnsPart = "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
const component = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"

/** An OCI image reference (the distribution grammar): [registry[:port]/]path[:tag][@sha256:digest]. */
export const imageReference = new RegExp(
  `^(?:${dnsPart}(?:\\.${dnsPart})*(?::[0-9]+)?/)?${component}(?:/${component})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`,
  "u"
)

const ImageReference = matching(
  imageReference,
  "must be an image reference such as python:3.12, ghcr.io/org/app:v1 or a name pinned with @sha256:<64 hex digits>"
)

/** A relative path inside the build context without '..' segments. */
const contextPath = matching(
  /^(?!\/)(?!(?:.*\/)?\.\.(?:\/|$)).+$/u,
  "must be a relative path inside the build context, without '..'"
)

const buildArgName = /^[A-Za-z_][A-Za-z0-9_]*$/u

const BuildArgs = mapOf(
  Schema.String,
  (name) => buildArgName.test(name) ? undefined : `must match ${buildArgName.source}`,
  { pattern: buildArgName.source }
).check(
  Schema.makeFilter(
    (args: Readonly<Record<string, string>>) => {
      const count = Object.keys(args).length
      return count <= Limits.imageBuildArgsMax
        ? undefined
        : `Too many: ${count}: must have at most ${Limits.imageBuildArgsMax} build arguments`
    },
    { toJsonSchema: () => ({ maxProperties: Limits.imageBuildArgsMax }) }
  )
)

const ImageBuild = Schema.Struct({
  context: described(BlobReference, "The build context: a tar archive uploaded through /blobs/v1, as sha256:<hex>."),
  dockerfile: defaulted(contextPath, "Dockerfile", "The Dockerfile's path inside the context; default Dockerfile."),
  target: optional(nonEmpty, "The stage of a multi-stage Dockerfile to build."),
  buildArgs: optional(BuildArgs, "Build arguments (ARG values); not for secrets: they stay in the image's history.")
})

export const ImageSpec = Schema.Struct({
  reference: optional(ImageReference, "An image to pull (exactly one of reference and build)."),
  build: optional(
    ImageBuild,
    "An image to build from an uploaded context (exactly one of reference and build); ImageBuildUnavailable where the deployment cannot build."
  ),
  imagePullSecrets: optional(
    listOf(nonEmpty, Limits.imagePullSecretsMax),
    "DockerConfigJson Secrets for pulling the image or the build's base images."
  )
}).check(exactlyOneOf(["reference", "build"])).annotate({
  identifier: "ImageSpec",
  description: "A container image to pull or build, pinned to a digest (spec: Areas, Job.imageRef)."
})

export const ImageStatus = Schema.Struct({
  phase: optional(
    oneOf(imagePhases),
    "Pending, Building, Ready or Failed; a workload naming an Image that is not Ready gets ImageNotReady."
  ),
  reference: optional(Schema.String, "The pinned reference workloads run (repository@sha256:…)."),
  digest: optional(Schema.String, "The pinned digest, sha256:<hex>."),
  user: optional(Schema.String, "The user the image config runs as (root when none)."),
  sizeBytes: optional(NonNegativeInt, "Compressed size in bytes."),
  reason: optional(Schema.String, "Why it failed, e.g. ImagePullFailed."),
  message: optional(Schema.String, "Details; the last build log lines for a failed build."),
  completionTime: optional(Schema.String, "When it became Ready or Failed."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "ImageObjectStatus", description: "The resolved image of an Image object." })

export const image: KindDefinition = {
  spec: ImageSpec,
  status: ImageStatus,
  // nodus: what is pulled or built is fixed at create; pull secrets may change.
  updates: { immutable: ["reference", "build"] }
}

/**
 * How the API serves Image (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const imageServed: ServedKind = {
  info: kindInfo({
    kind: "Image",
    plural: "images",
    shortNames: ["img"],
    operations: fullOps,
    description: "A container image reference pinned to a digest."
  }),
  definition: image
}
