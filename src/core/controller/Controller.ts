/**
 * The controller contract every kind's machine is written to (style.md: "a state machine is a pure function over
 * data"). A machine's `step` reads what is observed now — the object's spec and the status it wrote last, the facts
 * of its runs of capacity, the market, what money allows — and `now`, and returns the next status, the actions for
 * the capacity port, the events to record, and when it wants to be woken. It never reads a clock, never awaits, never
 * remembers: the same observation gives the same result, so a driver may step it after any change, on a timer, or
 * after a crash (level-triggered, like a Kubernetes reconciler).
 *
 * Drivers — the headless simulator's loop (src/backends/sim/Simulation.ts) and the runtime's reconciler
 * (src/runtime/Reconciler.ts) — bill around each step with `billedStep` (core/controller/BilledStep.ts), carry the
 * actions out through the capacity port (core/capacity/Capacity.ts), record the events and write the status.
 */
import type { Funding } from "../billing/Billing.ts"
import type { AttemptFacts, LaunchRequest } from "../capacity/Capacity.ts"
import type { Explanation, Market, PlacementRequest, Ranking, RunProfile } from "../capacity/Placement.ts"
import { conditionIn } from "./Conditions.ts"

/** What a step observes of its object. */
export interface Observation<Spec, Status> {
  readonly name: string
  readonly namespace: string
  readonly uid: string
  /** metadata.generation: status.observedGeneration reports it. */
  readonly generation: number
  /** metadata.creationTimestamp (epoch ms), where the driver knows it (a Sandbox's maxLifetime counts from it). */
  readonly createdAt?: number | undefined
  readonly spec: Spec
  readonly status: Status
  /** Every run of capacity the object has had, as the capacity port reports them. */
  readonly attempts: ReadonlyArray<AttemptFacts>
  /** What the requests an object serves ask of its runs now (a Function's calls), where the runtime dispatches them. */
  readonly serving?: ServingLoad | undefined
}

/** The load on a serving object's runs (its workers), as the runtime's dispatcher counts it at the step. */
export interface ServingLoad {
  /** Requests waiting for a run to take them now (a retry's backoff over). */
  readonly queued: number
  /** Requests each run (by attempt name) works on now. */
  readonly running: Readonly<Record<string, number>>
  /** When each run last ended a request: its idle time counts from there (or from its boot). */
  readonly lastBusyAt: Readonly<Record<string, number>>
  /** The next time the dispatcher must be stepped (a retry's backoff over, a deadline), if any. */
  readonly nextAt: number | undefined
  /**
   * The counts the status shows (queued, and requests per run), where they lag the live ones: refreshed at most once
   * a second, so that an object's status is not rewritten for every request that comes and goes. Absent: the live ones.
   */
  readonly shown?: { readonly queued: number; readonly running: Readonly<Record<string, number>> } | undefined
}

/** What a step observes of the world beside its object. */
export interface StepContext {
  readonly now: number
  readonly market: Market
  /** The placement ranking of this object's request (memoized by the driver: it depends on the spec only). */
  readonly ranking: Ranking
  /** What money allows (core/billing/Billing.ts `settle`); absent when the driver bills nothing. */
  readonly funding?: Funding | undefined
  /**
   * The driver hands the observed status over: the step writes the next status into that object instead of a copy,
   * and the result's status is it. Only for a driver that keeps no other reference to the status it passes (the
   * headless simulator: copying every status at each of its 10^7 steps was the largest single cost of a step).
   * Absent or false: the status is copied and the one observed is left as it was.
   */
  readonly rewriteStatus?: boolean | undefined
  /** Other objects' contention for capacity, as the driver knows it (absent: none known). */
  readonly contention?: Contention | undefined
}

/**
 * Who else wants capacity now, and what idle capacity others hold (docs/functions.md, "Yielding to waiting work"): a
 * Function's idle worker above what its calls want goes at once when another object waits for its offering, and a
 * step that finds no capacity names the idle workers that hold it.
 */
export interface Contention {
  /** Offering id → the object that waits for capacity of it (e.g. `Function demo/b`), other than the stepped one. */
  readonly wanted: ReadonlyMap<string, string>
  /** Idle workers of other objects: their Attempt, its offering, and whose it is. */
  readonly idle: ReadonlyArray<{ readonly attempt: string; readonly offering: string; readonly owner: string }>
}

/** A launch, addressed by the driver to the port with the owner it knows; `explain` is rendered only where recorded. */
export interface LaunchAction extends Omit<LaunchRequest, "owner" | "namespace" | "annotations"> {
  readonly _tag: "Launch"
  readonly explain: () => Explanation
}

/** What a step asks of capacity (and of the object's own life: Delete, spec: ttlSecondsAfterFinished). */
export type Action =
  | LaunchAction
  | { readonly _tag: "Checkpoint"; readonly attempt: string; readonly episode: number }
  | { readonly _tag: "Stop"; readonly attempt: string; readonly keepWarmMs: number }
  | { readonly _tag: "Delete" }

/**
 * An event on the object: recorded as a Kubernetes Event, and delivered as `type` (spec: Event types, `<kind>.<reason>`
 * in lower case) when it has one.
 */
export interface ControllerEvent {
  readonly type: string | undefined
  readonly reason: string
  readonly message: string
  readonly warning: boolean
}

export interface StepResult<Status> {
  readonly status: Status
  readonly actions: ReadonlyArray<Action>
  readonly events: ReadonlyArray<ControllerEvent>
  /** The next time the step must run even if nothing is observed. */
  readonly wakeAt: number | undefined
  /** Work waits for capacity: step again when capacity frees up. */
  readonly waitingForCapacity: boolean
  /** Work waits for money (credits, a Budget, the cap): step again when the ledger changes. */
  readonly waitingForFunds: boolean
}

/**
 * A kind's machine: the pure step, and what drivers need to read of a spec without knowing the kind — the placement
 * request its launches are ranked for (rank's input), its cost cap, and the phase that ends it.
 */
export interface Machine<Spec, Status> {
  readonly kind: string
  readonly step: (observation: Observation<Spec, Status>, context: StepContext) => StepResult<Status>
  /** What placement ranks offerings for (the spec's resources and placement) and how a run of it behaves. */
  readonly placementOf: (spec: Spec) => { readonly request: PlacementRequest; readonly run: RunProfile }
  /** The object's maxCostUSD as written (spec: Conventions 4), if it has one. */
  readonly maxCostOf: (spec: Spec) => string | undefined
  /** Whether the status is final: nothing runs any more, and the cost shown is final once its holds closed. */
  readonly isFinal: (status: Status) => boolean
}

/** Whether a status shows a Funded condition that is False (money holds the object back). */
export const isUnfunded = (
  status: { readonly conditions?: ReadonlyArray<{ readonly type: string; readonly status: string }> | undefined }
): boolean => conditionIn(status.conditions, "Funded")?.status === "False"
