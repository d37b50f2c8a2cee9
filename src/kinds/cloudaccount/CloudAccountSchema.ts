/**
 * CloudAccount (spec: Areas "Own and other capacity"; cluster-scoped, full operations; errors
 * CloudAccountCredentialsRejected, CloudAccountInUse, CloudAccountNotVerified, CloudConnectUnavailable,
 * CloudUnreachable, CloudExecuteNotEnabled): the organization's own account at a cloud provider, connected to the
 * service. The spec does not show its fields: this schema is nodus's own (docs/kinds/CloudAccount.md) — the provider,
 * credentials by Secret reference only (never a literal; Conventions 6), the regions to use and whether the service
 * may execute workloads in it. The error codes come from verifying, connecting, using and deleting the account, which
 * are the controller's and the write path's, not this module's.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, intAtLeast, listOf, matching, nonEmpty, oneOf, optional, uniqueBy } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, Timestamp } from "../../core/schemas/Shared.ts"

/** CloudAccount phases (nodus's own value set, docs/kinds/CloudAccount.md). */
export const cloudAccountPhases = ["Pending", "Verified", "Connected", "Failed"] as const

export const CloudAccountSpec = Schema.Struct({
  provider: described(
    matching(
      /^[a-z][a-z0-9-]{0,62}$/u,
      "must be a provider id: a lowercase letter, then lowercase letters, digits or '-' (at most 63)"
    ),
    "The provider kind, as the service's cloud connect lists it; immutable."
  ),
  credentials: described(
    Schema.Struct({
      secretRef: described(
        Schema.Struct({
          namespace: described(nonEmpty, "The project holding the Secret."),
          name: described(nonEmpty, "The Secret."),
          version: optional(intAtLeast(1), "A version of the Secret; unset uses the newest.")
        }),
        "The Secret holding the provider credentials."
      )
    }),
    "Credentials, by Secret reference only; never literal values."
  ),
  regions: optional(
    listOf(nonEmpty, Limits.cloudAccountRegionsMax).check(uniqueBy((region: string) => region, "regions")),
    "Provider regions the service may use, at most 64; empty = every region the credentials allow."
  ),
  executeEnabled: optional(
    Schema.Boolean,
    "Whether the service may execute workloads in the account (CloudExecuteNotEnabled otherwise). Absent means false."
  )
}).annotate({ identifier: "CloudAccountSpec", description: "A cloud provider account connected to the service." })

export const CloudAccountStatus = Schema.Struct({
  phase: optional(oneOf(cloudAccountPhases), "Pending, Verified (credentials accepted), Connected or Failed."),
  reason: optional(
    Schema.String,
    "One CamelCase word: why it is not Connected (e.g. CredentialsRejected, Unreachable)."
  ),
  message: optional(Schema.String, "A sentence for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Verified (the credentials were accepted) and Connected."),
  verifiedTime: optional(Timestamp, "When the credentials were last verified.")
}).annotate({ identifier: "CloudAccountStatus", description: "What the service observed of the account." })

export const cloudAccount: KindDefinition = {
  spec: CloudAccountSpec,
  status: CloudAccountStatus,
  // nodus: an account stays at its provider; credentials, regions and executeEnabled may change.
  updates: { immutable: ["provider"] }
}

/**
 * How the API serves CloudAccount (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const cloudAccountServed: ServedKind = {
  info: kindInfo({
    kind: "CloudAccount",
    plural: "cloudaccounts",
    shortNames: ["ca"],
    scope: "Cluster",
    operations: fullOps,
    description: "A customer cloud account capacity can be rented through."
  }),
  definition: cloudAccount
}
