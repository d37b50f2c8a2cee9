/**
 * The capacity port: what a controller may ask of capacity and what it observes of it. Drivers implement it — the
 * simulator (`src/backends/sim`) over virtual time, live hosts later — and one contract suite
 * (test/backends/CapacityContract.ts) holds every driver to the same behaviour. The core never calls the port: a
 * machine's pure step returns `Launch`, `Checkpoint` and `Stop` actions, the runtime carries them out through the port,
 * and folds what it observes back into `AttemptFacts`, which is what the next step reads (level-triggered: the facts,
 * not the history of calls, decide).
 *
 * Two lifecycles meet in an attempt (one run of capacity for a workload):
 * - the host's: `acquire` a host of a variant (a warm one of the project first), `release` it (torn down, or kept warm
 *   for the project), observe its facts; `market` says what a project could acquire now, `forget` drops an owner's
 *   attempts once they are all released;
 * - the program's on that host: `start` it (it runs once the host has booted), `checkpoint` it, and — for a Sandbox's
 *   box — send it commands and file requests (`box`, core/SandboxBox.ts). Stopping a program while its host stays is
 *   a later issue's.
 * What happens next — boot, run, exit(code), OOM, checkpoint saved or failed, preemption, node loss, teardown — is
 * observed as the attempt's facts, and `changes` says whose facts changed and when capacity was freed.
 */
import { Context, type Effect, type Stream } from "effect"
import type { BoxReply, BoxRequest } from "../SandboxBox.ts"
import type { Variant } from "./Offering.ts"
import type { Market } from "./Placement.ts"

// ---------------------------------------------------------------------------------------------------------------------
// The port

/** The host half of a launch: which workload, which run, on what. */
export interface HostRequest {
  /** The workload's key (the runtime uses its uid): whose facts change, and whose checkpoints a restore reads. */
  readonly owner: string
  /** Warm hosts are reused within a project only. */
  readonly namespace: string
  readonly attempt: string
  readonly index: number
  /** 1-based run number of the index. */
  readonly number: number
  readonly variant: Variant
  /** The run replaces one that lost its capacity. */
  readonly recovery: boolean
}

/** The program half of a launch: how to start it and what it keeps. */
export interface ProgramRequest {
  /** Checkpoint to restore (continuity Checkpointed), or the progress cursor to resume from (Restartable). */
  readonly restoreFromSeq: number | undefined
  readonly resumeFromUnits: number | undefined
  /** Periodic checkpoints; undefined when the workload is not checkpointed. */
  readonly checkpointIntervalMs: number | undefined
  /** How long the host stays warm for another launch of the project after the program ends normally. */
  readonly keepWarmMs: number
  /** Env the program receives; PLATFORM_INDEX and JOB_COMPLETION_INDEX among them (spec: Job.completions). */
  readonly env: Readonly<Record<string, string>>
  /**
   * The owner's annotations: a driver reads the ones addressed to it and ignores the rest (the simulator's program
   * model, `sim.nodus.dev/duration` and the like; docs/simulator.md).
   */
  readonly annotations: Readonly<Record<string, string>>
  /**
   * What a live host runs (docs/live.md): the workload's command and what it receives. The simulator's program model
   * reads annotations instead and ignores it; absent for kinds that run nothing of the customer's yet.
   */
  readonly workload?: WorkloadProgram | undefined
  /**
   * The program serves until it is stopped (a Sandbox's box): a driver never ends it on its own as done, and the
   * simulator's program model gives it no duration.
   */
  readonly service?: boolean | undefined
}

/** An env entry of a program: a literal, or a Secret's key resolved when the program starts (never stored). */
export type ProgramEnv =
  | { readonly name: string; readonly value: string }
  | { readonly name: string; readonly secret: string; readonly key: string }

/** A Secret mounted into a program, at the version its object pinned (spec: SecretMount). */
export interface ProgramSecret {
  readonly name: string
  readonly version: number | undefined
}

/** The customer's program as a live host runs it (spec: Job command, args, env, secrets, workingDir, network). */
export interface WorkloadProgram {
  /** As written; on a live host the host's userland runs the program (docs/live.md, "Images"). */
  readonly image: string | undefined
  /** command + args. */
  readonly argv: ReadonlyArray<string>
  readonly workingDir: string | undefined
  readonly env: ReadonlyArray<ProgramEnv>
  readonly secrets: ReadonlyArray<ProgramSecret>
  readonly egress: "Deny" | "AllowList" | "Open"
  /** AllowList: the names and `*.suffix` patterns reachable, presets expanded (EgressPresets.ts). */
  readonly allow?: ReadonlyArray<string> | undefined
  /** Presets the spec names that no list has: the program does not start. */
  readonly unknownPresets?: ReadonlyArray<string> | undefined
  /** The memory floor, enforced as a limit where the kernel allows: above it the program is OOMKilled. */
  readonly memoryBytes: number | undefined
  /** The most processes (and threads) its box may hold: a fork bomb stops there (absent: the host's default). */
  readonly pidsMax?: number | undefined
  /** The quota of its box's writable space (absent: the host's default; docs/isolation.md, "Bounds"). */
  readonly diskBytes?: number | undefined
  /** A preflight before the command (spec: InitCommand): its non-zero exit fails the run as the command's would. */
  readonly init: { readonly argv: ReadonlyArray<string>; readonly timeoutMs: number } | undefined
  /** Paths collected when the program succeeds (spec: JobOutput); everything under /platform/outputs besides. */
  readonly outputs?: ReadonlyArray<{ readonly name: string; readonly path: string }> | undefined
  /** What is materialized read-only under /platform/inputs/<name> before the program starts (spec: JobInput). */
  readonly inputs?: ReadonlyArray<ProgramInput> | undefined
  /**
   * What a checkpoint saves (spec: Recovery.checkpoint.paths, saved together) and its bound (maxSize, before upload).
   */
  readonly checkpoint?: { readonly paths: ReadonlyArray<string>; readonly maxBytes: number } | undefined
  /**
   * A Sandbox's box (docs/sandboxes.md): the driver runs it until stopped, with /workspace of its own and a supervisor
   * that takes commands and file requests (`CapacityPortShape.sandbox`); `argv` is its optional main process.
   */
  readonly sandbox?: boolean | undefined
  /**
   * A Snapshotted Sandbox's box: its /workspace outlives a box that ends without being stopped (its host keeps it, and
   * the next box of the Sandbox there starts from it; docs/sandboxes.md, "/workspace continuity").
   */
  readonly keepWorkspace?: boolean | undefined
  /**
   * A Function's warm worker (docs/functions.md): the driver runs the Python worker (backends/live/PythonWorker.ts) in
   * the box instead of `argv`, Running once it imported the code, answering `Call` box requests until stopped.
   */
  readonly worker?: WorkerProgram | undefined
}

/** What a Function's worker serves (spec: Function.code, python, scaling.targetConcurrency). */
export interface WorkerProgram {
  /** The interpreter minor the Function asks for ("3.12"); absent: the host's python3. */
  readonly python: string | undefined
  readonly module: string
  readonly qualname?: string | undefined
  /** A class whose methods calls name (made once per worker). */
  readonly cls?: string | undefined
  /** Calls a worker runs at once. */
  readonly concurrency: number
  /** The input (`inputs[]` name) holding the code archive, a tar.gz or zip of Python sources; absent: the image's. */
  readonly codeInput: string | undefined
}

/** An input as a driver materializes it (spec: JobInput); the forms a driver does not serve say so at start. */
export type ProgramInput =
  | { readonly name: string; readonly url: string; readonly sha256: string }
  | { readonly name: string; readonly output: { readonly job: string; readonly name: string; readonly index: number } }
  | { readonly name: string; readonly unsupported: string }
  /** A blob of the owner's project (`sha256:<hex>`, docs/blobs.md): a Function's code archive. */
  | { readonly name: string; readonly blob: string }
  /**
   * A Volume's committed revision (absent: its latest), unpacked as a directory (spec: JobInput.volume); or, with
   * `mount`, a Volume mounted at a path of the workload (spec: VolumeMount), writable unless read-only.
   */
  | {
    readonly name: string
    readonly volume: { readonly name: string; readonly revision: number | undefined }
    readonly mount?: { readonly path: string; readonly writable: boolean } | undefined
  }

/** An input as it was materialized (spec: Job status.inputs): its digest, and for a Volume which revision it was. */
export interface MaterializedInput {
  readonly name: string
  readonly sha256: string
  readonly volumeName?: string
  readonly volumeRevision?: number
  readonly volumeUID?: string
}

/** A controller's Launch, addressed to a driver: the host and the program together (acquire, then start). */
export interface LaunchRequest extends HostRequest, ProgramRequest {}

/**
 * What the port reports: the facts of an owner's attempts changed, or capacity was freed (waiting work looks again).
 */
export type CapacityChange =
  | { readonly _tag: "Attempt"; readonly owner: string }
  | { readonly _tag: "Freed" }

/**
 * Every call is idempotent per (owner, attempt): a controller that repeats an action after a crash never takes
 * capacity twice, and attempt names are unique within their owner only.
 */
export interface CapacityPortShape {
  // The host's lifecycle
  /** A host of the variant, a warm one of the project first; an attempt that finds none ends Unavailable at once. */
  readonly acquire: (request: HostRequest) => Effect.Effect<AttemptFacts>
  /**
   * Stops what runs on the host and gives it back after teardown, or keeps it warm for `keepWarmMs` for the project.
   */
  readonly release: (owner: string, attempt: string, keepWarmMs: number) => Effect.Effect<void>
  /** The attempt's facts while the driver knows it (until its owner is forgotten). */
  readonly facts: (owner: string, attempt: string) => Effect.Effect<AttemptFacts | undefined>
  /**
   * What a workload of `namespace` could acquire now, as placement reads it (free hosts and the project's warm ones).
   */
  readonly market: (namespace: string) => Market
  /** Drops an owner's attempts (its object is gone and every run of it was released). */
  readonly forget: (owner: string) => Effect.Effect<void>
  /** Whose facts changed, and when capacity was freed, from the moment of subscription. */
  readonly changes: Stream.Stream<CapacityChange>
  // The program's lifecycle on a host
  /** Starts the program on the attempt's host once it has booted (at once on a warm host). */
  readonly start: (owner: string, attempt: string, program: ProgramRequest) => Effect.Effect<void>
  /** A customer suspend checkpoint now; `episode` names the suspend request it serves. */
  readonly checkpoint: (owner: string, attempt: string, episode: number) => Effect.Effect<void>
  /**
   * A run a previous server process left live, offered back after a restart (drivers whose hosts outlive the server):
   * the driver takes it, answering its facts from now on — it ends NodeLost if its host does not say it still runs it
   * in time. Absent (the simulator's capacity does not survive a restart): such runs end as lost.
   */
  readonly adopt?: (owner: string, namespace: string, facts: AttemptFacts) => Effect.Effect<AttemptFacts>
  /**
   * A request to the box of a running Sandbox attempt (WorkloadProgram.sandbox): a command, its output, stdin or kill,
   * or a file; or a call to a Function's worker (WorkloadProgram.worker). Counts as the box's activity. Absent: the
   * driver runs no boxes.
   */
  readonly box?: (owner: string, attempt: string, request: BoxRequest) => Effect.Effect<BoxReply>
  /**
   * The owner's object went to another server of the store (its shard moved in a rebalance): its live runs go on where
   * they run, for that server to reach (docs/scale-out.md, "Local hosts"), and this driver forgets the rest. Absent:
   * the runs are released and the owner forgotten.
   */
  readonly handOver?: (owner: string) => Effect.Effect<void>
}

export type {
  BoxCommand,
  BoxFileEntry,
  BoxRefusal,
  BoxReply,
  BoxRequest,
  CallError,
  CallOutcome
} from "../SandboxBox.ts"

export class CapacityPort extends Context.Service<CapacityPort, CapacityPortShape>()("nodus/core/capacity/Capacity") {}

/** Splits a launch into what the host and the program need. */
export const hostRequestOf = (launch: LaunchRequest): HostRequest => ({
  owner: launch.owner,
  namespace: launch.namespace,
  attempt: launch.attempt,
  index: launch.index,
  number: launch.number,
  variant: launch.variant,
  recovery: launch.recovery
})

export const programRequestOf = (launch: ProgramRequest): ProgramRequest => ({
  restoreFromSeq: launch.restoreFromSeq,
  resumeFromUnits: launch.resumeFromUnits,
  checkpointIntervalMs: launch.checkpointIntervalMs,
  keepWarmMs: launch.keepWarmMs,
  env: launch.env,
  annotations: launch.annotations,
  workload: launch.workload,
  service: launch.service
})

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

export const isCustomerFailure = (outcome: Outcome): boolean =>
  outcome.type === "Failed" || outcome.type === "OOMKilled"

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
  /** What a run that succeeded left behind (spec: JobOutput), as its driver collected it; absent when none. */
  readonly outputs?: ReadonlyArray<CollectedOutput> | undefined
  /** The inputs materialized before its program started (spec: JobInput), with their digests; absent when none. */
  readonly inputs?: ReadonlyArray<MaterializedInput> | undefined
  /**
   * What is done in a serving program (a Sandbox's commands, file requests, terminal input): whether a command runs
   * now, and when the last of them was seen. Absent for programs nobody drives.
   */
  readonly activity?: { readonly busy: boolean; readonly lastAt: number | undefined } | undefined
}

/** One collected output of a run: a file, or a directory archived as tar.zst (spec: JobOutput). */
export interface CollectedOutput {
  readonly name: string
  readonly path: string
  readonly sha256: string
  readonly sizeBytes: number
}

export const isLive = (attempt: AttemptFacts): boolean => attempt.phase !== "Ended"
