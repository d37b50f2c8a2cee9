// Tests for src/core/capacity/Catalog.ts against the repository's copy of the SkyPilot list prices
// (scenarios/data/skypilot-gpu-prices). The tests cover concrete facts from the files: Lambda prices, AWS on-demand
// and spot medians, the p4de merge and p5e's missing on-demand price. They also check the rules every offering obeys:
// ids are unique, provider-free DNS-1123 subdomains, and each API projection decodes with the Offering schema. The
// AWS medians are recomputed here from the raw lines by a separate, simpler method rather than copied from the
// implementation.

import { Schema } from "effect"
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import {
  buildCatalog,
  catalogPricebookVersion,
  offeringObject,
  parseAwsCatalog,
  parseCsv,
  parseLambdaCatalog,
  regionClassOf,
  upperMedian
} from "../../../src/core/capacity/Catalog.ts"
import type { Offering } from "../../../src/core/capacity/Offering.ts"
import { checkDns1123Subdomain } from "../../../src/core/meta/Names.ts"
import { loadCatalog } from "../../../src/data/CatalogData.ts"
import { OfferingSpec } from "../../../src/kinds/offering/OfferingSchema.ts"

const dataDir = new URL("../../../scenarios/data/skypilot-gpu-prices/", import.meta.url)
const lambdaText = readFileSync(new URL("lambda_vms_v7.csv", dataDir), "utf8")
const awsText = readFileSync(new URL("aws_vms_v7_p_family.csv", dataDir), "utf8")
const catalog = buildCatalog({ lambda: lambdaText, aws: awsText })

const find = (offerings: ReadonlyArray<Offering>, instanceType: string, regionClass: string): Offering => {
  const found = offerings.find((offering) =>
    offering.instanceType === instanceType && offering.regionClass === regionClass
  )
  if (found === undefined) throw new Error(`no offering for ${instanceType} in ${regionClass}`)
  return found
}

// The separate reading of the raw lines. GpuInfo is the only quoted field, so dropping quoted text and splitting on
// commas is enough. Every price has at most 6 decimals and is below 1000, so rounding value × 10^6 as a double is
// exact.
const dataLines = (text: string): Array<Array<string>> =>
  text.split(/\r?\n/u).slice(1).filter((line) => line !== "").map((line) => line.replace(/"[^"]*"/gu, "").split(","))
const micro = (text: string): bigint => BigInt(Math.round(Number(text) * 1e6))
const middle = (values: ReadonlyArray<bigint>): bigint | undefined =>
  values.length === 0 ? undefined : [...values].sort((a, b) => Number(a - b))[Math.floor(values.length / 2)]

interface AwsLine {
  readonly instanceType: string
  readonly price: string
  readonly spot: string
  readonly region: string
  readonly zone: string
}
const awsLines: ReadonlyArray<AwsLine> = dataLines(awsText).map((
  [instanceType, , , , , , price, spot, region, zone]
) => ({
  instanceType: instanceType ?? "",
  price: price ?? "",
  spot: spot ?? "",
  region: region ?? "",
  zone: zone ?? ""
}))
const awsClass = (region: string): string => region.startsWith("ap-") ? "asia" : region.slice(0, region.indexOf("-"))

/** On-demand: the median of one price per region; interruptible: the median of every zone line's spot price. */
const expectedAwsRates = (instanceType: string, regionClass: string) => {
  const lines = awsLines.filter((line) => line.instanceType === instanceType && awsClass(line.region) === regionClass)
  const regionPrices = new Map(
    lines.filter((line) => line.price !== "").map((line) => [line.region, micro(line.price)])
  )
  return {
    onDemand: middle([...regionPrices.values()]),
    interruptible: middle(lines.filter((line) => line.spot !== "").map((line) => micro(line.spot)))
  }
}

describe("parseCsv", () => {
  it("reads quoted commas, doubled quotes and CRLF line ends", () => {
    expect(parseCsv("a,\"b,c\",d\r\n\"x \"\"y\"\"\",,z\r\n")).toEqual([["a", "b,c", "d"], ["x \"y\"", "", "z"]])
  })

  it("reads LF, a quoted line break and a last line without a line end", () => {
    expect(parseCsv("a,b\n\"1\n2\",3")).toEqual([["a", "b"], ["1\n2", "3"]])
  })

  it("refuses text that ends inside a quoted field", () => {
    expect(() => parseCsv("a,\"b\n")).toThrow(/quoted/u)
  })

  it("the Lambda file is CRLF and its GpuInfo survives whole", () => {
    expect(lambdaText.includes("\r\n")).toBe(true)
    const rows = parseCsv(lambdaText)
    expect(rows.every((row) => row.length === 9)).toBe(true)
    expect(rows.find((row) => row[0] === "gpu_8x_h100_sxm5")?.[7]).toMatch(
      /^\{'Gpus': .*'TotalGpuMemoryInMiB': 81920\}$/u
    )
  })
})

describe("regionClassOf", () => {
  it.each([
    ["us-east-1", "us"],
    ["us-midwest-1", "us"],
    ["eu-north-1", "eu"],
    ["europe-central-1", "eu"],
    ["ap-southeast-3", "asia"],
    ["asia-northeast-2", "asia"],
    ["me-west-1", "me"],
    ["ca-central-1", "ca"],
    ["sa-east-1", "sa"],
    ["australia-east-1", "australia"],
    ["constructor-1", "constructor"]
  ])("%s is in %s", (region, regionClass) => {
    expect(regionClassOf(region)).toBe(regionClass)
  })
})

describe("upperMedian", () => {
  it("takes the middle value, the upper one of an even count", () => {
    expect(upperMedian([3n, 1n, 2n])).toBe(2n)
    expect(upperMedian([4n, 1n, 3n, 2n])).toBe(3n)
    expect(upperMedian([])).toBeUndefined()
  })
})

describe("Lambda offerings", () => {
  const lambda = parseLambdaCatalog(lambdaText)

  it("8x H100 SXM in the us class: 8 x H100-SXM-80GB over NVLink at 23.92 USD per hour", () => {
    const offering = find(lambda, "gpu_8x_h100_sxm5", "us")
    expect(offering.accelerator).toEqual({
      family: "H100",
      variant: "H100-SXM-80GB",
      count: 8,
      memoryGiB: 80,
      interconnect: "NVLink"
    })
    expect(offering.onDemandMicroUsdPerHour).toBe(23_920_000n)
    expect(offering.interruptibleMicroUsdPerHour).toBeUndefined()
    expect([offering.vcpus, offering.memoryGiB, offering.diskGiB]).toEqual([208, 1800, 8 * 512])
    expect(offering.regions).toEqual([
      "us-east-1",
      "us-east-2",
      "us-east-3",
      "us-midwest-1",
      "us-south-1",
      "us-south-2",
      "us-south-3",
      "us-west-1",
      "us-west-2",
      "us-west-3"
    ])
  })

  it("1x A10 costs 0.75, a PCIe A10-24GB", () => {
    const offering = find(lambda, "gpu_1x_a10", "eu")
    expect(offering.onDemandMicroUsdPerHour).toBe(750_000n)
    expect(offering.accelerator).toEqual({
      family: "A10",
      variant: "A10-24GB",
      count: 1,
      memoryGiB: 24,
      interconnect: "PCIe"
    })
    expect(offering.regions).toEqual(["europe-central-1", "europe-south-1"])
  })

  it("names the form where the instance type does", () => {
    const variant = (instanceType: string) => find(lambda, instanceType, "us").accelerator?.variant
    expect(variant("gpu_1x_h100_pcie")).toBe("H100-PCIe-80GB")
    expect(variant("gpu_1x_a100_sxm4")).toBe("A100-SXM-40GB")
    expect(variant("gpu_1x_a100")).toBe("A100-40GB")
    expect(variant("gpu_8x_a100_80gb_sxm4")).toBe("A100-SXM-80GB")
    expect(variant("gpu_1x_gh200")).toBe("GH200-96GB")
    expect(variant("gpu_8x_v100")).toBe("V100-16GB")
    expect(find(lambda, "gpu_1x_h100_pcie", "us").onDemandMicroUsdPerHour).toBe(2_490_000n)
    expect(find(lambda, "gpu_1x_gh200", "us").onDemandMicroUsdPerHour).toBe(1_490_000n)
  })

  it("has one offering per instance type and region class, none interruptible", () => {
    const lambdaClass: Readonly<Record<string, string>> = {
      us: "us",
      europe: "eu",
      asia: "asia",
      me: "me",
      australia: "australia"
    }
    const lines = dataLines(lambdaText)
    const types = new Set(lines.map((line) => line[0]))
    const classes = new Set(lines.map((line) => lambdaClass[(line[6] ?? "").split("-")[0] ?? ""]))
    expect(classes.has(undefined)).toBe(false)
    expect(lambda.length).toBe(types.size * classes.size)
    expect(lambda.every((offering) => offering.interruptibleMicroUsdPerHour === undefined)).toBe(true)
  })

  it("a CPU host has no accelerator", () => {
    const offering = find(lambda, "cpu_4x_general", "asia")
    expect(offering.accelerator).toBeUndefined()
    expect([offering.vcpus, offering.memoryGiB, offering.onDemandMicroUsdPerHour]).toEqual([4, 16, 200_000n])
    expect(offering.id).toMatch(/^cpu-4x-16gb-asia-[0-9a-f]{8}$/u)
  })
})

describe("AWS offerings", () => {
  const aws = parseAwsCatalog(awsText)

  it("p5.48xlarge in the us class: the medians of its rows", () => {
    const offering = find(aws, "p5.48xlarge", "us")
    const expected = expectedAwsRates("p5.48xlarge", "us")
    expect(offering.onDemandMicroUsdPerHour).toBe(expected.onDemand)
    expect(offering.interruptibleMicroUsdPerHour).toBe(expected.interruptible)
    // The README's us-east-1 facts bound them: on demand 98.32 there, spot 20.99 to 30.33 by zone.
    expect(
      awsLines.some((line) =>
        line.region === "us-east-1" && line.instanceType === "p5.48xlarge" && micro(line.price) === expected.onDemand
      )
    ).toBe(true)
    expect(offering.accelerator).toEqual({
      family: "H100",
      variant: "H100-SXM-80GB",
      count: 8,
      memoryGiB: 80,
      interconnect: "NVLink"
    })
    expect(offering.regions).toEqual(["us-east-1", "us-east-2", "us-west-1", "us-west-2"])
  })

  it("every rate is the median of its rows, and every (type, class) with a price has an offering", () => {
    const groups = new Set(
      awsLines.filter((line) => line.price !== "" || line.spot !== "").map((line) =>
        `${line.instanceType} ${awsClass(line.region)}`
      )
    )
    expect(aws.length).toBe(groups.size)
    for (const offering of aws) {
      const expected = expectedAwsRates(offering.instanceType, offering.regionClass)
      expect([
        offering.instanceType,
        offering.regionClass,
        offering.onDemandMicroUsdPerHour,
        offering.interruptibleMicroUsdPerHour
      ])
        .toEqual([offering.instanceType, offering.regionClass, expected.onDemand, expected.interruptible])
    }
  })

  it("merges p4de's 'A100' and 'A100-80GB' rows into one A100-SXM-80GB offering", () => {
    const p4de = aws.filter((offering) => offering.instanceType === "p4de.24xlarge")
    expect(p4de.map((offering) => offering.regionClass)).toEqual(["us"])
    const [offering] = p4de
    expect(offering?.accelerator).toEqual({
      family: "A100",
      variant: "A100-SXM-80GB",
      count: 8,
      memoryGiB: 80,
      interconnect: "NVLink"
    })
    expect(offering?.onDemandMicroUsdPerHour).toBe(40_965_750n)
    // The spot prices sit on the 'A100' rows only; the merge keeps them.
    expect(offering?.interruptibleMicroUsdPerHour).toBe(expectedAwsRates("p4de.24xlarge", "us").interruptible)
    expect(offering?.interruptibleMicroUsdPerHour).not.toBeUndefined()
  })

  it("p5e has no on-demand rate, and no offering where it has no spot price either", () => {
    const p5e = aws.filter((offering) => offering.instanceType === "p5e.48xlarge")
    expect(p5e.map((offering) => offering.regionClass).sort()).toEqual(["asia", "us"])
    expect(
      p5e.every((offering) =>
        offering.onDemandMicroUsdPerHour === undefined && offering.interruptibleMicroUsdPerHour !== undefined
      )
    ).toBe(true)
    expect(find(aws, "p5e.48xlarge", "asia").regions).toEqual(["ap-southeast-3"])
    expect(find(aws, "p5e.48xlarge", "asia").accelerator?.variant).toBe("H200-SXM-141GB")
  })

  it("takes GPU memory from GpuInfo: p3dn is V100-SXM-32GB, p3.8xlarge V100-SXM-16GB", () => {
    expect(find(aws, "p3dn.24xlarge", "us").accelerator?.variant).toBe("V100-SXM-32GB")
    expect(find(aws, "p3.8xlarge", "ca").accelerator).toEqual({
      family: "V100",
      variant: "V100-SXM-16GB",
      count: 4,
      memoryGiB: 16,
      interconnect: "NVLink"
    })
  })
})

describe("the catalog", () => {
  it("is sorted by id with unique ids", () => {
    const ids = catalog.map((offering) => offering.id)
    expect(ids).toEqual([...ids].sort())
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("ids are DNS-1123 subdomains that name neither provider nor instance type", () => {
    for (const offering of catalog) {
      expect(checkDns1123Subdomain(offering.id)).toEqual([])
      expect(offering.id).not.toMatch(/lambda|aws|amazon/u)
      expect(offering.id.includes(offering.instanceType.toLowerCase())).toBe(false)
    }
  })

  it("does not depend on the order of the rows", () => {
    const reversed = (text: string) => {
      const [header, ...body] = text.split(/\r?\n/u).filter((line) => line !== "")
      return [header, ...body.reverse()].join("\n")
    }
    expect(buildCatalog({ lambda: reversed(lambdaText), aws: reversed(awsText) })).toEqual(catalog)
  })

  it("every offering's projection decodes with the API's OfferingSpec and names no provider", () => {
    for (const offering of catalog) {
      const object = offeringObject(offering, catalogPricebookVersion)
      expect(Schema.decodeUnknownSync(OfferingSpec)(object.spec)).toEqual(object.spec)
      expect(JSON.stringify(object)).not.toMatch(
        new RegExp(`${offering.provider}|${offering.instanceType.replace(/\./gu, "\\.")}`, "u")
      )
    }
  })

  it("projects a GPU offering onto the API object", () => {
    const offering = find(catalog, "gpu_8x_h100_sxm5", "us")
    expect(offeringObject(offering, catalogPricebookVersion)).toEqual({
      metadata: { name: offering.id },
      spec: {
        accelerator: "H100-SXM-80GB",
        count: 8,
        gpuMemory: "80Gi",
        interconnect: "NVLink",
        host: { cpu: "208", memory: "1800Gi", disk: "4096Gi" },
        regionClass: "us",
        onDemandRateUSDPerHour: "23.92",
        providerClass: "Datacenter"
      },
      status: { pricebookVersion: "skypilot-v7-2026-11" }
    })
  })

  it("projects a CPU offering without accelerator fields, and an interruptible-only one without an on-demand rate", () => {
    const cpu = offeringObject(find(catalog, "cpu_4x_general", "me"), catalogPricebookVersion).spec
    expect(cpu).toEqual({
      count: 0,
      host: { cpu: "4", memory: "16Gi", disk: "256Gi" },
      regionClass: "me",
      onDemandRateUSDPerHour: "0.2",
      providerClass: "Datacenter"
    })
    const p5e = offeringObject(find(catalog, "p5e.48xlarge", "us"), catalogPricebookVersion).spec
    expect(p5e.onDemandRateUSDPerHour).toBeUndefined()
    expect(p5e.interruptibleRateUSDPerHour).toMatch(/^[0-9]+\.[0-9]+$/u)
  })

  it("loadCatalog reads the same files", () => {
    expect(loadCatalog()).toEqual(catalog)
  })

  it("refuses a file without the columns it needs or with a ragged row", () => {
    expect(() => parseLambdaCatalog("InstanceType,Price\r\ngpu_1x_a10,0.75\r\n")).toThrow(/lacks/u)
    const [header, first] = lambdaText.split("\r\n")
    expect(() => parseLambdaCatalog(`${header}\r\n${first},extra\r\n`)).toThrow(/fields/u)
  })
})
