/**
 * The reconcile core, one for every registered kind and every driver (docs/architecture.md, "A reconcile"): what a
 * kind gives (`ReconcileKind`: its name and its machine), its placement (`rankingOf`), the billed step
 * (`reconcileStep`, core/controller/BilledStep.ts) and the order its actions are carried out in (`interpret`,
 * `interpretEffect`). A driver observes the object, calls the step, and interprets the actions its own way: the
 * headless simulator synchronously on its in-memory capacity (src/backends/sim/Simulation.ts), the server's runtime
 * through the capacity port, for the sim backend and live hosts alike (src/runtime/Reconciler.ts). Nothing here names a
 * kind; a kind is an entry of a registry (src/runtime/Registry.ts, the simulator's list of kinds).
 */
import { Effect } from "effect"
import type { Offering } from "../capacity/Offering.ts"
import { type Market, rank, type Ranking } from "../capacity/Placement.ts"
import { type BilledStep, billedStep, type Billing } from "./BilledStep.ts"
import type { Action, LaunchAction, Machine, Observation, StepContext } from "./Controller.ts"

/**
 * What the reconcile core needs of a kind: its name in the registry of served kinds (src/kinds/Kinds.ts), its machine.
 */
export interface ReconcileKind<Spec, Status> {
  readonly kind: string
  readonly machine: Machine<Spec, Status>
}

/** A kind of any spec and status: registries hold kinds of different types side by side. */
// biome-ignore lint: a registry is heterogeneous; each entry is typed where it is written.
export type AnyReconcileKind = ReconcileKind<any, any>

/** The ranking of the offerings for a spec of the kind (stage 1 of placement), over `catalog` and `market`. */
export const rankingOf = <Spec>(
  kind: ReconcileKind<Spec, unknown>,
  spec: Spec,
  catalog: ReadonlyArray<Offering>,
  market: Market
): Ranking => {
  const { request, run } = kind.machine.placementOf(spec)
  return rank(request, catalog, market, run)
}

/**
 * One reconcile of an observed object: its kind's machine stepped, billed on `billing` when given. The result's
 * actions are the driver's to carry out (`interpret`), its status and events to write, and `wakeAt` when to step again.
 */
export const reconcileStep = <Spec, Status extends object>(
  kind: ReconcileKind<Spec, Status>,
  observation: Observation<Spec, Status>,
  context: Omit<StepContext, "funding">,
  billing: Billing | undefined
): BilledStep<Status> => billedStep(kind.machine, observation, context, billing)

/** How a driver carries out a step's actions on its capacity, synchronously (the headless simulator). */
export interface Interpreter<Subject> {
  readonly launch: (subject: Subject, action: LaunchAction) => void
  readonly checkpoint: (subject: Subject, attempt: string, episode: number) => void
  readonly stop: (subject: Subject, attempt: string, keepWarmMs: number) => void
  /** The object deletes itself (spec: ttlSecondsAfterFinished, a Sandbox's maxLifetime): nothing after it runs. */
  readonly delete: (subject: Subject) => void
}

/** Whether a step's actions end the object (a Delete among them): its postings and records go first. */
export const deletes = (actions: ReadonlyArray<Action>): boolean => {
  for (let index = 0; index < actions.length; index++) if (actions[index]!._tag === "Delete") return true
  return false
}

/** Carries out `actions` in order; answers false when a Delete ended the object (the actions after it are dropped). */
export const interpret = <Subject>(
  actions: ReadonlyArray<Action>,
  interpreter: Interpreter<Subject>,
  subject: Subject
): boolean => {
  for (let index = 0; index < actions.length; index++) {
    const action = actions[index]!
    switch (action._tag) {
      case "Launch":
        interpreter.launch(subject, action)
        break
      case "Checkpoint":
        interpreter.checkpoint(subject, action.attempt, action.episode)
        break
      case "Stop":
        interpreter.stop(subject, action.attempt, action.keepWarmMs)
        break
      case "Delete":
        interpreter.delete(subject)
        return false
    }
  }
  return true
}

/** How a driver carries out a step's actions through effects (the server's runtime, on the capacity port). */
export interface EffectInterpreter<Subject, E, R> {
  readonly launch: (subject: Subject, action: LaunchAction) => Effect.Effect<void, E, R>
  readonly checkpoint: (subject: Subject, attempt: string, episode: number) => Effect.Effect<void, E, R>
  readonly stop: (subject: Subject, attempt: string, keepWarmMs: number) => Effect.Effect<void, E, R>
  readonly delete: (subject: Subject) => Effect.Effect<void, E, R>
}

/** `interpret` through effects, in the same order: answers false when a Delete ended the object. */
export const interpretEffect = <Subject, E, R>(
  actions: ReadonlyArray<Action>,
  interpreter: EffectInterpreter<Subject, E, R>,
  subject: Subject
): Effect.Effect<boolean, E, R> =>
  Effect.gen(function*() {
    for (const action of actions) {
      switch (action._tag) {
        case "Launch":
          yield* interpreter.launch(subject, action)
          break
        case "Checkpoint":
          yield* interpreter.checkpoint(subject, action.attempt, action.episode)
          break
        case "Stop":
          yield* interpreter.stop(subject, action.attempt, action.keepWarmMs)
          break
        case "Delete":
          yield* interpreter.delete(subject)
          return false
      }
    }
    return true
  })
