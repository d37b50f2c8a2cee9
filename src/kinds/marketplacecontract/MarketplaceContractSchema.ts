/**
 * MarketplaceContract (spec: Areas "Own and other capacity"; cluster-scoped, list and read only): the binding the
 * service records between a Demand and a Supply MarketplaceEntry. The service writes it. The spec does not show its
 * fields: this schema is nodus's own (docs/kinds/MarketplaceContract.md) — the entries it binds, quantity, interval,
 * hours and the rate of each side, and its state; its terms never change once written, only its state.
 */
import { Schema } from "effect"
import { described, intAtLeast, nonEmpty, oneOf, optional, positiveUsd } from "../../core/meta/Fields.ts"
import { kindInfo, readOps } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition } from "../../core/schemas/Shared.ts"
import { endsAfterStarts, hoursWithinInterval, UtcTimestamp } from "../marketplaceentry/MarketplaceEntrySchema.ts"

/** Contract states (nodus's own value set, docs/kinds/MarketplaceContract.md). */
export const marketplaceContractStates = ["Pending", "Active", "Completed", "Cancelled"] as const

const MarketplaceContractSpecFields = Schema.Struct({
  demand: described(nonEmpty, "The Demand MarketplaceEntry it binds."),
  supply: described(nonEmpty, "The Supply MarketplaceEntry it binds."),
  quantity: described(intAtLeast(1), "Units bound."),
  startsAt: described(UtcTimestamp, "Start of the interval (UTC)."),
  endsAt: described(UtcTimestamp, "End of the interval (UTC, exclusive); after startsAt."),
  hours: described(intAtLeast(1), "Hours committed per unit; at most the hours from startsAt to endsAt."),
  demandRateUSDPerUnitHour: described(positiveUsd, "What the demand side pays per unit-hour."),
  supplyRateUSDPerUnitHour: described(positiveUsd, "What the supply side receives per unit-hour."),
  state: described(oneOf(marketplaceContractStates), "Pending, Active, Completed or Cancelled.")
})

type MarketplaceContractSpecInput = typeof MarketplaceContractSpecFields.Type

export const MarketplaceContractSpec = MarketplaceContractSpecFields
  .check(endsAfterStarts<MarketplaceContractSpecInput>(), hoursWithinInterval<MarketplaceContractSpecInput>("hours"))
  .annotate({ identifier: "MarketplaceContractSpec", description: "The terms binding a Demand and a Supply entry." })

export const MarketplaceContractStatus = Schema.Struct({
  message: optional(Schema.String, "A sentence for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Conditions of the contract.")
}).annotate({ identifier: "MarketplaceContractStatus", description: "What the service observed of the contract." })

export const marketplaceContract: KindDefinition = {
  spec: MarketplaceContractSpec,
  status: MarketplaceContractStatus,
  // nodus: the terms are fixed once bound; only the state moves.
  updates: { mutable: ["state"] }
}

/**
 * How the API serves MarketplaceContract (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const marketplaceContractServed: ServedKind = {
  info: kindInfo({
    kind: "MarketplaceContract",
    plural: "marketplacecontracts",
    shortNames: ["mc"],
    scope: "Cluster",
    operations: readOps,
    description: "An agreement between a marketplace demand and supply."
  }),
  definition: marketplaceContract
}
