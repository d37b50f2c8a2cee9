/**
 * Simulated time for the sim backend (docs/simulator.md, "The sim backend"): it follows the wall clock at `speed`
 * simulated seconds per second from an anchor, and the test clock moves the anchor forward. It never goes back.
 *
 * The server runs on this time throughout: it is Effect's `Clock` for every layer, so creationTimestamp, managedFields
 * times, Table ages and key expiry agree with the times the simulator writes into status. Sleeping stays on the
 * wall clock (timers, watch timeouts and bookmarks are about real waiting), and so does monotonic time.
 */
import { Clock, type Duration, Effect, Layer } from "effect"

export class VirtualClock {
  readonly speed: number
  private anchorVirtual: number
  private anchorWall: number
  private readonly wall: () => number

  constructor(speed: number, start: number, wall: () => number = Date.now) {
    this.speed = speed
    this.wall = wall
    this.anchorWall = wall()
    this.anchorVirtual = start
  }

  /** Simulated epoch milliseconds now (whole milliseconds, as the engine counts them). */
  now(): number {
    return Math.floor(this.anchorVirtual + (this.wall() - this.anchorWall) * this.speed)
  }

  /** Moves the clock forward to `at`; an instant already passed changes nothing. */
  advanceTo(at: number): void {
    if (at <= this.now()) return
    this.anchorVirtual = at
    this.anchorWall = this.wall()
  }
}

/** Effect's Clock reading `virtual`; sleeps and monotonic time are the default (wall) clock's. */
export const clockOf = (virtual: VirtualClock): Clock.Clock => {
  const real = Clock.Clock.defaultValue()
  return {
    currentTimeMillisUnsafe: () => virtual.now(),
    currentTimeMillis: Effect.sync(() => virtual.now()),
    currentTimeNanosUnsafe: () => BigInt(virtual.now()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(virtual.now()) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: real.monotonicTimeNanos,
    sleep: (duration: Duration.Duration) => real.sleep(duration)
  }
}

/** The layer that makes every effect built under it read `virtual`. */
export const layer = (virtual: VirtualClock) => Layer.succeed(Clock.Clock, clockOf(virtual))
