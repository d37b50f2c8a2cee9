/**
 * A headless simulation: objects of the kinds it is given (SimObject.ts: Jobs, Sandboxes, Functions) held in memory,
 * each stepped through the reconcile core (core/controller/Reconcile.ts) by its kind's machine after every change to
 * its facts or at the time it asked to be woken, its actions carried out by `SimCapacity`, and every event appended to
 * a trace whose hash identifies the run. The loop is one for every kind and names none: what a kind does beyond the
 * capacity (the checkers, a box, the requests its runs serve) is its entry's. The API server's sim backend runs the
 * same core and the same capacity over its store instead (src/runtime/Reconciler.ts, src/server/SimBackend.ts).
 */
import { createHash, type Hash } from "node:crypto"
import type { Room } from "../../core/billing/Billing.ts"
import type { Ledger } from "../../core/billing/Ledger.ts"
import type { Pricebook } from "../../core/billing/Pricebook.ts"
import { type Offering, variantKeyOf } from "../../core/capacity/Offering.ts"
import { choose, type Market, type Ranking } from "../../core/capacity/Placement.ts"
import { type Billing, billRemoved } from "../../core/controller/BilledStep.ts"
import { isUnfunded, type LaunchAction } from "../../core/controller/Controller.ts"
import { interpret, type Interpreter, rankingOf, reconcileStep } from "../../core/controller/Reconcile.ts"
import type { Engine } from "./Engine.ts"
import { appended, type SimCapacity, type WorkloadModel } from "./SimCapacity.ts"
import type { AnySimKind, AnySimObject, SimKind, SimObject, SimStatus } from "./SimObject.ts"

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
  /**
   * The kinds it runs (SimObject.ts): each object is stepped through the reconcile core by its kind's machine, the
   * same loop for every kind. The first is `submit`'s default.
   */
  readonly kinds: ReadonlyArray<AnySimKind>
  /**
   * Run the step on every capacity look, even for an object the look cannot change (see `Simulation.skippedSteps`).
   * Off by default; tests turn it on to show that skipping changes nothing.
   */
  readonly stepEveryLook?: boolean
  /** Bill the objects' runs on this ledger (Billing.ts); absent = nothing is billed and status.cost stays unset. */
  readonly billing?: SimBilling | undefined
}

export interface SimBilling {
  readonly ledger: Ledger
  readonly pricebook: Pricebook
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

const noRooms: ReadonlyArray<Room> = []

export class Simulation {
  /** The objects of each kind, by key (`objectsOf`). */
  private readonly byKind = new Map<AnySimKind, Map<string, AnySimObject>>()
  private readonly options: SimulationOptions
  private readonly rankings = new WeakMap<object, Ranking>()
  /** The first few specs ranked, and their rankings (`rankingOf`). */
  private readonly recentSpecs: Array<unknown> = []
  private readonly recentRankings: Array<Ranking> = []
  /** The last uid number given, per kind. */
  private readonly uids = new Map<AnySimKind, number>()
  /** Objects whose last step waited for capacity, in the order they started waiting (each `queued`). */
  private readonly waiting = new Set<AnySimObject>()
  /** Deleted objects whose runs are still billed until their hosts are released (`billRemoved`), by owner key. */
  private readonly billedAfterRemoval = new Map<string, AnySimObject>()
  /** Objects that money holds back (Funded False): they look again when credits arrive (`fundsChanged`). */
  private readonly unfunded = new Set<AnySimObject>()
  steps = 0
  private stepContext: { now: number; market: Market; ranking: Ranking; rewriteStatus: boolean } | undefined
  /** A batch of looks runs (`lookAll`), and the rankings and markets it found nothing free for, in pairs. */
  private looking = false
  private readonly nothingFree: Array<Ranking | Market> = []
  /**
   * `lookAgain` and `reconcile` of an object, made once: the engine runs them with the object as the event's argument.
   */
  private readonly lookAgainOf = (object: AnySimObject) => this.lookAgain(object)
  private waker: Waker<AnySimObject> | undefined
  private readonly factsChangedOf = (object: AnySimObject) => this.factsChanged(object)
  /** The capacity, carrying out a step's actions (core/controller/Reconcile.ts), made once. */
  private readonly interpreter: Interpreter<AnySimObject>
  /** Capacity looks answered without a step: the object was settled and nothing it could take was free. */
  skippedSteps = 0

  constructor(options: SimulationOptions) {
    this.options = options
    for (const kind of options.kinds) this.byKind.set(kind, new Map())
    options.capacity.onChange = (owner) => {
      const object = this.find(owner)
      if (object !== undefined) this.touch(object)
      else this.removedChanged(owner)
    }
    // The kinds whose objects look again at a freed host beside those waiting: none in a scenario of Jobs, so a freed
    // host (10^6 in the platform benchmark) iterates nothing more.
    const lookers = options.kinds.filter((kind) => kind.looksWhenFreed !== undefined)
    options.capacity.onFreed = () => {
      this.lookAll()
      for (let index = 0; index < lookers.length; index++) {
        const kind = lookers[index]!
        const looks = kind.looksWhenFreed!
        for (const object of this.byKind.get(kind)!.values()) if (looks(object)) this.touch(object)
      }
    }
    this.interpreter = {
      launch: (object, action) => this.launch(object, action),
      checkpoint: (object, attempt, episode) => {
        object.kind.checkpointing?.(object, attempt)
        options.capacity.checkpoint(object.key, attempt, episode)
      },
      stop: (object, attempt, keepWarmMs) => {
        options.capacity.stop(object.key, attempt, keepWarmMs)
        traceLine(options.trace, this.now, object.key, "Stop ", attempt)
      },
      delete: (object) => this.deleted(object)
    }
  }

  /** The objects of `kind` not deleted, by key. */
  objectsOf<Spec, Status extends SimStatus>(kind: SimKind<Spec, Status>): ReadonlyMap<string, SimObject<Spec, Status>> {
    return this.byKind.get(kind as AnySimKind) ?? new Map()
  }

  private find(key: string): AnySimObject | undefined {
    for (const objects of this.byKind.values()) {
      const object = objects.get(key)
      if (object !== undefined) return object
    }
    return undefined
  }

  /** Credits arrived, a cap or a Budget was raised: objects that money held back look again. */
  fundsChanged(): void {
    for (const object of this.unfunded) this.touch(object)
    for (const [kind, objects] of this.byKind) {
      if (kind.looksWhenFunded === true) { for (const object of objects.values()) this.touch(object) }
    }
  }

  /** Capacity changed outside the simulator's own releases (a drought ended): waiting objects look again. */
  capacityChanged(): void {
    this.lookAll()
  }

  /**
   * Every waiting object looks again, in the order they started waiting. One event runs the looks one after the other:
   * one event per object would take consecutive places in the queue, which nothing can come between (anything scheduled
   * meanwhile comes after them), so the order of everything is the same, without a queue entry per object (a freed host
   * in a drought's queue touches thousands of Jobs).
   */
  private lookAll(): void {
    let looks: Array<AnySimObject> | undefined
    for (const object of this.waiting) {
      if (object.dirty || object.deleted) continue
      object.dirty = true
      if (looks === undefined) looks = [object]
      else looks.push(object)
    }
    if (looks === undefined) return
    const batch = looks
    this.options.engine.after(0, () => {
      this.looking = true
      for (const object of batch) this.lookAgain(object)
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

  /**
   * Admits an object of `kind` (its spec already read as the machine reads it, defaults filled) now, under the owner
   * key `<kind.keyPrefix><namespace>/<name>` (the capacity's owner and the trace's subject).
   */
  submit<Spec, Status extends SimStatus>(
    kind: SimKind<Spec, Status>,
    namespace: string,
    name: string,
    spec: Spec,
    workload: WorkloadModel
  ): SimObject<Spec, Status> {
    // Joined: one flat string (a template keeps a rope of its pieces), written into every trace line of the object.
    const owner = kind.keyPrefix === undefined
      ? [namespace, name].join("/")
      : [kind.keyPrefix + namespace, name].join("/")
    const number = (this.uids.get(kind as AnySimKind) ?? 0) + 1
    this.uids.set(kind as AnySimKind, number)
    const object: SimObject<Spec, Status> = {
      kind,
      name,
      namespace,
      key: owner,
      uid: `${kind.uidPrefix ?? "sim-"}${number}`,
      generation: 1,
      createdAt: this.now,
      spec,
      status: {} as Status,
      attempts: [],
      workload,
      dirty: false,
      wakeAt: undefined,
      deleted: false,
      queued: false,
      settled: undefined,
      clockChecked: undefined
    }
    this.byKind.get(kind as AnySimKind)!.set(owner, object)
    traceLine(this.options.trace, this.now, owner, "Created")
    this.touch(object)
    return object
  }

  /** A caller's spec change (a Job's spec.state, a Sandbox's start request, ...): a new generation, reconciled now. */
  update<Spec, Status extends SimStatus>(object: SimObject<Spec, Status>, spec: NoInfer<Spec>): void {
    object.spec = spec
    object.generation++
    const updated = object.kind.updated
    if (updated !== undefined) {
      this.options.trace.record(
        `${this.now} ${object.namespace}/${object.name} Updated generation=${object.generation}${updated(spec)}`
      )
    }
    this.touch(object)
  }

  /** Forgets an object its owner deleted; its running programs are stopped so their hosts go back to the pool. */
  remove(object: AnySimObject): void {
    if (object.deleted) return
    object.deleted = true
    this.unqueue(object)
    this.unfunded.delete(object)
    const key = object.key
    for (const attempt of object.attempts) {
      if (attempt.phase !== "Ended") this.options.capacity.stop(key, attempt.name, 0)
    }
    object.kind.forgotten?.(object)
    this.options.capacity.forget(key)
    const objects = this.byKind.get(object.kind)!
    if (objects.get(key) === object) objects.delete(key)
    traceLine(this.options.trace, this.now, key, "Removed")
    if (this.options.billing !== undefined) {
      this.billedAfterRemoval.set(key, object)
      this.billRemoved(object)
    }
  }

  /**
   * An object's attempt changed, as the capacity tells the object itself (SimProgram.changed) rather than its owner
   * key: the same as `onChange(object.key)`, since an object is under its key until it is deleted.
   */
  private factsChanged(object: AnySimObject): void {
    if (!object.deleted) this.touch(object)
    else this.removedChanged(object.key)
  }

  /** A deleted object's run ended (its host is released): its final charge is due now. */
  private removedChanged(owner: string): void {
    const removed = this.billedAfterRemoval.get(owner)
    if (removed !== undefined) this.billRemoved(removed)
  }

  /** A deleted object's runs are billed until their hosts are released (BilledStep.billRemoved). */
  private billRemoved(object: AnySimObject): void {
    const billing = this.billingOf(object)
    if (billing === undefined) return
    const maxCost = object.kind.reconcile.machine.maxCostOf(object.spec)
    const { wakeAt, done } = billRemoved(billing, object.uid, maxCost, object.attempts, this.now)
    const key = object.key
    if (done) {
      if (this.billedAfterRemoval.get(key) === object) this.billedAfterRemoval.delete(key)
    } else if (wakeAt !== undefined) this.options.engine.at(wakeAt, () => this.billRemoved(object))
  }

  /**
   * Schedules a reconcile now, after a change of the object's facts (so a settled object is not settled any more), or
   * of the requests its runs serve (a kind's driver: one came, one was answered).
   */
  touch(object: AnySimObject): void {
    object.settled = undefined
    if (object.dirty || object.deleted) return
    object.dirty = true
    this.options.engine.after(0, this.lookAgainOf, object)
  }

  /**
   * A touched object's reconcile, skipped when it cannot change anything: its last step waited for capacity and
   * changed nothing (no action, no event, the status it was given), nothing it reads has changed since (spec,
   * generation, status, attempts: every change of its facts goes through `touch`), no wake-up of its own is due
   * (deadlines and queue timeouts wake it), and no variant of its ranking has capacity now. Its step would find
   * the same status again and launch nothing, so skipping it leaves the run byte-identical; it saves the herd of
   * steps a drought's queue costs, where every freed host touches every waiting Job.
   */
  private lookAgain(object: AnySimObject): void {
    const settled = object.settled
    if (
      settled !== undefined &&
      !object.deleted &&
      this.options.stepEveryLook !== true &&
      settled.status === object.status &&
      settled.spec === object.spec &&
      settled.generation === object.generation &&
      settled.attempts === object.attempts.length &&
      (object.wakeAt === undefined || object.wakeAt > this.now) &&
      this.nothingFreeFor(this.rankingOf(object), this.options.capacity.marketFor(object.namespace))
    ) {
      object.dirty = false
      this.skippedSteps++
      return
    }
    this.reconcile(object)
  }

  private rankingOf(object: AnySimObject): Ranking {
    // A template's spec object is shared by its objects; placement depends on the spec only. The last few specs are
    // looked for by identity first: a scenario's handful of templates never reach the WeakMap's hashing.
    const spec = object.spec
    const recent = this.recentSpecs
    for (let index = 0; index < recent.length; index++) if (recent[index] === spec) return this.recentRankings[index]!
    let ranking = this.rankings.get(spec as object)
    if (ranking === undefined) {
      ranking = rankingOf(
        object.kind.reconcile,
        spec,
        this.options.catalog,
        this.options.capacity.marketFor(object.namespace)
      )
      this.rankings.set(spec as object, ranking)
    }
    if (recent.length < 8) {
      recent.push(spec)
      this.recentRankings.push(ranking)
    }
    return ranking
  }

  /** One reconcile of an object, whatever its kind: the core's step, its actions carried out on the capacity. */
  reconcile(object: AnySimObject): void {
    object.dirty = false
    if (object.deleted) return
    // A step may take or give back capacity: what a batch of looks knew to be taken is read again.
    this.nothingFree.length = 0
    const now = this.now
    const key = object.key
    const kind = object.kind
    // What the step's status was, as far as anything after the step reads it (the status may be written in place).
    const beforePhase: string | undefined = object.status.phase
    const beforeConditions = object.status.conditions
    // The step writes the object's status in place (nothing else here holds it), except after a step that waited for
    // capacity: whether this one changes nothing (settled, below) is read against the status it was given.
    const inPlace = !object.queued
    const before = inPlace ? undefined : object.status
    const market = this.options.capacity.marketFor(object.namespace)
    const ranking = this.rankingOf(object)
    const billing = this.billingOf(object)
    // One context object for every step, set for this one: a step reads it while it runs and keeps nothing of it.
    const context = (this.stepContext ??= { now, market, ranking, rewriteStatus: inPlace })
    context.now = now
    context.market = market
    context.ranking = ranking
    context.rewriteStatus = inPlace
    kind.observe?.(object, now)
    const { result, settled, wakeAt } = reconcileStep(kind.reconcile, object, context, billing)
    this.steps++
    kind.checkStep?.(object, before ?? { phase: beforePhase, conditions: beforeConditions }, result, now)
    const status: SimStatus = result.status
    object.status = status
    if (result.waitingForCapacity) {
      if (!object.queued) {
        object.queued = true
        this.waiting.add(object)
      }
    } else this.unqueue(object)
    if (status.phase !== beforePhase && status.phase !== undefined) {
      kind.phaseChanged?.(object, beforePhase, now)
      traceLine(this.options.trace, now, key, "Phase ", beforePhase ?? "-", ">", status.phase, " ", status.reason ?? "")
    }
    for (const event of result.events) {
      traceLine(this.options.trace, now, key, "Event ", event.type ?? "-", " ", event.reason, ": ", event.message)
      kind.event?.(object, event)
    }
    if (!interpret(result.actions, this.interpreter, object)) return
    if (settled !== undefined && kind.looksWhenFunded !== true) {
      if (isUnfunded(status)) this.unfunded.add(object)
      else this.unfunded.delete(object)
    }
    const servedAt = kind.served?.(object, now)
    const wakeAtAll = servedAt === undefined || (wakeAt !== undefined && wakeAt <= servedAt) ? wakeAt : servedAt
    scheduleWake(this.options.engine, object, wakeAtAll, this.waker ??= wakerOf(this.options.engine, this.reconcileOf))
    // A step in place is never settled: the object was not waiting before it, so its status had a change to show.
    if (
      result.waitingForCapacity && result.actions.length === 0 && result.events.length === 0 && before !== undefined &&
      sameJson(status, before)
    ) {
      object.settled = { status, spec: object.spec, generation: object.generation, attempts: object.attempts.length }
    } else object.settled = undefined
    kind.stepped?.(object)
  }

  private readonly reconcileOf = (object: AnySimObject) => this.reconcile(object)

  /** A Launch: the capacity starts the run (its facts appended to the object's), the kind told when it found room. */
  private launch(object: AnySimObject, action: LaunchAction): void {
    const key = object.key
    const facts = this.options.capacity.launch({
      ...action,
      owner: key,
      namespace: object.namespace,
      workload: object.workload,
      startMs: object.kind.startMs?.(object),
      changed: this.factsChangedOf,
      subject: object
    })
    object.attempts = appended(object.attempts, facts)
    traceLine(
      this.options.trace,
      this.now,
      key,
      "Launch ",
      action.attempt,
      " ",
      variantKeyOf(action.variant),
      facts.outcome === undefined ? "" : " ",
      facts.outcome?.type ?? ""
    )
    if (facts.outcome !== undefined) this.touch(object)
    else object.kind.launched?.(object, action)
  }

  /** A step deleted its object (ttl, max lifetime): it is forgotten, and billed until its hosts are released. */
  private deleted(object: AnySimObject): void {
    const key = object.key
    object.deleted = true
    this.unqueue(object)
    this.unfunded.delete(object)
    object.kind.deleted?.(object)
    object.kind.forgotten?.(object)
    this.options.capacity.forget(key)
    this.byKind.get(object.kind)!.delete(key)
    traceLine(this.options.trace, this.now, key, "Deleted")
    if (this.options.billing !== undefined) {
      this.billedAfterRemoval.set(key, object)
      this.billRemoved(object)
    }
  }

  private unqueue(object: AnySimObject): void {
    if (!object.queued) return
    object.queued = false
    this.waiting.delete(object)
  }

  /** The ledger this object is billed on now, with the rooms of its Budgets (undefined: nothing is billed). */
  private billingOf(object: AnySimObject): Billing | undefined {
    const billing = this.options.billing
    return billing === undefined
      ? undefined
      : { ledger: billing.ledger, pricebook: billing.pricebook, rooms: object.kind.rooms?.(object) ?? noRooms }
  }

  /** Objects of `kind` not final. */
  unfinished<Spec, Status extends SimStatus>(kind: SimKind<Spec, Status>): Array<SimObject<Spec, Status>> {
    return [...this.objectsOf(kind).values()].filter((object) => !kind.reconcile.machine.isFinal(object.status))
  }
}

/**
 * Wakes `subject` (an object of any kind) at `at` for `reconcile`, unless a wake-up at or before it is already ahead; a
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

/**
 * The waker of `reconcile` on `engine`: a wake-up ahead reconciles its subject unless a later schedule superseded it.
 */
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
