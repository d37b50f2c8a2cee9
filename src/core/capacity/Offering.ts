/**
 * An offering as the core sees it: one host shape with its accelerators, in one region class, at an on-demand rate
 * and, where the provider sells spare capacity, an interruptible rate. Rates are integer micro-USD per host-hour
 * (money is exact; docs/kinds/Offering.md). The API's Offering object is a projection of this record without the
 * provider's name (spec: Events — webhooks never carry provider names); the core keeps the provider and instance
 * type for the simulator's provider models and for the live drivers.
 */
export interface Accelerator {
  /** The family a `gpu.type` family name matches, e.g. H100, A100, V100. */
  readonly family: string
  /** The exact variant an `exact: true` request pins, e.g. H100-SXM-80GB, A100-80GB. */
  readonly variant: string
  /** GPUs per host. */
  readonly count: number
  /** Memory of each GPU in GiB. */
  readonly memoryGiB: number
  readonly interconnect: "PCIe" | "NVLink"
}

export interface Offering {
  /** The object name of the Offering: DNS-1123, provider-free, stable across catalog refreshes. */
  readonly id: string
  /** Internal: the provider model the simulator and live drivers use. Never shown through the API. */
  readonly provider: string
  readonly instanceType: string
  /** Absent on a CPU-only offering. */
  readonly accelerator: Accelerator | undefined
  readonly vcpus: number
  readonly memoryGiB: number
  readonly diskGiB: number
  /** us, eu, asia, ... (Placement.regions). */
  readonly regionClass: string
  /** The provider regions the class covers here. */
  readonly regions: ReadonlyArray<string>
  readonly onDemandMicroUsdPerHour: bigint | undefined
  readonly interruptibleMicroUsdPerHour: bigint | undefined
}

/** A priced choice: an offering in its on-demand or interruptible variant. */
export interface Variant {
  readonly offering: Offering
  readonly interruptible: boolean
  readonly rateMicroUsdPerHour: bigint
}

/** The variants an offering sells. */
export const variantsOf = (offering: Offering): ReadonlyArray<Variant> => {
  const variants: Array<Variant> = []
  if (offering.onDemandMicroUsdPerHour !== undefined) {
    variants.push({ offering, interruptible: false, rateMicroUsdPerHour: offering.onDemandMicroUsdPerHour })
  }
  if (offering.interruptibleMicroUsdPerHour !== undefined) {
    variants.push({ offering, interruptible: true, rateMicroUsdPerHour: offering.interruptibleMicroUsdPerHour })
  }
  return variants
}

/** A variant's key in capacity facts and placements: `<offering id>` or `<offering id>/interruptible`. */
export const variantKey = (offering: string, interruptible: boolean): string =>
  interruptible ? `${offering}/interruptible` : offering

export const variantKeyOf = (variant: Variant): string => variantKey(variant.offering.id, variant.interruptible)
