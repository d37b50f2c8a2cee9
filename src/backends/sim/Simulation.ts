/**
 * A headless simulation: Jobs held in memory, the core's Job controller run after every change to their facts or at
 * the time it asked to be woken, its actions carried out by `SimCapacity`, every step held to the checkers, and every
 * event appended to a trace whose hash identifies the run. The API server's sim backend runs the same controller and
 * the same capacity over its store instead (src/server/SimBackend.ts).
 */
import { createHash, type Hash } from "node:crypto"
import type { Room, Settled as Billed } from "../../core/billing/Billing.ts"
import type { Ledger } from "../../core/billing/Ledger.ts"
import type { Pricebook } from "../../core/billing/Pricebook.ts"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import { type Offering, variantKeyOf } from "../../core/capacity/Offering.ts"
import { choose, type Market, rank, type Ranking } from "../../core/capacity/Placement.ts"
import { billedStep, type Billing, billRemoved } from "../../core/controller/BilledStep.ts"
import { type ControllerEvent, isUnfunded, type LaunchAction } from "../../core/controller/Controller.ts"
import { jobMachine, type JobStep } from "../../core/kinds/job/JobMachine.ts"
import { isFinalPhase } from "../../core/kinds/job/JobPhases.ts"
import { type JobSpecType, type JobStatusType } from "../../core/schemas/Job.ts"
import { parseDurationMs } from "../../core/Units.ts"
import type { Checkers, ClockVerdict } from "./Checkers.ts"
import type { Engine } from "./Engine.ts"
import { appended, type SimCapacity, type WorkloadModel } from "./SimCapacity.ts"

export interface SimJob {
  readonly name: string
  readonly namespace: string
  /**
   * `<namespace>/<name>`, made once per Job: it keys the Job's maps here and in the capacity, and one string object
   * hashes once (10^7 reconciles in the platform benchmark).
   */
  readonly key: string
  readonly uid: string
  generation: number
  readonly createdAt: number
  spec: JobSpecType
  status: JobStatusType
  /** Appended to by `appended` (SimCapacity.ts): a copy while short, so a Job's few attempts take no room for 17. */
  attempts: Array<AttemptFacts>
  readonly workload: WorkloadModel
  /** A reconcile is scheduled for now. */
  dirty: boolean
  /** The time of the wake-up already scheduled, if any. */
  wakeAt: number | undefined
  deleted: boolean
  /**
   * The simulation's own bookkeeping, on the Job rather than in sets and weak maps keyed by it (a lookup there reads
   * a table the step would not otherwise touch, several times per step): whether the Job is in the queue of Jobs
   * waiting for capacity, and what its last step saw when that step changed nothing while it waited (`lookAgain`).
   */
  queued: boolean
  settled: SettledLook | undefined
  /**
   * The checkers' memo of this Job (Checkers.ts, the clock rule's last verdict), kept on the Job it is about: a map
   * beside it was read at every step, out of the caches. The simulation itself never reads it.
   */
  clockChecked?: ClockVerdict | undefined
}

export interface TraceSink {
  readonly record: (line: string) => void
}

/** The trace's chunk: what gathers lines before they reach the hash. */
const traceChunkBytes = 65_536
/** Room kept for a line's time, separators and newline beside its parts (in bytes of UTF-8 per UTF-16 unit, ×3). */
const traceLineSlack = 32

/**
 * Hashes every trace line (sha256 of the lines' UTF-8, each followed by "\n"), optionally keeping the lines. Lines
 * are written into a 64 KiB buffer as they come, which reaches the hash when full: one native call per chunk, and the
 * same bytes, so the same digest. `line` takes a line in its parts — the time, the subject and what happened — and
 * writes them without making the line: the platform benchmark writes 1.5 × 10^7 lines, and making each one (a rope of
 * a dozen pieces, flattened to be copied) was a tenth of everything it allocated. ASCII is copied a byte at a time;
 * a part with any other character is written as UTF-8 by the buffer.
 */
export class TraceHash implements TraceSink {
  private readonly hash: Hash = createHash("sha256")
  private readonly chunk = Buffer.allocUnsafe(traceChunkBytes)
  private used = 0
  readonly lines: Array<string> | undefined
  count = 0

  constructor(keepLines = false) {
    this.lines = keepLines ? [] : undefined
  }

  record(line: string): void {
    this.count++
    this.lines?.push(line)
    if (line.length * 3 + 1 > traceChunkBytes) {
      // Longer than a chunk can hold: hashed on its own, after what is written.
      this.flush()
      this.hash.update(`${line}\n`)
      return
    }
    this.room(line.length * 3 + 1)
    this.put(line)
    this.chunk[this.used++] = 10
  }

  /** The line `${now} ${subject} ${a}${b}${c}${d}${e}${f}`. */
  line(now: number, subject: string, a: string, b = "", c = "", d = "", e = "", f = ""): void {
    const length = subject.length + a.length + b.length + c.length + d.length + e.length + f.length
    if (
      this.lines !== undefined || length * 3 + traceLineSlack > traceChunkBytes || !Number.isSafeInteger(now) || now < 0
    ) {
      this.record(`${now} ${subject} ${a}${b}${c}${d}${e}${f}`)
      return
    }
    this.count++
    this.room(length * 3 + traceLineSlack)
    this.putInteger(now)
    this.chunk[this.used++] = 32
    this.put(subject)
    this.chunk[this.used++] = 32
    this.put(a)
    if (b.length > 0) this.put(b)
    if (c.length > 0) this.put(c)
    if (d.length > 0) this.put(d)
    if (e.length > 0) this.put(e)
    if (f.length > 0) this.put(f)
    this.chunk[this.used++] = 10
  }

  /** Makes room for `bytes` more in the chunk, hashing it first when they would not fit. */
  private room(bytes: number): void {
    if (this.used + bytes > traceChunkBytes) this.flush()
  }

  /** Writes `text` as UTF-8 (room made): ASCII a byte at a time, anything else by the buffer. */
  private put(text: string): void {
    const chunk = this.chunk
    const start = this.used
    let used = start
    for (let index = 0; index < text.length; index++) {
      const code = text.charCodeAt(index)
      if (code >= 0x80) {
        this.used = start + chunk.write(text, start, "utf8")
        return
      }
      chunk[used++] = code
    }
    this.used = used
  }

  /**
   * Writes the decimal digits of a safe non-negative integer, as `${value}` would (room made). A time in ms has 13
   * digits: it is written as its part above 10^8 and its last eight, each small enough for int32 arithmetic.
   */
  private putInteger(value: number): void {
    if (value < 1e8) {
      this.putDigits(value, 1)
      return
    }
    const high = Math.floor(value / 1e8)
    this.putDigits(high, 1)
    this.putDigits(value - high * 1e8, 8)
  }

  /** Writes the decimal digits of `value` (below 2^31), at least `width` of them (leading zeros). */
  private putDigits(value: number, width: number): void {
    const chunk = this.chunk
    let digits = 1
    for (let rest = value; rest >= 10; rest = (rest / 10) | 0) digits++
    if (digits < width) digits = width
    let at = this.used + digits
    this.used = at
    let rest = value
    for (let left = digits; left > 0; left--) {
      const next = (rest / 10) | 0
      chunk[--at] = 48 + rest - next * 10
      rest = next
    }
  }

  private flush(): void {
    if (this.used === 0) return
    this.hash.update(this.chunk.subarray(0, this.used))
    this.used = 0
  }

  digest(): string {
    this.flush()
    return this.hash.copy().digest("hex")
  }
}

/**
 * Records the line `${now} ${subject} ${a}${b}…` on `trace`: a TraceHash writes it from its parts, any other sink
 * (tests, the estimate's) is given the line.
 */
export const traceLine = (
  trace: TraceSink,
  now: number,
  subject: string,
  a: string,
  b = "",
  c = "",
  d = "",
  e = "",
  f = ""
): void => {
  if (trace instanceof TraceHash) trace.line(now, subject, a, b, c, d, e, f)
  else trace.record(`${now} ${subject} ${a}${b}${c}${d}${e}${f}`)
}

export interface SimulationOptions {
  readonly engine: Engine
  readonly capacity: SimCapacity
  readonly catalog: ReadonlyArray<Offering>
  readonly trace: TraceSink
  readonly checkers?: Checkers | undefined
  /** Called with every event (for the server backend's Event objects and the webhook stream). */
  readonly onEvent?: (job: SimJob, event: ControllerEvent) => void
  /** Called when a Job is deleted (ttlSecondsAfterFinished), before it is forgotten. */
  readonly onDeleted?: (job: SimJob) => void
  /**
   * Called after every controller step with its result and the attempts it launched (their facts as the launch left
   * them), once the actions are carried out: the server backend writes status, Attempts and Events from it.
   */
  readonly onStep?: (
    job: SimJob,
    result: JobStep,
    launched: ReadonlyArray<Launched>,
    billed: Billed | undefined
  ) => void
  /**
   * Run the step on every capacity look, even for a Job the look cannot change (see `Simulation.skippedSteps`). Off by
   * default; tests turn it on to show that skipping changes nothing.
   */
  readonly stepEveryLook?: boolean
  /** Bill the Jobs' runs on this ledger (Billing.ts); absent = nothing is billed and status.cost stays unset. */
  readonly billing?: SimBilling | undefined
}

export interface SimBilling {
  readonly ledger: Ledger
  readonly pricebook: Pricebook
  /** The rooms of the Budgets matching a Job (none when absent). */
  readonly rooms?: (job: SimJob) => ReadonlyArray<Room>
}

/** What a Job's last step saw and left, when that step changed nothing while it waited for capacity. */
export interface SettledLook {
  readonly status: JobStatusType
  readonly spec: JobSpecType
  readonly generation: number
  readonly attempts: number
}

/** Structural equality of JSON-like values, keys in the same order. */
const sameJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    for (let index = 0; index < a.length; index++) if (!sameJson(a[index], b[index])) return false
    return true
  }
  if (Array.isArray(b)) return false
  const left = Object.keys(a)
  const right = Object.keys(b)
  if (left.length !== right.length) return false
  for (let index = 0; index < left.length; index++) {
    const key = left[index]!
    if (key !== right[index] || !sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) {
      return false
    }
  }
  return true
}

export interface Launched {
  readonly action: LaunchAction
  readonly facts: AttemptFacts
}

/** What a Job brings along when it is mirrored from a store (the server backend after a restart), not new. */
export interface Restored {
  readonly uid: string
  readonly generation: number
  readonly status: JobStatusType
  readonly attempts: ReadonlyArray<AttemptFacts>
}

export class Simulation {
  readonly jobs = new Map<string, SimJob>()
  private readonly options: SimulationOptions
  private readonly rankings = new WeakMap<object, Ranking>()
  /** The first few specs ranked, and their rankings (`rankingOf`). */
  private readonly recentSpecs: Array<JobSpecType> = []
  private readonly recentRankings: Array<Ranking> = []
  private nextUid = 0
  /** Jobs whose last step waited for capacity, in the order they started waiting (each `queued`). */
  private readonly waiting = new Set<SimJob>()
  /** Deleted Jobs whose runs are still billed until their hosts are released (`billRemoved`), by owner key. */
  private readonly billedAfterRemoval = new Map<string, SimJob>()
  /** Jobs that money holds back (Funded False): they look again when credits arrive (`fundsChanged`). */
  private readonly unfunded = new Set<SimJob>()
  steps = 0
  private stepContext: { now: number; market: Market; ranking: Ranking; rewriteStatus: boolean } | undefined
  /** A batch of looks runs (`lookAll`), and the rankings and markets it found nothing free for, in pairs. */
  private looking = false
  private readonly nothingFree: Array<Ranking | Market> = []
  /** `lookAgain` and `reconcile` of a Job, made once: the engine runs them with the Job as the event's argument. */
  private readonly lookAgainOf = (job: SimJob) => this.lookAgain(job)
  private waker: Waker<SimJob> | undefined
  private readonly factsChangedOf = (job: SimJob) => this.factsChanged(job)
  /** Capacity looks answered without a step: the Job was settled and nothing it could take was free. */
  skippedSteps = 0

  constructor(options: SimulationOptions) {
    this.options = options
    options.capacity.onChange = (owner) => {
      const job = this.jobs.get(owner)
      if (job !== undefined) this.touch(job)
      else this.removedChanged(owner)
    }
    options.capacity.onFreed = () => this.lookAll()
  }

  /** Credits arrived, a cap or a Budget was raised: Jobs that money held back look again. */
  fundsChanged(): void {
    for (const job of this.unfunded) this.touch(job)
  }

  /** Capacity changed outside the simulator's own releases (a drought ended): waiting Jobs look again. */
  capacityChanged(): void {
    this.lookAll()
  }

  /**
   * Every waiting Job looks again, in the order they started waiting. One event runs the looks one after the other:
   * one event per Job would take consecutive places in the queue, which nothing can come between (anything scheduled
   * meanwhile comes after them), so the order of everything is the same, without a queue entry per Job (a freed host
   * in a drought's queue touches thousands of Jobs).
   */
  private lookAll(): void {
    let looks: Array<SimJob> | undefined
    for (const job of this.waiting) {
      if (job.dirty || job.deleted) continue
      job.dirty = true
      if (looks === undefined) looks = [job]
      else looks.push(job)
    }
    if (looks === undefined) return
    const batch = looks
    this.options.engine.after(0, () => {
      this.looking = true
      for (const job of batch) this.lookAgain(job)
      this.looking = false
      this.nothingFree.length = 0
    })
  }

  /**
   * Whether a launch of this ranking finds nothing free now (`choose` answers none). Within one batch of looks (a
   * drought's queue is thousands of Jobs of a few specs) a "nothing" is remembered per ranking and market until a step
   * runs: the looks between two steps change no capacity.
   */
  private nothingFreeFor(ranking: Ranking, market: Market): boolean {
    const known = this.nothingFree
    for (let index = 0; index < known.length; index += 2) {
      if (known[index] === ranking && known[index + 1] === market) return true
    }
    if (choose(ranking, market) !== undefined) return false
    if (this.looking) known.push(ranking, market)
    return true
  }

  get now(): number {
    return this.options.engine.now
  }

  /** Admits a Job (its spec already decoded with defaults) now, or takes one over with its status and attempts. */
  submit(namespace: string, name: string, spec: JobSpecType, workload: WorkloadModel, restored?: Restored): SimJob {
    // Joined: one flat string (a template keeps a rope of its pieces), written into every trace line of the Job.
    const key = [namespace, name].join("/")
    const job: SimJob = {
      name,
      namespace,
      key,
      uid: restored?.uid ?? `sim-${++this.nextUid}`,
      generation: restored?.generation ?? 1,
      createdAt: this.now,
      spec,
      // A copy: the status is written in place at the Job's steps, and the caller's stays its own.
      status: restored === undefined ? {} : { ...restored.status },
      attempts: [...(restored?.attempts ?? [])],
      workload,
      dirty: false,
      wakeAt: undefined,
      deleted: false,
      queued: false,
      settled: undefined,
      clockChecked: undefined
    }
    this.jobs.set(key, job)
    traceLine(this.options.trace, this.now, key, "Created")
    this.touch(job)
    return job
  }

  /** A caller's spec change (spec.state, parallelism, ...): a new generation, reconciled now. */
  update(job: SimJob, spec: JobSpecType): void {
    job.spec = spec
    job.generation++
    this.options.trace.record(
      `${this.now} ${job.namespace}/${job.name} Updated generation=${job.generation} state=${spec.state}`
    )
    this.touch(job)
  }

  /** Forgets a Job its owner deleted; its running programs are stopped so their hosts go back to the pool. */
  remove(job: SimJob): void {
    if (job.deleted) return
    job.deleted = true
    this.unqueue(job)
    this.unfunded.delete(job)
    const key = job.key
    for (const attempt of job.attempts) if (attempt.phase !== "Ended") this.options.capacity.stop(key, attempt.name, 0)
    this.options.capacity.forget(key)
    if (this.jobs.get(key) === job) this.jobs.delete(key)
    traceLine(this.options.trace, this.now, key, "Removed")
    // Billing happens inside the engine's run (the server's ledger is lent to it only then).
    if (this.options.billing !== undefined) {
      this.billedAfterRemoval.set(key, job)
      this.options.engine.after(0, () => this.billRemoved(job))
    }
  }

  /**
   * A Job's attempt changed, as the capacity tells the Job itself (SimProgram.changed) rather than its owner key: the
   * same as `onChange(job.key)`, since a Job is under its key until it is deleted.
   */
  private factsChanged(job: SimJob): void {
    if (!job.deleted) this.touch(job)
    else this.removedChanged(job.key)
  }

  /** A deleted Job's run ended (its host is released): its final charge is due now. */
  private removedChanged(owner: string): void {
    const removed = this.billedAfterRemoval.get(owner)
    if (removed !== undefined) this.billRemoved(removed)
  }

  /** A deleted Job's runs are billed until their hosts are released (BilledStep.billRemoved). */
  private billRemoved(job: SimJob): void {
    const billing = this.billingOf(job)
    if (billing === undefined) return
    const { wakeAt, done } = billRemoved(billing, job.uid, job.spec.maxCostUSD, job.attempts, this.now)
    const key = job.key
    if (done) {
      if (this.billedAfterRemoval.get(key) === job) this.billedAfterRemoval.delete(key)
    } else if (wakeAt !== undefined) this.options.engine.at(wakeAt, () => this.billRemoved(job))
  }

  /** Schedules a reconcile now, after a change of the Job's facts (so a settled Job is not settled any more). */
  private touch(job: SimJob): void {
    job.settled = undefined
    if (job.dirty || job.deleted) return
    job.dirty = true
    this.options.engine.after(0, this.lookAgainOf, job)
  }

  /**
   * A touched Job's reconcile, skipped when it cannot change anything: the Job's last step waited for capacity and
   * changed nothing (no action, no event, the status it was given), nothing it reads has changed since (spec,
   * generation, status, attempts: every change of its facts goes through `touch`), no wake-up of its own is due
   * (deadlines and queue timeouts wake it), and no variant of its ranking has capacity now. Its step would find
   * the same status again and launch nothing, so skipping it leaves the run byte-identical; it saves the herd of
   * steps a drought's queue costs, where every freed host touches every waiting Job.
   */
  private lookAgain(job: SimJob): void {
    const settled = job.settled
    if (
      settled !== undefined &&
      !job.deleted &&
      this.options.stepEveryLook !== true &&
      settled.status === job.status &&
      settled.spec === job.spec &&
      settled.generation === job.generation &&
      settled.attempts === job.attempts.length &&
      (job.wakeAt === undefined || job.wakeAt > this.now) &&
      this.nothingFreeFor(this.rankingOf(job), this.options.capacity.marketFor(job.namespace))
    ) {
      job.dirty = false
      this.skippedSteps++
      return
    }
    this.reconcile(job)
  }

  private rankingOf(job: SimJob): Ranking {
    // A template's spec object is shared by its Jobs; placement depends on the spec only. The last few specs are
    // looked for by identity first: a scenario's handful of templates never reach the WeakMap's hashing.
    const spec = job.spec
    const recent = this.recentSpecs
    for (let index = 0; index < recent.length; index++) if (recent[index] === spec) return this.recentRankings[index]!
    let ranking = this.rankings.get(spec)
    if (ranking === undefined) {
      const { request, run } = jobMachine.placementOf(spec)
      ranking = rank(request, this.options.catalog, this.options.capacity.marketFor(job.namespace), run)
      this.rankings.set(spec, ranking)
    }
    if (recent.length < 8) {
      recent.push(spec)
      this.recentRankings.push(ranking)
    }
    return ranking
  }

  reconcile(job: SimJob): void {
    job.dirty = false
    if (job.deleted) return
    // A step may take or give back capacity: what a batch of looks knew to be taken is read again.
    this.nothingFree.length = 0
    const now = this.now
    const key = job.key
    const capacity = this.options.capacity
    // What the step's status was, as far as anything after the step reads it (the status may be written in place).
    const beforePhase = job.status.phase
    const beforeConditions = job.status.conditions
    // The step writes the Job's status in place (nothing else here holds it), except after a step that waited for
    // capacity: whether this one changes nothing (settled, below) is read against the status it was given.
    const inPlace = !job.queued
    const before = inPlace ? undefined : job.status
    const market = capacity.marketFor(job.namespace)
    const ranking = this.rankingOf(job)
    const billing = this.billingOf(job)
    // One context object for every step, set for this one: a step reads it while it runs and keeps nothing of it.
    const context = (this.stepContext ??= { now, market, ranking, rewriteStatus: inPlace })
    context.now = now
    context.market = market
    context.ranking = ranking
    context.rewriteStatus = inPlace
    const { result, settled, wakeAt } = billedStep(jobMachine, job, context, billing)
    this.steps++
    this.options.checkers?.afterStep(job, before ?? { phase: beforePhase, conditions: beforeConditions }, result, now)
    job.status = result.status
    if (result.waitingForCapacity) {
      if (!job.queued) {
        job.queued = true
        this.waiting.add(job)
      }
    } else this.unqueue(job)
    if (result.status.phase !== beforePhase && result.status.phase !== undefined) {
      traceLine(
        this.options.trace,
        now,
        key,
        "Phase ",
        beforePhase ?? "-",
        ">",
        result.status.phase,
        " ",
        result.status.reason ?? ""
      )
    }
    for (const event of result.events) {
      traceLine(this.options.trace, now, key, "Event ", event.type ?? "-", " ", event.reason, ": ", event.message)
      this.options.onEvent?.(job, event)
    }
    // Only a driver that is told of its launches gets them (the headless run is not: 2 × 10^6 launches).
    const launched: Array<Launched> | undefined = this.options.onStep === undefined ? undefined : []
    for (const action of result.actions) {
      switch (action._tag) {
        case "Launch": {
          const facts = capacity.launch({
            ...action,
            owner: key,
            namespace: job.namespace,
            workload: job.workload,
            changed: this.factsChangedOf,
            subject: job
          })
          job.attempts = appended(job.attempts, facts)
          launched?.push({ action, facts })
          traceLine(
            this.options.trace,
            now,
            key,
            "Launch ",
            action.attempt,
            " ",
            variantKeyOf(action.variant),
            facts.outcome === undefined ? "" : " ",
            facts.outcome?.type ?? ""
          )
          if (facts.outcome !== undefined) this.touch(job)
          break
        }
        case "Checkpoint":
          capacity.checkpoint(key, action.attempt, action.episode)
          break
        case "Stop":
          capacity.stop(key, action.attempt, action.keepWarmMs)
          traceLine(this.options.trace, now, key, "Stop ", action.attempt)
          break
        case "Delete":
          job.deleted = true
          this.unqueue(job)
          this.unfunded.delete(job)
          this.options.onDeleted?.(job)
          capacity.forget(key)
          this.jobs.delete(key)
          traceLine(this.options.trace, now, key, "Deleted")
          if (this.options.billing !== undefined) {
            this.billedAfterRemoval.set(key, job)
            this.billRemoved(job)
          }
          return
      }
    }
    if (settled !== undefined) {
      if (isUnfunded(job.status)) this.unfunded.add(job)
      else this.unfunded.delete(job)
    }
    this.options.onStep?.(job, result, launched ?? [], settled)
    this.scheduleWake(job, wakeAt)
    // A step in place is never settled: the Job was not waiting before it, so its status had a change to show.
    if (
      result.waitingForCapacity && result.actions.length === 0 && result.events.length === 0 && before !== undefined &&
      sameJson(job.status, before)
    ) {
      job.settled = { status: job.status, spec: job.spec, generation: job.generation, attempts: job.attempts.length }
    } else job.settled = undefined
  }

  private unqueue(job: SimJob): void {
    if (!job.queued) return
    job.queued = false
    this.waiting.delete(job)
  }

  /** The ledger this Job is billed on now, with the rooms of its Budgets (undefined: nothing is billed). */
  private billingOf(job: SimJob): Billing | undefined {
    const billing = this.options.billing
    return billing === undefined
      ? undefined
      : { ledger: billing.ledger, pricebook: billing.pricebook, rooms: billing.rooms?.(job) ?? [] }
  }

  private scheduleWake(job: SimJob, at: number | undefined): void {
    scheduleWake(
      this.options.engine,
      job,
      at,
      this.waker ??= wakerOf(this.options.engine, (job: SimJob) => this.reconcile(job))
    )
  }

  /** Jobs not in a final phase. */
  unfinished(): Array<SimJob> {
    return [...this.jobs.values()].filter((job) => job.status.phase === undefined || !isFinalPhase(job.status.phase))
  }
}

/**
 * Wakes `subject` (a Job, a Sandbox) at `at` for `reconcile`, unless a wake-up at or before it is already ahead; a
 * wake-up superseded by a later schedule does nothing when it comes.
 */
export const scheduleWake = <S extends { wakeAt: number | undefined }>(
  engine: Engine,
  subject: S,
  at: number | undefined,
  waker: Waker<S>
): void => {
  if (at === undefined || (subject.wakeAt !== undefined && subject.wakeAt <= at && subject.wakeAt > engine.now)) return
  subject.wakeAt = at
  // A wake-up ahead runs at exactly `at`, so `wakeAt` still saying now is `wakeAt` still saying `at`: one function for
  // every subject, the subject as the event's argument. One due already runs now, not at `at`: it keeps its `at`.
  if (at > engine.now) engine.at(at, waker.wake, subject)
  else {
    engine.at(at, () => {
      if (subject.wakeAt !== at) return
      subject.wakeAt = undefined
      waker.reconcile(subject)
    })
  }
}

/** What wakes a driver's subjects (`scheduleWake`): its reconcile, and the one function its wake-ups ahead run. */
export interface Waker<S> {
  readonly reconcile: (subject: S) => void
  readonly wake: (subject: S) => void
}

/** The waker of `reconcile` on `engine`: a wake-up ahead reconciles its subject unless a later schedule superseded it. */
export const wakerOf = <S extends { wakeAt: number | undefined }>(
  engine: Engine,
  reconcile: (subject: S) => void
): Waker<S> => ({
  reconcile,
  wake: (subject) => {
    if (subject.wakeAt !== engine.now) return
    subject.wakeAt = undefined
    reconcile(subject)
  }
})

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
