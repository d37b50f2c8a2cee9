/**
 * How providers behave, as the digital twin models them: per offering variant, how many hosts there are, how long a
 * boot takes and how often it fails, how often a host is preempted or lost, how long a teardown and a warm start take,
 * and how fast checkpoints move. The simulator runs programs over these models (src/backends/sim/SimCapacity.ts), the
 * estimates sample them (kinds/job/JobSampling.ts), and placement reads their boot times and interruption rates.
 *
 * The defaults are nodus's assumptions (docs/simulator.md), the fleet of the server's sim backend and of every
 * estimate: `defaultHostsPerVariant` hosts of every variant.
 */
import * as Limits from "../Limits.ts"
import type { Variant } from "./Offering.ts"
import type { Market } from "./Placement.ts"
import { poolProvider } from "./PoolOffering.ts"

/** How a provider behaves for one variant. Times in milliseconds. */
export interface ProviderModel {
  readonly capacity: number
  readonly bootMedianMs: number
  /** Spread of log(boot time). */
  readonly bootSigma: number
  readonly bootFailureRate: number
  /** Mean time between preemptions of one host (interruptible variants); undefined: never preempted. */
  readonly preemptionMtbfMs: number | undefined
  /** Mean time between node losses of one host; undefined: never. */
  readonly nodeLossMtbfMs: number | undefined
  readonly teardownMs: number
  /** Start of a program on a warm host (no boot). */
  readonly warmStartMs: number
  readonly restoreBytesPerSecond: number
}

/**
 * Hosts of every offering variant in the default fleet (the server's sim backend, the estimates, a scenario's default).
 */
export const defaultHostsPerVariant = 8

/** The provider defaults (nodus's assumptions; docs/simulator.md), every field of a model but its capacity. */
export const providerDefaults: Omit<ProviderModel, "capacity"> = {
  bootMedianMs: 2 * Limits.minuteMs,
  bootSigma: 0.4,
  bootFailureRate: 0.01,
  preemptionMtbfMs: 24 * Limits.hourMs,
  nodeLossMtbfMs: 2160 * Limits.hourMs,
  teardownMs: 30 * Limits.secondMs,
  warmStartMs: 5 * Limits.secondMs,
  restoreBytesPerSecond: Limits.GiB
}

/**
 * A customer's host of a Pool (PoolOffering.ts; docs/live.md): up already, so a run's "boot" is its box starting (tens
 * of milliseconds, measured by bench:live), never preempted, stopped at once. Node loss keeps the provider default.
 */
export const poolHostModel: Omit<ProviderModel, "capacity"> = {
  ...providerDefaults,
  bootMedianMs: 50,
  bootSigma: 0.3,
  bootFailureRate: 0,
  preemptionMtbfMs: undefined,
  teardownMs: Limits.secondMs,
  warmStartMs: 50
}

/**
 * The default fleet: `hostsPerVariant` hosts of every variant under the provider defaults (a Pool's hosts under
 * `poolHostModel`); only interruptible hosts are preempted.
 */
export const defaultProviderModels =
  (hostsPerVariant: number = defaultHostsPerVariant) => (variant: Variant): ProviderModel =>
    variant.offering.provider === poolProvider
      ? { capacity: hostsPerVariant, ...poolHostModel }
      : {
        capacity: hostsPerVariant,
        ...providerDefaults,
        preemptionMtbfMs: variant.interruptible ? providerDefaults.preemptionMtbfMs : undefined
      }

/** The market of a fleet with every host free: what placement sees where no backend reports live capacity. */
export const freeMarketOf = (models: (variant: Variant) => ProviderModel): Market => ({
  available: (variant) => models(variant).capacity,
  bootMs: (variant) => models(variant).bootMedianMs,
  meanTimeBetweenInterruptionsMs: (variant) => (variant.interruptible ? models(variant).preemptionMtbfMs : undefined)
})
