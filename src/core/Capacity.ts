/**
 * The capacity port: what a controller may ask of capacity and what it observes of it. Drivers implement it — the
 * simulator (`src/backends/sim`) over virtual time, live providers later — and one contract suite holds them to the
 * same behaviour. The core never calls the port: a controller's pure step returns `Launch`, `Checkpoint` and `Stop`
 * actions, a driver carries them out through the port, and folds what it observes back into `AttemptFacts`, which is
 * what the next step reads (level-triggered: the facts, not the history of calls, decide).
 */
import type { Effect } from "effect"
import type { Variant } from "./Offering.ts"

// ---------------------------------------------------------------------------------------------------------------------
// The port

/** What a program needs to start: the controller's launch plus the workload it belongs to. */
export interface ProgramSpec {
  readonly attempt: string
  readonly index: number
  /** Env the program receives; PLATFORM_INDEX and JOB_COMPLETION_INDEX among them (spec: Job.completions). */
  readonly env: Readonly<Record<string, string>>
  /** Checkpoint to restore (continuity Checkpointed), or the progress cursor to resume from (Restartable). */
  readonly restoreFromSeq: number | undefined
  readonly resumeFromUnits: number | undefined
  /** Periodic checkpoints; undefined when the workload is not checkpointed. */
  readonly checkpointIntervalMs: number | undefined
}

/** An observation a driver reports about one allocation. */
export type Observation =
  | { readonly _tag: "Booted"; readonly attempt: string; readonly at: number }
  | { readonly _tag: "Exited"; readonly attempt: string; readonly at: number; readonly exitCode: number; readonly message?: string }
  | { readonly _tag: "OOMKilled"; readonly attempt: string; readonly at: number }
  | { readonly _tag: "CheckpointSaved"; readonly attempt: string; readonly at: number; readonly seq: number; readonly sizeBytes: number; readonly episode?: number }
  | { readonly _tag: "CheckpointFailed"; readonly attempt: string; readonly at: number; readonly episode?: number }
  | { readonly _tag: "Progress"; readonly attempt: string; readonly at: number; readonly units: number }
  | { readonly _tag: "Preempted"; readonly attempt: string; readonly at: number }
  | { readonly _tag: "NodeLost"; readonly attempt: string; readonly at: number }
  | { readonly _tag: "BootFailed"; readonly attempt: string; readonly at: number }
  | { readonly _tag: "Unavailable"; readonly attempt: string; readonly at: number }
  | { readonly _tag: "Released"; readonly attempt: string; readonly at: number }

export interface CapacityError {
  readonly _tag: "CapacityError"
  readonly message: string
}

/**
 * The port a driver implements. Every call is idempotent per attempt name, so a controller that repeats an action
 * after a crash never takes capacity twice.
 */
export interface CapacityPort {
  /** Takes a host of the variant for `attempt` (warm capacity first); boot progress is observed. */
  readonly acquire: (attempt: string, variant: Variant, workload: WorkloadRef) => Effect.Effect<void, CapacityError>
  /** Starts the program once the host has booted. */
  readonly start: (program: ProgramSpec) => Effect.Effect<void, CapacityError>
  /** Asks for a checkpoint now (a customer suspend); `episode` names the suspend request it serves. */
  readonly checkpoint: (attempt: string, episode: number) => Effect.Effect<void, CapacityError>
  /** Stops the program. */
  readonly stop: (attempt: string) => Effect.Effect<void, CapacityError>
  /** Tears the host down, or keeps it warm for `keepWarmMs` for another launch of the same variant. */
  readonly release: (attempt: string, keepWarmMs: number) => Effect.Effect<void, CapacityError>
  /** Hosts of a variant that can be had now (warm ones included). */
  readonly available: (variantKey: string) => number
}

export interface WorkloadRef {
  readonly kind: string
  readonly namespace: string
  readonly name: string
  readonly uid: string
}

// ---------------------------------------------------------------------------------------------------------------------
// Facts: what drivers tell controllers

/** How an attempt ended. Customer outcomes count toward backoffLimit; infrastructure ones toward recovery. */
export type Outcome =
  | { readonly type: "Succeeded" }
  | { readonly type: "Failed"; readonly exitCode: number; readonly message?: string }
  | { readonly type: "OOMKilled" }
  | { readonly type: "Preempted" }
  | { readonly type: "NodeLost" }
  | { readonly type: "BootFailed" }
  | { readonly type: "Unavailable" }
  | { readonly type: "Stopped" }

export const isCustomerFailure = (outcome: Outcome): boolean => outcome.type === "Failed" || outcome.type === "OOMKilled"

/** Capacity was lost under a running or booting program: recovery replaces it. */
export const isInterruption = (outcome: Outcome): boolean =>
  outcome.type === "Preempted" || outcome.type === "NodeLost" || outcome.type === "BootFailed"

/** Provisioning (acquired, booting) → Running (program started) → Terminating (stop asked) → Ended. */
export type AttemptPhase = "Provisioning" | "Running" | "Terminating" | "Ended"

export interface Checkpoint {
  readonly seq: number
  readonly sizeBytes: number
  readonly at: number
}

/** A suspend checkpoint's progress on one attempt, for the suspend request (`episode`) it serves. */
export interface SuspendCheckpoint {
  readonly episode: number
  readonly state: "Pending" | "Saved" | "Failed"
  /** Failed tries in this episode. */
  readonly failures: number
}

/** Everything a controller knows of one attempt. Times are epoch milliseconds. */
export interface AttemptFacts {
  readonly name: string
  readonly index: number
  /** 1-based run number of the index. */
  readonly number: number
  readonly variant: Variant
  readonly warmReuse: boolean
  /** The attempt replaces one that lost its capacity. */
  readonly recovery: boolean
  readonly restoreFromSeq: number | undefined
  readonly requestedAt: number
  readonly bootedAt: number | undefined
  readonly endedAt: number | undefined
  readonly phase: AttemptPhase
  readonly outcome: Outcome | undefined
  readonly checkpoint: Checkpoint | undefined
  readonly checkpointFailures: number
  readonly suspend: SuspendCheckpoint | undefined
  readonly progressUnits: number | undefined
}

export const isLive = (attempt: AttemptFacts): boolean => attempt.phase !== "Ended"
