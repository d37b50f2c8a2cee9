/**
 * App (spec: Areas, "Run code"; Function.code.blob; Function.status.appVersion): a group of Functions sharing one
 * content-addressed code archive. The spec shows no App fields, so this schema holds only what the spec's facts
 * imply: the shared archive, the member Functions, and a version that counts the archives deployed, which members
 * report as `status.appVersion`. Every field is nodus's own shape of those facts (docs/kinds/App.md); all may change.
 */
import { Schema } from "effect"
import { described, oneOf, optional, uniqueBy } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import { ObjectName } from "../../core/meta/ObjectMeta.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { BlobReference, Condition, NonNegativeInt, uniqueNames } from "../../core/schemas/Shared.ts"
import { functionPhases } from "../function/FunctionSchema.ts"

export const AppSpec = Schema.Struct({
  code: described(
    Schema.Struct({
      blob: described(
        BlobReference,
        "The content-addressed code archive (sha256:<hex>, uploaded through /blobs/v1) the members run."
      )
    }),
    "The code archive shared by the App's members."
  ),
  functions: optional(
    Schema.Array(ObjectName).check(uniqueBy((name: string) => name, "function names")),
    "Names of the Functions in the project that belong to the App; unique."
  )
}).annotate({ identifier: "AppSpec", description: "A group of Functions sharing a code archive (spec: App)." })

export const AppStatus = Schema.Struct({
  version: optional(
    NonNegativeInt,
    "Counts the archives deployed: 1 at create, one more each time spec.code.blob changes."
  ),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Ready: every member runs the current version."),
  message: optional(Schema.String, "Details for humans."),
  functions: optional(
    Schema.Array(Schema.Struct({
      name: described(Schema.String, "The member Function."),
      appVersion: optional(NonNegativeInt, "The App version its workers run (its status.appVersion)."),
      phase: optional(oneOf(functionPhases), "Its phase.")
    })).check(uniqueNames("function names")),
    "The members as the service last saw them."
  )
}).annotate({ identifier: "AppStatus", description: "What the service observed of the App." })

export const app: KindDefinition = {
  spec: AppSpec,
  status: AppStatus
  // Every field may change: deploying a new archive is what an App is for (no spec rule says otherwise).
}

/**
 * How the API serves App (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const appServed: ServedKind = {
  info: kindInfo({
    kind: "App",
    plural: "apps",
    operations: fullOps,
    description: "A group of Functions deployed together from one code archive."
  }),
  definition: app
}
