// OpenAPI 3.0.3 documents for the resource API, one per group version (spec: Versioning), plus the /openapi/v3
// index and the core /api/v1 document for namespaces. kubectl downloads them before `apply`, `create -f`,
// `replace` and `edit` (client-side validation is on by default) and for `explain` (kubectl-compat §3), so two
// details are load-bearing: every PATCH operation carries `x-kubernetes-group-version-kind` and a `fieldValidation`
// query parameter, and no PATCH body lists strategic merge, which would make kubectl send it.
//
// Per-kind spec and status schemas come from a `KindSchemas` function, so that permissive placeholders can later be
// swapped for schemas generated from each kind's effect Schema; `toOpenApi30` is the conversion those will take,
// and `objectMetaSchema` already takes it. Pure: no I/O.

import { JsonSchema, Schema } from "effect"
import { isJson, isObject } from "../../core/Json.ts"
import type { Json, JsonObject } from "../../core/Json.ts"
import { eventKind, namespaceKind as namespaceResource, versions } from "../../core/meta/Kinds.ts"
import type { KindInfo, Operation, Scope, Version } from "../../core/meta/Kinds.ts"
import { ObjectMetaInput } from "../../core/meta/ObjectMeta.ts"
import { kindsIn } from "../../kinds/Kinds.ts"
import type { KindOperations } from "./Operations.ts"
import { clockPaths, clockSchemas } from "./SimulationClock.ts"

/**
 * The JSON Schemas (OpenAPI 3.0 flavour) of one kind's `spec` and `status`, e.g. built from its effect Schema with
 * `toOpenApi30`. `definitions`, when given, are named schemas the two refer to with `#/components/schemas/<name>`;
 * they are added to the document's components.
 */
export type KindSchemas = (info: KindInfo) => {
  readonly spec: JsonObject
  readonly status: JsonObject
  readonly definitions?: JsonObject
}

/**
 * Schemas that accept any spec and status object. They keep `kubectl explain` informative at the kind level and let
 * the server do all validation (kubectl sends `fieldValidation=Strict`, kubectl-compat §3).
 */
export const permissiveSchemas: KindSchemas = (info) => ({
  spec: {
    type: "object",
    description: `The desired state of the ${info.kind}, written by its owner. The server validates it on write.`,
    "x-kubernetes-preserve-unknown-fields": true
  },
  status: {
    type: "object",
    description: `The observed state of the ${info.kind}, written by the service.`,
    "x-kubernetes-preserve-unknown-fields": true
  }
})

const schemaPrefix = "#/components/schemas/"
const ref = (name: string): JsonObject => ({ $ref: `${schemaPrefix}${name}` })
// In OpenAPI 3.0 the siblings of a $ref are ignored, so a described reference is an allOf of one, as Kubernetes does.
const describedRef = (name: string, description: string): JsonObject => ({ allOf: [ref(name)], description })

/**
 * The components.schemas key of a kind, in Kubernetes' style: the group's DNS labels reversed, then the version and
 * the kind, so Job in nodus.dev/v1 is `dev.nodus.v1.Job`. The core group's kinds live under `io.k8s.api.core`.
 */
export const schemaName = (group: string, version: string, kind: string): string => {
  const prefix = group === "" ? "io.k8s.api.core" : group.split(".").reverse().join(".")
  return `${prefix}.${version}.${kind}`
}

const groupVersionPath = (
  group: string,
  version: string
): string => (group === "" ? `api/${version}` : `apis/${group}/${version}`)

/**
 * GET /openapi/v3: where each group version's document is. kubectl fetches the one for the kind at hand from its
 * `serverRelativeURL` (kubectl-compat §3). Lists the nodus versions that hold kinds, and the core api/v1.
 */
export const index = (group: string): JsonObject => {
  const paths = [
    ...versions.filter((version) => kindsIn(version).length > 0).map((version) => groupVersionPath(group, version)),
    groupVersionPath("", "v1")
  ]
  return { paths: Object.fromEntries(paths.map((path) => [path, { serverRelativeURL: `/openapi/v3/${path}` }])) }
}

/** Everything the path builder needs to know about one served resource. */
interface PathResource {
  readonly group: string
  readonly version: string
  readonly kind: string
  readonly plural: string
  readonly scope: Scope
  readonly operations: ReadonlySet<Operation>
  /** `/apis/<group>/<version>` or `/api/v1`. */
  readonly root: string
}

const pathResourceOf = (group: string, info: KindInfo): PathResource => ({
  ...info,
  group,
  root: `/${groupVersionPath(group, info.version)}`
})

// Query and header parameters. kubectl looks the parameters up by name on the operation itself, so they are inlined
// rather than referenced from components.parameters (kubectl-compat §3).
const query = (name: string, schema: JsonObject, description: string): JsonObject => ({
  name,
  in: "query",
  description,
  schema
})
const header = (name: string, description: string): JsonObject => ({
  name,
  in: "header",
  description,
  schema: { type: "string" }
})
const pathParameter = (name: string, description: string): JsonObject => ({
  name,
  in: "path",
  required: true,
  description,
  schema: { type: "string" }
})

const text = { type: "string" }
const listParameters: ReadonlyArray<JsonObject> = [
  query(
    "labelSelector",
    text,
    "Selects objects by their labels: =, ==, !=, in (…), notin (…), key and !key, comma-separated."
  ),
  query("fieldSelector", text, "Selects objects by fields, at least metadata.name and metadata.namespace."),
  query("limit", { type: "integer" }, "The most objects to return; the rest is reached with continue."),
  query("continue", text, "The continue token of the previous page."),
  query(
    "resourceVersion",
    text,
    "For a watch, the resourceVersion to start after; unset or 0 starts with the current objects."
  ),
  query("watch", { type: "boolean" }, "Stream added, modified and deleted events instead of returning a list."),
  query("timeoutSeconds", { type: "integer" }, "Closes a watch after this many seconds."),
  query("allowWatchBookmarks", { type: "boolean" }, "Lets a watch send BOOKMARK events.")
]
const dryRun = query("dryRun", text, "All: validate and answer with the would-be object without persisting it.")
const fieldValidation = query(
  "fieldValidation",
  text,
  "Ignore, Warn or Strict: how unknown or duplicate fields in the body are treated. kubectl sends Strict."
)
const fieldManager = query("fieldManager", text, "The name of the actor making the change, recorded in managedFields.")
const force = query("force", { type: "boolean" }, "For apply patches: take over fields owned by other managers.")
const writeHeaders: ReadonlyArray<JsonObject> = [
  header(
    "Idempotency-Key",
    "Makes the request retry-safe: a retry with the same key and payload reuses the first outcome."
  ),
  header(
    "If-Match",
    "Applies the write only if the current object still has this ETag. On a create: the ETag of a dry run of the same body, which binds its estimate's rate; the create is admitted after validUntil and never placed more than 10 % above that rate (PriceConsentRequired when it would be now)."
  )
]
const writeParameters: ReadonlyArray<JsonObject> = [dryRun, fieldValidation, fieldManager, ...writeHeaders]
// fieldValidation on PATCH is what tells kubectl to leave validation to the server (kubectl-compat §3).
const patchParameters: ReadonlyArray<JsonObject> = [dryRun, fieldValidation, fieldManager, force, ...writeHeaders]
const deleteParameters: ReadonlyArray<JsonObject> = [dryRun, ...writeHeaders]

const jsonContent = (schema: JsonObject): JsonObject => ({ "application/json": { schema } })
const objectBody = (name: string): JsonObject => ({ required: true, content: jsonContent(ref(name)) })

const mergePatch = { type: "object", description: "An RFC 7386 JSON merge patch: null deletes a member." }
const jsonPatch = {
  type: "array",
  description: "An RFC 6902 JSON patch.",
  items: {
    type: "object",
    required: ["op", "path"],
    properties: {
      op: { type: "string", enum: ["add", "remove", "replace", "move", "copy", "test"] },
      path: { type: "string" },
      from: { type: "string" },
      value: { description: "Any JSON value." }
    }
  }
}
const applyPatch = { type: "object", description: "A server-side apply configuration (sent as JSON by kubectl)." }
// Never application/strategic-merge-patch+json: kubectl would then send strategic merge patches (kubectl-compat §3).
const patchBody: JsonObject = {
  required: true,
  content: {
    "application/merge-patch+json": { schema: mergePatch },
    "application/json-patch+json": { schema: jsonPatch },
    "application/apply-patch+yaml": { schema: applyPatch }
  }
}
// The spec's status write path is PUT and merge PATCH; JSON patch works there too (kubectl patch --subresource=status).
const statusPatchBody: JsonObject = {
  required: true,
  content: {
    "application/merge-patch+json": { schema: mergePatch },
    "application/json-patch+json": { schema: jsonPatch }
  }
}

const okResponse = (description: string, name: string): JsonObject => ({ description, content: jsonContent(ref(name)) })
const errorResponse: JsonObject = {
  description: "An error, as a Status object (spec: Errors).",
  content: jsonContent(ref("Status"))
}

/** What distinguishes one operation of a resource from another. */
interface OperationShape {
  readonly action: "get" | "list" | "post" | "put" | "patch" | "delete"
  /** Kubernetes' operationId verb: list, create, read, replace, patch, delete. */
  readonly verb: string
  readonly status?: boolean
  readonly allNamespaces?: boolean
  readonly description: string
  readonly parameters: ReadonlyArray<JsonObject>
  readonly requestBody?: JsonObject
  readonly responses: JsonObject
}

/**
 * One operation object. operationIds follow Kubernetes (`createNamespacedJob`, `listJobForAllNamespaces`,
 * `patchNamespacedJobStatus`), and every operation carries `x-kubernetes-group-version-kind`, which kubectl
 * requires on PATCH operations to find the fieldValidation parameter (kubectl-compat §3).
 */
const operationObject = (resource: PathResource, shape: OperationShape): JsonObject => {
  const namespaced = resource.scope === "Namespaced" && shape.allNamespaces !== true ? "Namespaced" : ""
  const suffix = `${shape.status === true ? "Status" : ""}${shape.allNamespaces === true ? "ForAllNamespaces" : ""}`
  return {
    operationId: `${shape.verb}${namespaced}${resource.kind}${suffix}`,
    description: shape.description,
    parameters: shape.parameters,
    ...(shape.requestBody === undefined ? {} : { requestBody: shape.requestBody }),
    responses: { ...shape.responses, default: errorResponse },
    "x-kubernetes-action": shape.action,
    "x-kubernetes-group-version-kind": { group: resource.group, version: resource.version, kind: resource.kind }
  }
}

/** A path item from its operations by HTTP method; undefined when the resource serves none of them. */
const pathItem = (parameters: ReadonlyArray<JsonObject>, operations: JsonObject): JsonObject | undefined =>
  Object.keys(operations).length === 0
    ? undefined
    : { ...(parameters.length === 0 ? {} : { parameters }), ...operations }

const when = (
  condition: boolean,
  method: string,
  operation: () => JsonObject
): JsonObject => (condition ? { [method]: operation() } : {})

/** The collection path: list (or watch) and create. */
const collectionOperations = (resource: PathResource, schema: string): JsonObject => {
  const { kind, operations } = resource
  return {
    ...when(operations.has("list"), "get", () =>
      operationObject(resource, {
        action: "list",
        verb: "list",
        description: `List or watch objects of kind ${kind}.`,
        parameters: listParameters,
        responses: { "200": okResponse("OK", `${schema}List`) }
      })),
    ...when(operations.has("create"), "post", () =>
      operationObject(resource, {
        action: "post",
        verb: "create",
        description: `Create a ${kind}.`,
        parameters: writeParameters,
        requestBody: objectBody(schema),
        responses: { "200": okResponse("OK (dry run)", schema), "201": okResponse("Created", schema) }
      }))
  }
}

/** The object path: read, replace, patch and delete. */
const itemOperations = (resource: PathResource, schema: string): JsonObject => {
  const { kind, operations } = resource
  const ok = { "200": okResponse("OK", schema) }
  return {
    ...when(operations.has("get"), "get", () =>
      operationObject(resource, {
        action: "get",
        verb: "read",
        description: `Read the specified ${kind}.`,
        parameters: [],
        responses: ok
      })),
    ...when(operations.has("replace"), "put", () =>
      operationObject(resource, {
        action: "put",
        verb: "replace",
        description: `Replace the specified ${kind}.`,
        parameters: writeParameters,
        requestBody: objectBody(schema),
        responses: ok
      })),
    ...when(operations.has("patch"), "patch", () =>
      operationObject(resource, {
        action: "patch",
        verb: "patch",
        description: `Partially update the specified ${kind}.`,
        parameters: patchParameters,
        requestBody: patchBody,
        responses: { ...ok, "201": okResponse("Created (server-side apply)", schema) }
      })),
    ...when(operations.has("delete"), "delete", () =>
      operationObject(resource, {
        action: "delete",
        verb: "delete",
        description: `Delete the specified ${kind}.`,
        parameters: deleteParameters,
        responses: ok
      }))
  }
}

/** The status subresource: read, and replace and patch when the kind's status is writable. */
const statusOperations = (resource: PathResource, schema: string): JsonObject => {
  const { kind, operations } = resource
  const ok = { "200": okResponse("OK", schema) }
  const writable = operations.has("getStatus") && operations.has("writeStatus")
  return {
    ...when(operations.has("getStatus"), "get", () =>
      operationObject(resource, {
        action: "get",
        verb: "read",
        status: true,
        description: `Read the status of the specified ${kind}.`,
        parameters: [],
        responses: ok
      })),
    ...when(writable, "put", () =>
      operationObject(resource, {
        action: "put",
        verb: "replace",
        status: true,
        description: `Replace the status of the specified ${kind}.`,
        parameters: writeParameters,
        requestBody: objectBody(schema),
        responses: ok
      })),
    ...when(writable, "patch", () =>
      operationObject(resource, {
        action: "patch",
        verb: "patch",
        status: true,
        description: `Partially update the status of the specified ${kind}.`,
        parameters: patchParameters,
        requestBody: statusPatchBody,
        responses: ok
      }))
  }
}

/** The all-projects list of a namespaced kind. */
const allNamespacesOperations = (resource: PathResource, schema: string): JsonObject =>
  when(resource.scope === "Namespaced" && resource.operations.has("listAll"), "get", () =>
    operationObject(resource, {
      action: "list",
      verb: "list",
      allNamespaces: true,
      description: `List or watch objects of kind ${resource.kind} in every project.`,
      parameters: listParameters,
      responses: { "200": okResponse("OK", `${schema}List`) }
    }))

const namespaceParameter = pathParameter("namespace", "The project (namespace) of the object.")
const nameParameter = pathParameter("name", "The name of the object.")

/**
 * Every path of one resource (spec: Endpoints, Generic operations): namespaced kinds under
 * `<root>/namespaces/{namespace}/<plural>` plus the all-projects list `<root>/<plural>`, cluster-scoped kinds
 * without the namespaces segment.
 */
const resourcePaths = (resource: PathResource, schema: string): ReadonlyArray<readonly [string, JsonObject]> => {
  const namespaced = resource.scope === "Namespaced"
  const collection = `${resource.root}${namespaced ? "/namespaces/{namespace}" : ""}/${resource.plural}`
  const scopeParameters = namespaced ? [namespaceParameter] : []
  const items: ReadonlyArray<readonly [string, JsonObject | undefined]> = [
    [collection, pathItem(scopeParameters, collectionOperations(resource, schema))],
    [`${collection}/{name}`, pathItem([...scopeParameters, nameParameter], itemOperations(resource, schema))],
    [`${collection}/{name}/status`, pathItem([...scopeParameters, nameParameter], statusOperations(resource, schema))],
    // The all-projects path of a namespaced kind; for cluster-scoped kinds it is the collection path itself.
    ...(namespaced
      ? [[`${resource.root}/${resource.plural}`, pathItem([], allNamespacesOperations(resource, schema))] as const]
      : [])
  ]
  return items.flatMap(([path, item]) => (item === undefined ? [] : [[path, item] as const]))
}

const envelopeProperties = (group: string, version: string): JsonObject => ({
  apiVersion: {
    type: "string",
    description: `The group version of the object: ${group === "" ? version : `${group}/${version}`}.`
  },
  kind: { type: "string", description: "The kind of the object, in CamelCase." }
})

/** The List schema of a kind: the spec's list envelope (Object envelope) with items of that kind. */
const listSchema = (group: string, version: string, kind: string, schema: string): JsonObject => ({
  type: "object",
  description: `A list of ${kind} objects.`,
  properties: {
    ...envelopeProperties(group, version),
    metadata: describedRef("ListMeta", "Standard list metadata."),
    items: { type: "array", description: `The ${kind} objects.`, items: ref(schema) }
  },
  required: ["items"],
  "x-kubernetes-group-version-kind": [{ group, version, kind: `${kind}List` }]
})

/**
 * The schema of a kind's object. `x-kubernetes-group-version-kind` is how `kubectl explain` finds it
 * (kubectl-compat §3), and `spec` is required on write for kinds that have one (spec: Object envelope).
 */
const kindSchema = (group: string, info: KindInfo, schemas: ReturnType<KindSchemas>): JsonObject => ({
  type: "object",
  description: info.description,
  properties: {
    ...envelopeProperties(group, info.version),
    metadata: describedRef("ObjectMeta", "Standard object metadata."),
    ...(info.hasSpec ? { spec: schemas.spec } : {}),
    status: schemas.status
  },
  ...(info.hasSpec ? { required: ["spec"] } : {}),
  "x-kubernetes-group-version-kind": [{ group, version: info.version, kind: info.kind }]
})

/** The components every document shares: object and list metadata and the Status error body. */
const sharedSchemas = (): JsonObject => ({
  ObjectMeta: objectMetaSchema(),
  ListMeta: listMetaSchema,
  Status: statusSchema,
  StatusDetails: statusDetailsSchema,
  StatusCause: statusCauseSchema
})

/**
 * The OpenAPI 3.0.3 document of one group version (GET /openapi/v3/apis/{group}/{version}): a path for every
 * operation each kind of that version serves, and components holding each kind's schema and list schema
 * (`dev.nodus.v1.Job`, `dev.nodus.v1.JobList`), ObjectMeta, ListMeta, Status, StatusDetails and StatusCause; and the
 * operations the kinds' registrations add (`operations`: their subresources, src/kinds/Registry.ts).
 */
export const document = (
  group: string,
  version: Version,
  schemas: KindSchemas,
  operations: ReadonlyArray<KindOperations>
): JsonObject => {
  const paths: Array<readonly [string, JsonObject]> = []
  const components: Array<readonly [string, Json]> = []
  for (const info of kindsIn(version)) {
    const name = schemaName(group, version, info.kind)
    const kindSchemas = schemas(info)
    paths.push(...resourcePaths(pathResourceOf(group, info), name))
    components.push(...Object.entries(kindSchemas.definitions ?? {}))
    components.push([name, kindSchema(group, info, kindSchemas)], [
      `${name}List`,
      listSchema(group, version, info.kind, name)
    ])
  }
  // The sim backend's test clock lives beside the v1 kinds (docs/simulator.md), and each kind's subresources beside
  // its version's generic operations.
  if (version === "v1") {
    paths.push(...clockPaths(group))
    components.push(...Object.entries(clockSchemas(group)))
  }
  for (const kind of operations.filter((entry) => entry.version === version)) {
    paths.push(...kind.paths(group))
    components.push(...Object.entries(kind.schemas(group)))
  }
  return {
    openapi: "3.0.3",
    info: { title: "nodus", version },
    paths: Object.fromEntries(paths),
    components: { schemas: { ...Object.fromEntries(components), ...sharedSchemas() } }
  }
}

/** The Namespace schema: a project stub whose status.phase is Active (kubectl-compat §2). */
const namespaceSchema: JsonObject = {
  type: "object",
  description: namespaceResource.description,
  properties: {
    ...envelopeProperties("", "v1"),
    metadata: describedRef("ObjectMeta", "Standard object metadata."),
    spec: {
      type: "object",
      description: "The namespace's specification.",
      properties: {
        finalizers: { type: "array", items: { type: "string" }, description: "Finalizers of the namespace." }
      }
    },
    status: {
      type: "object",
      description: "The namespace's observed state.",
      properties: { phase: { type: "string", description: "Active or Terminating." } }
    }
  },
  "x-kubernetes-group-version-kind": [{ group: "", version: "v1", kind: "Namespace" }]
}

const timeProperty = (description: string): JsonObject => ({ type: "string", format: "date-time", description })

/**
 * The core/v1 Event as nodus records it (src/core/meta/Events.ts, docs/simulator.md): Kubernetes' fields, read-only.
 */
const eventSchema: JsonObject = {
  type: "object",
  description: eventKind.description,
  properties: {
    ...envelopeProperties("", "v1"),
    metadata: describedRef("ObjectMeta", "Standard object metadata."),
    involvedObject: {
      type: "object",
      description: "The object the event is about.",
      properties: Object.fromEntries(
        ["apiVersion", "kind", "name", "namespace", "uid"].map((
          field
        ) => [field, { type: "string", description: `The object's ${field}.` }])
      )
    },
    reason: { type: "string", description: "Why it happened, in CamelCase (e.g. Running, Preempted, Completed)." },
    message: { type: "string", description: "What happened, for humans." },
    type: { type: "string", description: "Normal or Warning." },
    count: {
      type: "integer",
      format: "int32",
      description: "How many times it happened (identical events are aggregated)."
    },
    firstTimestamp: timeProperty("When it first happened."),
    lastTimestamp: timeProperty("When it last happened."),
    eventTime: timeProperty("When it first happened, in microseconds."),
    source: {
      type: "object",
      description: "Who reported it.",
      properties: { component: { type: "string", description: "The component, e.g. nodus-runtime." } }
    },
    reportingComponent: { type: "string", description: "The component that reported it." },
    reportingInstance: { type: "string", description: "The instance of that component." }
  },
  "x-kubernetes-group-version-kind": [{ group: "", version: "v1", kind: "Event" }]
}

/**
 * The OpenAPI 3.0.3 document of the core group (GET /openapi/v3/api/v1): the namespaces and events paths and the
 * `io.k8s.api.core.v1.Namespace` and `…Event` schemas, so that kubectl can apply and explain Namespace manifests.
 */
export const coreDocument = (): JsonObject => {
  const name = schemaName("", "v1", namespaceResource.kind)
  const resource: PathResource = { ...namespaceResource, group: "", root: "/api/v1" }
  const eventName = schemaName("", "v1", eventKind.kind)
  const events: PathResource = { ...eventKind, group: "", root: "/api/v1" }
  return {
    openapi: "3.0.3",
    info: { title: "nodus", version: "v1" },
    paths: Object.fromEntries([...resourcePaths(resource, name), ...resourcePaths(events, eventName)]),
    components: {
      schemas: {
        [name]: namespaceSchema,
        [`${name}List`]: listSchema("", "v1", namespaceResource.kind, name),
        [eventName]: eventSchema,
        [`${eventName}List`]: listSchema("", "v1", eventKind.kind, eventName),
        ...sharedSchemas()
      }
    }
  }
}

const listMetaSchema: JsonObject = {
  type: "object",
  description: "Metadata of a list (spec: Object envelope, list envelope).",
  properties: {
    continue: {
      type: "string",
      description: "Set when more items exist: pass it as the continue parameter to get the next page."
    },
    remainingItemCount: {
      type: "integer",
      format: "int64",
      description: "How many items follow this page, when known."
    },
    resourceVersion: {
      type: "string",
      description: "The resourceVersion the list was read at; a watch can start from it."
    },
    selfLink: { type: "string", description: "Deprecated; not set." },
    shardInfo: {
      type: "object",
      description: "The shard this list covers.",
      required: ["selector"],
      properties: { selector: { type: "string", description: "The shard selector." } }
    }
  }
}

const statusCauseSchema: JsonObject = {
  type: "object",
  description: "One cause of an error, such as one invalid field.",
  properties: {
    field: { type: "string", description: "The path of the field at fault, e.g. spec.parallelism." },
    message: { type: "string", description: "A human-readable description of the cause." },
    reason: { type: "string", description: "A machine-readable description of the cause." }
  }
}

const statusDetailsSchema: JsonObject = {
  type: "object",
  description: "Extended data about an error.",
  properties: {
    causes: { type: "array", items: ref("StatusCause"), description: "Every cause of the error." },
    group: { type: "string", description: "The group of the resource concerned." },
    kind: { type: "string", description: "The resource (plural) or kind concerned." },
    name: { type: "string", description: "The name of the object concerned." },
    uid: { type: "string", description: "The uid of the object concerned." },
    retryAfterSeconds: { type: "integer", format: "int32", description: "How long to wait before retrying." }
  }
}

// Spec: Errors, Status body, with its three extensions docs, fix and requestId.
const statusSchema: JsonObject = {
  type: "object",
  description: "The body of every error response (spec: Errors).",
  properties: {
    apiVersion: { type: "string", description: "v1." },
    kind: { type: "string", description: "Status." },
    code: { type: "integer", format: "int32", description: "The HTTP status code." },
    status: { type: "string", description: "Success or Failure." },
    reason: { type: "string", description: "One of the registered error codes (spec: Errors, Registered codes)." },
    message: { type: "string", description: "A human-readable description of the error." },
    details: describedRef("StatusDetails", "Extended data about the error."),
    metadata: describedRef("ListMeta", "Standard list metadata."),
    docs: { type: "string", description: "The URL of the error code's documentation page." },
    fix: { type: "string", description: "What to do next, e.g. a command to run or the field to change." },
    requestId: { type: "string", description: "Identifies the request for support." }
  }
}

// Descriptions of ObjectMeta's fields, after Kubernetes' own; the effect Schema carries none.
const objectMetaDescriptions: Readonly<Record<string, string>> = {
  name: "Unique within a project (namespace) for a kind; a lowercase RFC 1123 subdomain. Cannot be updated.",
  generateName: "A prefix the server completes with random characters to make a unique name, when name is not set.",
  namespace: "The project (namespace) the object lives in; empty for cluster-scoped kinds. Cannot be updated.",
  uid: "Unique in time and space, set by the server on create. Read-only.",
  resourceVersion:
    "Opaque version of the object, changed on every write; used for optimistic concurrency and watches. Read-only.",
  generation: "A sequence number of the desired state, bumped when spec changes. Read-only.",
  creationTimestamp: "When the object was created, RFC 3339. Read-only.",
  deletionTimestamp: "When the object will be deleted, RFC 3339; set when deletion was requested. Read-only.",
  deletionGracePeriodSeconds: "Seconds allowed for graceful termination before the object is removed. Read-only.",
  labels: "String keys and values used to organize and select objects (label selectors).",
  annotations: "String keys and values for arbitrary metadata, stored verbatim and not used for selection.",
  finalizers: "Must be empty before the object is removed from the store.",
  ownerReferences: "Objects this object depends on; at most one may be the managing controller.",
  managedFields: "Which manager owns which fields, recorded by writes with a fieldManager.",
  selfLink: "Deprecated; not set."
}

// Labels and annotations are maps of string to string (spec: Object envelope). Their key grammar has no JSON Schema
// form, so the generator widens the values to anything; the spec's value type is restored here.
const stringMaps = new Set(["labels", "annotations"])

const describeProperty = (name: string, property: Json): Json => {
  if (!isObject(property)) return property
  const values = stringMaps.has(name) ? { additionalProperties: { type: "string" } } : {}
  const description = objectMetaDescriptions[name]
  return { ...property, ...values, ...(description === undefined ? {} : { description }) }
}

/**
 * The components schema of ObjectMeta, generated from the `ObjectMetaInput` effect Schema through
 * `Schema.toJsonSchemaDocument`, `JsonSchema.toDocumentDraft04` and `toOpenApi30`, the path full kind schemas will
 * take, then given a description per field for `kubectl explain`.
 */
export const objectMetaSchema = (): JsonObject => {
  const draft04 = JsonSchema.toDocumentDraft04(Schema.toJsonSchemaDocument(ObjectMetaInput))
  const converted = asJsonObject(toOpenApi30(draft04.schema))
  const properties = isObject(converted["properties"]) ? converted["properties"] : {}
  return {
    ...converted,
    // kubectl explain prints this after the field's own "Standard object metadata.", so it says something else.
    description: "Metadata every stored object has (spec: Object envelope). The server owns uid, resourceVersion, " +
      "generation, creationTimestamp and managedFields.",
    properties: Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name, describeProperty(name, property)])
    )
  }
}

// A broken invariant, not an operating error: the effect generator always emits a JSON object schema.
const asJsonObject = (value: unknown): JsonObject => {
  if (!isJson(value) || !isObject(value)) throw new Error("expected a JSON Schema object")
  return value
}

// ---------------------------------------------------------------------------------------------------------------
// JSON Schema (draft-04 or 2020-12) to the OpenAPI 3.0.3 Schema Object (effect4.md §5). OpenAPI 3.0 knows no
// "null" type, no const, no $defs and no keyword it does not list, and its validator rejects unknown keywords.

type SchemaNode = { readonly [key: string]: unknown }

const isNode = (value: unknown): value is SchemaNode =>
  typeof value === "object" && value !== null && !Array.isArray(value)

// OpenAPI 3.0.3 §4.7.24: the JSON Schema keywords a Schema Object may carry, plus its own; "x-" extensions pass too.
const keptKeywords = new Set([
  "title",
  "multipleOf",
  "maximum",
  "minimum",
  "maxLength",
  "minLength",
  "pattern",
  "maxItems",
  "minItems",
  "uniqueItems",
  "maxProperties",
  "minProperties",
  "enum",
  "type",
  "description",
  "format",
  "default",
  "nullable",
  "discriminator",
  "readOnly",
  "writeOnly",
  "xml",
  "externalDocs",
  "example",
  "deprecated"
])

/**
 * Converts one JSON Schema (draft-04, as `JsonSchema.toDocumentDraft04` emits, or 2020-12) into an OpenAPI 3.0.3
 * Schema Object: `anyOf`/`oneOf` with a `{type: "null"}` member and `type` arrays with "null" become
 * `nullable: true` (a nullable `$ref` is wrapped in `allOf`), `$ref`s to `#/definitions/` or `#/$defs/` point to
 * `#/components/schemas/`, `const` becomes a one-value `enum`, `examples` becomes `example`, numeric
 * `exclusiveMinimum`/`exclusiveMaximum` become the boolean form, `patternProperties` widen to
 * `additionalProperties`, tuple `items` become one schema, and keywords 3.0 lacks (`$schema`, `$id`, `$defs`,
 * `propertyNames`, …) are dropped. Subschemas are converted recursively; values (`enum`, `default`, `example`) and
 * property names are left alone. Convert each entry of a document's definitions separately and put them under
 * components.schemas.
 */
export const toOpenApi30 = (jsonSchema: unknown): unknown => {
  if (jsonSchema === true) return {}
  if (jsonSchema === false) return { not: {} }
  return isNode(jsonSchema) ? convertNode(jsonSchema) : jsonSchema
}

const convertNode = (node: SchemaNode): SchemaNode => {
  const lifted = liftNull(widenPatternProperties(node))
  const entries = Object.entries(lifted).flatMap(([key, value]) => convertKeyword(key, value))
  const converted = Object.fromEntries(entries)
  const enumValues = converted["enum"]
  const withNullable = Array.isArray(enumValues) && enumValues.includes(null)
    ? { ...converted, nullable: true }
    : converted
  return wrapReference(mergeAllOf(withNullable))
}

/**
 * Folds `allOf` members without a $ref into the node when their keywords do not overlap it. The generator puts a
 * checked schema's annotations (description, default) and a key's description in such members, and kubectl explain
 * reads the node's own `type` and `description`, not those inside an allOf.
 */
const mergeAllOf = (node: SchemaNode): SchemaNode => {
  const members = node["allOf"]
  if (!Array.isArray(members)) return node
  const { allOf: _allOf, ...merged } = node
  const kept: Array<unknown> = []
  for (const member of members) {
    const mergeable = isNode(member) && member["$ref"] === undefined &&
      Object.keys(member).every((key) => !(key in merged))
    if (mergeable) Object.assign(merged, member)
    else kept.push(member)
  }
  return kept.length === 0 ? merged : { ...merged, allOf: kept }
}

const isNullSchema = (value: unknown): boolean => isNode(value) && value["type"] === "null"

/**
 * Moves "null" out of a union into `nullable: true`: one remaining member is merged into the node (the node's own
 * annotations win), several stay a union.
 */
const liftNull = (node: SchemaNode): SchemaNode => {
  const type = node["type"]
  if (type === "null") {
    const { type: _null, ...rest } = node
    return { ...rest, nullable: true, enum: [null] }
  }
  if (Array.isArray(type)) return liftNullType(node, type)
  for (const union of ["anyOf", "oneOf"] as const) {
    const members = node[union]
    if (!Array.isArray(members) || !members.some(isNullSchema)) continue
    const { [union]: _union, ...rest } = node
    const others = members.filter((member) => !isNullSchema(member))
    const [only] = others
    // A `true` member (anything) merges as an empty schema.
    if (others.length === 1) return liftNull({ ...(isNode(only) ? only : {}), ...rest, nullable: true })
    return { ...rest, [union]: others, nullable: true }
  }
  return node
}

const liftNullType = (node: SchemaNode, types: ReadonlyArray<unknown>): SchemaNode => {
  const others = types.filter((type) => type !== "null")
  const nullable = others.length < types.length ? { nullable: true } : {}
  const { type: _types, ...rest } = node
  if (others.length === 0) return { ...rest, nullable: true, enum: [null] }
  if (others.length === 1) return { ...rest, type: others[0], ...nullable }
  return { ...rest, anyOf: others.map((type) => ({ type })), ...nullable }
}

// OpenAPI 3.0 cannot constrain key names, so pattern-keyed members are described by additionalProperties.
const widenPatternProperties = (node: SchemaNode): SchemaNode => {
  const patterns = node["patternProperties"]
  if (!isNode(patterns)) return node
  const { patternProperties: _patterns, ...rest } = node
  const schemas = Object.values(patterns)
  if (rest["additionalProperties"] !== undefined || schemas.length === 0) return rest
  return { ...rest, additionalProperties: schemas.length === 1 ? schemas[0] : { anyOf: schemas } }
}

const convertKeyword = (key: string, value: unknown): ReadonlyArray<readonly [string, unknown]> => {
  if (key.startsWith("x-")) return [[key, value]]
  switch (key) {
    case "$ref":
      return typeof value === "string" ? [[key, value.replace(/^#\/(definitions|\$defs)\//u, schemaPrefix)]] : []
    case "const":
      return [["enum", [value]]]
    case "examples":
      return Array.isArray(value) && value.length > 0 ? [["example", value[0]]] : []
    case "exclusiveMinimum":
      return exclusiveBound("minimum", key, value)
    case "exclusiveMaximum":
      return exclusiveBound("maximum", key, value)
    case "required":
      return Array.isArray(value) && value.length > 0 ? [[key, value]] : []
    case "properties":
      return isNode(value) ? [[key, mapValues(value, toOpenApi30)]] : []
    case "additionalProperties":
      return [[key, typeof value === "boolean" ? value : toOpenApi30(value)]]
    case "items":
      return [[key, Array.isArray(value) ? tupleItems(value) : toOpenApi30(value)]]
    case "allOf":
    case "anyOf":
    case "oneOf":
      return Array.isArray(value) ? [[key, value.map(toOpenApi30)]] : []
    case "not":
      return [[key, toOpenApi30(value)]]
    default:
      return keptKeywords.has(key) ? [[key, value]] : []
  }
}

// Draft-06 and later write exclusive bounds as numbers; draft-04 and OpenAPI 3.0 as a boolean beside the bound.
const exclusiveBound = (
  bound: string,
  key: string,
  value: unknown
): ReadonlyArray<
  readonly [string, unknown]
> => (typeof value === "number" ? [[bound, value], [key, true]] : [[key, value]])

// OpenAPI 3.0 items is one schema; a tuple's positions become alternatives (minItems/maxItems keep the length).
const tupleItems = (
  items: ReadonlyArray<unknown>
): unknown => (items.length === 1 ? toOpenApi30(items[0]) : { anyOf: items.map(toOpenApi30) })

const mapValues = (node: SchemaNode, convert: (value: unknown) => unknown): SchemaNode =>
  Object.fromEntries(Object.entries(node).map(([key, value]) => [key, convert(value)]))

// Siblings of a $ref are ignored in OpenAPI 3.0, so a reference with annotations or nullable goes into an allOf.
const wrapReference = (node: SchemaNode): SchemaNode => {
  const reference = node["$ref"]
  if (typeof reference !== "string" || Object.keys(node).length === 1) return node
  const { $ref: _reference, ...rest } = node
  const allOf = Array.isArray(rest["allOf"]) ? rest["allOf"] : []
  return { ...rest, allOf: [{ $ref: reference }, ...allOf] }
}
