/**
 * The queue of a Function's calls on its warm workers (spec: FunctionCall; docs/functions.md, "Dispatch"), as a pure
 * model: which calls wait, in what order, which worker takes the next one, what an answer, a lost worker, a cancel, a
 * deadline or a backoff's end does to a call, and the load the Function's step sizes its workers to. Nothing here reads
 * a clock, sends a call or writes a status: the drivers do — the runtime's dispatcher (runtime/FunctionDispatch.ts:
 * the store, the change feed, the capacity port's `box`, blobs) and the headless simulator
 * (backends/sim/SimFunctions.ts: the engine, the simulated workers) — and both make the same moves at the same
 * instants.
 *
 * - Claims take turns between sessions (spec: FunctionCall.session): the queue is served one call per session in turn.
 * - A worker takes at most `scaling.targetConcurrency` calls at once; a call goes to the least busy worker that takes
 *   calls (FunctionMachine.acceptsCalls: ready, of the current template, the Function not held).
 * - A call whose worker ended under it is lost (level-triggered: the worker's facts, not an answer, say so), and one
 *   answer or loss is for one dispatch epoch: anything about another epoch is fenced.
 * - A try's cost is its worker time at the worker's rate shared by the calls a worker takes at once.
 */
import type { AttemptFacts, BoxReply } from "../../core/capacity/Capacity.ts"
import { isLive } from "../../core/capacity/Capacity.ts"
import type { ServingLoad } from "../../core/controller/Controller.ts"
import { equals, type Json } from "../../core/Json.ts"
import * as Limits from "../../core/Limits.ts"
import * as Call from "./FunctionCallMachine.ts"
import type { FunctionCallSpecType } from "./FunctionCallSchema.ts"
import { acceptsCalls } from "./FunctionMachine.ts"
import type { FunctionSpecType, FunctionStatusType } from "./FunctionSchema.ts"

/** One unfinished call of a Function, as the queue holds it (a driver adds what it needs: its status, its version). */
export interface QueuedCall {
  readonly uid: string
  readonly spec: FunctionCallSpecType
  state: Call.CallState
  /** Cancelled, deleted or lost under a previous process: a move the next step makes. */
  cancelAsked: boolean
  lostBefore: boolean
  deleted: boolean
  /** In its session's queue, waiting for a worker now. */
  waiting: boolean
}

/** A call on a worker: its epoch, since when, and at what rate (its try's cost). */
export interface InFlight {
  readonly uid: string
  readonly epoch: number
  readonly worker: string
  readonly since: number
  readonly rateMicroUsdPerHour: bigint
}

/** An answer heard from a worker, taken in at the next step. */
export interface Heard {
  readonly flight: InFlight
  readonly reply: BoxReply
}

/** A Function's warm workers and the calls queued on them (by project and name). */
export interface WorkerGroup<C extends QueuedCall = QueuedCall> {
  readonly namespace: string
  readonly fn: string
  uid: string | undefined
  spec: FunctionSpecType | undefined
  readonly calls: Map<string, C>
  /** Calls waiting for a worker, by session, in arrival order; sessions take turns. */
  readonly waiting: Map<string, Fifo>
  /** Calls waiting for their retry's backoff. */
  readonly delayed: Set<string>
  readonly inFlight: Map<string, InFlight>
  readonly lastBusyAt: Map<string, number>
  readonly heard: Array<Heard>
  /** The session served last: the next turn is the one after it. */
  turn: number
  /** Calls waiting for a worker now (in the queues, and not stale there). */
  queued: number
  /** Calls with a move to make at the next step (lost under a previous process, cancel asked). */
  readonly attention: Set<string>
  /** Calls whose status is to be shown (written, recorded). */
  readonly dirty: Set<string>
  /** The counts the Function's status shows, and when they were taken (ServingLoad.shown). */
  shown: ServingLoad["shown"]
  shownAt: number
  /** When statuses the store did not take are written again. */
  rewriteAt: number | undefined
}

/** A first-in first-out queue whose shift costs O(1) (an array's shift moves every item: a map queues thousands). */
export class Fifo {
  private items: Array<string> = []
  private head = 0

  push(item: string) {
    this.items.push(item)
  }

  shift(): string | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head++]
    // Compacted once half is spent, so the array does not keep every item ever queued.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
}

/** How often a Function's status shows new counts of its calls at most (ServingLoad.shown). */
export const shownCountsMs = 1_000

/** The key of a Function's group: its project and name. */
export const groupKey = (namespace: string, fn: string) => `${namespace}/${fn}`

/** The key of one dispatch: the call's uid and its epoch (also the id of the `Call` a worker is sent). */
export const flightKey = (uid: string, epoch: number) => `${uid}.${epoch}`

export const makeGroup = <C extends QueuedCall>(namespace: string, fn: string): WorkerGroup<C> => ({
  namespace,
  fn,
  uid: undefined,
  spec: undefined,
  calls: new Map(),
  waiting: new Map(),
  delayed: new Set(),
  inFlight: new Map(),
  lastBusyAt: new Map(),
  heard: [],
  turn: 0,
  queued: 0,
  attention: new Set(),
  dirty: new Set(),
  shown: undefined,
  shownAt: Number.NEGATIVE_INFINITY,
  rewriteAt: undefined
})

export const enqueue = <C extends QueuedCall>(group: WorkerGroup<C>, call: C) => {
  if (call.waiting) return
  const session = call.spec.session ?? ""
  let queue = group.waiting.get(session)
  if (queue === undefined) group.waiting.set(session, queue = new Fifo())
  queue.push(call.uid)
  call.waiting = true
  group.queued++
}

/** The call leaves its queue (taken, or no longer waiting); its entry there is skipped when reached. */
export const unqueue = <C extends QueuedCall>(group: WorkerGroup<C>, call: C) => {
  if (!call.waiting) return
  call.waiting = false
  group.queued--
}

/**
 * A call taken in (new, or read again after a restart): held, to be shown, with its pending move (a cancel, a loss
 * under a previous process) marked; queued unless it waits out a retry's backoff or a recovery.
 */
export const admitCall = <C extends QueuedCall>(group: WorkerGroup<C>, call: C) => {
  group.calls.set(call.uid, call)
  group.dirty.add(call.uid)
  if (call.cancelAsked || call.lostBefore) group.attention.add(call.uid)
  // A retry waiting out its backoff under the previous process waits out the rest of it (status.retryTime).
  if (call.state.notBefore !== undefined) group.delayed.add(call.uid)
  else if (!call.lostBefore) enqueue(group, call)
}

/** A call is gone (deleted): it leaves every set of its group. */
export const dropCall = <C extends QueuedCall>(group: WorkerGroup<C>, call: C) => {
  call.deleted = true
  unqueue(group, call)
  group.calls.delete(call.uid)
  group.delayed.delete(call.uid)
  group.attention.delete(call.uid)
  group.dirty.delete(call.uid)
}

export const policyOf = <C extends QueuedCall>(group: WorkerGroup<C>, call: C) =>
  Call.policyOf(group.spec!, call.spec.timeout)

export const tryCost = <C extends QueuedCall>(group: WorkerGroup<C>, flight: InFlight, now: number) =>
  Call.tryCostMicroUsd(now - flight.since, flight.rateMicroUsdPerHour, group.spec?.scaling.targetConcurrency ?? 1)

/** A call's new state: a retry waits for its backoff, a recovered one for a worker. */
export const moved = <C extends QueuedCall>(group: WorkerGroup<C>, call: C, next: Call.CallState) => {
  const before = call.state
  call.state = next
  if (next === before) return
  group.dirty.add(call.uid)
  if (!Call.isDispatchable(next, Number.POSITIVE_INFINITY)) unqueue(group, call)
  if ((next.phase === "Queued" || next.phase === "Recovering") && before.phase !== next.phase) {
    if (next.notBefore !== undefined) group.delayed.add(call.uid)
    else enqueue(group, call)
  } else if (next.phase === "Queued" && next.notBefore !== undefined && before.notBefore === undefined) {
    group.delayed.add(call.uid)
  }
  if (!Call.isUnfinished(next)) group.delayed.delete(call.uid)
}

/** Ends a dispatch: its worker's slot is free again, whatever became of the call. */
const settle = <C extends QueuedCall>(group: WorkerGroup<C>, flight: InFlight, now: number) => {
  group.inFlight.delete(flightKey(flight.uid, flight.epoch))
  group.lastBusyAt.set(flight.worker, now)
}

const hear = <C extends QueuedCall>(group: WorkerGroup<C>, heard: Heard, now: number) => {
  const { flight, reply } = heard
  if (!group.inFlight.has(flightKey(flight.uid, flight.epoch))) return
  settle(group, flight, now)
  const call = group.calls.get(flight.uid)
  if (call === undefined) return
  const cost = tryCost(group, flight, now)
  const policy = policyOf(group, call)
  if (reply._tag === "Result") {
    moved(group, call, Call.answer(call.state, flight.epoch, reply.outcome, policy, now, cost))
  } else {
    const why = reply._tag === "Refused" ? reply.message : "no answer"
    moved(group, call, Call.lose(call.state, flight.epoch, policy, now, cost, why))
  }
}

/** Dispatches whose worker ended (or is no longer known) are lost with it; so is its idle time. */
const loseOnEndedWorkers = <C extends QueuedCall>(
  group: WorkerGroup<C>,
  attempts: ReadonlyArray<AttemptFacts>,
  now: number
) => {
  const live = new Set(attempts.filter(isLive).map((attempt) => attempt.name))
  for (const flight of [...group.inFlight.values()]) {
    if (live.has(flight.worker)) continue
    const ended = attempts.find((attempt) => attempt.name === flight.worker)
    hear(group, {
      flight,
      reply: {
        _tag: "Refused",
        code: "Unavailable",
        message: `the worker ${flight.worker} ended (${ended?.outcome?.type ?? "gone"})`
      }
    }, now)
  }
  // Only live workers' idle times matter (scale-down): a Function's workers come and go for as long as it serves.
  for (const worker of [...group.lastBusyAt.keys()]) if (!live.has(worker)) group.lastBusyAt.delete(worker)
}

/**
 * Every move due at `now` that needs no worker: answers heard, losses on ended workers, losses under a previous
 * process (`lostUnder` says why), cancels, deadlines, backoffs over.
 */
export const advance = <C extends QueuedCall>(
  group: WorkerGroup<C>,
  attempts: ReadonlyArray<AttemptFacts>,
  now: number,
  lostUnder: string
) => {
  const heard = group.heard.splice(0)
  for (const one of heard) hear(group, one, now)
  loseOnEndedWorkers(group, attempts, now)
  for (const uid of group.attention) {
    const call = group.calls.get(uid)
    if (call === undefined) continue
    if (call.lostBefore) {
      call.lostBefore = false
      moved(group, call, Call.lose(call.state, call.state.epoch, policyOf(group, call), now, 0n, lostUnder))
    }
    if (call.cancelAsked) moved(group, call, Call.cancel(call.state, now))
  }
  group.attention.clear()
  // The worker keeps running a call past its deadline until it answers (its slot stays taken); the call ends now.
  for (const flight of group.inFlight.values()) {
    const call = group.calls.get(flight.uid)
    if (call === undefined || call.state.epoch !== flight.epoch) continue
    const policy = policyOf(group, call)
    if ((Call.deadlineOf(call.state, policy) ?? Number.POSITIVE_INFINITY) <= now) {
      moved(group, call, Call.expire(call.state, policy, now, tryCost(group, flight, now)))
    }
  }
  for (const uid of [...group.delayed]) {
    const call = group.calls.get(uid)
    if (call === undefined || !Call.isUnfinished(call.state)) {
      group.delayed.delete(uid)
    } else if (Call.isDispatchable(call.state, now)) {
      group.delayed.delete(uid)
      enqueue(group, call)
    }
  }
}

/** The next call waiting, one session after another. */
const nextWaiting = <C extends QueuedCall>(group: WorkerGroup<C>, now: number): C | undefined => {
  const sessions = [...group.waiting.keys()]
  for (let tried = 0; tried < sessions.length; tried++) {
    const index = (group.turn + tried) % sessions.length
    const queue = group.waiting.get(sessions[index]!)!
    for (let uid = queue.shift(); uid !== undefined; uid = queue.shift()) {
      const call = group.calls.get(uid)
      if (call?.waiting === true && !call.cancelAsked && Call.isDispatchable(call.state, now)) {
        unqueue(group, call)
        group.turn = index + 1
        return call
      }
    }
    group.waiting.delete(sessions[index]!)
  }
  return undefined
}

/** The workers that take calls after a step, and the calls each runs now: what `nextDispatch` fills. */
export interface Slots {
  readonly workers: ReadonlyArray<AttemptFacts>
  readonly load: Map<string, number>
  readonly perWorker: number
}

/** The free slots of the group's workers after a step whose status is `status` (FunctionMachine.acceptsCalls). */
export const slotsOf = <C extends QueuedCall>(
  group: WorkerGroup<C>,
  status: FunctionStatusType,
  attempts: ReadonlyArray<AttemptFacts>
): Slots => {
  const spec = group.spec!
  const load = new Map<string, number>()
  for (const flight of group.inFlight.values()) load.set(flight.worker, (load.get(flight.worker) ?? 0) + 1)
  return {
    workers: attempts.filter((worker) => acceptsCalls(spec, status, worker)),
    load,
    perWorker: spec.scaling.targetConcurrency
  }
}

/**
 * The next dispatch: the next call waiting (sessions in turn) to the least busy worker with a free slot, the call moved
 * Running under its next epoch and the dispatch held in flight; undefined when no call waits or no slot is free. The
 * driver sends the call (`flightKey` names it) before it asks for the next one.
 */
export const nextDispatch = <C extends QueuedCall>(
  group: WorkerGroup<C>,
  slots: Slots,
  now: number
): { readonly call: C; readonly flight: InFlight } | undefined => {
  let best: AttemptFacts | undefined
  for (const worker of slots.workers) {
    const busy = slots.load.get(worker.name) ?? 0
    if (busy < slots.perWorker && (best === undefined || busy < (slots.load.get(best.name) ?? 0))) best = worker
  }
  if (best === undefined) return undefined
  const call = nextWaiting(group, now)
  if (call === undefined) return undefined
  moved(group, call, Call.dispatch(call.state, best.name, now))
  const flight: InFlight = {
    uid: call.uid,
    epoch: call.state.epoch,
    worker: best.name,
    since: now,
    rateMicroUsdPerHour: best.variant.rateMicroUsdPerHour
  }
  group.inFlight.set(flightKey(call.uid, flight.epoch), flight)
  slots.load.set(best.name, (slots.load.get(best.name) ?? 0) + 1)
  return { call, flight }
}

/** The Function is gone: every unfinished call of it is Failed FunctionDeleted (the try running then is paid). */
export const endAll = <C extends QueuedCall>(group: WorkerGroup<C>, now: number) => {
  for (const call of group.calls.values()) {
    const flight = group.inFlight.get(flightKey(call.uid, call.state.epoch))
    call.state = Call.functionDeleted(call.state, now, flight === undefined ? 0n : tryCost(group, flight, now))
    group.dirty.add(call.uid)
  }
}

/** A call just dispatched whose Running status waits `runningShownAfterMs`: its answer may come first. */
export const showsRunningLater = (call: QueuedCall, now: number, runningShownAfterMs: number) =>
  call.state.phase === "Running" && call.state.startTime !== undefined &&
  now < call.state.startTime + runningShownAfterMs

/**
 * When the group must be stepped next, if ever: a Running status shown late, a backoff's end, a rewrite, a deadline,
 * or `besides` (the driver's own: a retained call's end).
 */
export const nextAtOf = <C extends QueuedCall>(
  group: WorkerGroup<C>,
  runningShownAfterMs: number,
  besides: number | undefined
): number | undefined => {
  let next: number | undefined
  const consider = (at: number | undefined) => {
    if (at !== undefined && (next === undefined || at < next)) next = at
  }
  for (const uid of group.dirty) {
    const state = group.calls.get(uid)?.state
    if (state?.phase === "Running" && state.startTime !== undefined) {
      consider(state.startTime + runningShownAfterMs)
    }
  }
  for (const uid of group.delayed) consider(group.calls.get(uid)?.state.notBefore)
  consider(besides)
  if (group.rewriteAt !== undefined && group.dirty.size > 0) consider(group.rewriteAt)
  for (const flight of group.inFlight.values()) {
    const call = group.calls.get(flight.uid)
    if (call !== undefined && call.state.epoch === flight.epoch) {
      consider(Call.deadlineOf(call.state, policyOf(group, call)))
    }
  }
  return next
}

/**
 * The load the Function's step sees now, with the counts its status shows (refreshed at most once a second);
 * `nextAt` is the group's (nextAtOf).
 */
export const loadOf = <C extends QueuedCall>(
  group: WorkerGroup<C>,
  now: number,
  nextAt: number | undefined
): ServingLoad => {
  const running: Record<string, number> = {}
  for (const flight of group.inFlight.values()) running[flight.worker] = (running[flight.worker] ?? 0) + 1
  const live = { queued: group.queued, running }
  if (group.shown === undefined || now >= group.shownAt + shownCountsMs) {
    group.shown = live
    group.shownAt = now
  } else if (!equals(live as unknown as Json, group.shown as unknown as Json)) {
    const refresh = group.shownAt + shownCountsMs
    nextAt = nextAt === undefined ? refresh : Math.min(nextAt, refresh)
  }
  return {
    queued: group.queued,
    running,
    lastBusyAt: Object.fromEntries(group.lastBusyAt),
    nextAt,
    shown: group.shown
  }
}

/** An ended call, deleted once its retention is over. */
export interface Retained {
  readonly at: number
  readonly uid: string
  readonly namespace: string
  readonly name: string
  /** Its Function's name: whose shard's owner deletes it. */
  readonly fn: string
}

/**
 * Ended calls kept `Limits.functionCallRetentionMs` (7 days) after their completionTime, by the whole hour they go in
 * (spec: FunctionCall, "kept 7 days after it ends"): the Functions' steps that delete them wake at most once an hour.
 */
export class Retention {
  private readonly at = new Map<string, number>()
  private readonly hours = new Map<number, Map<string, Retained>>()

  has(uid: string): boolean {
    return this.at.has(uid)
  }

  retain(call: Omit<Retained, "at">, completionTime: number | undefined) {
    if (completionTime === undefined || this.at.has(call.uid)) return
    const at = Math.ceil((completionTime + Limits.functionCallRetentionMs) / Limits.hourMs) * Limits.hourMs
    this.at.set(call.uid, at)
    let hour = this.hours.get(at)
    if (hour === undefined) this.hours.set(at, hour = new Map())
    hour.set(call.uid, { ...call, at })
  }

  unretain(uid: string) {
    const at = this.at.get(uid)
    if (at === undefined) return
    this.at.delete(uid)
    const hour = this.hours.get(at)
    hour?.delete(uid)
    if (hour?.size === 0) this.hours.delete(at)
  }

  /** The earliest hour a retained call goes. */
  next(): number | undefined {
    let next: number | undefined
    for (const at of this.hours.keys()) if (next === undefined || at < next) next = at
    return next
  }

  /** The calls whose retention is over by `now`, no longer retained. */
  expire(now: number): ReadonlyArray<Retained> {
    const expired = [...this.hours.entries()].filter(([at]) => at <= now).flatMap(([, hour]) => [...hour.values()])
    for (const call of expired) this.unretain(call.uid)
    return expired
  }

  /** Every retained call (to let those of lost shards go). */
  all(): ReadonlyArray<Retained> {
    return [...this.hours.values()].flatMap((hour) => [...hour.values()])
  }
}
