/**
 * The host's wall clock, as a service: the time now on this machine, whatever the service's Clock says (virtual under
 * the simulator, moved by its test clock). What leaves the process to be checked against another party's clock reads
 * this one — a webhook's `webhook-timestamp`, which a Standard Webhooks receiver holds to within 5 minutes of its own
 * time. Everything the platform schedules or records stays on the service's Clock. Tests may provide another.
 */
import { Context } from "effect"

export interface WallClockShape {
  /** Epoch milliseconds now. */
  readonly millis: () => number
}

export const WallClock = Context.Reference<WallClockShape>("nodus/runtime/WallClock", {
  defaultValue: () => ({ millis: () => Date.now() })
})
