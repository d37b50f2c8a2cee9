/**
 * Events recorded on objects (spec: Events — "Objects that can be read through the API also record events (listed by
 * an events command); the fields of that Event object: not shown"). nodus records them as Kubernetes core/v1 Events in
 * the object's project, so that `kubectl get events` and the events section of `kubectl describe` show them without a
 * plugin (docs/simulator.md, "The sim backend"). Identical events of one object are aggregated as Kubernetes' event
 * correlator does: the count grows and lastTimestamp moves.
 *
 * Pure: times come in as epoch milliseconds.
 */
import type { JsonObject } from "../Json.ts"
import type { ResourceObject } from "./ObjectMeta.ts"
import { timestamp } from "./Strategy.ts"

/** The object an event is about (core/v1 ObjectReference, the fields nodus fills in). */
export interface InvolvedObject {
  readonly apiVersion: string
  readonly kind: string
  readonly name: string
  readonly namespace: string
  readonly uid: string
}

/** One event as nodus records it; `first`, `last` and `count` follow the aggregation of identical events. */
export interface EventRecord {
  readonly name: string
  readonly involved: InvolvedObject
  readonly reason: string
  readonly message: string
  readonly warning: boolean
  readonly count: number
  readonly first: number
  readonly last: number
  /** Who reported it: `source.component` and `reportingComponent`, e.g. nodus-runtime. */
  readonly component: string
}

/** Event names stay DNS subdomains: the object's name is cut so that the suffix fits in 253 characters. */
const nameRoomMax = 253 - 1 - 16

/**
 * `<object>.<hex>` as Kubernetes names events (`<name>.<UnixNano in hex>`); `sequence` keeps two events of one
 * millisecond apart.
 */
export const eventName = (objectName: string, at: number, sequence: number): string =>
  `${objectName.slice(0, nameRoomMax)}.${
    (BigInt(Math.max(0, Math.floor(at))) * 1_000_000n + BigInt(sequence % 1_000_000)).toString(16)
  }`

/** metav1.MicroTime: RFC 3339 with six fractional digits. */
export const microTime = (at: number): string => new Date(at).toISOString().replace(/\.(\d{3})Z$/u, ".$1000Z")

/**
 * Events of the same object, reason, message and type aggregate into one (Kubernetes' EventAggregator key, narrowed).
 */
export const aggregationKey = (involved: InvolvedObject, reason: string, message: string, warning: boolean): string =>
  JSON.stringify([involved.uid, reason, message, warning])

/** The core/v1 Event object of a record, without the server-owned metadata the store fills in. */
export const eventBody = (record: EventRecord): JsonObject => ({
  involvedObject: { ...record.involved },
  reason: record.reason,
  message: record.message,
  type: record.warning ? "Warning" : "Normal",
  count: record.count,
  firstTimestamp: timestamp(record.first),
  lastTimestamp: timestamp(record.last),
  eventTime: microTime(record.first),
  source: { component: record.component },
  reportingComponent: record.component,
  reportingInstance: record.component
})

/**
 * The whole Event object for a create: core/v1, in the involved object's project, owned by it so that the garbage
 * collector deletes the events with the object.
 */
export const eventObject = (record: EventRecord, uid: string, now: number): ResourceObject => ({
  apiVersion: "v1",
  kind: "Event",
  metadata: {
    name: record.name,
    namespace: record.involved.namespace,
    uid,
    resourceVersion: "",
    generation: 1,
    creationTimestamp: timestamp(now),
    ownerReferences: [{
      apiVersion: record.involved.apiVersion,
      kind: record.involved.kind,
      name: record.involved.name,
      uid: record.involved.uid
    }]
  },
  ...eventBody(record)
})

/**
 * The field labels an events list or watch may select on, as the Kubernetes API server supports them for events:
 * `kubectl describe` lists an object's events with `involvedObject.name=…,involvedObject.namespace=…,
 * involvedObject.kind=…,involvedObject.uid=…`.
 */
export const eventFieldLabels: ReadonlySet<string> = new Set([
  "metadata.name",
  "metadata.namespace",
  "involvedObject.kind",
  "involvedObject.namespace",
  "involvedObject.name",
  "involvedObject.uid",
  "involvedObject.apiVersion",
  "involvedObject.resourceVersion",
  "involvedObject.fieldPath",
  "reason",
  "reportingComponent",
  "source",
  "type"
])

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const member = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)[key]
    : undefined

/** The values of `eventFieldLabels` in an Event object. */
export const eventFields = (
  object: {
    readonly metadata?: { readonly name?: string; readonly namespace?: string }
    readonly [field: string]: unknown
  }
): Record<string, string | undefined> => {
  const involved = object["involvedObject"]
  return {
    "metadata.name": object.metadata?.name,
    "metadata.namespace": object.metadata?.namespace,
    "involvedObject.kind": text(member(involved, "kind")),
    "involvedObject.namespace": text(member(involved, "namespace")),
    "involvedObject.name": text(member(involved, "name")),
    "involvedObject.uid": text(member(involved, "uid")),
    "involvedObject.apiVersion": text(member(involved, "apiVersion")),
    "involvedObject.resourceVersion": text(member(involved, "resourceVersion")),
    "involvedObject.fieldPath": text(member(involved, "fieldPath")),
    reason: text(object["reason"]),
    reportingComponent: text(object["reportingComponent"]),
    source: text(member(object["source"], "component")),
    type: text(object["type"])
  }
}
