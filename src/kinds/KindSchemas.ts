/**
 * The schema each kind is admitted with: the object envelope (spec: Object envelope) with validated metadata around
 * the kind's own spec and status schemas (src/core/schemas). Admission, OpenAPI and test arbitraries all read this
 * module, so they cannot disagree.
 */
import { Schema } from "effect"
import type { KindInfo } from "../core/meta/Kinds.ts"
import { ObjectMetaInput, ProjectName } from "../core/meta/ObjectMeta.ts"
import { definitionOf } from "./Kinds.ts"

const AnyObject = Schema.Record(Schema.String, Schema.Json)

const envelope = {
  apiVersion: Schema.optionalKey(Schema.String),
  kind: Schema.optionalKey(Schema.String),
  metadata: Schema.optionalKey(ObjectMetaInput)
}

/** Builds a kind's schema once; admission then compiles its decoder once too (Admission.ts). */
const perKind = <S>(build: (info: KindInfo) => S): (info: KindInfo) => S => {
  const built = new WeakMap<KindInfo, S>()
  return (info) => {
    let schema = built.get(info)
    if (schema === undefined) built.set(info, schema = build(info))
    return schema
  }
}

/**
 * The object a create or replace of `info` must decode as. `spec` is required for kinds that have one; `status` in
 * the body is accepted and ignored (controllers write it through /status).
 */
export const objectSchema = perKind((info) => {
  const spec = definitionOf(info.kind).spec
  return Schema.Struct({
    ...envelope,
    spec: info.hasSpec ? spec : Schema.optionalKey(spec),
    status: Schema.optionalKey(Schema.Json)
  })
})

/**
 * A server-side apply configuration: the manager's partial intent, so `spec` need not be complete (kubectl's apply
 * migration sends metadata alone). The merged result is then admitted with `objectSchema`.
 */
export const applySchema = perKind((_info) =>
  Schema.Struct({
    ...envelope,
    spec: Schema.optionalKey(AnyObject),
    status: Schema.optionalKey(Schema.Json)
  })
)

/** The object a write to `/status` must decode as: the kind's status schema; `spec` is ignored (spec: Conventions). */
export const statusSchema = perKind((info) =>
  Schema.Struct({
    ...envelope,
    spec: Schema.optionalKey(Schema.Json),
    status: Schema.optionalKey(definitionOf(info.kind).status)
  })
)

/** A project, written as a Kubernetes Namespace; its name is a DNS-1123 label, as a namespace's is. */
export const namespaceSchema = Schema.Struct({
  ...envelope,
  metadata: Schema.optionalKey(Schema.Struct({ ...ObjectMetaInput.fields, name: Schema.optionalKey(ProjectName) })),
  spec: Schema.optionalKey(Schema.Struct({ finalizers: Schema.optionalKey(Schema.Array(Schema.String)) })),
  status: Schema.optionalKey(Schema.Json)
})
