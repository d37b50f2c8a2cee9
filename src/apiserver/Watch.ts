/**
 * Watches (spec: Generic operations, `watch=true`): a stream of ADDED, MODIFIED, DELETED, BOOKMARK and ERROR events
 * for one kind, optionally one project and selectors, with Kubernetes' semantics:
 *
 * - resourceVersion unset or "0": synthetic ADDED events for what exists now, then live events;
 * - resourceVersion N: every change after N, replayed from the change log; older than the log → an ERROR event
 *   carrying a 410 Expired Status (client-go then relists);
 * - a MODIFIED that makes an object start or stop matching the selectors is sent as ADDED or DELETED;
 * - BOOKMARK events (allowWatchBookmarks) carry the resourceVersion the watch has seen up to, matching or not.
 *
 * What a watch holds is bounded (WatchLimits): events pass a buffer of `buffer` events on their way to the client.
 * What is replayed (the initial listing, read a page at a time, and the changes after N) waits for room, so a client
 * that reads slowly slows the reading down. Live changes come at the writers' pace: one that finds no room for
 * `slowAfter` makes the watcher slow; the watch stops reading the change feed, drops what it holds and ends with a
 * 410 Expired ERROR event, so its client relists. timeoutSeconds ends a watch whatever it is doing.
 */
import {
  type Cause,
  Context,
  Data,
  Duration,
  Effect,
  Exit,
  type Fiber,
  Layer,
  Option,
  Queue,
  Result,
  Stream
} from "effect"
import type { Json } from "../core/Json.ts"
import type { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change, Expired, StoreError } from "../store/Store.ts"
import type { WatchLimits } from "./ApiConfig.ts"
import { parseResourceVersion, Resources, type Selectors, selectorsOf, selects } from "./Resources.ts"

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"

export interface WatchEvent {
  readonly type: WatchEventType
  readonly object: ResourceObject | Json
}

export const defaultWatchLimits: WatchLimits = { buffer: 100, slowAfter: "1 second", drainGrace: "5 seconds" }

export interface WatchOptions {
  readonly resourceVersion?: string
  readonly labelSelector?: string
  readonly fieldSelector?: string
  readonly allowWatchBookmarks: boolean
  readonly timeoutSeconds?: number
  readonly bookmarkInterval: Duration.Input
  readonly limits: WatchLimits
}

const bookmark = (ref: ResourceRef, resourceVersion: number): WatchEvent => ({
  type: "BOOKMARK",
  object: { kind: ref.info.kind, apiVersion: ref.apiVersion, metadata: { resourceVersion: String(resourceVersion) } }
})

/** An ERROR event whose object is a 410 Expired Status, as the API server sends it. */
const expiredStatus = (message: string): WatchEvent => ({
  type: "ERROR",
  object: { apiVersion: "v1", kind: "Status", metadata: {}, status: "Failure", message, reason: "Expired", code: 410 }
})

/** The 410 an expired watch ends with. */
export const expiredEvent = (requested: number): WatchEvent => expiredStatus(`too old resource version: ${requested}`)

/** The 410 a slow watcher ends with. */
export const slowEvent = (resourceVersion: number, buffer: number): WatchEvent =>
  expiredStatus(`the client fell more than ${buffer} events behind at resource version ${resourceVersion}: list again`)

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

/** The watcher left a live change waiting in its full buffer for `slowAfter`. */
class SlowWatcher extends Data.TaggedError("SlowWatcher")<{ readonly resourceVersion: number }> {}

/** Unset and 0 both mean: list what exists, then follow. */
const requestedVersion = (value: string | undefined): Result.Result<number | undefined, ApiError> =>
  value === undefined || value === ""
    ? Result.succeed(undefined)
    : Result.map(parseResourceVersion(value), (version) => (version === 0 ? undefined : version))

/**
 * Interrupts `consumer` once it has taken nothing for `grace`. Over HTTP the consumer is the response writer, which
 * waits for the socket to drain while its client does not read; only an interruption ends that wait (and the
 * connection).
 */
const interruptWhenStalled = (consumer: Fiber.Fiber<unknown, unknown>, taken: () => number, grace: Duration.Input) =>
  Effect.gen(function*() {
    let before: number | undefined
    while (before !== taken()) {
      before = taken()
      yield* Effect.sleep(grace)
    }
    consumer.interruptUnsafe()
  })

/**
 * The events `produce` offers, through a queue of `limits.buffer` that it fills from a fiber of its own, so that it
 * can tell when its consumer does not keep up. Whatever ends the production (the deadline, a final event, a failure)
 * drops what the queue still holds; a consumer that then takes nothing for `drainGrace` is interrupted.
 */
const buffered = <E>(
  produce: (queue: Queue.Queue<WatchEvent, E | Cause.Done>) => Effect.Effect<WatchEvent | undefined, E>,
  limits: WatchLimits,
  timeoutSeconds: number | undefined
): Stream.Stream<WatchEvent> =>
  Stream.unwrap(Effect.withFiber((consumer) => {
    let taken = 0
    const deadline = timeoutSeconds === undefined || timeoutSeconds <= 0 ? undefined : Duration.seconds(timeoutSeconds)
    const events = Stream.callback<WatchEvent, E>((queue) =>
      Effect.gen(function*() {
        const produced = produce(queue)
        // The deadline ends the watch without a final event.
        const ended = yield* Effect.exit(
          deadline === undefined
            ? produced
            : Effect.map(Effect.timeoutOption(produced, deadline), Option.getOrUndefined)
        )
        yield* Queue.clear(queue)
        if (Exit.isFailure(ended)) {
          yield* Queue.failCause(queue, ended.cause)
        } else {
          if (ended.value !== undefined) Queue.offerUnsafe(queue, ended.value)
          yield* Queue.end(queue)
        }
        yield* interruptWhenStalled(consumer, () => taken, limits.drainGrace)
      }), { bufferSize: limits.buffer, strategy: "suspend" })
    // Counted a chunk at a time: the count only tells whether the consumer moved.
    return Effect.succeed(Stream.mapArray(events, (chunk) => {
      taken++
      return chunk
    }))
  })).pipe(Stream.orDie)

export class Watches extends Context.Service<Watches, {
  readonly watch: (
    ref: ResourceRef,
    namespace: string | undefined,
    options: WatchOptions
  ) => Effect.Effect<Stream.Stream<WatchEvent>, ApiError>
}>()("nodus/apiserver/Watch") {
  static readonly layer = Layer.effect(
    Watches,
    Effect.gen(function*() {
      const feed = yield* ChangeFeed
      const resources = yield* Resources

      const watch = (ref: ResourceRef, namespace: string | undefined, options: WatchOptions) =>
        Effect.gen(function*() {
          const selectors = yield* Effect.fromResult(selectorsOf(options, ref))
          const requested = yield* Effect.fromResult(requestedVersion(options.resourceVersion))
          if (namespace !== undefined && ref.info.scope === "Namespaced") yield* resources.requireProject(namespace)
          const limits = options.limits
          const inScope = (change: Change) =>
            change.key.resource === ref.info.plural && (namespace === undefined || change.key.namespace === namespace)

          // The resourceVersion the watch has seen up to, for bookmarks and the slow watcher's 410.
          let seen = requested ?? 0
          const eventsOf = <E>(changes: Stream.Stream<Change, E>): Stream.Stream<WatchEvent, E> =>
            Stream.filterMap(changes, (change) => {
              seen = change.resourceVersion
              const event = inScope(change) ? eventOf(change, selectors) : undefined
              return event === undefined ? Result.fail(change) : Result.succeed(event)
            })
          const withBookmarks = (events: Stream.Stream<WatchEvent, Expired>) =>
            options.allowWatchBookmarks
              ? Stream.merge(
                events,
                Stream.tick(options.bookmarkInterval).pipe(Stream.drop(1), Stream.map(() => bookmark(ref, seen))),
                { haltStrategy: "left" }
              )
              : events

          /**
           * The synthetic ADDED events of a watch without resourceVersion, a page at a time; returns the list's
           * version.
           */
          const listInitial = (replay: (events: ReadonlyArray<WatchEvent>) => Effect.Effect<unknown>) =>
            Effect.gen(function*() {
              const listed = yield* resources.listPages(ref, namespace, {
                ...(options.labelSelector === undefined ? {} : { labelSelector: options.labelSelector }),
                ...(options.fieldSelector === undefined ? {} : { fieldSelector: options.fieldSelector })
              }, limits.buffer)
              yield* Stream.runForEach(
                listed.pages,
                (page) => replay(page.map((object): WatchEvent => ({ type: "ADDED", object })))
              )
              return Number(listed.resourceVersion)
            })

          // Replayed events wait for room (offered a batch at a time, so that the client is written to in chunks, not
          // an event per write); a live one waits `slowAfter` at most; a bookmark is sent only when there is room.
          const produce = (queue: Queue.Queue<WatchEvent, ApiError | StoreError | Cause.Done>) => {
            const replay = (events: ReadonlyArray<WatchEvent>) => Queue.offerAll(queue, events)
            const live = (event: WatchEvent) =>
              Effect.suspend(() =>
                Queue.offerUnsafe(queue, event) || event.type === "BOOKMARK"
                  ? Effect.void
                  : Effect.flatMap(
                    Effect.timeoutOption(Queue.offer(queue, event), limits.slowAfter),
                    (offered) =>
                      Option.isSome(offered) ? Effect.void : Effect.fail(new SlowWatcher({ resourceVersion: seen }))
                  )
              )
            return Effect.scoped(Effect.gen(function*() {
              seen = requested ?? (yield* listInitial(replay))
              const subscription = yield* feed.subscribe(seen)
              yield* Stream.runForEachArray(eventsOf(subscription.backlog), replay)
              yield* Stream.runForEach(withBookmarks(eventsOf(subscription.live)), live)
              return undefined
            })).pipe(
              Effect.catchTags({
                Expired: (expired) => Effect.succeed(expiredEvent(expired.requested)),
                SlowWatcher: (slow) => Effect.succeed(slowEvent(slow.resourceVersion, limits.buffer))
              })
            )
          }
          return buffered(produce, limits, options.timeoutSeconds)
        })

      return Watches.of({ watch })
    })
  )
}
