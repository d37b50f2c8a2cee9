/**
 * The pricebook (docs/billing.md, "Pricebook"): how time on capacity becomes a charge. The rate of a run is the
 * variant's hourly rate, frozen when the run is placed (spec: Job status.placement.rateUSDPerHour "frozen"); the
 * pricebook adds, per provider and optionally per offering, the billing increment (time is charged in whole
 * increments) and the minimum charge (the least time a run that was charged at all pays for). A pricebook is
 * versioned: an estimate names the version it used, and a new version applies to runs placed after it takes effect.
 *
 * The rounding rule (one, applied when a posting is made): a charge for `ms` milliseconds at `rate` micro-USD per
 * hour is ceil(rate × ms / 3,600,000) micro-USD, computed in exact integers; charges are cumulative per run, so each
 * posting is the difference of two such values and rounding never accumulates. Pure.
 */
import { catalogPricebookVersion } from "../capacity/Catalog.ts"
import type { Variant } from "../capacity/Offering.ts"
import * as Limits from "../Limits.ts"

export interface BillingRule {
  /** Time is charged in whole increments (the last, partial one rounds up). */
  readonly incrementMs: number
  /** A run that was charged at all pays for at least this much time. */
  readonly minimumMs: number
}

export interface Pricebook {
  readonly version: string
  /** The catalog (offerings and rates) this pricebook prices. */
  readonly catalogVersion: string
  /** When the version took effect (RFC 3339). */
  readonly effectiveFrom: string
  readonly byProvider: Readonly<Record<string, BillingRule>>
  readonly byOffering: Readonly<Record<string, BillingRule>>
  /** For a provider the pricebook does not name. */
  readonly fallback: BillingRule
}

/**
 * nodus's first pricebook. Per-second billing with a one-minute minimum where the provider bills per second (AWS
 * EC2 does, with a 60-second minimum for Linux instances); per-minute billing with a one-minute minimum elsewhere
 * (Lambda Cloud invoices by the minute). nodus passes the provider's own rounding on and adds none.
 */
export const pricebookV1: Pricebook = {
  version: "nodus-2026-11.1",
  catalogVersion: catalogPricebookVersion,
  effectiveFrom: "2026-11-01T00:00:00Z",
  byProvider: {
    aws: { incrementMs: Limits.secondMs, minimumMs: Limits.minuteMs },
    lambda: { incrementMs: Limits.minuteMs, minimumMs: Limits.minuteMs },
    // A customer's own hosts (core/capacity/PoolOffering.ts): per second, no minimum beyond the second.
    pool: { incrementMs: Limits.secondMs, minimumMs: Limits.secondMs }
  },
  byOffering: {},
  fallback: { incrementMs: Limits.minuteMs, minimumMs: Limits.minuteMs }
}

export const currentPricebook = pricebookV1

export const ruleOf = (pricebook: Pricebook, variant: Variant): BillingRule =>
  pricebook.byOffering[variant.offering.id] ?? pricebook.byProvider[variant.offering.provider] ?? pricebook.fallback

const msPerHour = BigInt(Limits.hourMs)

/** The charge for `ms` milliseconds at `rateMicroUsdPerHour`: rounded up to the micro-USD (the one rounding rule). */
export const chargeFor = (rateMicroUsdPerHour: bigint, ms: number): bigint => {
  if (ms <= 0) return 0n
  const product = rateMicroUsdPerHour * BigInt(Math.ceil(ms))
  return (product + msPerHour - 1n) / msPerHour
}

/** The milliseconds `micro` pays for at `rateMicroUsdPerHour` (rounded down: money never buys more time than it is). */
export const msFor = (rateMicroUsdPerHour: bigint, micro: bigint): number =>
  rateMicroUsdPerHour <= 0n || micro <= 0n
    ? (micro > 0n ? Number.POSITIVE_INFINITY : 0)
    : Number((micro * msPerHour) / rateMicroUsdPerHour)

export const roundUpTo = (ms: number, incrementMs: number): number => Math.ceil(ms / incrementMs) * incrementMs
export const roundDownTo = (ms: number, incrementMs: number): number => Math.floor(ms / incrementMs) * incrementMs

/** The minimum charge of a variant (spec: Estimate.minimumChargeUSD). */
export const minimumChargeOf = (pricebook: Pricebook, variant: Variant): bigint =>
  chargeFor(variant.rateMicroUsdPerHour, ruleOf(pricebook, variant).minimumMs)
