/**
 * What every generic operation of the resource API (Resources.ts) shares: the options and results of writes, the
 * store keys and failures, and the steps every write takes (admission with the kind's schema and rules, If-Match, the
 * project's guard, the commit of what a strategy decided). The operations themselves are split by concern:
 * ResourceReads.ts, ResourceCreates.ts, ResourceUpdates.ts, ResourceDeletes.ts.
 */
import { Clock, Effect, Option, Result } from "effect"
import { priceBoundAnnotation } from "../core/billing/PriceBound.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { admit, type Admitted, type FieldValidation } from "../core/meta/Admission.ts"
import { alreadyExists, ApiError, badRequest, conflict, invalid, notFound, subjectOf } from "../core/meta/ApiError.ts"
import { type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import * as Strategy from "../core/meta/Strategy.ts"
import { normalizeSpec, type ServerSettings } from "../core/schemas/Kind.ts"
import { definitionOf } from "../kinds/Kinds.ts"
import { applySchema, namespaceSchema, objectSchema, statusSchema } from "../kinds/KindSchemas.ts"
import { type CommitFailed, type ObjectKey, Store, type StoreError, type WriteOp } from "../store/Store.ts"
import { AdmissionPlugins } from "./AdmissionPlugins.ts"
import type { Principal } from "./Auth.ts"
import { Ids } from "./Ids.ts"

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

/** How often a patch or delete without a resourceVersion is retried when another writer got there first. */
export const patchConflictRetriesMax = 5

export const isNamespaceKind = (ref: ResourceRef): boolean => ref.group === "" && ref.info.plural === "namespaces"

export const stringAt = (object: JsonObject, ...path: ReadonlyArray<string>): string | undefined => {
  let current: Json | undefined = object
  for (const segment of path) current = isObject(current) ? current[segment] : undefined
  return typeof current === "string" ? current : undefined
}

export const keyOf = (ref: ResourceRef, namespace: string | undefined, name: string): ObjectKey => ({
  resource: ref.info.plural,
  namespace: namespace ?? "",
  name
})

export const namespaceKey = (namespace: string): ObjectKey => ({
  resource: "namespaces",
  namespace: "",
  name: namespace
})

export const targetOf = (ref: ResourceRef, namespace: string | undefined): Strategy.Target => ({
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
export const withBoundAnnotation = (object: JsonObject, group: string, bound: string | undefined): JsonObject => {
  const key = priceBoundAnnotation(group)
  const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
  const annotations = isObject(metadata["annotations"]) ? metadata["annotations"] : {}
  if (annotations[key] === bound) return object
  const { [key]: _sent, ...rest } = annotations
  return { ...object, metadata: { ...metadata, annotations: bound === undefined ? rest : { ...rest, [key]: bound } } }
}

export const storeFailure = (error: StoreError): ApiError =>
  new ApiError({ code: "Unavailable", message: `the store is unavailable: ${error.message}`, retryAfterSeconds: 1 })

export const commitFailure =
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

/** The services the operations run on, and how the server was started (for the kinds' `serverRules`). */
export interface ResourceServices {
  readonly store: Store["Service"]
  readonly ids: Ids["Service"]
  readonly plugins: AdmissionPlugins["Service"]
  /** How the server was started, for the kinds' `serverRules`. */
  readonly serverSettings: ServerSettings
}

/** Which schema a body is admitted with: the whole object, a status write, or an apply configuration. */
type BodyForm = "object" | "status" | "apply"

/** The steps the operations share, over one set of services. */
export const makeShared = (services: ResourceServices) => {
  const { store, serverSettings } = services
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

  return {
    ...services,
    now,
    read,
    readExisting,
    requireProject,
    commitNamed,
    commit,
    projectGuard,
    admitBody,
    checkTimeRules,
    checkServerRules,
    authorize,
    checkIfMatch,
    writeDisposition,
    commitDecided
  }
}

export type Shared = ReturnType<typeof makeShared>
