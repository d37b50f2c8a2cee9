/**
 * MarketplaceEntry (spec: MarketplaceEntry; cluster-scoped): a private, non-binding capacity request (Demand) or
 * supply submission (Supply); it never reserves or starts compute. The module decides what an entry must carry
 * (nodus: intent, title, hardware, quantity, the UTC interval and the rate), the spec's rules (endsAt after startsAt,
 * a positive rate, authorityConfirmed for supply, publish never on demand, intent immutable), and the state default
 * Open. It also holds the small helpers the marketplace kinds share (UTC timestamps, positive USD, intervals).
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import {
  defaulted,
  described,
  intAtLeast,
  matching,
  nonEmpty,
  oneOf,
  optional,
  positiveUsd,
  usd
} from "../../core/meta/Fields.ts"
import { fullOps, kindInfo, wide } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Timestamp } from "../../core/schemas/Shared.ts"

// ---------------------------------------------------------------------------------------------------------------------
// The marketplace interval, shared by MarketplaceEntry, MarketplaceContract and ReservedHost

/** An RFC 3339 timestamp in UTC (spec: MarketplaceEntry, "UTC interval"): the `Z` zone only. */
export const UtcTimestamp = matching(
  /^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?Z$/u,
  "must be an RFC 3339 UTC timestamp such as 2026-01-02T15:04:05Z"
)

/** A string of 1 to `maximum` characters. */
export const textUpTo = (maximum: number) =>
  nonEmpty.check(Schema.makeFilter(
    (text: string) => text.length <= maximum ? undefined : `Too long: may not be longer than ${maximum} characters`,
    { toJsonSchema: () => ({ maxLength: maximum }) }
  ))

interface Interval {
  readonly startsAt: string
  readonly endsAt: string
}

/** Whole hours in an interval (the end is exclusive). */
export const intervalHours = (interval: Interval): number =>
  (Date.parse(interval.endsAt) - Date.parse(interval.startsAt)) / Limits.hourMs

/** endsAt is after startsAt (spec: "endsAt (exclusive end; UTC interval)"). */
export const endsAfterStarts = <T extends Interval>() =>
  Schema.makeFilter<T>(
    (value) =>
      Date.parse(value.endsAt) > Date.parse(value.startsAt)
        ? undefined
        : {
          path: ["endsAt"],
          issue: `Invalid value: "${value.endsAt}": must be after startsAt (${value.startsAt}); the end is exclusive`
        },
    { toJsonSchema: () => [{}, true] }
  )

/** An hour count (`field`) fits in the interval: at most the hours from startsAt to endsAt (nodus). */
export const hoursWithinInterval = <T extends Interval>(field: string) =>
  Schema.makeFilter<T>(
    (value) => {
      const hours = (value as unknown as Record<string, unknown>)[field]
      const available = intervalHours(value)
      return typeof hours === "number" && available > 0 && hours > available
        ? {
          path: [field],
          issue: `Invalid value: ${hours}: must be at most the hours from startsAt to endsAt (${available})`
        }
        : undefined
    },
    { toJsonSchema: () => [{}, true] }
  )

// ---------------------------------------------------------------------------------------------------------------------
// spec

export const marketplaceIntents = ["Demand", "Supply"] as const
export const marketplaceEntryStates = ["Open", "Withdrawn"] as const

/** Review outcomes in `status.review` (the spec leaves them open; nodus's own, docs/kinds/MarketplaceEntry.md). */
export const marketplaceReviews = ["Pending", "Approved", "Rejected"] as const

/**
 * An email address: local part of the characters HTML's email grammar allows, "@", and a domain of two or more DNS
 * labels (nodus's grammar; the spec names contactEmail without one).
 */
const email = matching(
  /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)+$/u,
  "must be an email address such as ops@example.com"
)

const shortText = textUpTo(Limits.marketplaceTextMax)

const commonFields = {
  title: described(shortText, "A short title, at most 200 characters."),
  hardware: described(shortText, "The hardware asked for or offered, e.g. an accelerator id such as H100-SXM-80GB."),
  quantity: described(intAtLeast(1), "Units asked for or offered."),
  memoryGiB: optional(intAtLeast(1), "Memory per unit in GiB."),
  network: optional(shortText, "The network asked for or offered, e.g. the interconnect between units."),
  region: optional(shortText, "Where the capacity is, e.g. a region class (us, eu) or a region."),
  startsAt: described(UtcTimestamp, "Start of the interval (UTC)."),
  endsAt: described(UtcTimestamp, "End of the interval (UTC, exclusive); after startsAt."),
  minimumHours: optional(intAtLeast(1), "Shortest commitment in hours; at most the hours from startsAt to endsAt."),
  rateUSDPerUnitHour: described(
    positiveUsd,
    "Buyer ceiling (Demand) or seller ask (Supply) per unit-hour; a positive decimal USD string."
  ),
  notes: optional(
    textUpTo(Limits.marketplaceNotesMax),
    "Private notes for the operators; never credentials. At most 4096 characters."
  ),
  company: optional(shortText, "The company; published only with explicit consent and operator review."),
  contactEmail: optional(email, "Contact address, private to the owning organization and the operators.")
}

const state = defaulted(
  oneOf(marketplaceEntryStates),
  "Open",
  "Open (default) or Withdrawn (removes catalog visibility immediately)."
)

/**
 * Spec: "authorityConfirmed (required for supply)" — a supply entry confirms it, with true. A boolean refused unless
 * true, rather than the literal true: a required literal would be a second discriminator of the union, and a Supply
 * entry with false would then be refused as an unknown intent.
 */
const confirmed = Schema.Boolean.check(Schema.makeFilter(
  (value: boolean) => value ? undefined : "Required value: a Supply entry must set authorityConfirmed: true",
  { toJsonSchema: () => ({ enum: [true] }) }
))

export const SupplyMarketplaceEntrySpec = Schema.Struct({
  intent: described(Schema.Literal("Supply"), "Supply: a supply submission; immutable."),
  ...commonFields,
  authorityConfirmed: described(confirmed, "The submitter confirms the authority to offer the capacity; must be true."),
  publish: optional(Schema.Boolean, "List the supply in the catalog after review."),
  state
}).annotate({
  identifier: "SupplyMarketplaceEntrySpec",
  description: "A supply submission: capacity offered (spec: MarketplaceEntry, intent Supply)."
})

export const DemandMarketplaceEntrySpec = Schema.Struct({
  intent: described(Schema.Literal("Demand"), "Demand: a capacity request; immutable."),
  ...commonFields,
  authorityConfirmed: optional(
    Schema.Boolean,
    "The submitter confirms the authority to ask for the capacity (optional on Demand)."
  ),
  state
}).annotate({
  identifier: "DemandMarketplaceEntrySpec",
  description: "A capacity request (spec: MarketplaceEntry, intent Demand); never published."
})

type MarketplaceEntrySpecInput = typeof SupplyMarketplaceEntrySpec.Type | typeof DemandMarketplaceEntrySpec.Type

/**
 * The spec: a union keyed by `intent` (as Sweep's template is keyed by `template.kind`). Spec: "publish (supply only;
 * never valid on demand)" — publish is not a field of a Demand entry, so it is unknown there (refused under
 * fieldValidation Strict, dropped under Warn and Ignore).
 */
export const MarketplaceEntrySpec = Schema.Union([DemandMarketplaceEntrySpec, SupplyMarketplaceEntrySpec])
  // The union's own message (an annotation after .check would go to the last check instead).
  .annotate({
    message: `Unsupported value: intent: supported values: ${
      marketplaceIntents.map((intent) => JSON.stringify(intent)).join(", ")
    }`
  })
  .check(endsAfterStarts<MarketplaceEntrySpecInput>(), hoursWithinInterval<MarketplaceEntrySpecInput>("minimumHours"))
  .annotate({
    identifier: "MarketplaceEntrySpec",
    description: "A capacity request or supply submission (spec: MarketplaceEntry); its fields depend on its intent."
  })

// ---------------------------------------------------------------------------------------------------------------------
// status

export const MarketplaceEntryStatus = Schema.Struct({
  review: optional(
    oneOf(marketplaceReviews),
    "Operator review: Pending, Approved or Rejected; any edit after review needs another."
  ),
  reviewedAt: optional(Timestamp, "When the entry was last reviewed."),
  observedGeneration: optional(
    Schema.Int,
    "The spec generation the review covers; any later edit needs another review."
  ),
  message: optional(Schema.String, "The reviewer's message."),
  validUntil: optional(Timestamp, "When the indicative rates stop being current."),
  costAllowanceUSDPerUnitHour: optional(usd, "What the service allows per unit-hour for the capacity."),
  customerRateUSDPerUnitHour: optional(usd, "Indicative customer rate per unit-hour."),
  lastReservation: optional(
    Schema.Struct({
      contract: optional(Schema.String, "The MarketplaceContract."),
      quantity: optional(Schema.Int, "Units it bound."),
      time: optional(Timestamp, "When.")
    }),
    "The latest MarketplaceContract that bound this entry."
  )
}).annotate({ identifier: "MarketplaceEntryStatus", description: "Review and indicative prices of the entry." })

export const marketplaceEntry: KindDefinition = {
  spec: MarketplaceEntrySpec,
  status: MarketplaceEntryStatus,
  // Spec: MarketplaceEntry, "intent Demand | Supply (immutable)".
  updates: { immutable: ["intent"] }
}

/**
 * How the API serves MarketplaceEntry (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const marketplaceEntryServed: ServedKind = {
  info: kindInfo({
    kind: "MarketplaceEntry",
    plural: "marketplaceentries",
    shortNames: ["me"],
    scope: "Cluster",
    operations: fullOps,
    columns: [wide("Intent", "spec.intent", "Demand or Supply")],
    description: "A private, non-binding capacity request or supply submission."
  }),
  definition: marketplaceEntry
}
