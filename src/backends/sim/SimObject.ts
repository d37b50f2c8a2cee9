/**
 * What the headless simulator (Simulation.ts) holds of an object of any kind, and what a kind gives it (`SimKind`):
 * the kind's reconcile core registration (core/controller/Reconcile.ts) and the kind's own interpretation of what its
 * steps do beyond the capacity (a Sandbox's box, the checkers of a Job). The simulator's loop reads only these.
 */
import type { Room } from "../../core/billing/Billing.ts"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import type { ControllerEvent, LaunchAction, ServingLoad, StepResult } from "../../core/controller/Controller.ts"
import type { ReconcileKind } from "../../core/controller/Reconcile.ts"
import type { WorkloadModel } from "./SimCapacity.ts"

/** What a kind's status shows that the simulator reads: its phase, its conditions (funding) and why. */
export interface SimStatus {
  phase?: string | undefined
  reason?: string | undefined
  // biome-ignore lint: each kind's conditions have their own type; the simulator only hands them on.
  conditions?: any
}

export interface SimObject<Spec = unknown, Status extends SimStatus = SimStatus> {
  /** Its kind's entry (the simulator's list of kinds). */
  readonly kind: SimKind<Spec, Status>
  readonly name: string
  readonly namespace: string
  /**
   * The capacity's owner key and the trace's subject, made once per object: it keys the object's maps here and in the
   * capacity, and one string object hashes once (10^7 reconciles in the platform benchmark).
   */
  readonly key: string
  readonly uid: string
  generation: number
  readonly createdAt: number
  spec: Spec
  status: Status
  /**
   * Appended to by `appended` (SimCapacity.ts): a copy while short, so an object's few attempts take no room for 17.
   */
  attempts: Array<AttemptFacts>
  readonly workload: WorkloadModel
  /** A reconcile is scheduled for now. */
  dirty: boolean
  /** The time of the wake-up already scheduled, if any. */
  wakeAt: number | undefined
  deleted: boolean
  /**
   * The simulation's own bookkeeping, on the object rather than in sets and weak maps keyed by it (a lookup there reads
   * a table the step would not otherwise touch, several times per step): whether the object is in the queue of those
   * waiting for capacity, and what its last step saw when that step changed nothing while it waited (`lookAgain`).
   */
  queued: boolean
  settled: SettledLook<Spec, Status> | undefined
  /**
   * The checkers' memo of this object (Checkers.ts, the clock rule's last verdict), kept on the object it is about: a
   * map beside it was read at every step, out of the caches. The simulation itself never reads it.
   */
  clockChecked?: ClockVerdict | undefined
  /**
   * The load on its runs, for a kind whose runs serve requests (`Observation.serving`), set by its entry's `observe`
   * before each step. Left unset for other kinds (a Job's object keeps its shape).
   */
  serving?: ServingLoad | undefined
}

/** What an object's last step saw and left, when that step changed nothing while it waited for capacity. */
export interface SettledLook<Spec, Status> {
  readonly status: Status
  readonly spec: Spec
  readonly generation: number
  readonly attempts: number
}

/** What the clock rule was given at a Job's last step, and whether the clock was right (`SimObject.clockChecked`). */
export interface ClockVerdict {
  readonly timeoutTime: string
  readonly timeoutStartTime: string
  readonly timeout: string
  readonly suspendedDuration: string | undefined
  readonly right: boolean
}

/** What a step's status showed before the step: its phase and conditions (the step may have written it in place). */
export interface StatusBefore<Status extends SimStatus = SimStatus> {
  readonly phase?: Status["phase"] | undefined
  readonly conditions?: Status["conditions"] | undefined
}

/**
 * A kind the headless simulator runs: its registration with the reconcile core, and what its steps do beyond the
 * capacity, each optional. Adding a kind to the simulator is adding an entry to the list it is given.
 */
export interface SimKind<Spec = unknown, Status extends SimStatus = SimStatus> {
  readonly reconcile: ReconcileKind<Spec, Status>
  /**
   * What its objects' owner keys start with before `<namespace>/<name>` (none: a Job's key is `<namespace>/<name>`).
   */
  readonly keyPrefix?: string | undefined
  /** What its objects' uids are numbered after, per kind (default `sim-`). */
  readonly uidPrefix?: string | undefined
  /** The rooms of the Budgets matching an object of the kind, when billed (none when absent). */
  readonly rooms?: ((object: SimObject<Spec, Status>) => ReadonlyArray<Room>) | undefined
  /** Called before every step: what the step reads besides the object (the `serving` load of a serving kind). */
  readonly observe?: ((object: SimObject<Spec, Status>, now: number) => void) | undefined
  /** Told of every step before its status is taken, with what the status showed before (the checkers). */
  readonly checkStep?:
    | ((object: SimObject<Spec, Status>, before: StatusBefore<Status>, result: StepResult<Status>, now: number) => void)
    | undefined
  /** Told when a step moved the object to another phase, after its status is taken. */
  readonly phaseChanged?: ((object: SimObject<Spec, Status>, from: string | undefined, now: number) => void) | undefined
  /** Told of every event a step emits, after it is traced (webhooks). */
  readonly event?: ((object: SimObject<Spec, Status>, event: ControllerEvent) => void) | undefined
  /** Its runs' own start once their host is up (a Function's worker importing its code; SimProgram.startMs). */
  readonly startMs?: ((object: SimObject<Spec, Status>) => number) | undefined
  /** Told of a launch that found its capacity (a Sandbox opens its box). */
  readonly launched?: ((object: SimObject<Spec, Status>, action: LaunchAction) => void) | undefined
  /** Told before a checkpoint reaches the capacity (a Sandbox snapshots its box). */
  readonly checkpointing?: ((object: SimObject<Spec, Status>, attempt: string) => void) | undefined
  /** Told when a step deletes the object (ttl, max lifetime), before the capacity forgets it. */
  readonly deleted?: ((object: SimObject<Spec, Status>) => void) | undefined
  /** Told when the object is forgotten, deleted by a step or by its owner, before the capacity forgets it. */
  readonly forgotten?: ((object: SimObject<Spec, Status>) => void) | undefined
  /**
   * Told after each step's actions are carried out, before its wake-up is set: the requests its runs serve go to the
   * runs that take them now (a Function's calls, as the runtime's Serving does after a step). Answers when the object
   * must be stepped again for its requests (a deadline, a backoff's end), if ever.
   */
  readonly served?: ((object: SimObject<Spec, Status>, now: number) => number | undefined) | undefined
  /** Told after each step, once its actions are carried out and its wake-up is set (a Sandbox's waiting session). */
  readonly stepped?: ((object: SimObject<Spec, Status>) => void) | undefined
  /** Whether an object looks again when a host is freed although its last step did not wait for capacity. */
  readonly looksWhenFreed?: ((object: SimObject<Spec, Status>) => boolean) | undefined
  /** Whether every object of the kind looks again when funds change, not only those money holds back. */
  readonly looksWhenFunded?: boolean | undefined
  /** What an owner's spec change says in the trace after `Updated generation=<n>` (a Job: ` state=<state>`). */
  readonly updated?: ((spec: Spec) => string) | undefined
}

/** A kind of any spec and status: the simulator's list holds kinds of different types side by side. */
// biome-ignore lint: the list is heterogeneous; each entry is typed where it is written.
export type AnySimKind = SimKind<any, any>
// biome-ignore lint: an object of any kind.
export type AnySimObject = SimObject<any, any>
