/**
 * The Job in the headless simulator (spec: Job): its entry in the simulator's list of kinds (SimObject.ts) — the
 * machine of kinds/job, every step held to the checkers (Checkers.ts) — and what a run reads of its Jobs.
 */
import type { Room } from "../../core/billing/Billing.ts"
import type { ControllerEvent } from "../../core/controller/Controller.ts"
import { isUnfunded } from "../../core/controller/Controller.ts"
import type { ReconcileKind } from "../../core/controller/Reconcile.ts"
import { parseDurationMs } from "../../core/Units.ts"
import { jobMachine } from "../../kinds/job/JobMachine.ts"
import type { JobSpecType, JobStatusType } from "../../kinds/job/JobSchema.ts"
import type { Checkers } from "./Checkers.ts"
import type { SimKind, SimObject } from "./SimObject.ts"

/** A Job as the headless simulator holds it. */
export type SimJob = SimObject<JobSpecType, JobStatusType>

/** The Job's registration with the reconcile core. */
export const jobReconcileKind: ReconcileKind<JobSpecType, JobStatusType> = { kind: "Job", machine: jobMachine }

export interface JobSimOptions {
  /** Holds every step to the rules (Checkers.ts). */
  readonly checkers?: Checkers | undefined
  /** Called with every event (the webhook stream). */
  readonly onEvent?: ((job: SimJob, event: ControllerEvent) => void) | undefined
  /** Called when a Job deletes itself (ttlSecondsAfterFinished), before it is forgotten. */
  readonly onDeleted?: ((job: SimJob) => void) | undefined
  /** The rooms of the Budgets matching a Job, when billed (none when absent). */
  readonly rooms?: ((job: SimJob) => ReadonlyArray<Room>) | undefined
}

/** The Job's entry in a simulator's list of kinds. */
export const jobSimKind = (options: JobSimOptions = {}): SimKind<JobSpecType, JobStatusType> => {
  const { checkers } = options
  return {
    reconcile: jobReconcileKind,
    rooms: options.rooms,
    checkStep: checkers === undefined ?
      undefined :
      (job, before, result, now) =>
        checkers.afterStep(job, before, result as Parameters<Checkers["afterStep"]>[2], now),
    event: options.onEvent,
    deleted: options.onDeleted,
    updated: (spec) => ` state=${spec.state}`
  }
}

/** Whether a Job that is not final is in a documented waiting state (docs/simulator.md, liveness). */
export const isWaiting = (job: SimJob): boolean => {
  const phase = job.status.phase
  // Money holds it back (Funded False): it waits for credits or a raised cap (docs/billing.md).
  if (isUnfunded(job.status)) return phase === "Suspended" || phase === "Pending"
  if (phase === "Suspended") return job.spec.state === "Suspended"
  // queueTimeout 0s waits forever for capacity.
  if (phase === "Pending") return parseDurationMs(job.spec.placement.queueTimeout) === 0
  return false
}
