/**
 * ServiceAccount (spec: Authentication 2 and 5 — scopes are checked per operation; workloads call the service as a
 * service account named by serviceAccountName): an identity in a project that API keys and workloads act as, with the
 * scopes it holds. The scopes are the known vocabulary (src/core/meta/Scopes.ts), unique and bounded; that a writer
 * holds every scope it grants is checked by the server (src/apiserver/Auth.ts, scopeProblems). Keys are
 * issued through …/serviceaccounts/{name}/tokens (docs/auth.md). Every field may change after create.
 */
import { Schema } from "effect"
import { listOf, oneOf, optional, uniqueBy } from "../../core/meta/Fields.ts"
import { fullOps, kindInfo } from "../../core/meta/Kinds.ts"
import { knownScopes } from "../../core/meta/Scopes.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt } from "../../core/schemas/Shared.ts"

export const ServiceAccountSpec = Schema.Struct({
  scopes: optional(
    // Known and unique, so a list holds at most every scope once.
    listOf(oneOf(knownScopes), knownScopes.length).check(uniqueBy((scope: string) => scope, "scopes")),
    "Scopes the account holds, e.g. jobs:write, billing:read, *:read (docs/auth.md); its keys act with the current list."
  )
}).annotate({ identifier: "ServiceAccountSpec", description: "The scopes an identity holds (spec: Authentication)." })

export const ServiceAccountStatus = Schema.Struct({
  tokensIssued: optional(NonNegativeInt, "Keys issued for the account so far."),
  lastUsedTime: optional(Schema.String, "When one of its keys last authenticated a request."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "ServiceAccountStatus", description: "What the service observed of the account's keys." })

export const serviceAccount: KindDefinition = {
  spec: ServiceAccountSpec,
  status: ServiceAccountStatus
  // Every field may change after create; keys act with the account's current scopes (docs/auth.md).
}

/**
 * How the API serves ServiceAccount (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const serviceAccountServed: ServedKind = {
  info: kindInfo({
    kind: "ServiceAccount",
    plural: "serviceaccounts",
    shortNames: ["sa"],
    operations: fullOps,
    description: "An identity with scopes that API keys and workloads act as."
  }),
  definition: serviceAccount
}
