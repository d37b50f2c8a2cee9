/**
 * The generic operations of the resource API over HTTP, for every kind: list (JSON or a Table; the stored texts of a
 * plain list, never parsed), watch (newline-delimited events), create (with an Idempotency-Key; a kind's create
 * hooks), replace, patch (merge, JSON and server-side apply), delete, and an object's answer. The router (Api.ts) has
 * authenticated and authorized the request before it calls one of them.
 */
import { Clock, Context, Effect, Layer, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Auth, type Principal } from "../apiserver/Auth.ts"
import { Idempotency } from "../apiserver/Idempotency.ts"
import { etagOf, type ListResult, Resources, type WriteOptions } from "../apiserver/Resources.ts"
import { defaultWatchLimits, Watches, type WatchEvent } from "../apiserver/Watch.ts"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import { type ApiError, badRequest } from "../core/meta/ApiError.ts"
import { eventKind, namespaceKind, type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { parseJson, parseYamlDocument, readObject, readText } from "./Body.ts"
import { KindApis } from "./KindApi.ts"
import { streamedArray, streamedTexts, withTexts } from "./ListBody.ts"
import {
  boolParameter,
  dryRunOf,
  fieldManagerOf,
  fieldValidationOf,
  intParameter,
  limitRange,
  objectHeaders,
  parseBool,
  patchTypeOf,
  postFingerprint,
  selectorsOf,
  timeoutSecondsRange
} from "./Parameters.ts"
import { json, warningHeader } from "./Respond.ts"
import * as Table from "./Table.ts"

type Request = HttpServerRequest.HttpServerRequest

const make = Effect.gen(function*() {
  const settings = yield* ApiConfig
  const resources = yield* Resources
  const watches = yield* Watches
  const auth = yield* Auth
  const idempotency = yield* Idempotency
  const kindApis = yield* KindApis

  const tableOf = (
    ref: ResourceRef
  ) => (ref.info === namespaceKind ? "namespaces" as const : ref.info === eventKind ? "events" as const : ref.info)

  const renderObject = Effect.fnUntraced(function*(
    request: Request,
    query: URLSearchParams,
    ref: ResourceRef,
    object: ResourceObject,
    status: number,
    headers: Record<string, string>
  ) {
    if (!Table.wantsTable(request.headers["accept"])) return json(status, object, headers)
    const includeObject = Table.includeObjectOf(query.get("includeObject"))
    if (includeObject === undefined) return yield* badRequest("includeObject must be None, Metadata or Object")
    const now = yield* Clock.currentTimeMillis
    return json(
      status,
      Table.table(tableOf(ref), [object], {
        now,
        includeObject,
        withColumns: true,
        resourceVersion: object.metadata.resourceVersion
      }),
      headers
    )
  })

  /** The project a list or watch reads: the path's, or for an all-projects request the one a key is confined to. */
  const scopeOf = (principal: Principal, ref: ResourceRef, namespace: string | undefined) =>
    namespace ?? (ref.info.scope === "Namespaced" ? auth.confinedTo(principal) : undefined)

  /**
   * The selectors of a list or watch, narrowed to what the key may see: among projects, a confined key sees only its
   * own. The narrowing is one more field requirement, so a list and a watch of the same request see the same objects.
   */
  const visibleSelectors = (principal: Principal, ref: ResourceRef, query: URLSearchParams) => {
    const sent = selectorsOf(query)
    const confined = auth.confinedTo(principal)
    if (ref.info !== namespaceKind || confined === undefined) return sent
    const own = `metadata.name=${confined}`
    return {
      ...sent,
      fieldSelector: sent.fieldSelector === undefined || sent.fieldSelector === ""
        ? own
        : `${sent.fieldSelector},${own}`
    }
  }

  const list = Effect.fn("Api.list")(function*(
    request: Request,
    query: URLSearchParams,
    principal: Principal,
    ref: ResourceRef,
    namespace: string | undefined
  ) {
    const limit = yield* intParameter(query, "limit", ...limitRange)
    const asTable = Table.wantsTable(request.headers["accept"])
    const includeObject = Table.includeObjectOf(query.get("includeObject"))
    if (asTable && includeObject === undefined) {
      return yield* badRequest("includeObject must be None, Metadata or Object")
    }
    const tableOptions = { now: yield* Clock.currentTimeMillis, includeObject: includeObject ?? "Metadata" }
    const options = {
      ...visibleSelectors(principal, ref, query),
      ...(query.get("continue") === null ? {} : { continue: query.get("continue")! }),
      ...(query.get("resourceVersion") === null ? {} : { resourceVersion: query.get("resourceVersion")! })
    }
    const envelope = (result: ListResult): object => {
      const listMeta = {
        resourceVersion: result.resourceVersion,
        ...(result.continue === undefined ? {} : { continue: result.continue }),
        ...(result.remainingItemCount === undefined ? {} : { remainingItemCount: result.remainingItemCount })
      }
      return asTable
        ? Table.table(tableOf(ref), result.items, { ...tableOptions, withColumns: true, ...listMeta })
        : { apiVersion: ref.apiVersion, kind: `${ref.info.kind}List`, metadata: listMeta, items: result.items }
    }
    // A plain JSON list whose selectors the store applies carries the stored texts of its objects, never parsed.
    if (!asTable) {
      const bounded = limit !== undefined && limit > 0
      const texts = bounded
        ? yield* resources.listText(ref, scopeOf(principal, ref, namespace), { ...options, limit })
        : undefined
      if (texts !== undefined) {
        return HttpServerResponse.text(withTexts(envelope({ ...texts, items: [] }), texts.items), {
          status: 200,
          contentType: "application/json"
        })
      }
      const paged = bounded
        ? undefined
        : yield* resources.listTextPages(ref, scopeOf(principal, ref, namespace), options)
      if (paged !== undefined) {
        return HttpServerResponse.stream(
          streamedTexts(envelope({ items: [], resourceVersion: paged.resourceVersion }), paged.pages),
          { contentType: "application/json" }
        )
      }
    }
    if (limit !== undefined && limit > 0) {
      return json(
        200,
        envelope(yield* resources.list(ref, scopeOf(principal, ref, namespace), { ...options, limit }))
      )
    }
    // Without a limit the list is read and written a page at a time (ListBody.ts): the first page is read here, so
    // what fails before the first byte still answers a Status.
    const listed = yield* resources.listPages(ref, scopeOf(principal, ref, namespace), options)
    const elements: Stream.Stream<ReadonlyArray<object>, ApiError> = asTable
      ? Stream.map(listed.pages, (page) => Table.rows(tableOf(ref), page, tableOptions))
      : listed.pages
    return HttpServerResponse.stream(
      streamedArray(envelope({ items: [], resourceVersion: listed.resourceVersion }), elements),
      { contentType: "application/json" }
    )
  })

  const watch = Effect.fn("Api.watch")(function*(
    request: Request,
    query: URLSearchParams,
    principal: Principal,
    ref: ResourceRef,
    namespace: string | undefined
  ) {
    const timeoutSeconds = yield* intParameter(query, "timeoutSeconds", ...timeoutSecondsRange)
    const allowWatchBookmarks = yield* boolParameter(query, "allowWatchBookmarks")
    const events = yield* watches.watch(ref, scopeOf(principal, ref, namespace), {
      ...(query.get("resourceVersion") === null ? {} : { resourceVersion: query.get("resourceVersion")! }),
      ...visibleSelectors(principal, ref, query),
      allowWatchBookmarks,
      ...(timeoutSeconds === undefined ? {} : { timeoutSeconds }),
      bookmarkInterval: settings.bookmarkInterval,
      limits: settings.watchLimits ?? defaultWatchLimits
    })
    const asTable = Table.wantsTable(request.headers["accept"])
    const includeObject = Table.includeObjectOf(query.get("includeObject")) ?? "Metadata"
    let first = true
    const line = (event: WatchEvent, now: number) => {
      const object = asTable && (event.type === "ADDED" || event.type === "MODIFIED" || event.type === "DELETED")
        ? Table.table(tableOf(ref), [event.object as ResourceObject], { now, includeObject, withColumns: first })
        : event.object
      first = false
      return `${JSON.stringify({ type: event.type, object })}\n`
    }
    // Each chunk the watch hands over (up to its buffer) is one write, not a write per event.
    const encode = (chunk: ReadonlyArray<WatchEvent>) =>
      Effect.map(
        Clock.currentTimeMillis,
        (now) => [new TextEncoder().encode(chunk.map((event) => line(event, now)).join(""))] as const
      )
    // An empty first chunk makes Node send the headers at once, so a client sees the watch open before any event.
    const body = Stream.concat(Stream.make(new Uint8Array(0)), Stream.mapArrayEffect(events, encode))
    return HttpServerResponse.stream(body, { status: 200, contentType: "application/json" })
  })

  const writeOptions = Effect.fnUntraced(
    function*(request: Request, query: URLSearchParams, principal: Principal, ref: ResourceRef) {
      const options: WriteOptions = {
        dryRun: yield* dryRunOf(query),
        fieldValidation: yield* fieldValidationOf(query),
        fieldManager: yield* fieldManagerOf(query, request),
        ...(request.headers["if-match"] === undefined ? {} : { ifMatch: request.headers["if-match"] }),
        ...kindApis.of(ref.info.kind)?.writeOptions?.(principal),
        principal,
        ...(parseBool(query.get("force")) === true ? { force: true } : {})
      }
      return options
    }
  )

  const create = Effect.fn("Api.create")(function*(
    request: Request,
    query: URLSearchParams,
    principal: Principal,
    ref: ResourceRef,
    namespace: string | undefined
  ) {
    // A kind's creates may have their own rules, and a processing before the answer (TopUps: runtime/Credits.ts).
    const hooks = kindApis.of(ref.info.kind)?.createHooks
    const sent = yield* readObject(request, ref.info.kind)
    const body = hooks === undefined ? sent : yield* hooks.admit(sent)
    const options = yield* writeOptions(request, query, principal, ref)
    const key = request.headers["idempotency-key"]
    if (key === undefined || key === "" || options.dryRun) {
      const created = yield* resources.create(ref, namespace, body, options)
      const result = hooks === undefined || options.dryRun
        ? created
        : { ...created, object: yield* hooks.settle(created.object) }
      // A dry run's ETag quotes its price and binds a later create that sends it in If-Match (spec: Create semantics
      // 1).
      const headers = { etag: result.etag ?? etagOf(result.object), ...warningHeader(result.warnings) }
      return yield* renderObject(request, query, ref, result.object, 201, headers)
    }
    const claim = yield* idempotency.claim(
      principal.name,
      key,
      postFingerprint(request, query, options, body)
    )
    if (claim._tag === "Replay") {
      const object = claim.response.body as unknown as ResourceObject
      return yield* renderObject(request, query, ref, object, claim.response.status, {
        ...objectHeaders(object, claim.response.warnings),
        "idempotent-replayed": "true"
      })
    }
    const result = yield* resources.create(ref, namespace, body, {
      ...options,
      commitWith: (warnings) => claim.finishOps(201, warnings)
    }).pipe(
      Effect.tapError(() => claim.release)
    )
    const object = hooks === undefined ? result.object : yield* hooks.settle(result.object)
    return yield* renderObject(request, query, ref, object, 201, objectHeaders(object, result.warnings))
  })

  const replace = Effect.fn("Api.replace")(function*(
    request: Request,
    query: URLSearchParams,
    principal: Principal,
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    subresource: "status" | undefined
  ) {
    const body = yield* readObject(request, ref.info.kind)
    const options = yield* writeOptions(request, query, principal, ref)
    const result = yield* resources.replace(ref, namespace, name, body, options, subresource)
    return yield* renderObject(
      request,
      query,
      ref,
      result.object,
      200,
      objectHeaders(result.object, result.warnings)
    )
  })

  const patch = Effect.fn("Api.patch")(function*(
    request: Request,
    query: URLSearchParams,
    principal: Principal,
    ref: ResourceRef,
    namespace: string | undefined,
    name: string,
    subresource: "status" | undefined
  ) {
    const patchType = yield* patchTypeOf(request.headers["content-type"], ref)
    if (patchType === "apply" && subresource === "status") {
      return yield* badRequest("server-side apply of the status subresource is not supported; use a merge patch")
    }
    if (patchType === "apply" && (query.get("fieldManager") ?? "") === "") {
      return yield* badRequest("PATCH requests with the apply content type require fieldManager to be set")
    }
    const text = yield* readText(request)
    const body = patchType === "apply" ? yield* parseYamlDocument(text) : yield* parseJson(text)
    if (body === undefined) return yield* badRequest("the patch body is empty")
    const options = yield* writeOptions(request, query, principal, ref)
    const result = yield* resources.patch(ref, namespace, name, patchType, body, options, subresource)
    return yield* renderObject(
      request,
      query,
      ref,
      result.object,
      result.created ? 201 : 200,
      objectHeaders(result.object, result.warnings)
    )
  })

  const remove = Effect.fn("Api.remove")(function*(
    request: Request,
    query: URLSearchParams,
    ref: ResourceRef,
    namespace: string | undefined,
    name: string
  ) {
    const body = yield* Effect.flatMap(readText(request), parseJson)
    const options = isObject((body ?? null) as Json) ? body as JsonObject : {}
    const policy = query.get("propagationPolicy") ??
      (typeof options["propagationPolicy"] === "string" ? options["propagationPolicy"] : "Background")
    if (policy !== "Background" && policy !== "Orphan") {
      return yield* badRequest(
        `propagationPolicy ${policy} is not supported: use Background (the default) or Orphan`
      )
    }
    const bodyDryRun = Array.isArray(options["dryRun"]) && options["dryRun"].includes("All")
    const preconditions = isObject(options["preconditions"]) ? options["preconditions"] : undefined
    const object = yield* resources.remove(ref, namespace, name, {
      dryRun: bodyDryRun || (yield* dryRunOf(query)),
      propagationPolicy: policy,
      ...(preconditions === undefined ? {} : {
        preconditions: {
          ...(typeof preconditions["uid"] === "string" ? { uid: preconditions["uid"] } : {}),
          ...(typeof preconditions["resourceVersion"] === "string"
            ? { resourceVersion: preconditions["resourceVersion"] }
            : {})
        }
      }),
      ...(request.headers["if-match"] === undefined ? {} : { ifMatch: request.headers["if-match"] })
    })
    return json(200, object, { etag: etagOf(object) })
  })

  return { render: renderObject, list, watch, writeOptions, create, replace, patch, remove }
})

/** The generic handlers, one named span each (`Api.list`, `Api.create`, …). */
export class ResourceHandlers extends Context.Service<ResourceHandlers, Effect.Success<typeof make>>()(
  "nodus/http/Handlers"
) {
  static readonly layer = Layer.effect(ResourceHandlers, make)
}
