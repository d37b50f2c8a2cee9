/**
 * The simulator's capacity: hosts of every offering variant, and the programs that run on them, over the engine's
 * virtual time. It carries out the controller's actions (launch, checkpoint, stop) and keeps the facts of every
 * attempt, which is all a controller reads back. Provider models decide boots, boot failures, preemptions (a rate or
 * a replayed spot trace), node loss and teardown; workload models decide how long a program runs, how it exits and
 * how big its checkpoints are. Every random draw comes from a generator derived from the scenario seed.
 *
 * Simplifications, documented in docs/simulator.md: a checkpoint is saved in the background without pausing the
 * program; restoring one costs its size over `restoreBytesPerSecond`; a program's progress is its run time (one
 * progress unit per second of work).
 */
import type {
  AttemptFacts,
  Checkpoint,
  HostRequest,
  Outcome,
  ProgramRequest,
  SuspendCheckpoint
} from "../../core/capacity/Capacity.ts"
import { type Variant, variantKeyOf } from "../../core/capacity/Offering.ts"
import type { Market } from "../../core/capacity/Placement.ts"
import type { ProviderModel } from "../../core/capacity/ProviderModels.ts"
import type { Engine } from "./Engine.ts"
import type { Prng } from "./Prng.ts"
import { nextPreemptionAfter, type SpotTrace } from "./SpotTraces.ts"

/** A provider model as the simulator runs it: the twin's model, or a replayed spot trace for its preemptions. */
export interface SimProviderModel extends ProviderModel {
  /** A replayed spot trace instead of a rate: a host is preempted at the trace's next 1 → 0 drop. */
  readonly preemptionTrace: SpotTrace | undefined
}

/** How one workload's program behaves. */
export interface WorkloadModel {
  /** Work to do, in milliseconds of run time. */
  readonly durationMs: number
  /** Exit code at the end of the work; non-zero is a customer failure. */
  readonly exitCode: number
  /** Probability that a run exits with code 1 instead (a flaky program). */
  readonly runFailureRate: number
  /** Probability that a run is OOM-killed halfway through its remaining work. */
  readonly oomRate: number
  readonly checkpointSizeBytes: number
  readonly checkpointFailureRate: number
  readonly suspendCheckpointFailureRate: number
}

/** Modifies a provider model over time (fault injection): e.g. a preemption storm multiplies the rate. */
export type ProviderFaults = (
  variant: Variant,
  now: number
) => { readonly preemptionFactor: number; readonly capacityFactor: number }

const noFaults: ProviderFaults = () => ({ preemptionFactor: 1, capacityFactor: 1 })

/** The attempt as the simulator keeps it: the facts a controller reads, plus the program's bookkeeping. */
type SimAttempt = { -readonly [K in keyof AttemptFacts]: AttemptFacts[K] }

interface Program {
  readonly attempt: SimAttempt
  /** The pool of the attempt's variant (looked up once: every event of the program reads its model). */
  readonly pool: Pool
  readonly owner: string
  /** The owner's record, where its checkpoints are saved (looked up once). */
  readonly owned: Owned
  /** Told of the attempt's changes instead of `onChange` (SimProgram.changed, with its subject). */
  readonly changed: ((subject: unknown) => void) | undefined
  readonly subject: unknown
  /** Where the attempt is in its owner's record (`Owned.attempts`, `Owned.programs`). */
  readonly position: number
  readonly workload: WorkloadModel
  readonly namespace: string
  /** Invalidates scheduled callbacks once the program moved on. */
  token: number
  /**
   * The program's next event (`scheduleNext`): its engine ticket, the token it was scheduled under and what it is.
   * One function runs every program's next event, told which by its ticket, instead of a closure per event.
   */
  nextTicket: number
  nextToken: number
  nextKind: NextKind
  /** Work done when the current run started, and when it (virtually) started. */
  workAtStart: number
  runStartedAt: number
  checkpointIntervalMs: number | undefined
  keepWarmMs: number
  hostWarm: boolean
  /** Work at which the program is OOM-killed, drawn once per run; undefined: it is not. */
  readonly oomAtWork: number | undefined
  /** Called once the program runs (a Sandbox box's main process starts then; `whenRunning`). */
  onRunning?: (() => void) | undefined
  /** Its own start after the host is up (SimProgram.startMs). */
  readonly startMs: number
}

/**
 * The outcomes that carry nothing but their type, one object each for every attempt (they are read, never written):
 * an object per ended attempt outlived the young generation with its Job (two million of them in the platform run).
 */
const ended = {
  Succeeded: { type: "Succeeded" },
  OOMKilled: { type: "OOMKilled" },
  Preempted: { type: "Preempted" },
  NodeLost: { type: "NodeLost" },
  BootFailed: { type: "BootFailed" },
  Unavailable: { type: "Unavailable" },
  Stopped: { type: "Stopped" }
} as const satisfies Record<string, Outcome>

/** What a program's next event is; when several are due at the same instant they win in this order. */
const NextKind = {
  Preempted: 0,
  NodeLost: 1,
  OOMKilled: 2,
  Exit: 3,
  Checkpoint: 4,
  Started: 5,
  BootFailed: 6,
  Stopped: 7
} as const
type NextKind = (typeof NextKind)[keyof typeof NextKind]

/** A host kept warm after its program ended (spec: Job.scaledownWindow). */
interface WarmHost {
  readonly expiresAt: number
  taken: boolean
}

interface Pool {
  readonly variant: Variant
  readonly model: SimProviderModel
  used: number
  /** Warm hosts by namespace, oldest first (a warm host is reused only within its project). */
  readonly warm: Map<string, Array<WarmHost>>
}

/** A program as the simulator starts it: the port's request plus the model of how it behaves. */
export interface SimProgram extends Omit<ProgramRequest, "env" | "annotations" | "workload"> {
  readonly workload: WorkloadModel
  /**
   * The program's own start once its host is up (a Function worker importing its code, SimWorkers.ts): the attempt
   * stays Provisioning that much longer, on a warm host too. Default 0.
   */
  readonly startMs?: number | undefined
  /**
   * Told with `subject` when the attempt's facts change, instead of `onChange(owner)`: the headless simulation's Job
   * itself, so that none of the ten million changes of its benchmark looks its owner up by name (one function for
   * every attempt, the Job as its argument: no closure per launch).
   */
  readonly changed?: ((subject: never) => void) | undefined
  readonly subject?: unknown
}

/** A launch as the simulator takes it in one call: the host and the program. */
export interface SimLaunch extends HostRequest, SimProgram {}

/** Attempt names are unique within their owner only (two projects may both run a Job named train). */
const programKey = (owner: string, name: string) => [owner, name].join("\n")

/** Past this many attempts an owner's are found by name in a map. */
const ownedByNameAfter = 8

/**
 * `list` with `item` at its end: a copy of the exact size while the list is short, the list itself pushed to after.
 * A push onto a short array gives it room for 17 or more, and a Job's lists — its attempts, their programs, one or
 * a few of each — live as long as it does: the room was most of what they took, copied by every scavenge they
 * survived. A long list (a Function's workers over days) is pushed to, not copied at every append.
 */
export const appended = <T>(list: Array<T>, item: T): Array<T> => {
  // The first two as literals (most Jobs have one or two attempts; concat takes about 60 ns more than a push).
  if (list.length === 0) return [item]
  if (list.length === 1) return [list[0]!, item]
  if (list.length < ownedByNameAfter) return list.concat([item])
  list.push(item)
  return list
}

/** What the capacity keeps of an owner until it is forgotten: one map entry per owner, looked up once per action. */
interface Owned {
  /**
   * Its attempts in the order they were acquired — what makes launch idempotent — found by name by a look through
   * them, or in `byName` once there are more than a few (a Job has one or a few; a large one, or a Function's
   * workers over days, many). No map for most owners: a map per owner, or one for all attempts, cost a map's work for
   * each of the platform benchmark's two million attempts.
   */
  attempts: Array<AttemptFacts>
  /** Positions in `attempts` by name, once there are more than a few. */
  byName: Map<string, number> | undefined
  /**
   * The program of each attempt while it runs (by position, as `attempts`): found through its owner's record, not in
   * a map of every program (a map's set and delete for each of the platform benchmark's two million programs, and a
   * key made for each, cost about 2 % of its run).
   */
  programs: Array<Program | undefined>
  /** The last checkpoint's seq (seqs count from 1 per owner). */
  seq: number
  /** Work saved at each checkpoint, by seq: what a restore resumes from. */
  readonly saved: Array<number>
}

export class SimCapacity {
  private readonly engine: Engine
  private readonly random: Prng
  private readonly models: (variant: Variant) => SimProviderModel
  private readonly faults: ProviderFaults
  /** Pools by variant key: every Variant object of one offering variant (each ranking makes its own) shares one. */
  private readonly pools = new Map<string, Pool>()
  private readonly poolByObject = new WeakMap<Variant, Pool>()
  /**
   * Programs still running when their owner was forgotten (`forget`), by `programKey`: they are stopped or end on
   * their own after it (a deleted Job's teardowns), and are found by name until then.
   */
  private readonly orphans = new Map<string, Program>()
  /** Hosts acquired whose program has not started yet. */
  private readonly idle = new Map<string, { readonly attempt: SimAttempt; readonly namespace: string }>()
  /** Every owner's attempts and checkpoints, until the owner is forgotten. */
  private readonly owners = new Map<string, Owned>()
  private readonly markets = new Map<string, Market>()
  /** Called whenever an owner's facts change, so its controller runs again. */
  onChange: (owner: string) => void = () => {}
  /** Called when a host goes back to the pool or capacity grows, so waiting workloads look again. */
  onFreed: () => void = () => {}

  constructor(
    engine: Engine,
    random: Prng,
    models: (variant: Variant) => SimProviderModel,
    faults: ProviderFaults = noFaults
  ) {
    this.engine = engine
    this.random = random
    this.models = models
    this.faults = faults
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Market

  private pool(variant: Variant): Pool {
    let pool = this.poolByObject.get(variant)
    if (pool !== undefined) return pool
    const key = variantKeyOf(variant)
    pool = this.pools.get(key)
    if (pool === undefined) {
      pool = { variant, model: this.models(variant), used: 0, warm: new Map() }
      this.pools.set(key, pool)
    }
    this.poolByObject.set(variant, pool)
    return pool
  }

  private warmHosts(pool: Pool, namespace: string): Array<WarmHost> {
    const hosts = pool.warm.get(namespace)
    if (hosts === undefined) return []
    while (hosts.length > 0 && (hosts[0]!.taken || hosts[0]!.expiresAt <= this.engine.now)) hosts.shift()
    return hosts
  }

  /** Keeps a healthy host warm for `keepWarmMs`; it goes back to the provider when nobody took it by then. */
  private keepWarm(pool: Pool, namespace: string, keepWarmMs: number): void {
    let hosts = pool.warm.get(namespace)
    if (hosts === undefined) pool.warm.set(namespace, hosts = [])
    const host: WarmHost = { expiresAt: this.engine.now + keepWarmMs, taken: false }
    hosts.push(host)
    this.engine.at(host.expiresAt, () => {
      if (host.taken) return
      host.taken = true
      pool.used--
      this.onFreed()
    })
  }

  /** Hosts a launch in `namespace` could take now: free ones and the project's warm ones. */
  available(variant: Variant, namespace: string): number {
    const pool = this.pool(variant)
    const warm = this.warmHosts(pool, namespace).length
    const capacity = Math.floor(pool.model.capacity * this.faults(variant, this.engine.now).capacityFactor)
    return Math.max(0, capacity - pool.used) + warm
  }

  /** The market a controller of `namespace` sees (one object per namespace: it reads the pools when asked). */
  marketFor(namespace: string): Market {
    let market = this.markets.get(namespace)
    if (market === undefined) {
      market = {
        available: (variant) => this.available(variant, namespace),
        bootMs: (variant) => this.pool(variant).model.bootMedianMs,
        meanTimeBetweenInterruptionsMs: (
          variant
        ) => (variant.interruptible ? this.pool(variant).model.preemptionMtbfMs : undefined)
      }
      this.markets.set(namespace, market)
    }
    return market
  }

  inUse(variant: Variant): number {
    return this.pool(variant).used
  }

  capacityOf(variant: Variant): number {
    return this.pool(variant).model.capacity
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Actions

  private owned(owner: string): Owned {
    let owned = this.owners.get(owner)
    if (owned === undefined) {
      this.owners.set(owner, owned = { attempts: [], byName: undefined, programs: [], seq: 0, saved: [] })
    }
    return owned
  }

  /** Where the owner's attempt of this name is in its record, or -1. */
  private positionOf(owned: Owned, name: string): number {
    if (owned.byName !== undefined) return owned.byName.get(name) ?? -1
    const { attempts } = owned
    for (let index = 0; index < attempts.length; index++) if (attempts[index]!.name === name) return index
    return -1
  }

  /** The owner's attempt of this name, if it has one. */
  private attemptOf(owned: Owned, name: string): AttemptFacts | undefined {
    const position = this.positionOf(owned, name)
    return position === -1 ? undefined : owned.attempts[position]
  }

  /** The running program of the owner's attempt of this name, if there is one (its owner's, else one orphaned). */
  private programOf(owner: string, name: string): Program | undefined {
    const owned = this.owners.get(owner)
    const position = owned === undefined ? -1 : this.positionOf(owned, name)
    const program = position === -1 ? undefined : owned!.programs[position]
    if (program !== undefined || this.orphans.size === 0) return program
    return this.orphans.get(programKey(owner, name))
  }

  /**
   * A launch in one call: the host, then the program on it (what the headless simulation's loop does), as `acquire`
   * and `start` would make it, without the idle host between them.
   */
  launch(request: SimLaunch): AttemptFacts {
    const owned = this.owned(request.owner)
    const known = this.attemptOf(owned, request.attempt)
    if (known !== undefined) {
      this.start(request.owner, request.attempt, request)
      return known
    }
    const attempt = this.take(request, owned)
    if (attempt.phase === "Provisioning") {
      this.run(request.owner, owned, owned.attempts.length - 1, attempt, request.namespace, request)
    }
    return attempt
  }

  /**
   * Takes a host of the variant for the attempt: a warm one of the project first, else a free one, else the attempt
   * ends Unavailable. Idempotent per attempt name (spec of the port): a repeated acquire returns the same attempt. The
   * host boots once its program is given (`start`, in the same instant when the runtime launches).
   */
  acquire(request: HostRequest): AttemptFacts {
    const owned = this.owned(request.owner)
    const known = this.attemptOf(owned, request.attempt)
    if (known !== undefined) return known
    const attempt = this.take(request, owned)
    if (attempt.phase === "Provisioning") {
      this.idle.set(programKey(request.owner, request.attempt), { attempt, namespace: request.namespace })
    }
    return attempt
  }

  /** A new attempt of `owned` on a host taken now (Provisioning), or none free (Ended Unavailable). */
  private take(request: HostRequest, owned: Owned): SimAttempt {
    const now = this.engine.now
    const attempt: SimAttempt = {
      name: request.attempt,
      index: request.index,
      number: request.number,
      variant: request.variant,
      warmReuse: false,
      recovery: request.recovery,
      restoreFromSeq: undefined,
      requestedAt: now,
      bootedAt: undefined,
      endedAt: undefined,
      stoppingAt: undefined,
      releasedAt: undefined,
      phase: "Provisioning",
      outcome: undefined,
      checkpoint: undefined,
      checkpointFailures: 0,
      suspend: undefined,
      progressUnits: undefined
    }
    owned.attempts = appended(owned.attempts, attempt)
    owned.programs = appended(owned.programs, undefined)
    if (owned.byName !== undefined) owned.byName.set(attempt.name, owned.attempts.length - 1)
    else if (owned.attempts.length > ownedByNameAfter) {
      owned.byName = new Map(owned.attempts.map((entry, position) => [entry.name, position]))
    }
    const pool = this.pool(request.variant)
    const warm = this.warmHosts(pool, request.namespace)
    if (warm.length > 0) {
      warm.shift()!.taken = true
      attempt.warmReuse = true
    } else if (this.available(request.variant, request.namespace) > 0) {
      pool.used++
    } else {
      // Spec: capacity was taken between the placement decision and the acquire; the index waits again.
      this.end(attempt, ended.Unavailable, now)
    }
    return attempt
  }

  /** Starts the program on an acquired host: it boots (a warm host only starts the program), then runs its work. */
  start(owner: string, name: string, request: SimProgram): void {
    const key = programKey(owner, name)
    const host = this.idle.get(key)
    if (host === undefined) return
    this.idle.delete(key)
    const owned = this.owned(owner)
    this.run(owner, owned, this.positionOf(owned, name), host.attempt, host.namespace, request)
  }

  private run(
    owner: string,
    owned: Owned,
    position: number,
    attempt: SimAttempt,
    namespace: string,
    request: SimProgram
  ): void {
    attempt.restoreFromSeq = request.restoreFromSeq
    const workAtStart = this.restoredWork(owner, request)
    const program: Program = {
      attempt,
      pool: this.pool(attempt.variant),
      owner,
      owned,
      changed: request.changed as ((subject: unknown) => void) | undefined,
      subject: request.subject,
      position,
      workload: request.workload,
      namespace,
      token: 0,
      workAtStart,
      runStartedAt: this.engine.now,
      checkpointIntervalMs: request.checkpointIntervalMs,
      keepWarmMs: request.keepWarmMs,
      hostWarm: attempt.warmReuse,
      oomAtWork: this.random.chance(request.workload.oomRate)
        ? Math.round(this.random.uniform() * request.workload.durationMs)
        : undefined,
      startMs: Math.max(0, request.startMs ?? 0),
      nextTicket: -1,
      nextToken: -1,
      nextKind: NextKind.Exit
    }
    owned.programs[position] = program
    this.boot(program)
  }

  /** Tells the program's owner that its facts changed. */
  private changed(program: Program): void {
    if (program.changed !== undefined) program.changed(program.subject)
    else this.onChange(program.owner)
  }

  /** A customer suspend checkpoint for `episode`. */
  checkpoint(owner: string, name: string, episode: number): void {
    const program = this.programOf(owner, name)
    if (program === undefined || program.attempt.phase !== "Running") return
    const previous = program.attempt.suspend
    const failures = previous?.episode === episode ? previous.failures : 0
    if (previous?.episode === episode && previous.state === "Pending") return
    program.attempt.suspend = { episode, state: "Pending", failures }
    const token = program.token
    const saveMs = this.saveMs(program)
    this.engine.after(saveMs, () => {
      if (program.token !== token) return
      const failed = this.random.chance(program.workload.suspendCheckpointFailureRate)
      if (failed) {
        program.attempt.suspend = { episode, state: "Failed", failures: failures + 1 } satisfies SuspendCheckpoint
      } else {
        this.saveCheckpoint(program)
        program.attempt.suspend = { episode, state: "Saved", failures }
      }
      this.changed(program)
    })
  }

  /** Stops the attempt's program and releases its host after teardown (or keeps it warm, `keepWarmMs`). */
  stop(owner: string, name: string, keepWarmMs: number): void {
    // A host idle without its program exists only between `acquire` and `start` (the headless loop launches in one
    // call and has none): its key is made and looked up only when there is one.
    if (this.idle.size > 0) {
      const key = programKey(owner, name)
      const idle = this.idle.get(key)
      if (idle !== undefined) return this.releaseIdle(key, idle.attempt)
    }
    const program = this.programOf(owner, name)
    if (program === undefined || program.attempt.phase === "Terminating" || program.attempt.phase === "Ended") return
    program.token++
    this.recordProgress(program)
    program.attempt.phase = "Terminating"
    program.attempt.stoppingAt = this.engine.now
    program.keepWarmMs = keepWarmMs
    this.next(program, this.later(program.pool.model.teardownMs), NextKind.Stopped)
  }

  /** The facts of an attempt (the same object while it lives), until its owner is forgotten. */
  facts(owner: string, name: string): AttemptFacts | undefined {
    const owned = this.owners.get(owner)
    return owned === undefined ? undefined : this.attemptOf(owned, name)
  }

  /** Every attempt of an owner the simulator still knows. */
  attemptsOf(owner: string): ReadonlyArray<AttemptFacts> {
    return [...(this.owners.get(owner)?.attempts ?? [])]
  }

  /** The engine's virtual now. */
  get now(): number {
    return this.engine.now
  }

  /**
   * A host acquired for a program that never started: torn down and given back (never kept warm: nothing ran on it).
   */
  private releaseIdle(key: string, attempt: SimAttempt): void {
    this.idle.delete(key)
    const now = this.engine.now
    const pool = this.pool(attempt.variant)
    attempt.phase = "Terminating"
    attempt.stoppingAt = now
    this.engine.after(pool.model.teardownMs, () => {
      this.end(attempt, ended.Stopped, this.engine.now)
      pool.used--
      this.onFreed()
    })
  }

  /** Forgets an owner's attempts (its Job was deleted); its programs still running are found by name until they end. */
  forget(owner: string): void {
    const owned = this.owners.get(owner)
    if (owned === undefined) return
    for (const program of owned.programs) {
      if (program !== undefined) this.orphans.set(programKey(owner, program.attempt.name), program)
    }
    this.owners.delete(owner)
  }

  // -------------------------------------------------------------------------------------------------------------------
  // The program's life

  private restoredWork(owner: string, request: SimProgram): number {
    if (request.restoreFromSeq !== undefined) return this.owners.get(owner)?.saved[request.restoreFromSeq] ?? 0
    if (request.resumeFromUnits !== undefined) return request.resumeFromUnits * 1000
    return 0
  }

  private saveMs(program: Program): number {
    return Math.max(
      1000,
      Math.round((program.workload.checkpointSizeBytes / program.pool.model.restoreBytesPerSecond) * 1000)
    )
  }

  private boot(program: Program): void {
    const model = program.pool.model
    if (program.hostWarm) return this.next(program, this.later(model.warmStartMs + program.startMs), NextKind.Started)
    // The program's own start follows the host's boot; the draws are the same with or without it.
    const bootMs = Math.round(this.random.logNormal(model.bootMedianMs, model.bootSigma)) + program.startMs
    const lossAt = this.nodeLossDelay(model)
    if (lossAt !== undefined && lossAt < bootMs) return this.next(program, this.later(lossAt), NextKind.NodeLost)
    const failed = this.random.chance(model.bootFailureRate)
    this.next(program, this.later(bootMs), failed ? NextKind.BootFailed : NextKind.Started)
  }

  /** The instant `delayMs` from now, as `engine.after` takes it. */
  private later(delayMs: number): number {
    return this.engine.now + (delayMs > 0 ? delayMs : 0)
  }

  /** Makes `kind` at `at` the program's next event, under its current token. */
  private next(program: Program, at: number, kind: NextKind): void {
    program.nextToken = program.token
    program.nextKind = kind
    program.nextTicket = this.engine.at(at, this.nextEvent, program)
  }

  private nodeLossDelay(model: SimProviderModel): number | undefined {
    return model.nodeLossMtbfMs === undefined ? undefined : Math.round(this.random.exponential(model.nodeLossMtbfMs))
  }

  private preemptionDelay(program: Program): number | undefined {
    const variant = program.attempt.variant
    if (!variant.interruptible) return undefined
    const model = program.pool.model
    const now = this.engine.now
    if (model.preemptionTrace !== undefined) {
      const at = nextPreemptionAfter(model.preemptionTrace, now)
      return at === undefined ? undefined : at - now
    }
    if (model.preemptionMtbfMs === undefined) return undefined
    const factor = this.faults(variant, now).preemptionFactor
    return Math.round(this.random.exponential(model.preemptionMtbfMs / factor))
  }

  private started(program: Program): void {
    const attempt = program.attempt
    const now = this.engine.now
    attempt.phase = "Running"
    attempt.bootedAt = now
    const restoreMs = attempt.restoreFromSeq === undefined ? 0 : this.saveMs(program)
    program.runStartedAt = now + restoreMs
    this.changed(program)
    this.scheduleNext(program)
    const running = program.onRunning
    program.onRunning = undefined
    running?.()
  }

  /** Schedules the program's next event: exit, OOM, checkpoint, preemption or node loss, whichever comes first. */
  private scheduleNext(program: Program): void {
    const now = this.engine.now
    const { durationMs } = program.workload
    // The run's work is anchored at (runStartedAt, workAtStart); runStartedAt may lie ahead while a restore loads.
    const { runStartedAt, workAtStart, oomAtWork } = program
    const exitAt = runStartedAt + Math.max(0, durationMs - workAtStart)
    const oomAt = oomAtWork !== undefined && oomAtWork >= workAtStart
      ? runStartedAt + Math.max(0, oomAtWork - workAtStart)
      : Number.POSITIVE_INFINITY
    const interval = program.checkpointIntervalMs
    const checkpointAt = interval === undefined
      ? Number.POSITIVE_INFINITY
      : Math.max(now, program.runStartedAt) + interval
    const preemption = this.preemptionDelay(program)
    const loss = this.nodeLossDelay(program.pool.model)
    const preemptAt = preemption === undefined ? Number.POSITIVE_INFINITY : now + preemption
    const lossAt = loss === undefined ? Number.POSITIVE_INFINITY : now + loss
    const first = Math.min(exitAt, oomAt, checkpointAt, preemptAt, lossAt)
    program.token++
    // A serving program (a Sandbox's box) with nothing else ahead runs until it is stopped.
    if (first === Number.POSITIVE_INFINITY) return
    this.next(
      program,
      first,
      first === preemptAt
        ? NextKind.Preempted
        : first === lossAt
        ? NextKind.NodeLost
        : first === oomAt
        ? NextKind.OOMKilled
        : first === exitAt
        ? NextKind.Exit
        : NextKind.Checkpoint
    )
  }

  /** A program's next event (`scheduleNext`), unless the program moved on since it was scheduled. */
  private readonly nextEvent = (program: Program, ticket: number): void => {
    if (program.token !== program.nextToken || ticket !== program.nextTicket) return
    switch (program.nextKind) {
      case NextKind.Preempted:
        return this.finish(program, ended.Preempted, false)
      case NextKind.NodeLost:
        return this.finish(program, ended.NodeLost, false)
      case NextKind.OOMKilled:
        return this.finish(program, ended.OOMKilled, true)
      case NextKind.Exit:
        return this.exit(program)
      case NextKind.Checkpoint:
        return this.periodicCheckpoint(program)
      case NextKind.Started:
        return this.started(program)
      case NextKind.BootFailed:
        return this.finish(program, ended.BootFailed, false)
      case NextKind.Stopped:
        return this.finish(program, ended.Stopped, true)
    }
  }

  private workDone(program: Program, at: number): number {
    return program.workAtStart + Math.max(0, at - program.runStartedAt)
  }

  private periodicCheckpoint(program: Program): void {
    if (this.random.chance(program.workload.checkpointFailureRate)) program.attempt.checkpointFailures++
    else this.saveCheckpoint(program)
    this.recordProgress(program)
    this.changed(program)
    // Re-anchor so the next checkpoint is one interval of work later; the draw of the next exit stays consistent.
    program.workAtStart = this.workDone(program, this.engine.now)
    program.runStartedAt = this.engine.now
    this.scheduleNext(program)
  }

  private saveCheckpoint(program: Program): void {
    const now = this.engine.now
    const owned = program.owned
    const seq = ++owned.seq
    owned.saved[seq] = this.workDone(program, now)
    program.attempt.checkpoint = { seq, sizeBytes: program.workload.checkpointSizeBytes, at: now } satisfies Checkpoint
  }

  private recordProgress(program: Program): void {
    program.attempt.progressUnits = Math.floor(this.workDone(program, this.engine.now) / 1000)
  }

  private exit(program: Program): void {
    const code = program.workload.exitCode !== 0
      ? program.workload.exitCode
      : this.random.chance(program.workload.runFailureRate)
      ? 1
      : 0
    this.recordProgress(program)
    this.finish(
      program,
      code === 0 ? ended.Succeeded : { type: "Failed", exitCode: code, message: `exit code ${code}` },
      true
    )
  }

  /** Ends the attempt; its host is released at `releasedAt` (billing ends then), now unless a teardown follows. */
  private end(attempt: SimAttempt, outcome: Outcome, at: number, releasedAt = at): void {
    attempt.phase = "Ended"
    attempt.outcome = outcome
    attempt.endedAt = at
    attempt.stoppingAt ??= at
    attempt.releasedAt = releasedAt
  }

  /**
   * Something was done in the program (a Sandbox's command or file request): its activity is now. `busy`, when given,
   * is whether a command other than a terminal's shell runs in its box (SimBoxes); a change of it is activity too and
   * reaches the owner's machine at once, as the live agent reports it (docs/sandboxes.md, "Activity"), so the idle
   * clock starts when the last command ends. Answers whether the owner's change was told (the busy state changed).
   */
  noteActivity(owner: string, name: string, busy?: boolean): boolean {
    const program = this.programOf(owner, name)
    if (program === undefined) return false
    const was = program.attempt.activity?.busy ?? false
    program.attempt.activity = { busy: busy ?? was, lastAt: this.engine.now }
    if (busy === undefined || busy === was) return false
    this.changed(program)
    return true
  }

  /** Runs `then` at `at` if the same program still runs then (a box's command ending on the engine's clock). */
  atWhileRunning(owner: string, name: string, at: number, then: () => void): void {
    const program = this.programOf(owner, name)
    if (program === undefined) return
    this.engine.at(at, () => {
      if (this.programOf(owner, name) === program && program.attempt.phase === "Running") then()
    })
  }

  /** Runs `then` once the program runs: now if it does, else when its host has booted (a box's main process). */
  whenRunning(owner: string, name: string, then: () => void): void {
    const program = this.programOf(owner, name)
    if (program === undefined) return
    if (program.attempt.phase === "Running") then()
    else program.onRunning = then
  }

  /** Loses the host under a running program now (NodeLost), as a failure drawn from the model would. */
  loseNode(owner: string, name: string): void {
    const program = this.programOf(owner, name)
    if (program !== undefined) this.finish(program, ended.NodeLost, false)
  }

  /**
   * Ends the attempt. A host that is still healthy (`reusable`) is kept warm for the launch's window; a lost or
   * preempted one is gone. The host returns to the pool after teardown.
   */
  private finish(program: Program, outcome: Outcome, reusable: boolean): void {
    program.token++
    const now = this.engine.now
    // A program reports its progress cursor as it goes; what it reported up to the end survives it.
    if (program.attempt.phase === "Running") this.recordProgress(program)
    const pool = program.pool
    // A program that exited on its own still has its host torn down, which is billed (Teardown) until released.
    const tearsDown = reusable && program.keepWarmMs <= 0 && outcome.type !== "Stopped"
    this.end(program.attempt, outcome, now, tearsDown ? now + pool.model.teardownMs : now)
    this.unregister(program)
    if (reusable && program.keepWarmMs > 0) {
      this.keepWarm(pool, program.namespace, program.keepWarmMs)
    } else if (outcome.type === "Stopped" || !reusable) {
      pool.used--
      this.onFreed()
    } else {
      this.engine.after(pool.model.teardownMs, this.torndown, pool)
    }
    this.changed(program)
  }

  /** The program runs no more: it is found by name no more. */
  private unregister(program: Program): void {
    const { owned, position } = program
    if (owned.programs[position] === program) owned.programs[position] = undefined
    if (this.orphans.size === 0) return
    const key = programKey(program.owner, program.attempt.name)
    if (this.orphans.get(key) === program) this.orphans.delete(key)
  }

  /** A host of `pool` is back after its teardown (one function for every host: the pool is the event's argument). */
  private readonly torndown = (pool: Pool): void => {
    pool.used--
    this.onFreed()
  }
}
