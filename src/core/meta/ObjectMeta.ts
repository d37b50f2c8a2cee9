/**
 * The object envelope every kind shares (spec: Object envelope): `metadata` with its Kubernetes semantics, and the
 * list envelope. The schema here is what a client may write; the server fills in the fields it owns (uid,
 * resourceVersion, generation, creationTimestamp, managedFields) in Strategy.ts.
 */
import { Schema } from "effect"
import type { Json, JsonObject } from "../Json.ts"
import { mapOf } from "./Fields.ts"
import {
  checkDns1123Label,
  checkDns1123Subdomain,
  checkLabelValue,
  checkQualifiedName,
  jsonSchemas,
  utf8Length
} from "./Names.ts"

/** Kubernetes' limit on the summed size of all annotation keys and values (apimachinery TotalAnnotationSizeLimitB). */
export const annotationsSizeMaxBytes = 256 * 1024

/** A generated name is generateName (cut to this length) plus five random characters, as in Kubernetes. */
export const generateNamePrefixMaxLength = 58
export const generateNameSuffixLength = 5

/** A string check whose problems come from one of the Names.ts grammars, worded as Kubernetes words them. */
const grammar = (
  check: (value: string) => ReadonlyArray<string>,
  description: string,
  jsonSchema: { readonly pattern: string; readonly maxLength: number },
  exact: boolean
) =>
  Schema.makeFilter<string>((value) => {
    const problems = check(value)
    return problems.length === 0 ? undefined : `Invalid value: "${value}": ${problems.join("; ")}`
  }, { description, toJsonSchema: () => exact ? jsonSchema : [jsonSchema, true] })

export const ObjectName = Schema.String.check(
  grammar(checkDns1123Subdomain, "a lowercase RFC 1123 subdomain", jsonSchemas.dns1123Subdomain, true)
)
export const Dns1123Label = Schema.String.check(
  grammar(checkDns1123Label, "a lowercase RFC 1123 label", jsonSchemas.dns1123Label, true)
)
/** Projects are named like Kubernetes namespaces: DNS-1123 labels. */
export const ProjectName = Dns1123Label
export const QualifiedName = Schema.String.check(
  grammar(checkQualifiedName, "a qualified name such as example.com/my-name", jsonSchemas.qualifiedName, false)
)
export const LabelValue = Schema.String.check(
  grammar(
    checkLabelValue,
    "a label value: empty or at most 63 alphanumerics, '-', '_', '.'",
    jsonSchemas.labelValue,
    true
  )
)

const qualifiedNameProblem = (key: string): string | undefined => {
  const problems = checkQualifiedName(key)
  return problems.length === 0 ? undefined : problems.join("; ")
}

/** Labels, annotations and label selectors: maps keyed by qualified names such as example.com/my-name. */
export const QualifiedNameMap = <S extends Schema.Top>(value: S) =>
  mapOf(value, qualifiedNameProblem, jsonSchemas.qualifiedName)

export const OwnerReference = Schema.Struct({
  apiVersion: Schema.String,
  kind: Schema.String,
  name: Schema.String,
  uid: Schema.String,
  controller: Schema.optionalKey(Schema.Boolean),
  blockOwnerDeletion: Schema.optionalKey(Schema.Boolean)
})
export type OwnerReference = typeof OwnerReference.Type

export const ManagedFieldsEntry = Schema.Struct({
  apiVersion: Schema.optionalKey(Schema.String),
  fieldsType: Schema.optionalKey(Schema.String),
  fieldsV1: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown)),
  manager: Schema.optionalKey(Schema.String),
  operation: Schema.optionalKey(Schema.String),
  subresource: Schema.optionalKey(Schema.String),
  time: Schema.optionalKey(Schema.String)
})

const annotationsWithinSize = Schema.makeFilter<Readonly<Record<string, string>>>((annotations) => {
  let bytes = 0
  for (const [key, value] of Object.entries(annotations)) bytes += utf8Length(key) + utf8Length(value)
  return bytes <= annotationsSizeMaxBytes
    ? undefined
    : `Too long: may not be more than ${annotationsSizeMaxBytes} bytes`
})

const singleController = Schema.makeFilter<ReadonlyArray<OwnerReference>>((references) =>
  references.filter((reference) => reference.controller === true).length <= 1
    ? undefined
    : "Invalid value: only one reference can have Controller set to true"
)

/**
 * What a client may send as `metadata`. Server-owned fields (uid, resourceVersion, …) are accepted so that a client can
 * send back an object it read, as `kubectl replace` does; the strategy decides what they mean on each operation.
 */
export const ObjectMetaInput = Schema.Struct({
  name: Schema.optionalKey(ObjectName),
  generateName: Schema.optionalKey(Schema.String),
  namespace: Schema.optionalKey(Schema.String),
  uid: Schema.optionalKey(Schema.String),
  resourceVersion: Schema.optionalKey(Schema.String),
  generation: Schema.optionalKey(Schema.Int),
  creationTimestamp: Schema.optionalKey(Schema.NullOr(Schema.String)),
  deletionTimestamp: Schema.optionalKey(Schema.NullOr(Schema.String)),
  deletionGracePeriodSeconds: Schema.optionalKey(Schema.NullOr(Schema.Int)),
  labels: Schema.optionalKey(Schema.NullOr(QualifiedNameMap(LabelValue))),
  annotations: Schema.optionalKey(Schema.NullOr(QualifiedNameMap(Schema.String).check(annotationsWithinSize))),
  finalizers: Schema.optionalKey(Schema.NullOr(Schema.Array(QualifiedName))),
  ownerReferences: Schema.optionalKey(Schema.NullOr(Schema.Array(OwnerReference).check(singleController))),
  managedFields: Schema.optionalKey(Schema.NullOr(Schema.Array(ManagedFieldsEntry))),
  selfLink: Schema.optionalKey(Schema.String)
})
export type ObjectMetaInput = typeof ObjectMetaInput.Type

/** Metadata as stored and served: the fields the server owns are always present. */
export type ObjectMeta = {
  readonly name: string
  readonly generateName?: string
  readonly namespace?: string
  readonly uid: string
  readonly resourceVersion: string
  readonly generation: number
  readonly creationTimestamp: string
  readonly deletionTimestamp?: string
  readonly deletionGracePeriodSeconds?: number
  readonly labels?: { readonly [key: string]: string }
  readonly annotations?: { readonly [key: string]: string }
  readonly finalizers?: ReadonlyArray<string>
  readonly ownerReferences?: ReadonlyArray<OwnerReference>
  readonly managedFields?: ReadonlyArray<Json>
}

/** A stored object: the envelope with server-owned metadata; everything else is the kind's JSON. */
export type ResourceObject = {
  readonly apiVersion: string
  readonly kind: string
  readonly metadata: ObjectMeta
  readonly spec?: Json
  readonly status?: Json
  readonly [field: string]: Json
}

/** The object's `status.phase`, when it has one. */
export const phaseOf = (object: ResourceObject): string | undefined => {
  const status = object.status
  if (status === null || typeof status !== "object" || Array.isArray(status)) return undefined
  const phase = (status as JsonObject)["phase"]
  return typeof phase === "string" ? phase : undefined
}

/** Reads a dotted path (`status.cost.totalUSD`) from a JSON value. */
export const readPath = (value: Json | undefined, path: string): Json | undefined => {
  let current: unknown = value
  for (const segment of path.split(".")) {
    if (current === null || typeof current !== "object" || Array.isArray(current)) return undefined
    current = (current as Record<string, unknown>)[segment]
  }
  return current as Json | undefined
}
