/**
 * The reads of the resource API (Resources.ts): get, and lists of every kind, one page at a time (`limit`, `continue`)
 * or paged through a stream, as objects or as the JSON texts the store holds; their selectors, which watches parse
 * the same way (Watch.ts).
 */
import { Effect, Option, Result, Semaphore, Stream } from "effect"
import { type ApiError, badRequest } from "../core/meta/ApiError.ts"
import { eventFieldLabels, eventFields } from "../core/meta/Events.ts"
import * as FieldSelector from "../core/meta/FieldSelector.ts"
import { eventKind, type ResourceRef } from "../core/meta/Kinds.ts"
import * as LabelSelector from "../core/meta/LabelSelector.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { ListedText, ListQuery, StoreError } from "../store/Store.ts"
import { type Shared, storeFailure } from "./ResourceShared.ts"

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

interface ListCursor {
  readonly resourceVersion: string
  readonly namespace: string
  readonly name: string
}

/**
 * A continue token's cursor; undefined for a token this server did not make (its version is checked like a client's).
 */
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

/** The reads, over the shared steps. */
export const makeReads = (shared: Shared) => {
  const { store, requireProject } = shared
  const pagedReads = Semaphore.makeUnsafe(pagedReadsMax)

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

  return { get: shared.readExisting, list, listPages, listText, listTextPages }
}
