/**
 * The Offering's admission rules (nodus's own schema; docs/kinds/Offering.md), one row per rule. A catalog row is
 * rewritten by the service as prices change: no update rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { Exit, Schema } from "effect"
import type { JsonObject } from "../../../src/core/Json.ts"
import { offering } from "../../../src/kinds/offering/OfferingSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = {
  accelerator: "H100-SXM-80GB",
  count: 8,
  host: { cpu: "208", memory: "1800Gi", disk: "20Ti" },
  regionClass: "eu",
  onDemandRateUSDPerHour: "18.00",
  providerClass: "Datacenter"
}
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const cpu = {
  count: 0,
  host: { cpu: "8", memory: "32Gi", disk: "100Gi" },
  regionClass: "us",
  onDemandRateUSDPerHour: "0.40",
  providerClass: "Community"
}

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no count", { ...cpu, count: undefined }, "spec.count"],
  ["a negative count", spec({ count: -1 }), "spec.count"],
  ["GPUs without accelerator", { ...base, accelerator: undefined }, "spec.accelerator"],
  ["an accelerator on a CPU offering", { ...cpu, accelerator: "H100" }, "spec.accelerator"],
  ["an empty accelerator", spec({ accelerator: "" }), "spec.accelerator"],
  ["gpuMemory without accelerator", { ...cpu, gpuMemory: "80Gi" }, "spec.gpuMemory"],
  ["a gpuMemory that is no quantity", spec({ gpuMemory: "80 GB" }), "spec.gpuMemory"],
  ["interconnect without accelerator", { ...cpu, interconnect: "PCIe" }, "spec.interconnect"],
  ["an unknown interconnect", spec({ interconnect: "InfiniBand" }), "spec.interconnect"],
  ["no host", { ...base, host: undefined }, "spec.host"],
  ["a host without cpu", spec({ host: { memory: "1Gi", disk: "1Gi" } }), "spec.host.cpu"],
  ["a host memory that is no quantity", spec({ host: { cpu: "1", memory: "much", disk: "1Gi" } }), "spec.host.memory"],
  ["a host without disk", spec({ host: { cpu: "1", memory: "1Gi" } }), "spec.host.disk"],
  ["no regionClass", { ...base, regionClass: undefined }, "spec.regionClass"],
  ["a regionClass with capitals", spec({ regionClass: "EU" }), "spec.regionClass"],
  ["no rate at all", { ...base, onDemandRateUSDPerHour: undefined }, "spec.onDemandRateUSDPerHour"],
  ["an on-demand rate of 0", spec({ onDemandRateUSDPerHour: "0" }), "spec.onDemandRateUSDPerHour"],
  ["an interruptible rate of 0", spec({ interruptibleRateUSDPerHour: "0.0" }), "spec.interruptibleRateUSDPerHour"],
  ["a minimumChargeUSD that is not USD", spec({ minimumChargeUSD: "1e3" }), "spec.minimumChargeUSD"],
  ["no providerClass", { ...base, providerClass: undefined }, "spec.providerClass"],
  ["an unknown providerClass", spec({ providerClass: "Hyperscaler" }), "spec.providerClass"],
  ["a provider name (no such field)", spec({ provider: "somecloud" }), "spec.provider"]
].map(([rule, input, field]) =>
  [rule as string, JSON.parse(JSON.stringify(input)) as JsonObject, field as string] as const
)

describe("Offering admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(offering, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("sets no defaults and admits every form at its edge", () => {
    assert.deepStrictEqual(admitSpec(offering, base), { _tag: "Admitted", spec: base })
    const edges: ReadonlyArray<JsonObject> = [
      cpu,
      spec({
        count: 1,
        gpuMemory: "80Gi",
        interconnect: "NVLink",
        interruptibleRateUSDPerHour: "0.000001",
        minimumChargeUSD: "0"
      }),
      JSON.parse(
        JSON.stringify({ ...base, onDemandRateUSDPerHour: undefined, interruptibleRateUSDPerHour: "7.20" })
      ) as JsonObject
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(offering, edge)._tag, "Admitted", JSON.stringify(admitSpec(offering, edge)))
    }
  })

  it("lets the service rewrite a row", () => {
    assert.deepStrictEqual(
      updateRefusals(offering, base, spec({ onDemandRateUSDPerHour: "17.50", regionClass: "us" })),
      { immutable: [], invalid: [] }
    )
  })
})

describe("Offering status", () => {
  const decodes = (status: unknown) => Exit.isSuccess(Schema.decodeUnknownExit(offering.status)(status))
  it("admits its fields", () =>
    assert.isTrue(decodes({ available: true, pricebookVersion: "2026-03-01", updatedTime: "2026-03-01T00:00:00Z" })))
  it("refuses available that is not a bool", () => assert.isFalse(decodes({ available: "yes" })))
})
