/**
 * The generic operations of the resource API (spec: Generic operations, Create semantics), for every kind alike:
 * get, list, create, replace, patch (merge, JSON, apply), delete, and the status subresource. Each operation admits
 * the request with the kind's schema, applies the per-write rules of core/meta/Strategy.ts, and commits through the
 * store port in one atomic commit, retried on conflicts where Kubernetes retries them (patches without a
 * resourceVersion).
 *
 * The operations are split by concern (ResourceReads.ts, ResourceCreates.ts, ResourceUpdates.ts, ResourceDeletes.ts,
 * over the steps of ResourceShared.ts); each method of the service runs in a span named after it ("Resources.create").
 *
 * HTTP is not here: handlers in src/http translate requests into these calls and results into responses.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { type Committed, Store, type WriteOp } from "../store/Store.ts"
import { AdmissionPlugins } from "./AdmissionPlugins.ts"
import { ApiConfig } from "./ApiConfig.ts"
import { Ids } from "./Ids.ts"
import { makeCreates } from "./ResourceCreates.ts"
import { type DeleteOptions, makeDeletes } from "./ResourceDeletes.ts"
import { type ListOptions, type ListResult, makeReads, type PagedList } from "./ResourceReads.ts"
import {
  type DecidedWrite,
  makeShared,
  type ResourceServices,
  type WriteOptions,
  type WriteResult
} from "./ResourceShared.ts"
import { makeUpdates, type PatchType } from "./ResourceUpdates.ts"

export { generatedNameRetriesMax } from "./ResourceCreates.ts"
export { type DeleteOptions, storedKey } from "./ResourceDeletes.ts"
export {
  type ListOptions,
  listPageSize,
  type ListResult,
  type PagedList,
  parseResourceVersion,
  remainingItemCountMax,
  type Selectors,
  selectorsOf,
  selects
} from "./ResourceReads.ts"
export {
  type DecidedWrite,
  etagOf,
  isNamespaceKind,
  patchConflictRetriesMax,
  type WriteOptions,
  type WriteResult
} from "./ResourceShared.ts"
export { type PatchType } from "./ResourceUpdates.ts"

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

/** An operation in a span of its own name (Effect.fn), so that each call of a method is traced by name. */
const traced = <Args extends Array<any>, A, E>(name: string, operation: (...args: Args) => Effect.Effect<A, E>) =>
  Effect.fn(name)(function*(...args: Args) {
    return yield* operation(...args)
  })

function makeOperations(services: ResourceServices): ResourcesShape {
  const shared = makeShared(services)
  const reads = makeReads(shared)
  const creates = makeCreates(shared)
  const updates = makeUpdates(shared, creates.create)
  const deletes = makeDeletes(shared)
  return {
    get: traced("Resources.get", reads.get),
    list: traced("Resources.list", reads.list),
    listPages: traced("Resources.listPages", reads.listPages),
    listText: traced("Resources.listText", reads.listText),
    listTextPages: traced("Resources.listTextPages", reads.listTextPages),
    create: traced("Resources.create", creates.create),
    createMany: traced("Resources.createMany", creates.createMany),
    replaceStatusMany: traced("Resources.replaceStatusMany", updates.replaceStatusMany),
    decideCreate: traced("Resources.decideCreate", creates.decideCreate),
    decideStatus: traced("Resources.decideStatus", updates.decideStatus),
    commitDecided: traced("Resources.commitDecided", shared.commitDecided),
    replace: traced("Resources.replace", updates.replace),
    patch: traced("Resources.patch", updates.patch),
    remove: traced("Resources.remove", deletes.remove),
    requireProject: traced("Resources.requireProject", shared.requireProject),
    commit: traced("Resources.commit", shared.commit)
  }
}
