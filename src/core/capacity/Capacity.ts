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

/** A controller's Launch, addressed to a driver: which workload, which run, on what, and how to start it. */
export interface LaunchRequest {
  /** The workload's key (`<namespace>/<name>`): whose facts change, and whose checkpoints a restore reads. */
  readonly owner: string
  readonly namespace: string
  readonly attempt: string
  readonly index: number
  readonly number: number
  readonly variant: Variant
  readonly recovery: boolean
  /** Checkpoint to restore (continuity Checkpointed), or the progress cursor to resume from (Restartable). */
  readonly restoreFromSeq: number | undefined
  readonly resumeFromUnits: number | undefined
  /** Periodic checkpoints; undefined when the workload is not checkpointed. */
  readonly checkpointIntervalMs: number | undefined
  /** How long the host stays warm for another launch of the project after the program ends normally. */
  readonly keepWarmMs: number
  /** Env the program receives; PLATFORM_INDEX and JOB_COMPLETION_INDEX among them (spec: Job.completions). */
  readonly env: Readonly<Record<string, string>>
}

/**
 * The port a driver implements. `launch` acquires a host of the variant (a warm one of the project first) and starts
 * the program on it once it has booted; `stop` stops the program and releases the host (torn down, or kept warm).
 * Attempt names are unique within their owner. Every call is idempotent per attempt, so a controller that repeats an action after a crash never takes
 * capacity twice. What happens next — boot, run, exit(code), OOM, checkpoint saved or failed, preemption, node loss,
 * teardown — is observed as the attempt's facts, and `onChange` says whose facts changed.
 */
export interface CapacityPort {
  readonly launch: (request: LaunchRequest) => Effect.Effect<AttemptFacts>
  /** A customer suspend checkpoint now; `episode` names the suspend request it serves. */
  readonly checkpoint: (owner: string, attempt: string, episode: number) => Effect.Effect<void>
  readonly stop: (owner: string, attempt: string, keepWarmMs: number) => Effect.Effect<void>
  /** The attempt's facts while the driver knows it (a live attempt, or one that ended and was not forgotten). */
  readonly facts: (owner: string, attempt: string) => Effect.Effect<AttemptFacts | undefined>
  /** Hosts of the variant a launch in `namespace` could take now. */
  readonly available: (variant: Variant, namespace: string) => Effect.Effect<number>
  /** Registers the listener told the owner whose facts changed. */
  readonly onChange: (listener: (owner: string) => void) => Effect.Effect<void>
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
  /**
   * When the program stopped or its stop was asked: the Teardown segment starts (spec: CostSegments). Undefined
   * while the program runs or boots.
   */
  readonly stoppingAt: number | undefined
  /**
   * When the host was released (deletion confirmed, or handed to the warm pool): billing of the run ends. It may lie
   * ahead of `endedAt` when the host tears down after the program exited on its own.
   */
  readonly releasedAt: number | undefined
  readonly phase: AttemptPhase
  readonly outcome: Outcome | undefined
  readonly checkpoint: Checkpoint | undefined
  readonly checkpointFailures: number
  readonly suspend: SuspendCheckpoint | undefined
  readonly progressUnits: number | undefined
}

export const isLive = (attempt: AttemptFacts): boolean => attempt.phase !== "Ended"
