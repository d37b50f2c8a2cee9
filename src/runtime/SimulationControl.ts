/**
 * The test clock of the sim backend (docs/simulator.md, "The sim backend"): read the simulated time, and move it
 * forward so that integrators test hours of behaviour in seconds.
 *
 *   GET  /apis/{group}/v1/simulation/clock                       → {kind: SimulationClock, now, speed}
 *   POST /apis/{group}/v1/simulation/clock  {"advance": "2h"}    → runs every due event, then answers the new clock
 *   POST /apis/{group}/v1/simulation/clock  {"to": "<RFC 3339>"} → the same, to an instant
 *
 * This module holds the service the HTTP layer calls, the request's validation and the answer's shape. Without the
 * sim backend (`layerNone`) the clock is 404 NotFound.
 */
import { Context, Effect, Layer, Result } from "effect"
import { isObject, type Json, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import { ApiError, type Cause, fieldInvalid, fieldRequired } from "../core/meta/ApiError.ts"
import { formatDurationMs, parseDurationMs } from "../core/Units.ts"

/** The simulated clock: its time (epoch ms) and how many simulated seconds pass per wall-clock second. */
export interface ClockReading {
  readonly now: number
  readonly speed: number
}

/** Where a POST moves the clock. */
export type ClockTarget =
  | { readonly _tag: "By"; readonly ms: number }
  | { readonly _tag: "To"; readonly at: number }

/** The largest move of one request: a year of simulated time; a longer test moves the clock several times. */
export const clockAdvanceMaxMs = 8_760 * Limits.hourMs

export const clockRequestFix = `Send {"advance": "<duration such as 15m or 2h, at most ${
  formatDurationMs(clockAdvanceMaxMs)
}>"} or {"to": "<RFC 3339 time not before the clock's now>"}, not both.`

const clockInvalid = (causes: ReadonlyArray<Cause>): ApiError =>
  new ApiError({
    code: "Invalid",
    message: `SimulationClock is invalid: ${causes.map((cause) => `${cause.field}: ${cause.message}`).join(", ")}`,
    causes,
    fix: clockRequestFix
  })

const rfc3339 = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$/u

const advanceOf = (value: Json): Result.Result<ClockTarget, Cause> => {
  const ms = typeof value === "string" ? parseDurationMs(value) : undefined
  if (ms === undefined) {
    return Result.fail(
      fieldInvalid("advance", `Invalid value: ${JSON.stringify(value)}: must be a duration such as 30s, 15m or 2h`)
    )
  }
  if (ms > clockAdvanceMaxMs) {
    return Result.fail(
      fieldInvalid(
        "advance",
        `Invalid value: "${value as string}": must be at most ${formatDurationMs(clockAdvanceMaxMs)}`
      )
    )
  }
  return Result.succeed({ _tag: "By", ms: Math.round(ms) })
}

const toOf = (value: Json): Result.Result<ClockTarget, Cause> => {
  const at = typeof value === "string" && rfc3339.test(value) ? Date.parse(value) : Number.NaN
  return Number.isNaN(at)
    ? Result.fail(
      fieldInvalid(
        "to",
        `Invalid value: ${JSON.stringify(value)}: must be an RFC 3339 time such as 2026-01-02T15:04:05Z`
      )
    )
    : Result.succeed({ _tag: "To", at })
}

/** The body of a POST: exactly one of `advance` and `to`, and nothing else. */
export const parseClockRequest = (body: unknown): Result.Result<ClockTarget, ApiError> => {
  if (!isObject((body ?? null) as Json)) {
    return Result.fail(clockInvalid([fieldInvalid("", "Invalid value: the body must be a JSON object")]))
  }
  const object = body as JsonObject
  const unknown = Object.keys(object).filter((key) => key !== "advance" && key !== "to")
  if (unknown.length > 0) {
    return Result.fail(
      clockInvalid(
        unknown.map((key) => fieldInvalid(key, "Unsupported field: only advance or to", "FieldValueNotSupported"))
      )
    )
  }
  const advance = object["advance"]
  const to = object["to"]
  if ((advance === undefined) === (to === undefined)) {
    return Result.fail(
      clockInvalid([
        advance === undefined
          ? { ...fieldRequired("advance"), message: "Required value: advance or to" }
          : fieldInvalid("to", "Forbidden: advance and to exclude each other", "FieldValueForbidden")
      ])
    )
  }
  const target = advance !== undefined ? advanceOf(advance) : toOf(to!)
  return Result.mapError(target, (cause) => clockInvalid([cause]))
}

/** The clock instant a target names, refusing to go back: simulated time only moves forward. */
export const targetTime = (target: ClockTarget, now: number): Result.Result<number, ApiError> => {
  const at = target._tag === "By" ? now + target.ms : target.at
  if (at < now) {
    return Result.fail(
      clockInvalid([
        fieldInvalid(
          "to",
          `Invalid value: "${new Date(at).toISOString()}": before the clock's now (${
            new Date(now).toISOString()
          }); simulated time never goes back`
        )
      ])
    )
  }
  if (at - now > clockAdvanceMaxMs) {
    return Result.fail(
      clockInvalid([
        fieldInvalid(
          "to",
          `Invalid value: "${new Date(at).toISOString()}": more than ${formatDurationMs(clockAdvanceMaxMs)} ahead`
        )
      ])
    )
  }
  return Result.succeed(at)
}

/** The answer of both methods. */
export const clockObject = (group: string, reading: ClockReading): JsonObject => ({
  apiVersion: `${group}/v1`,
  kind: "SimulationClock",
  now: new Date(reading.now).toISOString(),
  speed: reading.speed
})

export class SimulationControl extends Context.Service<SimulationControl, {
  readonly read: Effect.Effect<ClockReading, ApiError>
  /** Runs the simulation to the target: every reconcile and store write is done when this succeeds. */
  readonly advance: (target: ClockTarget) => Effect.Effect<ClockReading, ApiError>
}>()("nodus/runtime/SimulationControl") {
  /** No simulator behind the server: the clock does not exist. */
  static readonly layerNone = Layer.succeed(
    SimulationControl,
    SimulationControl.of({
      read: Effect.fail(noSimulator()),
      advance: () => Effect.fail(noSimulator())
    })
  )
}

function noSimulator(): ApiError {
  return new ApiError({
    code: "NotFound",
    message: "the simulation clock exists only with the sim backend",
    fix: "Start the server with --backend sim (NODUS_BACKEND=sim) to use the test clock."
  })
}
