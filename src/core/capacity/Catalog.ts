/**
 * Builds the offering catalog from real list prices, the SkyPilot catalog's Lambda and AWS rows
 * (scenarios/data/skypilot-gpu-prices/README.md), so the simulator and the scheduler work with rates that providers
 * actually charge rather than invented ones. Pure: it takes the CSV text and returns Offerings. Reading the files
 * is left to the simulator backend (src/data/CatalogData.ts), so the core stays free of I/O and portable.
 *
 * **One offering per (provider, instance type, region class).** The region class (Placement.regions) comes from the
 * first dash segment of the provider's region name:
 *
 *   | segment        | class                                          |
 *   |----------------|------------------------------------------------|
 *   | us             | us                                             |
 *   | eu, europe     | eu                                             |
 *   | ap, asia       | asia                                           |
 *   | me             | me                                             |
 *   | ca             | ca                                             |
 *   | sa             | sa                                             |
 *   | anything else  | the segment itself (australia-east-1 → australia) |
 *
 * `regions` lists the class's provider regions where the type sells at some rate.
 *
 * **Rates** are integer micro-USD per host-hour, parsed exactly from the decimal text (src/core/Money.ts):
 * - On demand: the median over the class's regions of each region's `Price`. AWS repeats the region's price on
 *   every zone row; if a region's rows ever disagreed, the region would count with the median of its rows. Lambda
 *   charges the same in every region.
 * - Interruptible: the median over the class's availability zones that have a `SpotPrice`. Lambda sells no spot
 *   capacity, and its rows carry no zone, so a Lambda region counts as its own zone.
 * - A median of an even count takes the upper of the two middle values, so every rate is one the provider charges.
 * - A row without a `Price` has no on-demand variant (AWS p5e). An offering with neither rate is left out.
 *
 * **Accelerator variants** are `<family>[-<form>]-<memory>GB`, e.g. H100-SXM-80GB, H100-PCIe-80GB, A100-40GB,
 * H200-SXM-141GB:
 * - family: the GPU's name from GpuInfo without any memory suffix (A100-80GB → A100). The families in the data are
 *   H100, H200, A100, A10, A6000, RTX6000, V100 and GH200.
 * - form: SXM or PCIe, where the catalog makes it known. Lambda puts it in the instance type (`_sxm4`, `_sxm5`,
 *   `_pcie`). The AWS p3, p3dn, p4d, p4de, p5, p5e and p5en boards are all SXM. Where nothing says which form a
 *   part has, the variant carries no form (Lambda's gpu_8x_a100 → A100-40GB).
 * - memory: per-GPU GiB from GpuInfo's `MemoryInfo.SizeInMiB`, which is per GPU for both providers (Lambda's
 *   `TotalGpuMemoryInMiB` is also per GPU, so it is not used). Without GpuInfo, the memory is read from an `NNgb` in
 *   the accelerator name or the instance type.
 * - interconnect: NVLink for SXM parts and PCIe otherwise. PCIe therefore means "not known to be NVLink".
 *
 * **The p4de merge.** Upstream lists each p4de.24xlarge zone twice: once with GPU name 'A100' (carrying the spot
 * price) and once as 'A100-80GB' (without). A p4de host has 8 A100 80GB SXM GPUs either way, and the variant is
 * derived from family, form and memory rather than from the name, so both rows become A100-SXM-80GB and fall into
 * the same offering. The spot median counts the zones of the 'A100' rows.
 *
 * **Disk** is not in the catalog. nodus assumes ephemeral disk per GPU of 512 GiB on Lambda (its hosts carry local
 * NVMe well above that) and 256 GiB on AWS (the EBS root volume nodus would attach). A CPU host gets 256 GiB.
 *
 * **Ids** are `<variant>-<count>x-<class>-<hash>`, or `cpu-<vcpus>x-<memory>gb-<class>-<hash>` for a CPU host, in
 * lower case. The hash is the FNV-1a 32-bit hash of `<provider>/<instance type>` in 8 hex digits. An id is thus a
 * DNS-1123 subdomain, stable across catalog refreshes, and never names the provider or instance type (the API never
 * names providers).
 */
import type { OfferingSpec, OfferingStatus } from "../../kinds/offering/OfferingSchema.ts"
import { fnv1a32 } from "../Hash.ts"
import { formatMicroUsd, parseMicroUsd } from "../Money.ts"
import type { Accelerator, Offering } from "./Offering.ts"

/** The pricebook the catalog's rates come from (Offering status.pricebookVersion). */
export const catalogPricebookVersion = "skypilot-v7-2026-11"

// ---------------------------------------------------------------------------------------------------------------
// CSV

/**
 * Rows of RFC 4180 CSV text: quoted fields may hold commas, line breaks and doubled quotes; lines end in LF or CRLF.
 * A final line break does not add an empty row.
 */
export const parseCsv = (text: string): Array<Array<string>> => {
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let quoted = false
  for (let index = 0; index < text.length; index++) {
    const char = text[index]!
    if (quoted) {
      if (char !== "\"") field += char
      else if (text[index + 1] === "\"") {
        field += "\""
        index++
      } else quoted = false
    } else if (char === "\"") quoted = true
    else if (char === ",") {
      row.push(field)
      field = ""
    } else if (char === "\n" || char === "\r") {
      if (char === "\r" && text[index + 1] === "\n") index++
      rows.push([...row, field])
      row = []
      field = ""
    } else field += char
  }
  if (quoted) throw new Error("CSV text ends inside a quoted field")
  if (field !== "" || row.length > 0) rows.push([...row, field])
  return rows
}

type CsvRecord = Readonly<Record<string, string>>

/** The CSV's rows keyed by header name; refuses text that lacks a required column or has ragged rows. */
const readTable = (text: string, required: ReadonlyArray<string>): Array<CsvRecord> => {
  const [header, ...body] = parseCsv(text).filter((row) => !(row.length === 1 && row[0] === ""))
  if (header === undefined) throw new Error("the CSV text is empty")
  const missing = required.filter((column) => !header.includes(column))
  if (missing.length > 0) throw new Error(`the CSV header lacks ${missing.join(", ")}`)
  return body.map((row, index) => {
    if (row.length !== header.length) {
      throw new Error(`CSV row ${index + 2} has ${row.length} fields; the header has ${header.length}`)
    }
    return Object.fromEntries(header.map((name, column) => [name, row[column] ?? ""]))
  })
}

// Only columns readTable has checked are read.
const cell = (record: CsvRecord, column: string): string => record[column] ?? ""

// ---------------------------------------------------------------------------------------------------------------
// Region classes

const regionClassBySegment: ReadonlyMap<string, string> = new Map([
  ["us", "us"],
  ["eu", "eu"],
  ["europe", "eu"],
  ["ap", "asia"],
  ["asia", "asia"],
  ["me", "me"],
  ["ca", "ca"],
  ["sa", "sa"]
])

/** The region class of a provider region: us-east-1 → us, europe-central-1 → eu, ap-south-1 → asia. */
export const regionClassOf = (region: string): string => {
  const segment = region.split("-")[0] ?? region
  return regionClassBySegment.get(segment) ?? segment
}

// ---------------------------------------------------------------------------------------------------------------
// Rows

type GpuForm = "SXM" | "PCIe"

/** What differs between the providers' files. */
interface ProviderRules {
  readonly provider: string
  /** The column naming a row's availability zone; absent where rows are per region. */
  readonly zoneColumn: string | undefined
  readonly formOf: (instanceType: string) => GpuForm | undefined
  /** nodus's assumption: the catalog carries no disk. */
  readonly diskGiBPerGpu: number
}

const cpuHostDiskGiB = 256

const lambdaForm = (instanceType: string): GpuForm | undefined => {
  const parts = instanceType.split("_")
  if (parts.some((part) => /^sxm[0-9]*$/u.test(part))) return "SXM"
  return parts.includes("pcie") ? "PCIe" : undefined
}

const awsSxmFamilies: ReadonlySet<string> = new Set(["p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en"])

const awsForm = (instanceType: string): GpuForm | undefined =>
  awsSxmFamilies.has(instanceType.split(".")[0] ?? "") ? "SXM" : undefined

const lambda: ProviderRules = { provider: "lambda", zoneColumn: undefined, formOf: lambdaForm, diskGiBPerGpu: 512 }
const aws: ProviderRules = { provider: "aws", zoneColumn: "AvailabilityZone", formOf: awsForm, diskGiBPerGpu: 256 }

const commonColumns = [
  "InstanceType",
  "AcceleratorName",
  "AcceleratorCount",
  "vCPUs",
  "MemoryGiB",
  "GpuInfo",
  "Price",
  "SpotPrice",
  "Region"
]

/** One CSV row, parsed: a host shape with its prices in one region (Lambda) or availability zone (AWS). */
interface PriceRow {
  readonly instanceType: string
  readonly accelerator: Accelerator | undefined
  readonly vcpus: number
  readonly memoryGiB: number
  readonly region: string
  readonly zone: string
  readonly onDemand: bigint | undefined
  readonly spot: bigint | undefined
}

/** A number the catalog writes as "8.0" or "1800.0"; refuses text that is no positive number. */
const positiveNumber = (text: string, what: string): number => {
  const value = Number(text)
  if (text.trim() === "" || !Number.isFinite(value) || value <= 0) {
    throw new Error(`${what} is not a positive number: "${text}"`)
  }
  return value
}

const optionalMicroUsd = (text: string): bigint | undefined => text === "" ? undefined : parseMicroUsd(text)

/** The GPU name and per-GPU memory of a GpuInfo cell, a Python dict literal; the first (only) GPU entry counts. */
const gpuInfoOf = (text: string): { readonly name: string | undefined; readonly memoryMiB: number | undefined } => {
  const name = /'Name': '([^']+)'/u.exec(text)?.[1]
  const memoryMiB = /'SizeInMiB': ([0-9]+)/u.exec(text)?.[1]
  return { name, memoryMiB: memoryMiB === undefined ? undefined : Number(memoryMiB) }
}

/** Per-GPU GiB from an `NNgb` in any of the names, for rows without GpuInfo. */
const memoryGiBFromNames = (names: ReadonlyArray<string>): number | undefined => {
  for (const name of names) {
    const match = /([0-9]+)gb/iu.exec(name)
    if (match !== null) return Number(match[1])
  }
  return undefined
}

/** `<family>[-<form>]-<memory>GB`. */
export const variantName = (family: string, form: GpuForm | undefined, memoryGiB: number): string =>
  [family, ...(form === undefined ? [] : [form]), `${Math.round(memoryGiB)}GB`].join("-")

const acceleratorOf = (rules: ProviderRules, record: CsvRecord): Accelerator | undefined => {
  const instanceType = cell(record, "InstanceType")
  const acceleratorName = cell(record, "AcceleratorName")
  if (acceleratorName === "") return undefined
  const count = positiveNumber(cell(record, "AcceleratorCount"), `${instanceType} AcceleratorCount`)
  const info = gpuInfoOf(cell(record, "GpuInfo"))
  const memoryGiB = info.memoryMiB === undefined
    ? memoryGiBFromNames([acceleratorName, instanceType])
    : info.memoryMiB / 1024
  if (memoryGiB === undefined) throw new Error(`${instanceType}: neither GpuInfo nor a name gives the GPU memory`)
  const family = (info.name ?? acceleratorName).replace(/-[0-9]+GB$/iu, "")
  const form = rules.formOf(instanceType)
  return {
    family,
    variant: variantName(family, form, memoryGiB),
    count,
    memoryGiB,
    interconnect: form === "SXM" ? "NVLink" : "PCIe"
  }
}

const priceRowOf = (rules: ProviderRules, record: CsvRecord): PriceRow => {
  const instanceType = cell(record, "InstanceType")
  const region = cell(record, "Region")
  return {
    instanceType,
    accelerator: acceleratorOf(rules, record),
    vcpus: positiveNumber(cell(record, "vCPUs"), `${instanceType} vCPUs`),
    memoryGiB: positiveNumber(cell(record, "MemoryGiB"), `${instanceType} MemoryGiB`),
    region,
    zone: rules.zoneColumn === undefined ? region : cell(record, rules.zoneColumn),
    onDemand: optionalMicroUsd(cell(record, "Price")),
    spot: optionalMicroUsd(cell(record, "SpotPrice"))
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Medians and grouping

const groupBy = <T>(items: ReadonlyArray<T>, keyOf: (item: T) => string): Map<string, Array<T>> => {
  const groups = new Map<string, Array<T>>()
  for (const item of items) {
    const key = keyOf(item)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [item])
    else group.push(item)
  }
  return groups
}

const compareBigint = (a: bigint, b: bigint): number => a < b ? -1 : a > b ? 1 : 0

/** The median; for an even count the upper of the two middle values. Undefined for no values. */
export const upperMedian = (values: ReadonlyArray<bigint>): bigint | undefined =>
  [...values].sort(compareBigint)[Math.floor(values.length / 2)]

const defined = <T>(values: ReadonlyArray<T | undefined>): Array<T> =>
  values.filter((value): value is T => value !== undefined)

/** The median over groups (regions, zones) of each group's median price. */
const medianOfGroups = (
  rows: ReadonlyArray<PriceRow>,
  keyOf: (row: PriceRow) => string,
  priceOf: (row: PriceRow) => bigint | undefined
): bigint | undefined =>
  upperMedian(defined([...groupBy(rows, keyOf).values()].map((group) => upperMedian(defined(group.map(priceOf))))))

// ---------------------------------------------------------------------------------------------------------------
// Offerings

const offeringId = (provider: string, row: PriceRow, regionClass: string): string => {
  const shape = row.accelerator === undefined
    ? `cpu-${row.vcpus}x-${row.memoryGiB}gb`
    : `${row.accelerator.variant}-${row.accelerator.count}x`
  return `${shape}-${regionClass}-${fnv1a32(`${provider}/${row.instanceType}`)}`.toLowerCase().replace(
    /[^a-z0-9.-]+/gu,
    "-"
  )
}

const shapeKey = (row: PriceRow): string => JSON.stringify([row.accelerator, row.vcpus, row.memoryGiB])

const sellsHere = (row: PriceRow): boolean => row.onDemand !== undefined || row.spot !== undefined

/** The offering of one (instance type, region class) group of rows; undefined when it sells at no rate. */
const offeringOf = (rules: ProviderRules, rows: ReadonlyArray<PriceRow>): Offering | undefined => {
  const first = rows[0]
  if (first === undefined) return undefined
  if (rows.some((row) => shapeKey(row) !== shapeKey(first))) {
    throw new Error(`the rows of ${first.instanceType} disagree on the host shape`)
  }
  const onDemand = medianOfGroups(rows, (row) => row.region, (row) => row.onDemand)
  const interruptible = medianOfGroups(rows, (row) => row.zone, (row) => row.spot)
  if (onDemand === undefined && interruptible === undefined) return undefined
  const regionClass = regionClassOf(first.region)
  return {
    id: offeringId(rules.provider, first, regionClass),
    provider: rules.provider,
    instanceType: first.instanceType,
    accelerator: first.accelerator,
    vcpus: first.vcpus,
    memoryGiB: first.memoryGiB,
    diskGiB: first.accelerator === undefined ? cpuHostDiskGiB : first.accelerator.count * rules.diskGiBPerGpu,
    regionClass,
    regions: [...new Set(rows.filter(sellsHere).map((row) => row.region))].sort(),
    onDemandMicroUsdPerHour: onDemand,
    interruptibleMicroUsdPerHour: interruptible
  }
}

const offeringsOf = (rules: ProviderRules, csvText: string): ReadonlyArray<Offering> => {
  const columns = rules.zoneColumn === undefined ? commonColumns : [...commonColumns, rules.zoneColumn]
  const rows = readTable(csvText, columns).map((record) => priceRowOf(rules, record))
  const groups = groupBy(rows, (row) => `${row.instanceType} ${regionClassOf(row.region)}`)
  return defined([...groups.values()].map((group) => offeringOf(rules, group)))
}

/** Offerings of the SkyPilot catalog's Lambda file (`catalogs/v7/lambda/vms.csv`). */
export const parseLambdaCatalog = (csvText: string): ReadonlyArray<Offering> => offeringsOf(lambda, csvText)

/** Offerings of the SkyPilot catalog's AWS file or an extract of it (`catalogs/v7/aws/vms.csv`). */
export const parseAwsCatalog = (csvText: string): ReadonlyArray<Offering> => offeringsOf(aws, csvText)

const compareText = (a: string, b: string): number => a < b ? -1 : a > b ? 1 : 0

/** The whole catalog, sorted by id; refuses two offerings with one id. */
export const buildCatalog = (sources: { readonly lambda: string; readonly aws: string }): ReadonlyArray<Offering> => {
  const offerings = [...parseLambdaCatalog(sources.lambda), ...parseAwsCatalog(sources.aws)].sort((a, b) =>
    compareText(a.id, b.id)
  )
  const clash = offerings.find((offering, index) => offerings[index - 1]?.id === offering.id)
  if (clash !== undefined) throw new Error(`two offerings share the id ${clash.id}`)
  return offerings
}

// ---------------------------------------------------------------------------------------------------------------
// API projection

/** The API's Offering object, without apiVersion and kind (src/kinds/offering/OfferingSchema.ts). */
export interface OfferingObject {
  readonly metadata: { readonly name: string }
  readonly spec: (typeof OfferingSpec)["Encoded"]
  readonly status: (typeof OfferingStatus)["Encoded"]
}

/** A GiB amount as a quantity: "1800Gi", or in Mi when it is no whole number of GiB. */
const gibQuantity = (gib: number): string => Number.isInteger(gib) ? `${gib}Gi` : `${gib * 1024}Mi`

/** The API's view of an offering: no provider or instance type, rates as decimal USD strings. */
export const offeringObject = (offering: Offering, pricebookVersion: string): OfferingObject => {
  const { accelerator, onDemandMicroUsdPerHour: onDemand, interruptibleMicroUsdPerHour: interruptible } = offering
  return {
    metadata: { name: offering.id },
    spec: {
      ...(accelerator === undefined ? {} : { accelerator: accelerator.variant }),
      count: accelerator?.count ?? 0,
      ...(accelerator === undefined
        ? {}
        : { gpuMemory: gibQuantity(accelerator.memoryGiB), interconnect: accelerator.interconnect }),
      host: { cpu: `${offering.vcpus}`, memory: gibQuantity(offering.memoryGiB), disk: gibQuantity(offering.diskGiB) },
      regionClass: offering.regionClass,
      ...(onDemand === undefined ? {} : { onDemandRateUSDPerHour: formatMicroUsd(onDemand) }),
      ...(interruptible === undefined ? {} : { interruptibleRateUSDPerHour: formatMicroUsd(interruptible) }),
      providerClass: "Datacenter"
    },
    status: { pricebookVersion }
  }
}
