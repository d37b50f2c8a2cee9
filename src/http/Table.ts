// Server-side printing for `kubectl get`: the meta.k8s.io/v1 Table that kubectl asks for with
// `Accept: application/json;as=Table;…`. kubectl prints the cells verbatim, so the server formats them here, Age as
// Kubernetes' HumanDuration and costs as dollars, the way the CRD table converter does (kubectl-compat §5).
// Pure: the clock reading comes in as `now`.

import type { Json, JsonObject } from "../core/Json.ts"
import type { Column, KindInfo } from "../core/meta/Kinds.ts"
import { phaseOf, readPath } from "../core/meta/ObjectMeta.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { acceptsForm } from "./Discovery.ts"

/**
 * Whether the client asked for a Table: kubectl's default and `-o wide` output list
 * `application/json;as=Table;v=v1;g=meta.k8s.io` (and the v1beta1 form) before plain JSON (kubectl-compat §5).
 */
export const wantsTable = (accept: string | undefined): boolean =>
  acceptsForm(accept, { as: "Table", group: "meta.k8s.io", versions: ["v1", "v1beta1"] })

/** The `includeObject` query parameter: what each row's `object` holds. Kubernetes' default is Metadata. */
export type IncludeObject = "None" | "Metadata" | "Object"

/**
 * Reads the `includeObject` query parameter: absent or empty means "Metadata", one of the three values means itself,
 * and anything else gives undefined, which the caller answers with 400 BadRequest as the Kubernetes API server does.
 */
export const includeObjectOf = (value: string | null | undefined): IncludeObject | undefined => {
  if (value === undefined || value === null || value === "") return "Metadata"
  return value === "None" || value === "Metadata" || value === "Object" ? value : undefined
}

/** How one column's cell is computed from an object, next to its TableColumnDefinition. */
interface CellColumn {
  readonly definition: JsonObject
  readonly cell: (object: ResourceObject, now: number) => string
}

// A TableColumnDefinition carries all five fields; Kubernetes serialises them without omitempty.
const definition = (name: string, type: string, format: string, priority: number, description: string): JsonObject => ({
  name,
  type,
  format,
  description,
  priority
})

const nameColumn: CellColumn = {
  definition: definition(
    "Name",
    "string",
    "name",
    0,
    "Name must be unique within a namespace (project). kubectl prints <resource>/<name> when several kinds are shown."
  ),
  cell: (object) => object.metadata.name
}

// The Age column has type "date" but its cell is already a duration, as the CRD table converter does it.
const ageColumn: CellColumn = {
  definition: definition("Age", "date", "", 0, "Time since the object was created (metadata.creationTimestamp)."),
  cell: (object, now) => age(object.metadata.creationTimestamp, now)
}

const phaseColumn: CellColumn = {
  definition: definition("Phase", "string", "", 0, "The object's lifecycle phase (status.phase)."),
  cell: (object) => phaseOf(object) ?? ""
}

// Namespaces report Active when the stub carries no phase, matching the GET /api/v1/namespaces/<ns> answer.
const namespaceStatusColumn: CellColumn = {
  definition: definition("Status", "string", "", 0, "The phase of the namespace."),
  cell: (object) => phaseOf(object) ?? "Active"
}

const costColumn = (costPath: string): CellColumn => ({
  definition: definition("Cost", "string", "", 0, `Money spent so far in USD (${costPath}).`),
  cell: (object) => formatUsd(readPath(object, costPath))
})

const kindColumn = (column: Column): CellColumn => ({
  definition: definition(column.name, column.type, "", column.priority, column.description),
  cell: (object) => {
    const value = readPath(object, column.path)
    if (column.condition !== undefined) return conditionStatus(value, column.condition)
    return column.format === "usd" ? formatUsd(value) : cellText(value)
  }
})

/** The `status` of the condition of `type` in a conditions list; empty while it has none. */
const conditionStatus = (conditions: Json | undefined, type: string): string => {
  const found = Array.isArray(conditions)
    ? conditions.find((entry) =>
      typeof entry === "object" && entry !== null && !Array.isArray(entry) && entry["type"] === type
    )
    : undefined
  return typeof found === "object" && found !== null && !Array.isArray(found) ? text(found["status"]) : ""
}

/** A JSON value as cell text: strings as they are, missing and null as empty, others as compact JSON. */
const cellText = (value: Json | undefined): string => {
  if (value === undefined || value === null) return ""
  return typeof value === "string" ? value : JSON.stringify(value)
}

const text = (value: Json | undefined): string => (typeof value === "string" ? value : "")

const since = (
  stamp: Json | undefined,
  now: number
): string => (typeof stamp === "string" ? age(stamp, now) : "<unknown>")

/** An event's object as Kubernetes prints it: `<kind in lower case>/<name>`. */
const eventTarget = (object: ResourceObject): string => {
  const kind = text(readPath(object, "involvedObject.kind")).toLowerCase()
  const name = text(readPath(object, "involvedObject.name"))
  return name === "" ? kind : `${kind}/${name}`
}

const eventColumn = (
  name: string,
  priority: 0 | 1,
  description: string,
  cell: CellColumn["cell"],
  format = ""
): CellColumn => ({ definition: definition(name, "string", format, priority, description), cell })

/** The columns the Kubernetes API server prints for core/v1 Events (`kubectl get events`), in its order. */
const eventColumns: ReadonlyArray<CellColumn> = [
  eventColumn(
    "Last Seen",
    0,
    "The time the event last occurred (lastTimestamp).",
    (object, now) => since(object["lastTimestamp"], now)
  ),
  eventColumn("Type", 0, "Normal or Warning.", (object) => text(object["type"])),
  eventColumn("Reason", 0, "Why the event happened, in CamelCase.", (object) => text(object["reason"])),
  eventColumn("Object", 0, "The object the event is about.", eventTarget),
  eventColumn(
    "Subobject",
    1,
    "The part of the object, when the event is about one.",
    (object) => text(readPath(object, "involvedObject.fieldPath"))
  ),
  eventColumn(
    "Source",
    1,
    "The component that reported the event.",
    (object) => text(readPath(object, "source.component"))
  ),
  eventColumn("Message", 0, "What happened, for humans.", (object) => text(object["message"])),
  eventColumn(
    "First Seen",
    1,
    "The time the event first occurred (firstTimestamp).",
    (object, now) => since(object["firstTimestamp"], now)
  ),
  eventColumn("Count", 1, "How many times the event occurred.", (object) => cellText(object["count"])),
  eventColumn("Name", 1, "The event's name.", (object) => object.metadata.name, "name")
]

/**
 * Name, Phase (or the kind's state column), Age, Cost (when the kind spends money), then the kind's own columns;
 * namespaces get Name, Status, Age.
 */
const columnsOf = (info: KindInfo | "namespaces" | "events"): ReadonlyArray<CellColumn> => {
  if (info === "namespaces") return [nameColumn, namespaceStatusColumn, ageColumn]
  if (info === "events") return eventColumns
  const cost = info.costPath === undefined ? [] : [costColumn(info.costPath)]
  return [
    nameColumn,
    info.state === undefined ? phaseColumn : kindColumn(info.state),
    ageColumn,
    ...cost,
    ...info.columns.map(kindColumn)
  ]
}

/**
 * The TableColumnDefinitions of a kind (or of core namespaces), in cell order. Columns with priority 1 are printed
 * only with `kubectl get -o wide`, and Name's format "name" makes kubectl print `job.nodus.dev/x` when it shows
 * several kinds at once (kubectl-compat §5).
 */
export const columnDefinitions = (info: KindInfo | "namespaces" | "events"): ReadonlyArray<JsonObject> =>
  columnsOf(info).map((column) => column.definition)

/** What `table` renders besides the rows: the clock reading, the row object form and the list metadata. */
export interface TableOptions {
  readonly now: number
  readonly includeObject: IncludeObject
  readonly resourceVersion?: string
  readonly continue?: string
  readonly remainingItemCount?: number
  /** False for watch events after the first: kubectl keeps the last column definitions (kubectl-compat §6). */
  readonly withColumns: boolean
}

// kubectl needs kind and apiVersion on the row object; a bare {metadata} is mis-decoded (kubectl-compat §5).
const rowObject = (object: ResourceObject, includeObject: IncludeObject): JsonObject => {
  if (includeObject === "None") return {}
  if (includeObject === "Object") return { object }
  return { object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: object.metadata } }
}

/**
 * A meta.k8s.io/v1 Table of `objects`, one row per object. Each row carries the object (PartialObjectMetadata by
 * default, the whole object for `includeObject=Object`, as `--sort-by` needs; nothing for None) because kubectl
 * takes the NAMESPACE column, `--show-labels` and `-L` from it (kubectl-compat §5). `metadata` carries the list's
 * resourceVersion, continue token and remaining item count when given.
 */
export const table = (
  info: KindInfo | "namespaces" | "events",
  objects: ReadonlyArray<ResourceObject>,
  options: TableOptions
): JsonObject => {
  const metadata: JsonObject = {
    ...(options.resourceVersion === undefined ? {} : { resourceVersion: options.resourceVersion }),
    ...(options.continue === undefined ? {} : { continue: options.continue }),
    ...(options.remainingItemCount === undefined ? {} : { remainingItemCount: options.remainingItemCount })
  }
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata,
    ...(options.withColumns ? { columnDefinitions: columnDefinitions(info) } : {}),
    rows: rows(info, objects, options)
  }
}

/** The rows of `objects`, as `table` has them: a list streamed page by page renders each page's rows with this. */
export const rows = (
  info: KindInfo | "namespaces" | "events",
  objects: ReadonlyArray<ResourceObject>,
  options: Pick<TableOptions, "now" | "includeObject">
): Array<JsonObject> => {
  const columns = columnsOf(info)
  return objects.map((object) => ({
    cells: columns.map((column) => column.cell(object, options.now)),
    ...rowObject(object, options.includeObject)
  }))
}

/** The Age cell: the time since creation, or "<unknown>" (Kubernetes' word) when the timestamp is missing or bad. */
const age = (creationTimestamp: string | undefined, now: number): string => {
  const created = creationTimestamp === undefined ? Number.NaN : Date.parse(creationTimestamp)
  return Number.isNaN(created) ? "<unknown>" : humanDuration(now - created)
}

const secondMs = 1000
const minuteMs = 60 * secondMs
const hourMs = 60 * minuteMs

/**
 * A duration in milliseconds as Kubernetes prints ages: exactly k8s.io/apimachinery/pkg/util/duration.HumanDuration,
 * two significant units at most and coarser as the duration grows ("119s", "9m59s", "3h", "7h59m", "2d", "7d23h",
 * "2y1d"). Slightly negative durations (clock skew up to a second) print "0s" and larger negative ones "<invalid>".
 */
export const humanDuration = (milliseconds: number): string => {
  // Go's int() truncates toward zero, and so does Math.trunc.
  const seconds = Math.trunc(milliseconds / secondMs)
  if (seconds < -1) return "<invalid>"
  if (seconds < 0) return "0s"
  if (seconds < 60 * 2) return `${seconds}s`
  const minutes = Math.trunc(milliseconds / minuteMs)
  if (minutes < 10) {
    const rest = seconds % 60
    return rest === 0 ? `${minutes}m` : `${minutes}m${rest}s`
  }
  if (minutes < 60 * 3) return `${minutes}m`
  return humanHours(Math.trunc(milliseconds / hourMs), minutes)
}

// The branches of HumanDuration from three hours on, where hours are the coarsest exact unit.
const humanHours = (hours: number, minutes: number): string => {
  if (hours < 8) {
    const rest = minutes % 60
    return rest === 0 ? `${hours}h` : `${hours}h${rest}m`
  }
  if (hours < 48) return `${hours}h`
  const days = Math.trunc(hours / 24)
  if (hours < 24 * 8) {
    const rest = hours % 24
    return rest === 0 ? `${days}d` : `${days}d${rest}h`
  }
  if (hours < 24 * 365 * 2) return `${days}d`
  const years = Math.trunc(days / 365)
  if (hours < 24 * 365 * 8) {
    const rest = days % 365
    return rest === 0 ? `${years}y` : `${years}y${rest}d`
  }
  return `${years}y`
}

/**
 * A USD amount as a cost cell: "$" and the decimal with trailing zeros dropped but at least two decimals kept, so
 * "0.420000" is "$0.42", "12" is "$12.00" and "0.0001" stays "$0.0001" (no rounding: the ledger's digits are exact).
 * Accepts the API's decimal strings and plain numbers; a missing or null value is "", and a string that is not a
 * decimal is shown as it is rather than hidden.
 */
export const formatUsd = (value: Json | undefined): string => {
  if (typeof value === "number") return Number.isFinite(value) ? dollars(plainDecimal(value)) : ""
  if (typeof value !== "string") return ""
  return /^[+-]?(\d+(\.\d*)?|\.\d+)$/u.test(value) ? dollars(value) : value
}

const dollars = (decimal: string): string => {
  const negative = decimal.startsWith("-")
  const unsigned = decimal.replace(/^[+-]/u, "")
  const [whole = "", fraction = ""] = unsigned.split(".")
  const integerDigits = whole.replace(/^0+/u, "") || "0"
  const fractionDigits = fraction.replace(/0+$/u, "").padEnd(2, "0")
  // "-$0.00" would be noise: a zero amount has no sign.
  const isZero = /^0*$/u.test(integerDigits + fraction)
  return `${negative && !isZero ? "-" : ""}$${integerDigits}.${fractionDigits}`
}

/**
 * A finite number as a plain decimal string, expanding the exponent form ("1e-7") that String() uses for tiny values.
 */
const plainDecimal = (value: number): string => {
  const text = String(value)
  const match = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/u.exec(text)
  if (match === null) return text
  const [, sign = "", leading = "", rest = "", exponentText = "0"] = match
  const digits = leading + rest
  const exponent = Number(exponentText)
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`
  return `${sign}${digits.padEnd(exponent + 1, "0")}`
}
