/**
 * The generic operations of the resource API (spec: Generic operations, Create semantics), for every kind alike:
 * get, list, create, replace, patch (merge, JSON, apply), delete, and the status subresource. Each operation admits
 * the request with the kind's schema, applies the per-write rules of core/meta/Strategy.ts, and commits through the store
 * port in one atomic commit, retried on conflicts where Kubernetes retries them (patches without a resourceVersion).
 *
 * HTTP is not here: handlers in apiserver/http translate requests into these calls and results into responses.
 */
import { Clock, Context, Effect, Layer, Option, Result, Semaphore, Stream } from "effect"
import { priceBoundAnnotation } from "../core/billing/PriceBound.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { admit, type Admitted, type FieldValidation } from "../core/meta/Admission.ts"
import {
  alreadyExists,
  ApiError,
  badRequest,
  conflict,
  fieldInvalid,
  invalid,
  notFound,
  subjectOf
} from "../core/meta/ApiError.ts"
import { eventFieldLabels, eventFields } from "../core/meta/Events.ts"
import * as FieldSelector from "../core/meta/FieldSelector.ts"
import * as JsonPatch from "../core/meta/JsonPatch.ts"
import { byKindName, eventKind, type ResourceRef } from "../core/meta/Kinds.ts"
import * as LabelSelector from "../core/meta/LabelSelector.ts"
import * as MergePatch from "../core/meta/MergePatch.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import * as ServerSideApply from "../core/meta/ServerSideApply.ts"
import * as Strategy from "../core/meta/Strategy.ts"
import { definitionOf } from "../core/schemas/Definitions.ts"
import { checkUpdate, normalizeSpec, type ServerSettings } from "../core/schemas/Kind.ts"
import { applySchema, namespaceSchema, objectSchema, statusSchema } from "../core/schemas/KindSchemas.ts"
import {
  type CommitFailed,
  type Committed,
  type ListedText,
  type ListQuery,
  type ObjectKey,
  Store,
  type StoreError,
  type WriteOp
} from "../store/Store.ts"
import { AdmissionPlugins, prepareAll, reviewAll } from "./AdmissionPlugins.ts"
import { ApiConfig } from "./ApiConfig.ts"
import type { Principal } from "./Auth.ts"
import { Ids } from "./Ids.ts"

export type PatchType = "merge" | "json" | "apply"

export interface WriteOptions {
  readonly dryRun: boolean
  readonly fieldValidation: FieldValidation
  readonly fieldManager: string
  /** `If-Match`: the ETag the caller last saw (an object's, or a dry run's for a create). */
  readonly ifMatch?: string
  /**
   * Creates only: ops committed atomically with the new object, given the admission warnings (op 0 of that commit is
   * always the create itself). The idempotency record of the request rides on this.
   */
  readonly commitWith?: (warnings: ReadonlyArray<string>) => ReadonlyArray<WriteOp>
  /** Kind-specific authorization of the admitted object (e.g. ServiceAccount scopes). */
  readonly authorizeObject?: (object: JsonObject) => ApiError | undefined
  /** Server-side apply only: take over conflicting fields (kubectl --force-conflicts). */
  readonly force?: boolean
  /** How managedFields record the write: Apply for server-side apply. */
  readonly operation?: "Apply" | "Update"
  /** Server-side apply: the configuration as applied, which the manager owns exactly (defaults are not its fields). */
  readonly applied?: JsonObject
  /** The caller, for admission plugins (AdmissionPlugins.ts CreateRequest); absent for the server's own writes. */
  readonly principal?: Principal
  /**
   * The server's own creates only: the object's first status, in the create's commit (an Attempt is created with where
   * it runs). A client's create never sets status (the strategy drops it).
   */
  readonly status?: JsonObject
}

/** A write decided and not committed yet (Resources.decideCreate, decideStatus; committed by commitDecided). */
export interface DecidedWrite {
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  readonly name: string
  /** The object's own op first (none when nothing changes), then what commits with it. */
  readonly ops: ReadonlyArray<WriteOp>
  /** The object as it will be (or is, when nothing changes). */
  readonly object: ResourceObject
}

export interface WriteResult {
  readonly object: ResourceObject
  readonly warnings: ReadonlyArray<string>
  /** true when the write created the object (HTTP 201). */
  readonly created: boolean
  /** A dry-run create's ETag, quoting its estimate's price (PriceConsent.ts); other writes answer `etagOf(object)`. */
  readonly etag?: string
}

export interface DeleteOptions {
  readonly dryRun: boolean
  readonly propagationPolicy: "Background" | "Orphan"
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string }
  readonly ifMatch?: string
  /** The server's own deletes: ops committed with the delete (a controller's fence: runtime/Ownership.ts). */
  readonly commitWith?: () => ReadonlyArray<WriteOp>
}

export interface ListOptions {
  readonly labelSelector?: string
  readonly fieldSelector?: string
  /** At most this many objects (at most `listPageSize`: a larger limit is served as that, with a continue token). */
  readonly limit?: number
  readonly continue?: string
  /**
   * The client's `resourceVersion`: checked (see `parseResourceVersion`), then unused, since every list reads the
   * latest state, which is never older than a version the store issued.
   */
  readonly resourceVersion?: string
}

/** A page of a list: its objects (or, from `listText`, their stored JSON texts). */
export interface ListResult<A = ResourceObject> {
  readonly items: ReadonlyArray<A>
  readonly resourceVersion: string
  readonly continue?: string
  readonly remainingItemCount?: number
}

/** A list of any length, read a page at a time (`listPages`). */
export interface PagedList<A = ResourceObject> {
  /** The list's resourceVersion: the first page's, which every page reports. */
  readonly resourceVersion: string
  /** The selected objects page by page: the first page is already read, each later one is read when it is pulled. */
  readonly pages: Stream.Stream<ReadonlyArray<A>, ApiError>
}

/** How often a patch or delete without a resourceVersion is retried when another writer got there first. */
export const patchConflictRetriesMax = 5

/**
 * How often a create whose name comes from `generateName` is made again with a new suffix when the name it drew is
 * taken, as Kubernetes' API server retries it: five characters of 27 collide, among a few thousand objects of a kind,
 * often enough to fail a run of `.remote()` calls (seen once in 2,000 in bench:functions).
 */
export const generatedNameRetriesMax = 7

/**
 * `remainingItemCount` is exact up to this many remaining objects and left out beyond (the field is optional, and
 * Kubernetes leaves it out too when it cannot count cheaply): counting costs a walk over everything after the page.
 */
export const remainingItemCountMax = 10_000

/** Store scans made per page while filtering in memory (selectors a store cannot evaluate). */
const scanChunkSize = 500

/**
 * The most objects one list page holds, so that a list never holds more: a larger `limit` is served as this many with
 * a continue token (the API conventions let a server return fewer items than the limit), and a list without a limit
 * is read and written this many at a time.
 */
export const listPageSize = 500

/**
 * Page reads of paged lists (listPages) that run at once, across every list and watch: each such list goes on for as
 * long as its client takes to read it, and twenty of them reading at will would hold every store connection (the
 * PostgreSQL pool has 16), so that a GET queued behind them for hundreds of milliseconds.
 */
const pagedReadsMax = 4

const uint64Max = 2n ** 64n - 1n

/**
 * A resourceVersion a client sent: an unsigned 64-bit integer in decimal, as Kubernetes reads it (strconv.ParseUint);
 * anything else is 400 BadRequest. A version above 2^53 loses digits as a number but stays above every version this
 * store issues, which is all a watch or list compares it for.
 */
export const parseResourceVersion = (value: string): Result.Result<number, ApiError> => {
  const digits = value.replace(/^0+(?=[0-9])/u, "")
  return /^[0-9]{1,20}$/u.test(digits) && BigInt(digits) <= uint64Max
    ? Result.succeed(Number(digits))
    : Result.fail(badRequest(`invalid resourceVersion "${value}": must be an unsigned 64-bit integer in decimal`))
}

export const isNamespaceKind = (ref: ResourceRef): boolean => ref.group === "" && ref.info.plural === "namespaces"

const stringAt = (object: JsonObject, ...path: ReadonlyArray<string>): string | undefined => {
  let current: Json | undefined = object
  for (const segment of path) current = isObject(current) ? current[segment] : undefined
  return typeof current === "string" ? current : undefined
}

const keyOf = (ref: ResourceRef, namespace: string | undefined, name: string): ObjectKey => ({
  resource: ref.info.plural,
  namespace: namespace ?? "",
  name
})

const namespaceKey = (namespace: string): ObjectKey => ({ resource: "namespaces", namespace: "", name: namespace })

const targetOf = (ref: ResourceRef, namespace: string | undefined): Strategy.Target => ({
  apiVersion: ref.apiVersion,
  kind: ref.info.kind,
  plural: ref.info.plural,
  group: ref.group,
  namespace: ref.info.scope === "Namespaced" ? namespace : undefined
})

/** An object's ETag: its resourceVersion, quoted (RFC 9110 §8.8.3). */
export const etagOf = (object: ResourceObject): string => `"${object.metadata.resourceVersion}"`

/**
 * The price bound annotation is the server's (docs/billing.md, "Price consent"): whatever a request body carries, the
 * object gets `bound` (undefined: none). A create passes none, so only the consent of its If-Match sets one; an update
 * passes the stored one (spec: Create semantics 2 — "never placed above"), so a `kubectl replace -f` of the original
 * manifest does not drop it, nor an edit raise it.
 */
const withBoundAnnotation = (object: JsonObject, group: string, bound: string | undefined): JsonObject => {
  const key = priceBoundAnnotation(group)
  const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
  const annotations = isObject(metadata["annotations"]) ? metadata["annotations"] : {}
  if (annotations[key] === bound) return object
  const { [key]: _sent, ...rest } = annotations
  return { ...object, metadata: { ...metadata, annotations: bound === undefined ? rest : { ...rest, [key]: bound } } }
}

const storeFailure = (error: StoreError): ApiError =>
  new ApiError({ code: "Unavailable", message: `the store is unavailable: ${error.message}`, retryAfterSeconds: 1 })

const commitFailure =
  (ref: ResourceRef, name: string, namespace: string | undefined) => (failure: CommitFailed): ApiError => {
    switch (failure.reason) {
      case "AlreadyExists":
        return alreadyExists(subjectOf(ref, name))
      case "Conflict":
        return conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      case "NotFound":
        // Op 0 is the object; a later Require names the project.
        return failure.index === 0 || namespace === undefined
          ? notFound(subjectOf(ref, name))
          : notFound({ group: "", kind: "namespaces", name: namespace })
      case "Terminating":
        return new ApiError({
          code: "Forbidden",
          message:
            `${ref.info.plural}.${ref.group} "${name}" is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
          subject: subjectOf(ref, name),
          fix: "Wait until the project is gone and create it again, or use another project."
        })
      case "RecordExists":
        return new ApiError({
          code: "RequestInProgress",
          message: "a request with this Idempotency-Key is in progress",
          retryAfterSeconds: 1
        })
    }
  }

interface ListCursor {
  readonly resourceVersion: string
  readonly namespace: string
  readonly name: string
}

/** A continue token's cursor; undefined for a token this server did not make (its version is checked like a client's). */
const decodeContinue = (token: string): ListCursor | undefined => {
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown
    if (!Array.isArray(parsed) || parsed.length !== 3) return undefined
    const [resourceVersion, namespace, name] = parsed as Array<unknown>
    return typeof resourceVersion === "string" && Result.isSuccess(parseResourceVersion(resourceVersion)) &&
        typeof namespace === "string" && typeof name === "string"
      ? { resourceVersion, namespace, name }
      : undefined
  } catch {
    return undefined
  }
}

/**
 * The terms of the selectors the store applies itself (label equalities, a pinned name), and whether any is left for
 * the server to check on the objects (`filtered`).
 */
const pushedDown = (selectors: Selectors) => {
  const labelEquals = LabelSelector.equalityTerms(selectors.labels)
  const name = FieldSelector.pinnedName(selectors.fields)
  const filtered = selectors.labels.requirements.length > labelEquals.length ||
    selectors.fields.requirements.length > (name === undefined ? 0 : 1)
  return { labelEquals, name, filtered }
}

const encodeContinue = (resourceVersion: string, last: { readonly namespace: string; readonly name: string }): string =>
  Buffer.from(JSON.stringify([resourceVersion, last.namespace, last.name])).toString("base64url")

/** Where a list read goes on from: an object's key. */
const objectKey = (object: ResourceObject) => ({
  namespace: object.metadata.namespace ?? "",
  name: object.metadata.name
})

/** What a page is read from: the store's objects, or their stored texts; `key` places an item, `accepts` selects it. */
interface PageSource<A> {
  readonly read: (
    query: ListQuery
  ) => Effect.Effect<
    { readonly items: ReadonlyArray<A>; readonly resourceVersion: number; readonly remaining: number },
    StoreError
  >
  readonly key: (item: A) => { readonly namespace: string; readonly name: string }
  readonly accepts: (item: A) => boolean
}

export interface Selectors {
  readonly labels: LabelSelector.LabelSelector
  readonly fields: FieldSelector.FieldSelector
}

/**
 * The parsed selectors of a list or watch; a malformed one is 400 BadRequest with the parser's words. Events also
 * select on their involved object, as `kubectl describe` does.
 */
export const selectorsOf = (options: ListOptions, ref?: ResourceRef): Result.Result<Selectors, ApiError> => {
  const labels = LabelSelector.parse(options.labelSelector ?? "")
  // The parser's messages are apimachinery's own ("unable to parse requirement: …"), which kubectl users know.
  if (labels._tag === "Err") return Result.fail(badRequest(labels.message))
  const supported = ref?.info === eventKind ? eventFieldLabels : FieldSelector.defaultSupportedFields
  const fields = FieldSelector.parse(options.fieldSelector ?? "", supported)
  if (fields._tag === "Err") return Result.fail(badRequest(fields.message))
  return Result.succeed({ labels: labels.value, fields: fields.value })
}

/** Whether an object passes a list's or watch's selectors. */
export const selects = (selectors: Selectors, object: ResourceObject): boolean =>
  LabelSelector.matches(selectors.labels, object.metadata.labels) &&
  FieldSelector.matches(
    selectors.fields,
    isEvent(object)
      ? eventFields(object)
      : FieldSelector.fieldsOf(object as { metadata: { name: string; namespace?: string }; status?: unknown })
  )

const isEvent = (object: ResourceObject): boolean => object.kind === eventKind.kind && object.apiVersion === "v1"

export class Resources extends Context.Service<Resources, ResourcesShape>()("nodus/apiserver/Resources") {
  static readonly layer = Layer.effect(
    Resources,
    Effect.map(
      Effect.all({ store: Store, ids: Ids, plugins: AdmissionPlugins, config: Effect.serviceOption(ApiConfig) }),
      ({ config, ...services }) =>
        makeOperations({
          ...services,
          serverSettings: {
            developmentWebhooks: Option.isSome(config) && config.value.developmentWebhooks === true,
            hostUserland: Option.isSome(config) && config.value.hostUserland === true
          }
        })
    )
  )
}

/** The generic operations of every kind (spec: Generic operations), as handlers and controllers call them. */
export interface ResourcesShape {
  readonly get: (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string
  ) => Effect.Effect<ResourceObject, ApiError>
  /** One page: everything selected, or with `limit` (at most `listPageSize`) the page at the continue token. */
  readonly list: (
    ref: ResourceRef,
    namespace: string | undefined,
    options: ListOptions
  ) => Effect.Effect<ListResult, ApiError>
  /**
   * Everything selected, from the continue token on, `pageSize` objects (at most `listPageSize`) at a time, each page
   * read when it is pulled; a few such reads run at once across the server (`pagedReadsMax`).
   */
  readonly listPages: (
    ref: ResourceRef,
    namespace: string | undefined,
    options: Omit<ListOptions, "limit">,
    pageSize?: number
  ) => Effect.Effect<PagedList, ApiError>
  /**
   * `list` and `listPages` with each object as the JSON text the store holds, passed through unparsed (a plain JSON
   * list is exactly these texts in its `items`); undefined when a selector must read the objects (one the store does
   * not apply).
   */
  readonly listText: (
    ref: ResourceRef,
    namespace: string | undefined,
    options: ListOptions
  ) => Effect.Effect<ListResult<string> | undefined, ApiError>
  readonly listTextPages: (
    ref: ResourceRef,
    namespace: string | undefined,
    options: Omit<ListOptions, "limit">
  ) => Effect.Effect<PagedList<string> | undefined, ApiError>
  readonly create: (
    ref: ResourceRef,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions
  ) => Effect.Effect<WriteResult, ApiError>
  /**
   * Creates every body or none, in one store commit, in order; a body that fails admission fails the whole request
   * as `itemError(index, error)`. A dry run checks the project, not names (generated names cannot clash).
   */
  readonly createMany: (
    ref: ResourceRef,
    namespace: string | undefined,
    bodies: ReadonlyArray<unknown>,
    options: WriteOptions,
    itemError?: (index: number, error: ApiError) => ApiError
  ) => Effect.Effect<ReadonlyArray<WriteResult>, ApiError>
  /**
   * Replaces the status of every named object or none, in one store commit (a controller writing what one step decided
   * of many objects). Each body is admitted as a status write and must name the object's current resourceVersion; a
   * status that changes nothing writes nothing. Conflict or NotFound of any one fails them all, and so does a failed
   * op of `commitWith` (a controller's fence).
   */
  readonly replaceStatusMany: (
    ref: ResourceRef,
    namespace: string | undefined,
    items: ReadonlyArray<{ readonly name: string; readonly body: unknown }>,
    options: WriteOptions
  ) => Effect.Effect<ReadonlyArray<WriteResult>, ApiError>
  /**
   * A create decided as `create` would (admission, strategy, the kind's review), not committed: its ops, to commit
   * with others (`commitDecided`). For controllers writing what one step decided of several objects.
   */
  readonly decideCreate: (
    ref: ResourceRef,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions
  ) => Effect.Effect<DecidedWrite, ApiError>
  /** A status write decided as `replace(…, "status")` would, not committed (no ops when it changes nothing). */
  readonly decideStatus: (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions
  ) => Effect.Effect<DecidedWrite, ApiError>
  /** Commits decided writes and `extraOps` in one store commit; answers each write's object as committed, in order. */
  readonly commitDecided: (
    writes: ReadonlyArray<DecidedWrite>,
    extraOps: ReadonlyArray<WriteOp>,
    about?: Omit<DecidedWrite, "ops" | "object">
  ) => Effect.Effect<ReadonlyArray<ResourceObject>, ApiError>
  /** PUT of the object or (`subresource` status) of its status. */
  readonly replace: (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions,
    subresource?: "status"
  ) => Effect.Effect<WriteResult, ApiError>
  readonly patch: (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    patchType: PatchType,
    body: unknown,
    options: WriteOptions,
    subresource?: "status"
  ) => Effect.Effect<WriteResult, ApiError>
  readonly remove: (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions
  ) => Effect.Effect<ResourceObject, ApiError>
  /** Whether the project exists (watches and lists in a missing project are NotFound). */
  readonly requireProject: (namespace: string) => Effect.Effect<void, ApiError>
  /** Commits raw ops about one object, with the same error mapping as every operation. */
  readonly commit: (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    ops: ReadonlyArray<WriteOp>
  ) => Effect.Effect<Committed, ApiError>
}

function makeOperations(services: {
  readonly store: Store["Service"]
  readonly ids: Ids["Service"]
  readonly plugins: AdmissionPlugins["Service"]
  /** How the server was started, for the kinds' `serverRules`. */
  readonly serverSettings: ServerSettings
}): ResourcesShape {
  const { store, ids, plugins, serverSettings } = services
  const pagedReads = Semaphore.makeUnsafe(pagedReadsMax)
  const now = Clock.currentTimeMillis

  const read = (key: ObjectKey) => store.get(key).pipe(Effect.mapError(storeFailure))

  const readExisting = (ref: ResourceRef, namespace: string | undefined, name: string) =>
    Effect.flatMap(
      read(keyOf(ref, namespace, name)),
      (found) =>
        Option.match(found, { onNone: () => Effect.fail(notFound(subjectOf(ref, name))), onSome: Effect.succeed })
    )

  const requireProject = (namespace: string) =>
    Effect.flatMap(
      read(namespaceKey(namespace)),
      (found) =>
        Option.isSome(found) ? Effect.void : Effect.fail(notFound({ group: "", kind: "namespaces", name: namespace }))
    )

  /** Commits ops, a failure naming the object of the op that failed (`nameAt` its index). */
  const commitNamed = (
    ref: ResourceRef,
    namespace: string | undefined,
    nameAt: (index: number) => string,
    ops: ReadonlyArray<WriteOp>
  ) =>
    store.commit(ops).pipe(
      Effect.catchTag("CommitFailed", (failure) =>
        Effect.fail(commitFailure(ref, nameAt(failure.index), namespace)(failure))),
      Effect.mapError((error) => (error._tag === "StoreError" ? storeFailure(error) : error))
    )

  const commit = (ref: ResourceRef, namespace: string | undefined, name: string, ops: ReadonlyArray<WriteOp>) =>
    commitNamed(ref, namespace, () => name, ops)

  /** The project must exist and not be terminating for new content to appear in it. */
  const projectGuard = (ref: ResourceRef, namespace: string | undefined): ReadonlyArray<WriteOp> =>
    ref.info.scope === "Namespaced" && namespace !== undefined && !isNamespaceKind(ref)
      ? [{ _tag: "Require", key: namespaceKey(namespace), notDeleting: true }]
      : []

  /** Which schema a body is admitted with: the whole object, a status write, or an apply configuration. */
  type BodyForm = "object" | "status" | "apply"

  const admitBody = (
    ref: ResourceRef,
    body: unknown,
    validation: FieldValidation,
    name: string | undefined,
    form: BodyForm = "object"
  ) =>
    Effect.gen(function*() {
      if (!isObject(body as Json)) return yield* badRequest("the request body must be a JSON object")
      const object = body as JsonObject
      const apiVersion = object["apiVersion"]
      const kind = object["kind"]
      if (typeof apiVersion === "string" && apiVersion !== ref.apiVersion) {
        return yield* badRequest(
          `the API version in the data (${apiVersion}) does not match the expected API version (${ref.apiVersion})`
        )
      }
      if (typeof kind === "string" && kind !== ref.info.kind) {
        return yield* badRequest(`the kind in the data (${kind}) does not match the expected kind (${ref.info.kind})`)
      }
      const schema = isNamespaceKind(ref)
        ? namespaceSchema
        : form === "status"
        ? statusSchema(ref.info)
        : form === "apply"
        ? applySchema(ref.info)
        : objectSchema(ref.info)
      // A create names its object in the body; errors name it as Kubernetes does (Job.nodus.dev "train" is invalid).
      const named = name ?? stringAt(object, "metadata", "name")
      const admitted = yield* Effect.fromResult(admit(schema, object, validation, subjectOf(ref, named), ref.info.kind))
      return form === "object" && !isNamespaceKind(ref) ? yield* normalized(ref, admitted, named) : admitted
    })

  /**
   * Folds a kind's aliases and cross-field defaults into the admitted spec (schemas/<Kind>.ts `normalize`), decoding
   * the result again when they changed it so that the defaults of fields the normalization created apply too; then the
   * kind's completions (`complete`), which need no decoding.
   */
  const normalized = (ref: ResourceRef, admitted: Admitted, name: string | undefined) => {
    const definition = definitionOf(ref.info.kind)
    const spec = admitted.object["spec"]
    if ((definition.normalize === undefined && definition.complete === undefined) || !isObject(spec)) {
      return Effect.succeed(admitted)
    }
    const decodeAgain = (next: JsonObject) =>
      Result.map(
        admit(
          objectSchema(ref.info),
          { ...admitted.object, spec: next },
          "Ignore",
          subjectOf(ref, name),
          ref.info.kind
        ),
        (again) => again.object["spec"] as JsonObject
      )
    return Effect.map(
      Effect.fromResult(normalizeSpec(definition, spec, decodeAgain)),
      (stored): Admitted => ({ object: { ...admitted.object, spec: stored }, warnings: admitted.warnings })
    )
  }

  /** The kind's rules that need the request time (e.g. a Workspace's readyBy lead), on create and update. */
  const checkTimeRules = (
    ref: ResourceRef,
    spec: Json | undefined,
    previous: Json | undefined,
    name: string | undefined
  ) =>
    Effect.gen(function*() {
      const rules = definitionOf(ref.info.kind).timeRules
      if (rules === undefined || !isObject(spec) || isNamespaceKind(ref)) return
      const causes = rules(spec, yield* now, isObject(previous) ? previous : undefined)
      if (causes.length > 0) return yield* invalid(subjectOf(ref, name), causes, ref.info.kind)
    })

  /** The kind's rules that depend on how this server was started (a WebhookEndpoint's development receivers). */
  const checkServerRules = (ref: ResourceRef, spec: Json | undefined, name: string | undefined) => {
    const rules = definitionOf(ref.info.kind).serverRules
    if (rules === undefined || !isObject(spec) || isNamespaceKind(ref)) return Effect.void
    const causes = rules(spec, serverSettings)
    return causes.length === 0 ? Effect.void : Effect.fail(invalid(subjectOf(ref, name), causes, ref.info.kind))
  }

  /** The kind's rules for changes after create (spec: FieldImmutable; maxCostUSD can only be raised). */
  const checkUpdateRules = (ref: ResourceRef, current: ResourceObject, disposition: Strategy.Disposition) => {
    if (disposition._tag !== "Write") return Effect.void
    const broken = checkUpdate(definitionOf(ref.info.kind), current.spec, disposition.object.spec)
    const subject = subjectOf(ref, current.metadata.name)
    if (broken.immutable.length > 0) {
      const fields = broken.immutable.map((cause) => `${cause.field}: ${cause.message}`).join(", ")
      return Effect.fail(
        new ApiError({
          code: "FieldImmutable",
          message: `${ref.info.kind}.${ref.group} "${current.metadata.name}" is invalid: ${fields}`,
          causes: broken.immutable,
          subject,
          fix:
            `Only the fields ${ref.info.kind} lists as mutable can change after create; delete and re-create the object to change ${
              broken.immutable.map((cause) => cause.field).join(", ")
            }.`
        })
      )
    }
    return broken.invalid.length > 0 ? Effect.fail(invalid(subject, broken.invalid, ref.info.kind)) : Effect.void
  }

  const authorize = (options: WriteOptions, admitted: Admitted) => {
    const denied = options.authorizeObject?.(admitted.object)
    return denied === undefined ? Effect.void : Effect.fail(denied)
  }

  const checkIfMatch = (ifMatch: string | undefined, current: ResourceObject) =>
    ifMatch === undefined || ifMatch === "*" || ifMatch === etagOf(current)
      ? Effect.void
      : Effect.fail(
        new ApiError({
          code: "PreconditionFailed",
          message: `If-Match ${ifMatch} does not match the current ETag ${etagOf(current)}`
        })
      )

  /** Namespaces start Active; every other kind starts as admitted. */
  const initialStatus = (ref: ResourceRef, object: ResourceObject): ResourceObject =>
    isNamespaceKind(ref) ? { ...object, status: { phase: "Active" } } : object

  /** The kind's admission plugins before and after the strategy of a create (AdmissionPlugins.ts). */
  const prepareCreate = (
    ref: ResourceRef,
    namespace: string | undefined,
    object: JsonObject,
    principal: Principal | undefined
  ) =>
    prepareAll<ResourceObject, never>(
      plugins.of(ref),
      object,
      (plugin, input) => plugin.prepareCreate?.({ ref, namespace, object: input, principal })
    )

  const prepareUpdate = (
    ref: ResourceRef,
    namespace: string | undefined,
    current: ResourceObject,
    object: JsonObject,
    principal: Principal | undefined
  ) =>
    prepareAll<Strategy.Disposition, never>(
      plugins.of(ref),
      object,
      (plugin, input) => plugin.prepareUpdate?.({ ref, namespace, current, object: input, principal })
    )

  /**
   * The write of an update decided: the kind's store-reading admission, the strategy, the kind's update rules (main
   * resource only), then the commit. Shared by replace, patch and apply.
   */
  const writeUpdate = (
    ref: ResourceRef,
    namespace: string | undefined,
    current: ResourceObject,
    object: JsonObject,
    options: WriteOptions,
    write: { readonly expectedRv: string; readonly subresource?: "status"; readonly applied?: JsonObject }
  ) =>
    Effect.gen(function*() {
      const context = { now: yield* now, fieldManager: options.fieldManager }
      const target = targetOf(ref, namespace)
      if (write.subresource === "status") {
        const disposition = yield* Effect.fromResult(Strategy.updateStatus(target, current, object, context))
        return yield* writeDisposition(ref, namespace, current, disposition, write.expectedRv, {
          dryRun: options.dryRun,
          extraOps: options.commitWith?.([]) ?? []
        })
      }
      yield* checkTimeRules(ref, object["spec"], current.spec, current.metadata.name)
      yield* checkServerRules(ref, object["spec"], current.metadata.name)
      const prepared = yield* prepareUpdate(
        ref,
        namespace,
        current,
        withBoundAnnotation(object, ref.group, current.metadata.annotations?.[priceBoundAnnotation(ref.group)]),
        options.principal
      )
      const decided = yield* Effect.fromResult(
        Strategy.update(
          target,
          current,
          prepared.input,
          context,
          write.applied === undefined ? { operation: "Update" } : { operation: "Apply", applied: write.applied }
        )
      )
      yield* checkUpdateRules(ref, current, decided)
      const { result: disposition, ops } = yield* prepared.finish(decided)
      return yield* writeDisposition(ref, namespace, current, disposition, write.expectedRv, {
        dryRun: options.dryRun,
        extraOps: [...ops, ...(options.commitWith?.([]) ?? [])]
      })
    })

  /**
   * A create admitted and decided but not committed: the schema, the kind's rules and admission plugins, the strategy
   * and the kind's review. `create` commits one, `createMany` many in one commit.
   */
  const decideCreate = (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
    Effect.gen(function*() {
      const admitted = yield* admitBody(ref, body, options.fieldValidation, undefined)
      yield* authorize(options, admitted)
      yield* checkTimeRules(ref, admitted.object["spec"], undefined, stringAt(admitted.object, "metadata", "name"))
      yield* checkServerRules(ref, admitted.object["spec"], stringAt(admitted.object, "metadata", "name"))
      const prepared = yield* prepareCreate(
        ref,
        namespace,
        withBoundAnnotation(admitted.object, ref.group, undefined),
        options.principal
      )
      const made = Strategy.create(targetOf(ref, namespace), prepared.input, {
        now: yield* now,
        fieldManager: options.fieldManager,
        uid: ids.uid(),
        nameSuffix: ids.nameSuffix,
        ...(options.operation === undefined ? {} : { operation: options.operation }),
        ...(options.applied === undefined ? {} : { applied: options.applied })
      })
      const first = initialStatus(ref, yield* Effect.fromResult(made))
      const { result: admittedObject, ops, shownOnce } = yield* prepared.finish(
        options.status === undefined ? first : { ...first, status: options.status }
      )
      // The kind's review (spec: Create semantics — the estimate, price consent, a refusal the estimate foresees).
      const reviewed = yield* reviewAll(plugins.of(ref), {
        ref,
        namespace,
        object: admittedObject,
        dryRun: options.dryRun,
        ifMatch: options.ifMatch
      })
      const key = keyOf(ref, isNamespaceKind(ref) ? undefined : namespace, reviewed.object.metadata.name)
      return {
        object: reviewed.object,
        create: { _tag: "Create", key, object: reviewed.object } satisfies WriteOp,
        ops,
        shownOnce,
        warnings: admitted.warnings,
        etag: reviewed.etag
      }
    })

  /** The stored object as the create answers it: with what its plugins show once (a key's secret). */
  const shown = (stored: ResourceObject, shownOnce: JsonObject | undefined): ResourceObject =>
    shownOnce === undefined
      ? stored
      : { ...stored, status: { ...(isObject(stored.status) ? stored.status : {}), ...shownOnce } }

  /** A body that asks the server to name its object (`generateName` and no name): a taken name is drawn again. */
  const generatesName = (body: unknown): boolean =>
    isObject(body as Json) && stringAt(body as JsonObject, "metadata", "name") === undefined &&
    stringAt(body as JsonObject, "metadata", "generateName") !== undefined

  const retryGeneratedNames = <A>(
    bodies: ReadonlyArray<unknown>,
    once: Effect.Effect<A, ApiError>
  ): Effect.Effect<A, ApiError> =>
    bodies.every(generatesName)
      ? once.pipe(Effect.retry({ times: generatedNameRetriesMax, while: (error) => error.code === "AlreadyExists" }))
      : once

  const create = (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
    retryGeneratedNames([body], createOnce(ref, namespace, body, options))

  const createOnce = (ref: ResourceRef, namespace: string | undefined, body: unknown, options: WriteOptions) =>
    Effect.gen(function*() {
      if (ref.info.scope === "Namespaced" && namespace === undefined) {
        return yield* badRequest("a project (namespace) is required")
      }
      const decided = yield* decideCreate(ref, namespace, body, options)
      const { object, warnings } = decided
      if (options.dryRun) {
        if (namespace !== undefined && !isNamespaceKind(ref)) yield* requireProject(namespace)
        const existing = yield* read(decided.create.key)
        if (Option.isSome(existing)) return yield* alreadyExists(subjectOf(ref, object.metadata.name))
        return {
          object,
          warnings,
          created: true,
          ...(decided.etag === undefined ? {} : { etag: decided.etag })
        } satisfies WriteResult
      }
      const committed = yield* commit(ref, namespace, object.metadata.name, [
        decided.create,
        ...projectGuard(ref, namespace),
        ...decided.ops,
        ...(options.commitWith?.(warnings) ?? [])
      ])
      return { object: shown(committed.objects[0]!, decided.shownOnce), warnings, created: true } satisfies WriteResult
    })

  /**
   * Creates of many objects of one kind, all or nothing: each body is admitted as `create` admits one (a failure of
   * body i is `itemError(i, error)`, nothing is created), then all are committed in one store commit, the creates
   * first and in order (`commitWith` sees every warning; op 0 is the first create). For FunctionCall map batches
   * (apiserver/http/FunctionMap.ts).
   */
  const createMany = (
    ref: ResourceRef,
    namespace: string | undefined,
    bodies: ReadonlyArray<unknown>,
    options: WriteOptions,
    itemError: (index: number, error: ApiError) => ApiError = (_, error) => error
  ) => retryGeneratedNames(bodies, createManyOnce(ref, namespace, bodies, options, itemError))

  const createManyOnce = (
    ref: ResourceRef,
    namespace: string | undefined,
    bodies: ReadonlyArray<unknown>,
    options: WriteOptions,
    itemError: (index: number, error: ApiError) => ApiError
  ) =>
    Effect.gen(function*() {
      if (ref.info.scope === "Namespaced" && namespace === undefined) {
        return yield* badRequest("a project (namespace) is required")
      }
      const decided = yield* Effect.forEach(bodies, (body, index) =>
        Effect.mapError(decideCreate(ref, namespace, body, options), (error) => itemError(index, error)))
      const warnings = [
        ...new Set(decided.flatMap((one) =>
          one.warnings
        ))
      ]
      if (options.dryRun) {
        if (namespace !== undefined && !isNamespaceKind(ref)) yield* requireProject(namespace)
        return decided.map(({ object }) => ({ object, warnings, created: true }) satisfies WriteResult)
      }
      const creates = decided.map((one) => one.create)
      const committed = yield* commitNamed(ref, namespace, (index) =>
        creates[index]?.object.metadata.name ?? creates[0]?.object.metadata.name ?? "", [
        ...creates,
        ...projectGuard(ref, namespace),
        ...decided.flatMap((one) =>
          one.ops
        ),
        ...(options.commitWith?.(warnings) ?? [])
      ])
      return decided.map((one, index) =>
        ({ object: shown(committed.objects[index]!, one.shownOnce), warnings, created: true }) satisfies WriteResult
      )
    })

  /** Writes what a strategy decided: nothing, an update, or the object's removal (last finalizer gone). */
  const writeDisposition = (
    ref: ResourceRef,
    namespace: string | undefined,
    current: ResourceObject,
    disposition: Strategy.Disposition,
    expectedRv: string,
    options: { readonly dryRun: boolean; readonly extraOps?: ReadonlyArray<WriteOp> }
  ) =>
    Effect.gen(function*() {
      if (disposition._tag === "Unchanged" && (options.extraOps ?? []).length === 0) return current
      if (options.dryRun) return disposition.object
      const key = keyOf(ref, namespace, current.metadata.name)
      const op: WriteOp = disposition._tag === "Remove"
        ? { _tag: "Delete", key, object: disposition.object, expectedRv }
        : disposition._tag === "Unchanged"
        ? { _tag: "Require", key, notDeleting: false }
        : { _tag: "Update", key, object: disposition.object, previous: current, expectedRv }
      const committed = yield* commit(ref, namespace, current.metadata.name, [op, ...(options.extraOps ?? [])])
      return committed.objects[0] ?? current
    })

  const replace = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions,
    subresource?: "status"
  ) =>
    Effect.gen(function*() {
      const admitted = yield* admitBody(
        ref,
        body,
        options.fieldValidation,
        name,
        subresource === "status" ? "status" : "object"
      )
      yield* authorize(options, admitted)
      const metadata = admitted.object["metadata"]
      const expectedRv = isObject(metadata) && typeof metadata["resourceVersion"] === "string"
        ? metadata["resourceVersion"]
        : undefined
      if (expectedRv === undefined || expectedRv === "") {
        return yield* invalid(subjectOf(ref, name), [
          fieldInvalid("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")
        ], ref.info.kind)
      }
      const current = yield* readExisting(ref, namespace, name)
      yield* checkIfMatch(options.ifMatch, current)
      if (current.metadata.resourceVersion !== expectedRv) {
        return yield* conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      }
      const object = yield* writeUpdate(ref, namespace, current, admitted.object, options, {
        expectedRv,
        ...(subresource === undefined ? {} : { subresource })
      })
      return { object, warnings: admitted.warnings, created: false } satisfies WriteResult
    })

  const decideStatus = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions
  ) =>
    Effect.gen(function*() {
      const admitted = yield* admitBody(ref, body, options.fieldValidation, name, "status")
      yield* authorize(options, admitted)
      const metadata = admitted.object["metadata"]
      const expectedRv = isObject(metadata) && typeof metadata["resourceVersion"] === "string"
        ? metadata["resourceVersion"]
        : ""
      const current = yield* readExisting(ref, namespace, name)
      if (current.metadata.resourceVersion !== expectedRv) {
        return yield* conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      }
      const disposition = yield* Effect.fromResult(
        Strategy.updateStatus(targetOf(ref, namespace), current, admitted.object, {
          now: yield* now,
          fieldManager: options.fieldManager
        })
      )
      const ops: ReadonlyArray<WriteOp> = disposition._tag === "Write"
        ? [{
          _tag: "Update",
          key: keyOf(ref, namespace, name),
          object: disposition.object,
          previous: current,
          expectedRv
        }]
        : []
      return {
        ref,
        namespace,
        name,
        ops,
        object: ops.length === 0 ? current : disposition.object
      } satisfies DecidedWrite
    })

  const commitDecided = (
    writes: ReadonlyArray<DecidedWrite>,
    extraOps: ReadonlyArray<WriteOp>,
    about?: Omit<DecidedWrite, "ops" | "object">
  ) =>
    Effect.gen(function*() {
      const ops = [...writes.flatMap((write) => write.ops), ...extraOps]
      if (ops.length === 0) return writes.map((write) => write.object)
      // A failure names the object whose op failed (an extra op: the object the commit is about, or the first write's).
      const owners = writes.flatMap((write) => write.ops.map(() => write))
      const fallback = about ?? writes[0]
      const committed = yield* store.commit(ops).pipe(
        Effect.catchTag("CommitFailed", (failure) => {
          const owner = owners[failure.index] ?? fallback
          return Effect.fail(
            owner === undefined
              ? conflict({ group: "", kind: "", name: "" }, "the commit's conditions did not hold")
              : commitFailure(owner.ref, owner.name, owner.namespace)(failure)
          )
        }),
        Effect.mapError((error) => (error._tag === "StoreError" ? storeFailure(error) : error))
      )
      let index = 0
      return writes.map((write) => {
        const object = write.ops.length === 0 ? write.object : committed.objects[index] ?? write.object
        index += write.ops.length
        return object
      })
    })

  const replaceStatusMany = (
    ref: ResourceRef,
    namespace: string | undefined,
    items: ReadonlyArray<{ readonly name: string; readonly body: unknown }>,
    options: WriteOptions
  ) =>
    Effect.gen(function*() {
      const decided = yield* Effect.forEach(
        items,
        ({ name, body }) => decideStatus(ref, namespace, name, body, options)
      )
      const objects = options.dryRun
        ? decided.map((write) => write.object)
        : yield* commitDecided(decided, options.commitWith?.([]) ?? [])
      return objects.map((object) => ({ object, warnings: [], created: false }) satisfies WriteResult)
    })

  const applyPatch = (
    ref: ResourceRef,
    current: ResourceObject,
    patchType: Exclude<PatchType, "apply">,
    patch: unknown
  ): Effect.Effect<Json, ApiError> => {
    if (patchType === "merge") {
      if (!isObject(patch as Json)) return Effect.fail(badRequest("a merge patch must be a JSON object"))
      return Effect.succeed(MergePatch.apply(Strategy.asJson(current), patch as Json))
    }
    const decoded = JsonPatch.decode(patch)
    if (decoded._tag === "Err") return Effect.fail(badRequest(`invalid JSON patch: ${decoded.error.message}`))
    const applied = JsonPatch.apply(Strategy.asJson(current), decoded.operations)
    if (applied._tag === "Err") {
      return Effect.fail(
        invalid(subjectOf(ref, current.metadata.name), [
          fieldInvalid(
            applied.error.path,
            `JSON patch operation ${applied.error.index} failed: ${applied.error.message}`
          )
        ], ref.info.kind)
      )
    }
    return Effect.succeed(applied.value)
  }

  /** The resourceVersion a patch body pins, if any (then the patch is a compare-and-swap, not retried). */
  const pinnedVersion = (patched: Json, current: ResourceObject): string | undefined => {
    const metadata = isObject(patched) ? patched["metadata"] : undefined
    const version = isObject(metadata) ? metadata["resourceVersion"] : undefined
    return typeof version === "string" && version !== current.metadata.resourceVersion ? version : undefined
  }

  const patchOnce = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    patchType: Exclude<PatchType, "apply">,
    patch: unknown,
    options: WriteOptions,
    subresource: "status" | undefined
  ) =>
    Effect.gen(function*() {
      const current = yield* readExisting(ref, namespace, name)
      yield* checkIfMatch(options.ifMatch, current)
      const patched = yield* applyPatch(ref, current, patchType, patch)
      if (pinnedVersion(patched, current) !== undefined) {
        return yield* conflict(
          subjectOf(ref, name),
          "the object has been modified; please apply your changes to the latest version and try again"
        )
      }
      const admitted = yield* admitBody(
        ref,
        patched,
        options.fieldValidation,
        name,
        subresource === "status" ? "status" : "object"
      )
      yield* authorize(options, admitted)
      const object = yield* writeUpdate(ref, namespace, current, admitted.object, options, {
        expectedRv: current.metadata.resourceVersion,
        ...(subresource === undefined ? {} : { subresource })
      })
      return { object, warnings: admitted.warnings, created: false } satisfies WriteResult
    })

  const applyOnce = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    configuration: unknown,
    options: WriteOptions
  ) =>
    Effect.gen(function*() {
      const admittedConfiguration = yield* admitBody(ref, configuration, options.fieldValidation, name, "apply")
      const configured = admittedConfiguration.object["metadata"]
      const configuredName = isObject(configured) ? configured["name"] : undefined
      if (typeof configuredName === "string" && configuredName !== "" && configuredName !== name) {
        return yield* badRequest(
          `the name of the object (${configuredName}) does not match the name on the URL (${name})`
        )
      }
      const found = yield* read(keyOf(ref, namespace, name))
      if (Option.isNone(found)) {
        const named = ServerSideApply.withName(admittedConfiguration.object, name)
        const result = yield* create(ref, namespace, named, {
          ...options,
          fieldValidation: "Ignore",
          operation: "Apply",
          applied: named
        })
        return { ...result, warnings: admittedConfiguration.warnings }
      }
      const current = found.value
      yield* checkIfMatch(options.ifMatch, current)
      const merged = ServerSideApply.apply(current, admittedConfiguration.object, options.fieldManager)
      const admitted = yield* admitBody(ref, merged, "Ignore", name)
      yield* authorize(options, admitted)
      const object = yield* writeUpdate(ref, namespace, current, admitted.object, options, {
        expectedRv: current.metadata.resourceVersion,
        applied: admittedConfiguration.object
      })
      return { object, warnings: admittedConfiguration.warnings, created: false } satisfies WriteResult
    })

  /**
   * Patches retry on Conflict like Kubernetes' GuaranteedUpdate: the patch is re-applied to the newer object. A patch
   * that pins `metadata.resourceVersion` is a compare-and-swap and is not retried.
   */
  const patch = (
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    patchType: PatchType,
    body: unknown,
    options: WriteOptions,
    subresource?: "status"
  ) => {
    const once = patchType === "apply"
      ? applyOnce(ref, namespace, name, body, options)
      : patchOnce(ref, namespace, name, patchType, body, options, subresource)
    const metadata = isObject(body as Json) ? (body as JsonObject)["metadata"] : undefined
    const pinned = isObject(metadata) && typeof metadata["resourceVersion"] === "string"
    return pinned
      ? once
      : once.pipe(Effect.retry({ times: patchConflictRetriesMax, while: (error) => error.code === "Conflict" }))
  }

  /** Orphan: dependents lose their reference to the owner, in the same commit as the owner's removal. */
  const orphanOps = (owner: ResourceObject) =>
    Effect.map(
      store.dependentsOf(owner.metadata.uid).pipe(Effect.mapError(storeFailure)),
      (dependents) =>
        dependents.map((dependent): WriteOp => {
          const ownerReferences = (dependent.metadata.ownerReferences ?? []).filter((reference) =>
            reference.uid !== owner.metadata.uid
          )
          const { ownerReferences: _dropped, ...metadata } = dependent.metadata
          const object = {
            ...dependent,
            metadata: ownerReferences.length === 0 ? metadata : { ...metadata, ownerReferences }
          }
          return {
            _tag: "Update",
            key: storedKey(dependent),
            object,
            previous: dependent,
            expectedRv: dependent.metadata.resourceVersion
          }
        })
    )

  /**
   * A DELETE retries on Conflict like a patch: a controller's status write between the read and the commit must not
   * turn a plain DELETE into a 409 (Kubernetes' GuaranteedUpdate). One that pins a resourceVersion (a precondition or
   * If-Match) is a compare-and-swap and is not retried; a uid precondition is checked again on every try.
   */
  const remove = (ref: ResourceRef, namespace: string | undefined, name: string, options: DeleteOptions) => {
    const once = removeOnce(ref, namespace, name, options)
    const pinned = options.preconditions?.resourceVersion !== undefined || options.ifMatch !== undefined
    return pinned
      ? once
      : once.pipe(Effect.retry({ times: patchConflictRetriesMax, while: (error) => error.code === "Conflict" }))
  }

  const removeOnce = (ref: ResourceRef, namespace: string | undefined, name: string, options: DeleteOptions) =>
    Effect.gen(function*() {
      const current = yield* readExisting(ref, namespace, name)
      yield* checkIfMatch(options.ifMatch, current)
      const preconditions = options.preconditions
      if (preconditions?.uid !== undefined && preconditions.uid !== current.metadata.uid) {
        return yield* conflict(
          subjectOf(ref, name),
          `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${current.metadata.uid}`
        )
      }
      if (
        preconditions?.resourceVersion !== undefined &&
        preconditions.resourceVersion !== current.metadata.resourceVersion
      ) {
        return yield* conflict(
          subjectOf(ref, name),
          `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`
        )
      }
      const at = yield* now
      // A project is emptied by the namespace controller before it goes: it always lingers as Terminating first.
      const disposition = isNamespaceKind(ref) ? terminate(current, at) : Strategy.remove(current, at)
      const orphans = options.propagationPolicy === "Orphan" && disposition._tag === "Remove"
        ? yield* orphanOps(current)
        : []
      // What goes with the object (a Secret's values).
      const values = disposition._tag === "Remove"
        ? plugins.of(ref).flatMap((plugin) => plugin.removeOps?.(current) ?? [])
        : []
      const object = yield* writeDisposition(ref, namespace, current, disposition, current.metadata.resourceVersion, {
        dryRun: options.dryRun,
        extraOps: [...orphans, ...values, ...(options.commitWith?.() ?? [])]
      })
      return object
    })

  /** A list request's selectors, resourceVersion and continue cursor, checked: malformed ones are 400 BadRequest. */
  const listQuery = (ref: ResourceRef, namespace: string | undefined, options: ListOptions) =>
    Effect.gen(function*() {
      const selectors = yield* Effect.fromResult(selectorsOf(options, ref))
      if (namespace !== undefined && ref.info.scope === "Namespaced") yield* requireProject(namespace)
      const resourceVersion = options.resourceVersion ?? ""
      if (resourceVersion !== "") yield* Effect.fromResult(parseResourceVersion(resourceVersion))
      const token = options.continue ?? ""
      // Kubernetes' rule: a continued list reads as of its first page, so another version cannot be asked for.
      if (token !== "" && resourceVersion !== "" && resourceVersion !== "0") {
        return yield* badRequest("specifying resourceVersion is not allowed when using continue")
      }
      const cursor = token === "" ? undefined : decodeContinue(token)
      if (token !== "" && cursor === undefined) return yield* badRequest("the provided continue parameter is not valid")
      return { selectors, cursor }
    })

  /**
   * The page of a list after `cursor`: up to `limit` selected objects (every one without a limit). `counted` pages
   * count the objects after them for `remainingItemCount`, a walk over up to `remainingItemCountMax` rows; the others
   * only ask whether one follows.
   */
  const readPage = <A>(
    source: PageSource<A>,
    ref: ResourceRef,
    namespace: string | undefined,
    selectors: Selectors,
    cursor: ListCursor | undefined,
    limit: number | undefined,
    counted: boolean
  ) =>
    Effect.gen(function*() {
      const { labelEquals, name, filtered } = pushedDown(selectors)
      const items: Array<A> = []
      let after = cursor === undefined ? undefined : { namespace: cursor.namespace, name: cursor.name }
      let resourceVersion: number | undefined
      let remaining = 0
      for (;;) {
        const want = limit === undefined ? undefined : filtered ? scanChunkSize : limit - items.length
        const page = yield* source.read({
          resource: ref.info.plural,
          ...(ref.info.scope === "Namespaced" && namespace !== undefined ? { namespace } : {}),
          ...(after === undefined ? {} : { after }),
          ...(want === undefined ? {} : { limit: want }),
          ...(labelEquals.length === 0 ? {} : { labelEquals }),
          ...(name === undefined ? {} : { name }),
          countUpTo: counted ? remainingItemCountMax : 0
        }).pipe(Effect.mapError(storeFailure))
        resourceVersion ??= page.resourceVersion
        for (const item of page.items) {
          if (limit !== undefined && items.length === limit) break
          if (source.accepts(item)) items.push(item)
          after = source.key(item)
        }
        remaining = page.remaining
        const scannedAll = page.items.length === 0 || (want === undefined) || page.remaining === 0
        if (scannedAll || (limit !== undefined && items.length === limit)) break
      }
      const listVersion = cursor?.resourceVersion ?? String(resourceVersion ?? 0)
      const more = limit !== undefined && items.length === limit && (remaining > 0 || filtered)
      return {
        items,
        resourceVersion: listVersion,
        ...(more && items.length > 0 ? { continue: encodeContinue(listVersion, source.key(items.at(-1)!)) } : {}),
        ...(more && counted && !filtered && remaining > 0 && remaining <= remainingItemCountMax
          ? { remainingItemCount: remaining }
          : {})
      } satisfies ListResult<A>
    })

  /** Pages of the store's objects, each checked against the selectors. */
  const objectsOf = (selectors: Selectors): PageSource<ResourceObject> => ({
    read: store.list,
    key: objectKey,
    accepts: (object) => selects(selectors, object)
  })

  /** Pages of stored texts: only where the store applies every selector itself (nothing is read of the objects). */
  const textsOf: PageSource<ListedText> = { read: store.listText, key: (item) => item, accepts: () => true }

  /** A list's page size: its limit, at most `listPageSize`; undefined (everything) without one. */
  const pageLimitOf = (options: ListOptions) =>
    options.limit !== undefined && options.limit > 0 ? Math.min(options.limit, listPageSize) : undefined

  /**
   * Whether the store applies every selector of `options` itself, so that its stored texts can be passed through. Read
   * before the list's query is made, so that a list that cannot be read as texts is not queried twice; selectors that
   * do not parse are left to the query, which refuses them.
   */
  const readableAsTexts = (ref: ResourceRef, options: ListOptions) => {
    const selectors = selectorsOf(options, ref)
    return Result.isFailure(selectors) || !pushedDown(selectors.success).filtered
  }

  const list = (ref: ResourceRef, namespace: string | undefined, options: ListOptions) =>
    Effect.flatMap(
      listQuery(ref, namespace, options),
      ({ selectors, cursor }) =>
        readPage(objectsOf(selectors), ref, namespace, selectors, cursor, pageLimitOf(options), true)
    )

  const listText = (ref: ResourceRef, namespace: string | undefined, options: ListOptions) =>
    !readableAsTexts(ref, options)
      ? Effect.succeed(undefined)
      : Effect.flatMap(
        listQuery(ref, namespace, options),
        ({ selectors, cursor }) =>
          Effect.map(
            readPage(textsOf, ref, namespace, selectors, cursor, pageLimitOf(options), true),
            (page) => ({ ...page, items: page.items.map((item) => item.text) })
          )
      )

  // Each page is read through the continue token of the one before, so later pages read the current state, as a
  // client paging with limit and continue would.
  const pagesOf = <A>(
    source: PageSource<A>,
    ref: ResourceRef,
    namespace: string | undefined,
    selectors: Selectors,
    cursor: ListCursor | undefined,
    pageSize: number
  ) =>
    Effect.gen(function*() {
      const limit = Math.min(Math.max(1, pageSize), listPageSize)
      const readAfter = (token: string | undefined) =>
        Semaphore.withPermit(
          pagedReads,
          readPage(
            source,
            ref,
            namespace,
            selectors,
            token === undefined ? cursor : decodeContinue(token),
            limit,
            false
          )
        )
      const first = yield* readAfter(undefined)
      const rest = first.continue === undefined
        ? Stream.empty
        : Stream.paginate(
          first.continue,
          (token) =>
            Effect.map(readAfter(token), (page) => [[page.items], Option.fromUndefinedOr(page.continue)] as const)
        )
      return {
        resourceVersion: first.resourceVersion,
        pages: Stream.concat(Stream.make(first.items), rest)
      } satisfies PagedList<A>
    })

  const listPages = (
    ref: ResourceRef,
    namespace: string | undefined,
    options: Omit<ListOptions, "limit">,
    pageSize = listPageSize
  ) =>
    Effect.flatMap(
      listQuery(ref, namespace, options),
      ({ selectors, cursor }) => pagesOf(objectsOf(selectors), ref, namespace, selectors, cursor, pageSize)
    )

  const listTextPages = (ref: ResourceRef, namespace: string | undefined, options: Omit<ListOptions, "limit">) =>
    !readableAsTexts(ref, options)
      ? Effect.succeed(undefined)
      : Effect.flatMap(
        listQuery(ref, namespace, options),
        ({ selectors, cursor }) =>
          Effect.map(
            pagesOf(textsOf, ref, namespace, selectors, cursor, listPageSize),
            (paged) => ({ ...paged, pages: Stream.map(paged.pages, (page) => page.map((item) => item.text)) })
          )
      )

  return {
    get: (ref: ResourceRef, namespace: string | undefined, name: string) => readExisting(ref, namespace, name),
    list,
    listPages,
    listText,
    listTextPages,
    create,
    createMany,
    replaceStatusMany,
    decideCreate: (ref, namespace, body, options) =>
      Effect.map(decideCreate(ref, namespace, body, options), (decided) =>
        ({
          ref,
          namespace,
          name: decided.object.metadata.name,
          ops: [decided.create, ...projectGuard(ref, namespace), ...decided.ops],
          object: decided.object
        }) satisfies DecidedWrite),
    decideStatus,
    commitDecided,
    replace,
    patch,
    remove,
    /** Whether the project exists (watches and lists in a missing project are NotFound). */
    requireProject,
    /** Commits raw ops about one object, with the same error mapping as every operation. */
    commit
  }
}

/** A Namespace's DELETE: mark it Terminating; the namespace controller deletes its content and then it. */
const terminate = (current: ResourceObject, now: number): Strategy.Disposition =>
  current.metadata.deletionTimestamp !== undefined
    ? { _tag: "Unchanged", object: current }
    : {
      _tag: "Write",
      object: {
        ...current,
        metadata: { ...current.metadata, deletionTimestamp: Strategy.timestamp(now), deletionGracePeriodSeconds: 0 },
        status: { phase: "Terminating" }
      }
    }

/** Where a stored object lives: objects carry their kind, and the registry maps it back to its plural. */
export const storedKey = (object: ResourceObject): ObjectKey => ({
  resource: byKindName(object.kind)?.plural ?? object.kind.toLowerCase(),
  namespace: object.metadata.namespace ?? "",
  name: object.metadata.name
})
