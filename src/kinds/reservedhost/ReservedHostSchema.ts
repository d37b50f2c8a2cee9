/**
 * ReservedHost (spec: Areas "Own and other capacity"; project, list and read only; reserved compute is Beta —
 * Versioning 3): hosts of an Offering reserved for the project for a period at a fixed rate. The service writes it.
 * The spec does not show its fields: this schema is nodus's own (docs/kinds/ReservedHost.md); the terms never change.
 */
import { Schema } from "effect"
import { described, intAtLeast, nonEmpty, oneOf, optional, positiveUsd } from "../../core/meta/Fields.ts"
import { kindInfo, readOps } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt } from "../../core/schemas/Shared.ts"
import { endsAfterStarts, UtcTimestamp } from "../marketplaceentry/MarketplaceEntrySchema.ts"

/** ReservedHost phases (nodus's own value set, docs/kinds/ReservedHost.md). */
export const reservedHostPhases = ["Pending", "Active", "Expired"] as const

const ReservedHostSpecFields = Schema.Struct({
  offering: described(nonEmpty, "The Offering reserved."),
  quantity: described(intAtLeast(1), "Hosts reserved."),
  startsAt: described(UtcTimestamp, "Start of the period (UTC)."),
  endsAt: described(UtcTimestamp, "End of the period (UTC, exclusive); after startsAt."),
  rateUSDPerHour: described(positiveUsd, "Rate per host-hour for the period, a decimal USD string."),
  contract: optional(nonEmpty, "The MarketplaceContract the reservation came from, if any.")
})

type ReservedHostSpecInput = typeof ReservedHostSpecFields.Type

export const ReservedHostSpec = ReservedHostSpecFields
  .check(endsAfterStarts<ReservedHostSpecInput>())
  .annotate({
    identifier: "ReservedHostSpec",
    description: "Hosts of an Offering reserved for a period at a fixed rate."
  })

export const ReservedHostStatus = Schema.Struct({
  phase: optional(oneOf(reservedHostPhases), "Pending (before startsAt), Active or Expired (after endsAt)."),
  readyHosts: optional(NonNegativeInt, "Reserved hosts ready for work."),
  message: optional(Schema.String, "A sentence for humans."),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects."),
  conditions: optional(Schema.Array(Condition), "Conditions of the reservation.")
}).annotate({ identifier: "ReservedHostStatus", description: "What the service observed of the reservation." })

export const reservedHost: KindDefinition = {
  spec: ReservedHostSpec,
  status: ReservedHostStatus,
  // nodus: the terms of a reservation never change.
  updates: { mutable: [] }
}

/**
 * How the API serves ReservedHost (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const reservedHostServed: ServedKind = {
  info: kindInfo({
    kind: "ReservedHost",
    plural: "reservedhosts",
    shortNames: ["rh"],
    operations: readOps,
    description: "A host reserved for the project."
  }),
  definition: reservedHost
}
