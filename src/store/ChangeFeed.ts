/**
 * The change feed: one tailer per process reads the store's change log in resourceVersion order and fans each change
 * out to every watch. It wakes on this process's commits and on other processes' (the store's onCommit, LISTEN/NOTIFY
 * on PostgreSQL), and polls once a second in case a notification was lost.
 *
 * A watch starts from a resourceVersion: recent changes come from an in-memory ring, older ones from the store's log
 * (a page at a time, as the watch takes them, so replaying a long stretch holds one page), and anything older than the
 * log's compaction horizon is Expired (HTTP 410). Live delivery goes through a sliding PubSub so a stalled client never
 * holds up the others; a subscriber that fell behind far enough to lose changes notices the gap (each entry names its
 * predecessor) and ends its watch as Expired, so its client relists.
 */
import { Context, type Duration, Effect, Layer, Option, PubSub, Queue, Schedule, type Scope, Stream } from "effect"
import { type Change, Expired, Store, type StoreError } from "./Store.ts"

export interface FeedOptions {
  /** Changes kept in memory for watches that start slightly in the past. */
  readonly bufferSize: number
  /** Live changes a subscriber may fall behind by before its watch ends as Expired. */
  readonly subscriberLag: number
  /** Changes read from the log per query. */
  readonly pageSize: number
  readonly pollInterval: Duration.Input
}

export const defaultFeedOptions: FeedOptions = {
  bufferSize: 4_096,
  subscriberLag: 16_384,
  pageSize: 1_000,
  pollInterval: "1 second"
}

interface Entry {
  readonly change: Change
  /** The resourceVersion of the change published before this one. */
  readonly previous: number
}

export interface Subscription {
  /**
   * Changes after the requested resourceVersion that were already committed when the watch started, read as they are
   * pulled. Fails Expired when the log is compacted past them first.
   */
  readonly backlog: Stream.Stream<Change, Expired | StoreError>
  /** Every later change, in order. Fails Expired when this subscriber lost changes. */
  readonly live: Stream.Stream<Change, Expired>
  /** The resourceVersion the watch is current at after the backlog. */
  readonly resourceVersion: number
}

export class ChangeFeed extends Context.Service<ChangeFeed, {
  /** Changes after `after` (or from now when undefined). */
  readonly subscribe: (after: number | undefined) => Effect.Effect<Subscription, Expired | StoreError, Scope.Scope>
  /** The last resourceVersion the feed has published. */
  readonly resourceVersion: Effect.Effect<number>
}>()("nodus/store/ChangeFeed") {
  static readonly layerWith = (options: FeedOptions) => Layer.effect(ChangeFeed, make(options))
  static readonly layer = ChangeFeed.layerWith(defaultFeedOptions)
}

function make(options: FeedOptions) {
  return Effect.gen(function*() {
    const store = yield* Store
    const pubsub = yield* PubSub.sliding<Entry>(options.subscriberLag)
    const pokes = yield* Queue.sliding<void>(1)
    const ring: Array<Entry> = []
    let published = yield* store.resourceVersion
    // The ring holds every change after `ringFrom`.
    let ringFrom = published

    const publish = (change: Change) => {
      const entry = { change, previous: published }
      ring.push(entry)
      if (ring.length > options.bufferSize) ringFrom = ring.shift()!.change.resourceVersion
      published = change.resourceVersion
      PubSub.publishUnsafe(pubsub, entry)
    }

    const drain: Effect.Effect<void, StoreError> = Effect.gen(function*() {
      const page = yield* store.changes(published, options.pageSize)
      for (const change of page.changes) if (change.resourceVersion > published) publish(change)
      if (page.changes.length === options.pageSize) return yield* drain
    })

    // This process's commits usually follow straight on what the feed published: publish them as they are. Otherwise
    // (another process committed in between, or the notification carries nothing) read the log.
    const unregister = yield* store.onCommit((committed) => {
      if (committed !== undefined && committed.after === published) {
        for (const change of committed.changes) publish(change)
      } else Queue.offerUnsafe(pokes, undefined)
    })
    yield* Effect.addFinalizer(() => unregister)
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Queue.take(pokes), Effect.ignore(drain))))
    yield* Effect.forkScoped(
      Effect.repeat(Effect.sync(() => Queue.offerUnsafe(pokes, undefined)), Schedule.spaced(options.pollInterval))
    )

    /**
     * Committed changes after `after` from the log, up to what the feed has published, a page per pull: a watch that
     * replays a long stretch holds one page of it, not the stretch.
     */
    const fromLog = (after: number, upTo: number): Stream.Stream<Change, Expired | StoreError> =>
      Stream.paginate(after, (cursor) =>
        Effect.gen(function*() {
          const page = yield* store.changes(cursor, options.pageSize)
          // Changes after the cursor were compacted away before the watch read them.
          if (page.compactedResourceVersion > cursor) {
            return yield* new Expired({ requested: after, oldest: page.compactedResourceVersion })
          }
          const last = page.changes.at(-1)?.resourceVersion ?? upTo
          return [
            page.changes.filter((change) => change.resourceVersion <= upTo),
            last < upTo ? Option.some(last) : Option.none()
          ] as const
        }))

    const subscribe = (after: number | undefined) =>
      Effect.gen(function*() {
        const subscription = yield* PubSub.subscribe(pubsub)
        const upTo = published
        const start = after ?? upTo
        const backlog = start >= upTo
          ? Stream.empty
          : start >= ringFrom
          ? Stream.fromIterable(
            ring.filter((entry) => entry.change.resourceVersion > start).map((entry) => entry.change)
          )
          : fromLog(start, upTo)
        let delivered = Math.max(start, upTo)
        const live = Stream.fromSubscription(subscription).pipe(
          Stream.filter((entry) => entry.change.resourceVersion > delivered),
          Stream.mapEffect((entry) => {
            if (entry.previous > delivered) {
              return Effect.fail(new Expired({ requested: delivered, oldest: entry.previous }))
            }
            delivered = entry.change.resourceVersion
            return Effect.succeed(entry.change)
          })
        )
        return { backlog, live, resourceVersion: Math.max(start, upTo) }
      })

    return ChangeFeed.of({ subscribe, resourceVersion: Effect.sync(() => published) })
  })
}
