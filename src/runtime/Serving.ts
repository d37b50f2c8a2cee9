/**
 * The seam between the reconciler and a dispatcher of requests that an object's runs serve (a Function's calls on its
 * workers; runtime/FunctionDispatch.ts). The reconciler names no kind: for an object of a kind the dispatcher serves,
 * it asks the load before the step (what the machine sizes its runs to), tells it the runs after the step's actions
 * (it dispatches to those that take requests then, and writes what its requests became), and tells it when the object
 * is let go. Everything happens inside the object's reconcile, one at a time, so the simulator's virtual time sees the
 * same moves at the same instants on every run.
 */
import { Context, type Effect } from "effect"
import type { AttemptFacts } from "../core/capacity/Capacity.ts"
import type { ServingLoad } from "../core/controller/Controller.ts"
import type { JsonObject } from "../core/Json.ts"

/** The object whose runs serve requests, as the reconciler knows it at the step. */
export interface ServedObject {
  readonly kind: string
  readonly uid: string
  readonly namespace: string
  readonly name: string
  /** Its spec as its machine reads it. */
  readonly spec: unknown
}

export class Serving extends Context.Service<Serving, {
  /** The kinds whose objects it serves. */
  readonly kinds: ReadonlySet<string>
  /**
   * Before a step at `now`, with the object's runs as the port reports them: answers heard so far taken in, requests on
   * runs that ended lost, deadlines and backoffs checked; the load the step sees.
   */
  readonly load: (
    object: ServedObject,
    attempts: ReadonlyArray<AttemptFacts>,
    now: number
  ) => Effect.Effect<ServingLoad>
  /**
   * After the step's actions: its runs now and the status it wrote. Requests are dispatched to the runs that take them,
   * and what changed of them is written. Answers when the object must be stepped again for its requests, if ever.
   */
  readonly stepped: (
    object: ServedObject,
    status: JsonObject,
    attempts: ReadonlyArray<AttemptFacts>,
    now: number
  ) => Effect.Effect<number | undefined>
  /** The object is gone (deleted): its unfinished requests end. */
  readonly removed: (object: ServedObject, now: number) => Effect.Effect<void>
  /** Sets who hears of objects whose requests changed (one came, was answered or cancelled): they are stepped again. */
  readonly onWake: (wake: (uid: string) => void) => void
}>()("nodus/runtime/Serving") {}
