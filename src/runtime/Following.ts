/**
 * How a server component follows the store, level-triggered like a Kubernetes controller (style.md §3): it subscribes
 * to the change feed first, then reads everything (its resync), then applies each change, so nothing committed in
 * between is missed. A follower that falls too far behind ends as Expired and starts over with a fresh resync, and a
 * pass that fails (a bug in one step) is logged and the next one starts a second later: the component keeps working.
 */
import { Cause, Effect, type Scope, Stream } from "effect"
import type { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change } from "../store/Store.ts"

/** Keeps a fiber alive through failures and defects too: `component: what failed` is logged, and it goes on. */
export const surviving =
  (component: string, what: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<void, never, R> =>
    effect.pipe(
      Effect.asVoid,
      Effect.catchCause((cause) => Effect.logError(`${component}: ${what} failed`, Cause.pretty(cause)))
    )

/**
 * A pause of `ms` of wall time, not of the Effect clock (a test's or the simulator's clock may stand still or jump).
 */
export const wallPause = (ms: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Forks the follower for the scope's lifetime: `resync` reads everything, `onChange` applies one change. */
export const followStore = <E1, R1, E2, R2>(
  component: string,
  feed: ChangeFeed["Service"],
  resync: Effect.Effect<void, E1, R1>,
  onChange: (change: Change) => Effect.Effect<void, E2, R2>
): Effect.Effect<void, never, Scope.Scope | R1 | R2> => {
  const follow = Effect.scoped(Effect.gen(function*() {
    const subscription = yield* feed.subscribe(undefined)
    yield* resync
    yield* Stream.runForEach(subscription.live, onChange)
  })).pipe(
    Effect.catchTag(
      "Expired",
      () => Effect.logDebug(`${component}: fell behind the change feed; reading everything again`)
    )
  )
  return Effect.asVoid(
    Effect.forkScoped(
      Effect.forever(
        Effect.andThen(surviving(component, "following the change feed")(follow), Effect.sleep("1 second"))
      )
    )
  )
}
