/**
 * CreditGrant (spec: Areas — Accounts and billing; Availability: creditgrants are cluster-scoped, list and read only):
 * credits added to the account. Users only read them; grants are created by the service (starter credits, promo codes,
 * succeeded TopUps) and by an operator's admin operation. The spec does not show the fields; this module decides a
 * small schema (docs/kinds/CreditGrant.md): the amount, where it came from, why, and when it expires; the service
 * reports what remains. The amount and source never change after create.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, oneOf, optional, positiveUsd, usd } from "../../core/meta/Fields.ts"
import { kindInfo, readOps, shown } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, Timestamp } from "../../core/schemas/Shared.ts"

/** Where credits come from (nodus's value set; Starter credits and promo codes are named by the spec's errors). */
export const creditGrantSources = ["Starter", "Promo", "TopUp", "Admin"] as const

/** Grant phases (nodus): Active while credits remain and it has not expired. */
export const creditGrantPhases = ["Active", "Exhausted", "Expired"] as const

export const CreditGrantSpec = Schema.Struct({
  amountUSD: described(positiveUsd, "Credits granted, in USD; above zero."),
  source: described(
    oneOf(creditGrantSources),
    "Starter (new-account credits), Promo (a promo code), TopUp (a paid top-up) or Admin (an operator's grant)."
  ),
  reason: optional(
    Schema.String.check(Schema.makeFilter(
      (text: string) =>
        text.length <= Limits.creditGrantReasonLengthMax
          ? undefined
          : `Too long: may not be more than ${Limits.creditGrantReasonLengthMax} characters`,
      { toJsonSchema: () => ({ maxLength: Limits.creditGrantReasonLengthMax }) }
    )),
    "Why the credits were granted, for people (e.g. the promo code or the TopUp)."
  ),
  expiresAt: optional(Timestamp, "When unspent credits of this grant expire; never when unset.")
}).annotate({ identifier: "CreditGrantSpec", description: "Credits added to the account." })

export const CreditGrantStatus = Schema.Struct({
  remainingUSD: optional(usd, "Credits of this grant not yet spent."),
  phase: optional(oneOf(creditGrantPhases), "Active, Exhausted (nothing remains) or Expired."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "CreditGrantStatus", description: "What remains of the grant." })

export const creditGrant: KindDefinition = {
  spec: CreditGrantSpec,
  status: CreditGrantStatus,
  // nodus: the ledger entry a grant stands for never changes; an operator may still correct reason or expiresAt.
  updates: { immutable: ["amountUSD", "source"] }
}

/**
 * How the API serves CreditGrant (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const creditGrantServed: ServedKind = {
  info: kindInfo({
    kind: "CreditGrant",
    plural: "creditgrants",
    shortNames: ["cg"],
    scope: "Cluster",
    operations: readOps,
    columns: [
      { ...shown("Amount", "spec.amountUSD", "Credits granted"), format: "usd" },
      { ...shown("Remaining", "status.remainingUSD", "Credits of the grant not yet spent"), format: "usd" },
      shown("Source", "spec.source", "Starter, Promo, TopUp or Admin")
    ],
    scopePrefix: "billing",
    description: "Credits added to the account."
  }),
  definition: creditGrant
}
