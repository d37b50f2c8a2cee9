/**
 * Offering (spec: Areas "Own and other capacity"; list and read only; Placement.offerings, Estimate,
 * Job status.placement.offering): one row of the capacity catalog — an accelerator and count on a host shape in a
 * region class, at an on-demand rate and an interruptible variant's rate. The service writes it. The spec does not
 * show its fields: this schema is nodus's own (docs/kinds/Offering.md). It never names a provider (webhooks never
 * carry provider names); it shows the provider's class only.
 */
import { Schema } from "effect"
import {
  described,
  intAtLeast,
  matching,
  nonEmpty,
  oneOf,
  onlyWith,
  optional,
  positiveUsd,
  quantity,
  usd
} from "../../core/meta/Fields.ts"
import { kindInfo, readOps, shown, wide } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Timestamp } from "../../core/schemas/Shared.ts"

/** Provider classes (nodus's own value set; Placement.community permits Community offerings). */
export const offeringProviderClasses = ["Datacenter", "Community"] as const

const OfferingSpecFields = Schema.Struct({
  accelerator: optional(nonEmpty, "Accelerator id of its GPUs (e.g. H100-SXM-80GB); absent on a CPU offering."),
  count: described(intAtLeast(0), "GPUs per host; 0 for a CPU offering."),
  gpuMemory: optional(quantity(), "Memory of each GPU (only with accelerator)."),
  interconnect: optional(
    oneOf(["PCIe", "NVLink"]),
    "How its GPUs are connected: PCIe or NVLink (only with accelerator)."
  ),
  host: described(
    Schema.Struct({
      cpu: described(quantity(), "vCPUs."),
      memory: described(quantity(), "Host memory."),
      disk: described(quantity(), "Ephemeral disk.")
    }),
    "The host shape (applies when larger than a workload's resources)."
  ),
  regionClass: described(
    matching(/^[a-z][a-z0-9-]*$/u, "must be a region class such as us or eu"),
    "Region class, e.g. us or eu."
  ),
  onDemandRateUSDPerHour: optional(positiveUsd, "Customer rate per host-hour on demand."),
  interruptibleRateUSDPerHour: optional(positiveUsd, "Customer rate per host-hour of the interruptible variant."),
  minimumChargeUSD: optional(usd, "The minimum charge of a run on it."),
  providerClass: described(oneOf(offeringProviderClasses), "Datacenter or Community; never the provider's name.")
})

type OfferingSpecInput = typeof OfferingSpecFields.Type

// nodus: GPUs come with their accelerator id, and a CPU offering names none.
const acceleratorWithGpus = Schema.makeFilter<OfferingSpecInput>(
  (spec) => {
    if (spec.count > 0 && spec.accelerator === undefined) {
      return {
        path: ["accelerator"],
        issue: `Required value: an offering with ${spec.count} GPUs names their accelerator`
      }
    }
    return spec.count === 0 && spec.accelerator !== undefined
      ? { path: ["accelerator"], issue: "Forbidden: a CPU offering (count 0) names no accelerator" }
      : undefined
  },
  { toJsonSchema: () => [{}, true] }
)

// nodus: an offering has a price — on demand, interruptible or both.
const someRate = Schema.makeFilter<OfferingSpecInput>(
  (spec) =>
    spec.onDemandRateUSDPerHour === undefined && spec.interruptibleRateUSDPerHour === undefined
      ? {
        path: ["onDemandRateUSDPerHour"],
        issue: "Required value: onDemandRateUSDPerHour or interruptibleRateUSDPerHour is required"
      }
      : undefined,
  {
    toJsonSchema: () => ({
      anyOf: [{ required: ["onDemandRateUSDPerHour"] }, { required: ["interruptibleRateUSDPerHour"] }]
    })
  }
)

const withAccelerator = (field: string) =>
  onlyWith<OfferingSpecInput>(field, "accelerator", (spec) => spec.accelerator !== undefined)

export const OfferingSpec = OfferingSpecFields
  .check(acceleratorWithGpus, someRate, withAccelerator("gpuMemory"), withAccelerator("interconnect"))
  .annotate({ identifier: "OfferingSpec", description: "A row of the capacity catalog." })

export const OfferingStatus = Schema.Struct({
  available: optional(Schema.Boolean, "Whether capacity of the offering can be had now."),
  pricebookVersion: optional(Schema.String, "The pricebook its rates come from."),
  updatedTime: optional(Timestamp, "When the row was last refreshed.")
}).annotate({ identifier: "OfferingStatus", description: "Availability and price source of the offering." })

// The service rewrites catalog rows as prices and capacity change: no update rules.
export const offering: KindDefinition = {
  spec: OfferingSpec,
  status: OfferingStatus
}

/**
 * How the API serves Offering (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
// Offerings are the platform's public catalog and top-ups fund the whole account: both are cluster-scoped.
export const offeringServed: ServedKind = {
  info: kindInfo({
    kind: "Offering",
    plural: "offerings",
    shortNames: ["off"],
    scope: "Cluster",
    operations: readOps,
    hasSpec: false,
    state: shown("Available", "status.available", "Whether capacity of the offering can be had now"),
    columns: [
      wide("Accelerator", "spec.accelerator", "Accelerator of its GPUs"),
      wide("GPUs", "spec.count", "GPUs per host", "integer"),
      wide("Region", "spec.regionClass", "Region class"),
      { ...wide("On demand", "spec.onDemandRateUSDPerHour", "Rate per host-hour on demand"), format: "usd" },
      {
        ...wide("Interruptible", "spec.interruptibleRateUSDPerHour", "Rate per host-hour of the interruptible variant"),
        format: "usd"
      }
    ],
    description: "A purchasable capacity shape with its rates."
  }),
  definition: offering
}
