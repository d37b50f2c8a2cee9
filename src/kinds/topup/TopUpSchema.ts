/**
 * TopUp (spec: Areas — Accounts and billing; Availability: topups — list, create, read; Events topup.succeeded,
 * topup.failed, topup.refunded; errors PaymentMethodRequired, TopUpLimitReached, PromoCodeExpired, PromoCodeUsed,
 * PaymentsNotConfigured, PaymentDisputed): a payment that adds credits. The spec does not show the fields; this module
 * decides a small schema (docs/kinds/TopUp.md): the amount, the payment method and an optional promo code. A TopUp is
 * a payment: nothing in its spec changes after create.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { described, matching, nonEmpty, oneOf, optional, positiveUsd } from "../../core/meta/Fields.ts"
import { kindInfo, readOps, shown } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition } from "../../core/schemas/Shared.ts"

const promoCode = matching(
  new RegExp(`^[A-Za-z0-9][A-Za-z0-9_-]{0,${Limits.promoCodeLengthMax - 1}}$`, "u"),
  `must be 1 to ${Limits.promoCodeLengthMax} letters, digits, '-' or '_', starting with a letter or digit`
)

/** TopUp phases (nodus's value set, from the topup.* events). */
export const topUpPhases = ["Pending", "Succeeded", "Failed", "Refunded"] as const

export const TopUpSpec = Schema.Struct({
  amountUSD: described(
    positiveUsd,
    "USD to charge and add as credits; above zero. The organization's top-up limit applies (TopUpLimitReached)."
  ),
  paymentMethod: optional(
    nonEmpty,
    "A payment method on file (its id); unset uses the default one. Without one the create fails with PaymentMethodRequired."
  ),
  promoCode: optional(
    promoCode,
    "A promo code whose credits are granted with the top-up (PromoCodeExpired, PromoCodeUsed)."
  )
}).annotate({ identifier: "TopUpSpec", description: "A payment that adds credits." })

export const TopUpStatus = Schema.Struct({
  phase: optional(
    oneOf(topUpPhases),
    "Pending, Succeeded (topup.succeeded), Failed (topup.failed) or Refunded (topup.refunded)."
  ),
  creditGrant: optional(Schema.String, "The CreditGrant created when the payment succeeded."),
  failureReason: optional(Schema.String, "Why the payment failed, for people."),
  completionTime: optional(Schema.String, "When the payment succeeded or failed."),
  conditions: optional(Schema.Array(Condition), "Conditions."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({ identifier: "TopUpStatus", description: "Where the payment stands." })

export const topUp: KindDefinition = {
  spec: TopUpSpec,
  status: TopUpStatus,
  // nodus: a TopUp is a payment; its spec never changes after create (topups have no replace or patch either).
  updates: { mutable: [] }
}

/**
 * How the API serves TopUp (spec: Availability by kind) and its schema: its entry in the registry (src/kinds/Kinds.ts).
 */
export const topUpServed: ServedKind = {
  info: kindInfo({
    kind: "TopUp",
    plural: "topups",
    shortNames: ["tu"],
    scope: "Cluster",
    operations: [...readOps, "create"],
    columns: [{ ...shown("Amount", "spec.amountUSD", "USD charged and added as credits"), format: "usd" }],
    scopePrefix: "billing",
    description: "A payment that adds credits."
  }),
  definition: topUp
}
