/**
 * Running the reconciler on virtual time (the sim backend, and tests over any driver whose time they move): the
 * driver's events and the reconciler's due keys in time order, instant by instant — at each instant the driver first
 * (boots, exits, preemptions: the port's changes), then, once the reconciler has taken in every change the port
 * published, every key due then. What is due already when it starts (a spec change just read) runs at the driver's
 * now, before time moves.
 */
import { Effect } from "effect"
import type { Reconciler } from "./Reconciler.ts"

/** A capacity driver whose time its caller moves. */
export interface SteppedCapacity {
  readonly now: () => number
  /** When its next event is due, if any. */
  readonly nextAt: () => number | undefined
  /** Runs its events due by `at`; its time is then `at`. */
  readonly runTo: (at: number) => void
  /** The changes its port has published so far. */
  readonly published: () => number
}

export interface Instant {
  /** Before the driver runs the instant (the sim backend moves its clock there). */
  readonly before?: (at: number) => void
  /** After the driver ran it, before the due keys run (the sim backend lets lapsed holds expire). */
  readonly after?: (at: number) => Effect.Effect<void>
}

/** Yields granted to the reconciler's fiber to take in the changes of one instant (it needs one or two). */
const changeYieldsMax = 1_000

/** Waits until the reconciler has taken in every change the port published (its fiber runs between yields). */
const takeChanges = (reconciler: Reconciler["Service"], capacity: SteppedCapacity) =>
  Effect.gen(function*() {
    for (
      let yields = 0;
      reconciler.changesReceived() < capacity.published() && yields < changeYieldsMax;
      yields++
    ) yield* Effect.yieldNow
  })

/** Runs every driver event and due key up to `target`, in time order. */
export const runUntil = (
  reconciler: Reconciler["Service"],
  capacity: SteppedCapacity,
  target: number,
  hooks: Instant = {}
) =>
  Effect.gen(function*() {
    const instant = (at: number) =>
      Effect.gen(function*() {
        hooks.before?.(at)
        capacity.runTo(at)
        if (hooks.after !== undefined) yield* hooks.after(at)
        yield* takeChanges(reconciler, capacity)
        yield* reconciler.runDue(at)
      })
    yield* takeChanges(reconciler, capacity)
    yield* reconciler.runDue(capacity.now())
    for (;;) {
      const driverAt = capacity.nextAt()
      const keyAt = reconciler.nextWakeAt()
      const next = driverAt === undefined ? keyAt : keyAt === undefined ? driverAt : Math.min(driverAt, keyAt)
      if (next === undefined || next > target) break
      yield* instant(Math.max(next, capacity.now()))
    }
    yield* instant(Math.max(target, capacity.now()))
  })
