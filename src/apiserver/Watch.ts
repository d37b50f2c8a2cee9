/**
 * Watches (spec: Generic operations, `watch=true`): a stream of ADDED, MODIFIED, DELETED, BOOKMARK and ERROR events
 * for one kind, optionally one project and selectors, with Kubernetes' semantics:
 *
 * - resourceVersion unset or "0": synthetic ADDED events for what exists now, then live events;
 * - resourceVersion N: every change after N, replayed from the change log; older than the log → an ERROR event
 *   carrying a 410 Expired Status (client-go then relists);
 * - a MODIFIED that makes an object start or stop matching the selectors is sent as ADDED or DELETED;
 * - BOOKMARK events (allowWatchBookmarks) carry the resourceVersion the watch has seen up to, matching or not.
 */
import type { ResourceRef } from "../core/meta/Kinds.ts"
import { Context, Duration, Effect, Layer, Stream } from "effect"
import { ApiError, badRequest } from "../core/meta/ApiError.ts"
import type { Json } from "../core/Json.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change } from "../store/Store.ts"
import { Resources, type Selectors, selectorsOf, selects } from "./Resources.ts"

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"

export interface WatchEvent {
  readonly type: WatchEventType
  readonly object: ResourceObject | Json
}

export interface WatchOptions {
  readonly resourceVersion?: string
  readonly labelSelector?: string
  readonly fieldSelector?: string
  readonly allowWatchBookmarks: boolean
  readonly timeoutSeconds?: number
  readonly bookmarkInterval: Duration.Input
}

const bookmark = (ref: ResourceRef, resourceVersion: number): WatchEvent => ({
  type: "BOOKMARK",
  object: { kind: ref.info.kind, apiVersion: ref.apiVersion, metadata: { resourceVersion: String(resourceVersion) } }
})

/** The 410 an expired watch ends with (an ERROR event whose object is a Status, as the API server sends it). */
export const expiredEvent = (requested: number): WatchEvent => ({
  type: "ERROR",
  object: {
    apiVersion: "v1",
    kind: "Status",
    metadata: {},
    status: "Failure",
    message: `too old resource version: ${requested}`,
    reason: "Expired",
    code: 410
  }
})

/** The event a change becomes for a watcher with these selectors, or none. */
export const eventOf = (change: Change, selectors: Selectors): WatchEvent | undefined => {
  const now = selects(selectors, change.object)
  if (change.type !== "MODIFIED") return now ? { type: change.type, object: change.object } : undefined
  const before = change.previous === undefined ? now : selects(selectors, change.previous)
  if (now && before) return { type: "MODIFIED", object: change.object }
  if (now) return { type: "ADDED", object: change.object }
  if (before) return { type: "DELETED", object: change.object }
  return undefined
}

const parseResourceVersion = (value: string | undefined): number | undefined | ApiError => {
  if (value === undefined || value === "" || value === "0") return undefined
  return /^[0-9]+$/u.test(value) ? Number(value) : badRequest(`invalid resourceVersion "${value}": must be a decimal integer`)
}

export class Watches extends Context.Service<Watches, {
  readonly watch: (ref: ResourceRef, namespace: string | undefined, options: WatchOptions) => Effect.Effect<Stream.Stream<WatchEvent>, ApiError>
}>()("nodus/server/Watches") {
  static readonly layer = Layer.effect(Watches, Effect.gen(function*() {
    const feed = yield* ChangeFeed
    const resources = yield* Resources

    const watch = (ref: ResourceRef, namespace: string | undefined, options: WatchOptions) => Effect.gen(function*() {
      const selectors = yield* Effect.fromResult(selectorsOf(options, ref))
      const requested = parseResourceVersion(options.resourceVersion)
      if (requested instanceof ApiError) return yield* requested
      if (namespace !== undefined && ref.info.scope === "Namespaced") yield* resources.requireProject(namespace)
      const inScope = (change: Change) =>
        change.key.resource === ref.info.plural && (namespace === undefined || change.key.namespace === namespace)

      const initial = requested === undefined
        ? yield* resources.list(ref, namespace, { ...(options.labelSelector === undefined ? {} : { labelSelector: options.labelSelector }), ...(options.fieldSelector === undefined ? {} : { fieldSelector: options.fieldSelector }) })
        : undefined
      const after = initial === undefined ? requested : Number(initial.resourceVersion)
      const synthetic = (initial?.items ?? []).map((object): WatchEvent => ({ type: "ADDED", object }))
      let seen = after ?? 0
      const toEvents = (change: Change): ReadonlyArray<WatchEvent> => {
        seen = change.resourceVersion
        if (!inScope(change)) return []
        const event = eventOf(change, selectors)
        return event === undefined ? [] : [event]
      }
      // The subscription lives exactly as long as the stream: Stream.unwrap closes its scope when the watch ends.
      const changes = Stream.unwrap(Effect.gen(function*() {
        const subscribed = yield* Effect.result(feed.subscribe(after))
        if (subscribed._tag === "Failure") {
          const failure = subscribed.failure
          return failure._tag === "Expired" ? Stream.make(expiredEvent(failure.requested)) : Stream.fail(failure)
        }
        const subscription = subscribed.success
        return Stream.concat(
          Stream.fromIterable(subscription.backlog.flatMap(toEvents)),
          subscription.live.pipe(
            Stream.flatMap((change) => Stream.fromIterable(toEvents(change))),
            Stream.catch((expired) => Stream.make(expiredEvent(expired.requested)))
          )
        )
      }))
      const all = Stream.concat(Stream.fromIterable(synthetic), changes).pipe(Stream.orDie)
      const withBookmarks = options.allowWatchBookmarks
        ? Stream.merge(all, Stream.tick(options.bookmarkInterval).pipe(Stream.drop(1), Stream.map(() => bookmark(ref, seen))), { haltStrategy: "left" })
        : all
      return options.timeoutSeconds === undefined || options.timeoutSeconds <= 0
        ? withBookmarks
        : withBookmarks.pipe(Stream.interruptWhen(Effect.sleep(Duration.seconds(options.timeoutSeconds))))
    })

    return Watches.of({ watch })
  }))
}
