/**
 * The dispatcher of FunctionCalls (spec: FunctionCall; docs/functions.md, "Dispatch"): it holds every unfinished call
 * in memory, per Function, sends each to a worker of its Function through the capacity port's `box` (a `Call`), hears
 * the answers, makes the call's moves (core/kinds/function/FunctionCallMachine.ts) and writes the call's status. It is
 * the reconciler's `Serving` (Serving.ts) for Functions: everything it decides happens inside the Function's reconcile
 * — the load before the step (what the Function machine sizes its workers to), the dispatch after it — so the moves are
 * made at the instants the reconciler runs, on the simulator's virtual time as on the wall clock.
 *
 * - Calls come from the change feed (created, cancelled, deleted) and, after a restart, from the store: a call that was
 *   running under the previous process lost its answer with it, and is recovered as from a lost worker.
 * - Calls follow their Function's shard (docs/scale-out.md): a process holds only the calls of the Functions it owns
 *   (runtime/Ownership.ts), reads those of a shard it takes from the store (a call running under the previous owner is
 *   recovered so), drops those of a shard it loses (answers heard for them later are ignored), and every write about a
 *   call (its status, its deletion at the end of its retention) carries the fence of its Function's shard: a process
 *   that lost the shard records nothing more of its calls. One process owning everything fences nothing.
 * - Claims take turns between sessions (spec: FunctionCall.session): the queue is served one call per session in turn.
 * - A worker takes at most `scaling.targetConcurrency` calls at once; a call goes to the least busy worker that takes
 *   calls (FunctionMachine.acceptsCalls: ready, of the current template, the Function not held).
 * - A call whose worker ended under it is lost (level-triggered: the worker's facts, not an answer, say so), and one
 *   answer or loss is for one dispatch epoch: anything about another epoch is fenced.
 * - Inputs named by blob are read from the blob store; a result over the inline bound is stored as a blob of the
 *   call's project, held by the call (spec: Payload).
 * - An ended call is kept `Limits.functionCallRetentionMs` (7 days) after its completionTime, then deleted within the
 *   hour: at a Function's step (Functions wake for it), and every minute on the server's clock besides.
 */
import { Clock, Effect, Layer, Schedule, Semaphore, Stream } from "effect"
import { createHash } from "node:crypto"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Blobs, projectReader } from "../apiserver/Blobs.ts"
import { Resources, type WriteOptions } from "../apiserver/Resources.ts"
import { type AttemptFacts, type BoxReply, CapacityPort, isLive } from "../core/capacity/Capacity.ts"
import { conditionIn } from "../core/controller/Conditions.ts"
import type { ServingLoad } from "../core/controller/Controller.ts"
import { equals, isObject, type Json, type JsonObject } from "../core/Json.ts"
import * as Call from "../core/kinds/function/FunctionCallMachine.ts"
import { acceptsCalls } from "../core/kinds/function/FunctionMachine.ts"
import * as Limits from "../core/Limits.ts"
import { refOfKind } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { FunctionSpecType, FunctionStatusType } from "../core/schemas/Function.ts"
import type { FunctionCallSpecType, FunctionCallStatusType } from "../core/schemas/FunctionCall.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change, WriteOp } from "../store/Store.ts"
import { followStore, surviving, wallPause } from "./Following.ts"
import { methodAnnotation } from "./FunctionAdmission.ts"
import { runtimeComponent, statusWriter } from "./ObjectWriter.ts"
import { currentOwnership, entityOf, type OwnershipChange } from "./Ownership.ts"
import { type ServedObject, Serving } from "./Serving.ts"

/** One call the dispatcher holds. */
interface HeldCall {
  readonly uid: string
  readonly namespace: string
  readonly name: string
  readonly spec: FunctionCallSpecType
  readonly annotations: Readonly<Record<string, string>>
  state: Call.CallState
  /** The status as last written (or read), which the next write starts from. */
  status: FunctionCallStatusType
  written: string | undefined
  resourceVersion: string | undefined
  /** Cancelled, deleted or lost under a previous process: a move the next step makes. */
  cancelAsked: boolean
  lostBefore: boolean
  deleted: boolean
  /** In its session's queue, waiting for a worker now. */
  waiting: boolean
}

/** A call on a worker: its epoch, since when, and at what rate (its try's cost). */
interface InFlight {
  readonly uid: string
  readonly epoch: number
  readonly worker: string
  readonly since: number
  readonly rateMicroUsdPerHour: bigint
}

/** An answer heard from the port, taken in at the next step. */
interface Heard {
  readonly flight: InFlight
  readonly reply: BoxReply
}

/** What the dispatcher holds for one Function (by project and name). */
interface Pool {
  readonly namespace: string
  readonly fn: string
  uid: string | undefined
  spec: FunctionSpecType | undefined
  readonly calls: Map<string, HeldCall>
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
  /** Calls whose status is to be written. */
  readonly dirty: Set<string>
  /** The counts the Function's status shows, and when they were taken (ServingLoad.shown). */
  shown: ServingLoad["shown"]
  shownAt: number
  /** When statuses the store did not take are written again. */
  rewriteAt: number | undefined
}

/** An ended call, deleted once its retention is over. */
interface Retained {
  readonly at: number
  readonly uid: string
  readonly namespace: string
  readonly name: string
  /** Its Function's name: whose shard's owner deletes it. */
  readonly fn: string
}

const poolKey = (namespace: string, fn: string) => `${namespace}/${fn}`

/** A first-in first-out queue whose shift costs O(1) (an array's shift moves every item: a map queues thousands). */
class Fifo {
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

/** How soon a call's status the store did not take is written again. */
const rewriteAfterMs = 1_000

/** How often a Function's status shows new counts of its calls at most (ServingLoad.shown). */
const shownCountsMs = 1_000

/** How long calls of a Function not stepped yet wait before the store is asked whether the Function is there. */
const unservedCheckMs = 5_000

/** How often ended calls past their retention are looked for besides the Functions' steps (wall time). */
const retentionSweepMs = 60_000

/** Calls written at once. */
const writeConcurrency = 16

const sha256Hex = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

export interface DispatchOptions {
  /**
   * How long a call runs before its Running status is written (0: at once). Live hosts answer most calls within a few
   * milliseconds: a call that ends by then goes from Queued straight to its end, one store commit instead of two. The
   * simulator shows every phase at its instant (0).
   */
  readonly runningShownAfterMs: number
}

/** Live hosts: a call is shown Running once it has run 20 ms (DispatchOptions). */
export const liveDispatch: DispatchOptions = { runningShownAfterMs: 20 }

export const layer = (options: DispatchOptions = { runningShownAfterMs: 0 }) =>
  Layer.effect(
    Serving,
    Effect.gen(function*() {
      const port = yield* CapacityPort
      const resources = yield* Resources
      const feed = yield* ChangeFeed
      const blobs = yield* Blobs
      const { group } = yield* ApiConfig
      const callRef = refOfKind(group, "FunctionCall")
      const functionRef = refOfKind(group, "Function")
      const method = methodAnnotation(group)
      const writeStatus = statusWriter(resources)
      const statusWrites: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: runtimeComponent }
      const scope = yield* Effect.scope
      const ownership = yield* currentOwnership
      /** A Function's entity: its calls are held, and written, by the owner of its shard. */
      const functionEntity = (namespace: string, fn: string) => entityOf(functionRef.info.plural, namespace, fn)
      const ownsFunction = (namespace: string, fn: string) => ownership.owns(functionEntity(namespace, fn))
      const fenceOf = (namespace: string, fn: string): ReadonlyArray<WriteOp> =>
        ownership.fence(functionEntity(namespace, fn))

      const pools = new Map<string, Pool>()
      const callPools = new Map<string, Pool>()
      let wake: (uid: string) => void = () => undefined

      const poolOf = (namespace: string, fn: string): Pool => {
        const key = poolKey(namespace, fn)
        let pool = pools.get(key)
        if (pool === undefined) {
          pool = {
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
          }
          pools.set(key, pool)
        }
        return pool
      }

      /** The pool of a Function the reconciler steps, with its uid and spec as of this step. */
      const servedPool = (object: ServedObject): Pool => {
        const pool = poolOf(object.namespace, object.name)
        pool.uid = object.uid
        pool.spec = object.spec as FunctionSpecType
        return pool
      }

      const poke = (pool: Pool) => {
        if (pool.uid !== undefined) wake(pool.uid)
      }

      const enqueue = (pool: Pool, call: HeldCall) => {
        if (call.waiting) return
        const session = call.spec.session ?? ""
        let queue = pool.waiting.get(session)
        if (queue === undefined) pool.waiting.set(session, queue = new Fifo())
        queue.push(call.uid)
        call.waiting = true
        pool.queued++
      }

      /** The call leaves its queue (taken, or no longer waiting); its entry there is skipped when reached. */
      const unqueue = (pool: Pool, call: HeldCall) => {
        if (!call.waiting) return
        call.waiting = false
        pool.queued--
      }

      // -------------------------------------------------------------------------------------------------------------------
      // Retention (spec: FunctionCall, "kept 7 days after it ends")

      /** When each retained call goes (a whole hour), and the calls of each such hour. */
      const retainedAt = new Map<string, number>()
      const retainedHours = new Map<number, Map<string, Retained>>()

      const retain = (call: Omit<Retained, "at">, completionTime: number | undefined) => {
        if (completionTime === undefined || retainedAt.has(call.uid)) return
        // Whole hours: the Functions' steps that delete them wake at most once an hour for it.
        const at = Math.ceil((completionTime + Limits.functionCallRetentionMs) / Limits.hourMs) * Limits.hourMs
        retainedAt.set(call.uid, at)
        let hour = retainedHours.get(at)
        if (hour === undefined) retainedHours.set(at, hour = new Map())
        hour.set(call.uid, { ...call, at })
      }

      const unretain = (uid: string) => {
        const at = retainedAt.get(uid)
        if (at === undefined) return
        retainedAt.delete(uid)
        const hour = retainedHours.get(at)
        hour?.delete(uid)
        if (hour?.size === 0) retainedHours.delete(at)
      }

      /** The earliest hour a retained call goes. */
      const nextRetainedAt = (): number | undefined => {
        let next: number | undefined
        for (const at of retainedHours.keys()) if (next === undefined || at < next) next = at
        return next
      }

      /**
       * Deletes the ended calls whose retention is over by `now` (the same object: its uid is a precondition); one the
       * store did not delete (unavailable) is tried again an hour later.
       */
      const expireRetained = (now: number) =>
        Effect.gen(function*() {
          const expired = [...retainedHours.entries()].filter(([at]) => at <= now).flatMap((
            [, hour]
          ) => [...hour.values()])
          if (expired.length === 0) return
          for (const call of expired) unretain(call.uid)
          yield* Effect.forEach(expired, (call) =>
            resources.remove(callRef, call.namespace, call.name, {
              dryRun: false,
              propagationPolicy: "Background",
              preconditions: { uid: call.uid },
              commitWith: () => fenceOf(call.namespace, call.fn)
            }).pipe(
              Effect.catch((error) =>
                Effect.sync(() => {
                  if (error.code !== "NotFound" && error.code !== "Conflict") {
                    retain(call, now + Limits.hourMs - Limits.functionCallRetentionMs)
                  }
                })
              )
            ), { concurrency: writeConcurrency, discard: true })
        })

      // -------------------------------------------------------------------------------------------------------------------
      // Calls in from the store

      /** Takes a call in (or a change of one); what it answers is to be run: a check of a Function not stepped yet. */
      const take = (object: ResourceObject): Effect.Effect<unknown> => {
        const spec = object.spec as FunctionCallSpecType
        if (!isObject(object.spec) || typeof spec.function !== "string") return Effect.void
        const namespace = object.metadata.namespace ?? ""
        const known = callPools.get(object.metadata.uid)?.calls.get(object.metadata.uid)
        if (known !== undefined) {
          if (spec.state === "Cancelled" && !known.cancelAsked && Call.isUnfinished(known.state)) {
            const pool = callPools.get(known.uid)!
            known.cancelAsked = true
            pool.attention.add(known.uid)
            poke(pool)
          }
          return Effect.void
        }
        // Another process owns its Function's shard: that one holds it (this one reads it when it takes the shard).
        if (!ownsFunction(namespace, spec.function)) return Effect.void
        // A call that ended here is final: a change of it from before its end (a lagging feed, a resync's listing) is old.
        if (retainedAt.has(object.metadata.uid)) return Effect.void
        const status = (isObject(object.status) ? object.status : {}) as FunctionCallStatusType
        const state = Call.stateOf(status)
        if (!Call.isUnfinished(state)) {
          retain(
            { uid: object.metadata.uid, namespace, name: object.metadata.name, fn: spec.function },
            state.completionTime
          )
          return Effect.void
        }
        const unserved = !pools.has(poolKey(namespace, spec.function))
        const pool = poolOf(namespace, spec.function)
        const call: HeldCall = {
          uid: object.metadata.uid,
          namespace,
          name: object.metadata.name,
          spec,
          annotations: object.metadata.annotations ?? {},
          state,
          status,
          written: JSON.stringify(status),
          resourceVersion: object.metadata.resourceVersion,
          cancelAsked: spec.state === "Cancelled",
          lostBefore: state.phase === "Running" || state.phase === "Cancelling",
          deleted: false,
          waiting: false
        }
        pool.calls.set(call.uid, call)
        callPools.set(call.uid, pool)
        // A new call's status (Queued) is written at the next step; a restarted or cancelled one has a move to make first.
        pool.dirty.add(call.uid)
        if (call.cancelAsked || call.lostBefore) pool.attention.add(call.uid)
        // A retry waiting out its backoff under the previous process waits out the rest of it (status.retryTime).
        if (state.notBefore !== undefined) pool.delayed.add(call.uid)
        else if (!call.lostBefore) enqueue(pool, call)
        poke(pool)
        return unserved ? checkUnserved(poolKey(namespace, spec.function), namespace, spec.function) : Effect.void
      }

      const drop = (uid: string) => {
        unretain(uid)
        const pool = callPools.get(uid)
        const call = pool?.calls.get(uid)
        if (pool === undefined || call === undefined) return
        call.deleted = true
        unqueue(pool, call)
        pool.calls.delete(uid)
        pool.delayed.delete(uid)
        pool.attention.delete(uid)
        pool.dirty.delete(uid)
        callPools.delete(uid)
      }

      const onChange = (change: Change) =>
        Effect.suspend(() => {
          if (change.key.resource !== "functioncalls") return Effect.void
          if (change.type !== "DELETED") return take(change.object)
          drop(change.object.metadata.uid)
          return Effect.void
        })

      /**
       * Reads of the store one at a time: a resync's drop of the calls it did not list must not drop those a read of a
       * shard just taken listed later.
       */
      const reading = Semaphore.makeUnsafe(1)

      /** Everything again (start-up, or after falling behind the feed): calls held that are gone from the store go. */
      const resync = reading.withPermit(Effect.gen(function*() {
        const page = yield* resources.list(callRef, undefined, {})
        const listed = new Set(page.items.map((object) => object.metadata.uid))
        for (const uid of [...callPools.keys()]) if (!listed.has(uid)) drop(uid)
        for (const object of page.items) yield* take(object)
      }))

      /**
       * Shards lost: their calls are dropped (their writes would fail on the fence now), with the ended ones waiting out
       * their retention. Shards taken: their calls are read from the store (`take` keeps those of owned Functions; one
       * running under the previous owner is recovered as lost). Nothing held is dropped then: the change feed, followed
       * meanwhile, may have brought calls the listing does not show.
       */
      const onOwnership = (change: OwnershipChange) =>
        Effect.gen(function*() {
          if (change.lost.length > 0) dropShards(new Set(change.lost))
          if (change.acquired.length === 0) return
          yield* reading.withPermit(Effect.gen(function*() {
            const page = yield* resources.list(callRef, undefined, {}).pipe(
              Effect.retry({ times: 5, schedule: Schedule.spaced("1 second") })
            )
            for (const object of page.items) yield* take(object)
          }))
        }).pipe(surviving("functions", "reading the calls of the shards taken"))

      const inShards = (lost: ReadonlySet<string>, namespace: string, fn: string) =>
        lost.has(ownership.shardOf(functionEntity(namespace, fn)))

      const dropShards = (lost: ReadonlySet<string>) => {
        for (const [key, pool] of [...pools]) {
          if (!inShards(lost, pool.namespace, pool.fn)) continue
          for (const uid of [...pool.calls.keys()]) drop(uid)
          // A dispatch still out files its answer on this pool, which nothing reads any more.
          pools.delete(key)
        }
        for (const hour of retainedHours.values()) {
          for (const call of [...hour.values()]) if (inShards(lost, call.namespace, call.fn)) unretain(call.uid)
        }
      }

      // -------------------------------------------------------------------------------------------------------------------
      // Moves

      const policyOf = (pool: Pool, call: HeldCall) => Call.policyOf(pool.spec!, call.spec.timeout)

      const tryCost = (pool: Pool, flight: InFlight, now: number) =>
        Call.tryCostMicroUsd(now - flight.since, flight.rateMicroUsdPerHour, pool.spec?.scaling.targetConcurrency ?? 1)

      /** A call's new state: a retry waits for its backoff, a recovered one for a worker. */
      const moved = (pool: Pool, call: HeldCall, next: Call.CallState) => {
        const before = call.state
        call.state = next
        if (next === before) return
        pool.dirty.add(call.uid)
        if (!Call.isDispatchable(next, Number.POSITIVE_INFINITY)) unqueue(pool, call)
        if ((next.phase === "Queued" || next.phase === "Recovering") && before.phase !== next.phase) {
          if (next.notBefore !== undefined) pool.delayed.add(call.uid)
          else enqueue(pool, call)
        } else if (next.phase === "Queued" && next.notBefore !== undefined && before.notBefore === undefined) {
          pool.delayed.add(call.uid)
        }
        if (!Call.isUnfinished(next)) pool.delayed.delete(call.uid)
      }

      /** Ends a dispatch: its worker's slot is free again, whatever became of the call. */
      const settle = (pool: Pool, flight: InFlight, now: number) => {
        pool.inFlight.delete(`${flight.uid}.${flight.epoch}`)
        pool.lastBusyAt.set(flight.worker, now)
      }

      const hear = (pool: Pool, heard: Heard, now: number) => {
        const { flight, reply } = heard
        if (!pool.inFlight.has(`${flight.uid}.${flight.epoch}`)) return
        settle(pool, flight, now)
        const call = pool.calls.get(flight.uid)
        if (call === undefined) return
        const cost = tryCost(pool, flight, now)
        const policy = policyOf(pool, call)
        if (reply._tag === "Result") {
          moved(pool, call, Call.answer(call.state, flight.epoch, reply.outcome, policy, now, cost))
        } else {moved(
            pool,
            call,
            Call.lose(
              call.state,
              flight.epoch,
              policy,
              now,
              cost,
              reply._tag === "Refused" ? reply.message : "no answer"
            )
          )}
      }

      /** Dispatches whose worker ended (or is no longer known) are lost with it; so is its idle time. */
      const loseOnEndedWorkers = (pool: Pool, attempts: ReadonlyArray<AttemptFacts>, now: number) => {
        const live = new Set(
          attempts.filter(isLive).map((attempt) => attempt.name)
        )
        for (const flight of [...pool.inFlight.values()]) {
          if (live.has(flight.worker)) continue
          const ended = attempts.find((attempt) => attempt.name === flight.worker)
          hear(pool, {
            flight,
            reply: {
              _tag: "Refused",
              code: "Unavailable",
              message: `the worker ${flight.worker} ended (${ended?.outcome?.type ?? "gone"})`
            }
          }, now)
        }
        // Only live workers' idle times matter (scale-down): a Function's workers come and go for as long as it serves.
        for (const worker of [...pool.lastBusyAt.keys()]) if (!live.has(worker)) pool.lastBusyAt.delete(worker)
      }

      /** Why a call running under a previous process (or owner of its Function) lost its answer. */
      const lostUnder = ownership.whole
        ? "the server restarted under it"
        : "the server that ran it stopped or gave its Function up"

      /** Every move due at `now` that needs no worker: answers, losses, cancels, deadlines, backoffs over. */
      const advance = (pool: Pool, attempts: ReadonlyArray<AttemptFacts>, now: number) => {
        const heard = pool.heard.splice(0)
        for (const one of heard) hear(pool, one, now)
        loseOnEndedWorkers(pool, attempts, now)
        for (const uid of pool.attention) {
          const call = pool.calls.get(uid)
          if (call === undefined) continue
          if (call.lostBefore) {
            call.lostBefore = false
            moved(pool, call, Call.lose(call.state, call.state.epoch, policyOf(pool, call), now, 0n, lostUnder))
          }
          if (call.cancelAsked) moved(pool, call, Call.cancel(call.state, now))
        }
        pool.attention.clear()
        // The worker keeps running a call past its deadline until it answers (its slot stays taken); the call ends now.
        for (const flight of pool.inFlight.values()) {
          const call = pool.calls.get(flight.uid)
          if (call === undefined || call.state.epoch !== flight.epoch) continue
          const policy = policyOf(pool, call)
          if ((Call.deadlineOf(call.state, policy) ?? Number.POSITIVE_INFINITY) <= now) {
            moved(pool, call, Call.expire(call.state, policy, now, tryCost(pool, flight, now)))
          }
        }
        for (const uid of [...pool.delayed]) {
          const call = pool.calls.get(uid)
          if (call === undefined || !Call.isUnfinished(call.state)) {
            pool.delayed.delete(uid)
          } else if (Call.isDispatchable(call.state, now)) {
            pool.delayed.delete(uid)
            enqueue(pool, call)
          }
        }
      }

      /** The next call waiting, one session after another. */
      const nextWaiting = (pool: Pool, now: number): HeldCall | undefined => {
        const sessions = [...pool.waiting.keys()]
        for (let tried = 0; tried < sessions.length; tried++) {
          const index = (pool.turn + tried) % sessions.length
          const queue = pool.waiting.get(sessions[index]!)!
          for (let uid = queue.shift(); uid !== undefined; uid = queue.shift()) {
            const call = pool.calls.get(uid)
            if (call?.waiting === true && !call.cancelAsked && Call.isDispatchable(call.state, now)) {
              unqueue(pool, call)
              pool.turn = index + 1
              return call
            }
          }
          pool.waiting.delete(sessions[index]!)
        }
        return undefined
      }

      // -------------------------------------------------------------------------------------------------------------------
      // Dispatch

      const inputOf = (call: HeldCall) =>
        Effect.gen(function*() {
          const input = call.spec.input
          if (input === undefined) {
            return {
              encoding: "JSON" as const,
              bytes: Buffer.from(JSON.stringify({ args: [], kwargs: {} })).toString("base64")
            }
          }
          if (input.inline !== undefined) return { encoding: input.encoding ?? "JSON", bytes: input.inline }
          const digest = (input.blob ?? "").replace(/^sha256:/u, "")
          const blob = yield* blobs.stat(digest, projectReader(call.namespace))
          if (blob === undefined) {
            return yield* Effect.fail(`the input blob ${input.blob} is not readable by the project`)
          }
          const chunks = yield* Stream.runCollect(blobs.read(blob))
          return { encoding: input.encoding ?? "JSON", bytes: Buffer.concat([...chunks]).toString("base64") }
        })

      /** Sends one dispatch and files the answer for the next step (its fiber outlives the step). */
      const send = (pool: Pool, call: HeldCall, flight: InFlight, timeoutMs: number, owner: string) =>
        Effect.gen(function*() {
          const input = yield* Effect.result(
            inputOf(call).pipe(Effect.mapError((error) => typeof error === "string" ? error : error.message))
          )
          const reply: BoxReply = input._tag === "Failure"
            ? {
              _tag: "Result",
              outcome: { ok: false, error: { type: "nodus.InputUnavailable", message: input.failure, traceback: "" } }
            }
            : yield* port.box!(owner, flight.worker, {
              _tag: "Call",
              call: `${call.uid}.${flight.epoch}`,
              encoding: input.success.encoding,
              input: input.success.bytes,
              timeoutMs,
              method: call.annotations[method],
              annotations: call.annotations
            })
          pool.heard.push({ flight, reply })
          wake(owner)
          // Started at once: the call reaches its worker at the instant of its dispatch (an inline input is read with no
          // pause), which the simulator's clock must see before it moves on.
        }).pipe(Effect.forkIn(scope, { startImmediately: true }))

      const dispatch = (pool: Pool, status: FunctionStatusType, attempts: ReadonlyArray<AttemptFacts>, now: number) =>
        Effect.gen(function*() {
          const spec = pool.spec!
          const owner = pool.uid!
          if (port.box === undefined) return
          const slots = spec.scaling.targetConcurrency
          const load = new Map<string, number>()
          for (const flight of pool.inFlight.values()) load.set(flight.worker, (load.get(flight.worker) ?? 0) + 1)
          const workers = attempts.filter((worker) => acceptsCalls(spec, status, worker))
          for (;;) {
            let best: AttemptFacts | undefined
            for (const worker of workers) {
              const busy = load.get(worker.name) ?? 0
              if (busy < slots && (best === undefined || busy < (load.get(best.name) ?? 0))) best = worker
            }
            if (best === undefined) return
            const call = nextWaiting(pool, now)
            if (call === undefined) return
            moved(pool, call, Call.dispatch(call.state, best.name, now))
            const flight: InFlight = {
              uid: call.uid,
              epoch: call.state.epoch,
              worker: best.name,
              since: now,
              rateMicroUsdPerHour: best.variant.rateMicroUsdPerHour
            }
            pool.inFlight.set(`${call.uid}.${flight.epoch}`, flight)
            load.set(best.name, (load.get(best.name) ?? 0) + 1)
            yield* send(pool, call, flight, policyOf(pool, call).timeoutMs, owner)
          }
        })

      // -------------------------------------------------------------------------------------------------------------------
      // Writes

      /** A result too large to show inline goes to the blob store, held by its call (spec: Payload). */
      const shownResult = (call: HeldCall, status: FunctionCallStatusType) =>
        Effect.gen(function*() {
          const result = status.result
          if (result?.inline === undefined) return status
          const bytes = Buffer.from(result.inline, "base64")
          const sha256 = sha256Hex(bytes)
          if (bytes.length <= Limits.payloadInlineBytesMax) return { ...status, result: { ...result, sha256 } }
          const stored = yield* blobs.store(
            { project: call.namespace, holder: call.uid },
            Stream.make(bytes),
            blobs.bytesMax
          )
          return { ...status, result: { encoding: result.encoding ?? "JSON", blob: `sha256:${stored.digest}`, sha256 } }
        })

      /** A status to write: the call, the status and its JSON. */
      interface Pending {
        readonly call: HeldCall
        readonly next: FunctionCallStatusType
        readonly text: string
      }

      /** A call's status to write now; "unchanged" when it is what was written last, "failed" when it cannot be made now. */
      const nextStatus = (
        call: HeldCall,
        now: number,
        funded: Call.ShownCondition | undefined
      ): Effect.Effect<Pending | "unchanged" | "failed"> =>
        Effect.gen(function*() {
          if (call.deleted) return "unchanged" as const
          const shown = Call.statusOf(call.state, call.status)
          const conditions = Call.conditionsOf(call.state, shown.conditions, now, funded)
          const next = yield* shownResult(call, conditions === undefined ? shown : { ...shown, conditions })
          const text = JSON.stringify(next)
          return text === call.written ? "unchanged" as const : { call, next, text }
        }).pipe(Effect.catch((error) =>
          Effect.as(
            Effect.logWarning(`functions: the status of FunctionCall ${call.namespace}/${call.name}: ${error.message}`),
            "failed" as const
          )
        ))

      const written = (pending: Pending, resourceVersion: string) => {
        pending.call.status = pending.next
        pending.call.written = pending.text
        pending.call.resourceVersion = resourceVersion
      }

      /** One status written by itself (read again and retried when another writer got there first). */
      const writeOne = (pool: Pool, pending: Pending) => {
        const { call } = pending
        const target = {
          ref: callRef,
          namespace: call.namespace,
          name: call.name,
          uid: call.uid,
          resourceVersion: call.resourceVersion
        }
        return Effect.map(
          writeStatus(target, pending.next as unknown as JsonObject, () => fenceOf(pool.namespace, pool.fn)),
          (resourceVersion) => resourceVersion === undefined ? drop(call.uid) : written(pending, resourceVersion)
        ).pipe(
          Effect.catch((error) =>
            Effect.logWarning(`functions: writing FunctionCall ${call.namespace}/${call.name}: ${error.message}`)
          )
        )
      }

      /**
       * The statuses of one step, in one store commit where each is at the resourceVersion written last (the usual case:
       * only the dispatcher writes them); any refusal writes them one by one instead, each read again as needed.
       */
      const writeAll = (pool: Pool, pending: ReadonlyArray<Pending>) =>
        Effect.gen(function*() {
          if (pending.length === 0) return
          const known = pending.every((one) => one.call.resourceVersion !== undefined)
          if (pending.length > 1 && known) {
            const items = pending.map(({ call, next }) => ({
              name: call.name,
              body: {
                apiVersion: callRef.apiVersion,
                kind: callRef.info.kind,
                metadata: {
                  name: call.name,
                  namespace: pool.namespace,
                  uid: call.uid,
                  resourceVersion: call.resourceVersion
                },
                status: next
              }
            }))
            const fenced: WriteOptions = { ...statusWrites, commitWith: () => fenceOf(pool.namespace, pool.fn) }
            const together = yield* Effect.result(resources.replaceStatusMany(callRef, pool.namespace, items, fenced))
            if (together._tag === "Success") {
              return pending.forEach((one, index) =>
                written(one, together.success[index]!.object.metadata.resourceVersion)
              )
            }
          }
          yield* Effect.forEach(pending, (one) => writeOne(pool, one), { concurrency: writeConcurrency, discard: true })
        })

      /** Writes what changed, and lets go of the calls that ended (their statuses are final). */
      const flush = (pool: Pool, now: number, funded: Call.ShownCondition | undefined) =>
        Effect.gen(function*() {
          const changed: Array<HeldCall> = []
          for (const uid of pool.dirty) {
            const call = pool.calls.get(uid)
            if (call === undefined) pool.dirty.delete(uid)
            else if (!showsRunningLater(call, now)) {
              changed.push(call)
              pool.dirty.delete(uid)
            }
          }
          const made = yield* Effect.forEach(changed, (call) => nextStatus(call, now, funded))
          const pending = made.flatMap((one) => typeof one === "string" ? [] : [one])
          // A pool's calls are of one project: its Function's.
          yield* writeAll(pool, pending)
          changed.forEach((call, index) => {
            const one = made[index]!
            const stored = call.deleted || one === "unchanged" || (one !== "failed" && call.written === one.text)
            // A status the store did not take is written again a second later; the call is held until it is.
            if (!stored) {
              pool.dirty.add(call.uid)
              pool.rewriteAt = now + rewriteAfterMs
              return
            }
            if (Call.isUnfinished(call.state)) return
            pool.calls.delete(call.uid)
            callPools.delete(call.uid)
            if (!call.deleted) {
              retain(
                { uid: call.uid, namespace: call.namespace, name: call.name, fn: pool.fn },
                call.state.completionTime
              )
            }
          })
        })

      /** The Function is gone: every unfinished call of it is Failed FunctionDeleted (the try running then is paid). */
      const endPool = (key: string, now: number) =>
        Effect.gen(function*() {
          const pool = pools.get(key)
          if (pool === undefined) return
          pools.delete(key)
          for (const call of pool.calls.values()) {
            const flight = pool.inFlight.get(`${call.uid}.${call.state.epoch}`)
            call.state = Call.functionDeleted(call.state, now, flight === undefined ? 0n : tryCost(pool, flight, now))
            pool.dirty.add(call.uid)
          }
          yield* flush(pool, now, undefined)
        })

      /**
       * Calls of a Function the reconciler has not stepped a while after they came: its Function was deleted between the
       * call's admission and now (the reconciler will never step it), or it is still being taken in. The store says which.
       */
      const checkUnserved = (key: string, namespace: string, fn: string) =>
        Effect.gen(function*() {
          yield* wallPause(unservedCheckMs)
          // Stepped meanwhile, or its shard went to another process (which checks for itself).
          if (pools.get(key)?.uid !== undefined || !ownsFunction(namespace, fn)) return
          const found = yield* Effect.result(resources.get(functionRef, namespace, fn))
          const gone = found._tag === "Failure"
            ? found.failure.code === "NotFound"
            : found.success.metadata.deletionTimestamp !== undefined
          if (gone) yield* endPool(key, yield* Clock.currentTimeMillis)
        }).pipe(Effect.ignore, Effect.forkIn(scope))

      /** A call just dispatched whose Running status waits (DispatchOptions.runningShownAfterMs): its answer may come first. */
      const showsRunningLater = (call: HeldCall, now: number) =>
        call.state.phase === "Running" && call.state.startTime !== undefined &&
        now < call.state.startTime + options.runningShownAfterMs

      const nextAtOf = (pool: Pool): number | undefined => {
        let next: number | undefined
        const consider = (at: number | undefined) => {
          if (at !== undefined && (next === undefined || at < next)) next = at
        }
        for (const uid of pool.dirty) {
          const state = pool.calls.get(uid)?.state
          if (state?.phase === "Running" && state.startTime !== undefined) {
            consider(state.startTime + options.runningShownAfterMs)
          }
        }
        for (const uid of pool.delayed) consider(pool.calls.get(uid)?.state.notBefore)
        consider(nextRetainedAt())
        if (pool.rewriteAt !== undefined && pool.dirty.size > 0) consider(pool.rewriteAt)
        for (const flight of pool.inFlight.values()) {
          const call = pool.calls.get(flight.uid)
          if (call !== undefined && call.state.epoch === flight.epoch) {
            consider(Call.deadlineOf(call.state, policyOf(pool, call)))
          }
        }
        return next
      }

      /** The load the Function's step sees now, with the counts its status shows (refreshed at most once a second). */
      const loadOf = (pool: Pool, now: number): ServingLoad => {
        const running: Record<string, number> = {}
        for (const flight of pool.inFlight.values()) running[flight.worker] = (running[flight.worker] ?? 0) + 1
        let nextAt = nextAtOf(pool)
        const live = { queued: pool.queued, running }
        if (pool.shown === undefined || now >= pool.shownAt + shownCountsMs) {
          pool.shown = live
          pool.shownAt = now
        } else if (!equals(live as unknown as Json, pool.shown as unknown as Json)) {
          const refresh = pool.shownAt + shownCountsMs
          nextAt = nextAt === undefined ? refresh : Math.min(nextAt, refresh)
        }
        return {
          queued: pool.queued,
          running,
          lastBusyAt: Object.fromEntries(pool.lastBusyAt),
          nextAt,
          shown: pool.shown
        }
      }

      // Subscribed to the shards' changes first (the fiber subscribes when it first runs), then the store read and followed.
      // One process owning everything has none.
      if (!ownership.whole) {
        yield* Effect.forkScoped(Stream.runForEach(ownership.changes, onOwnership))
        yield* Effect.yieldNow
      }
      yield* followStore("functions", feed, resync, onChange)
      // Ended calls go on the server's clock (simulated time under the sim backend) even where no Function is stepped (those
      // of the Functions this process owns: it holds no other's). The pause between sweeps is wall time, whatever the clock:
      // a clock moved days ahead at once runs one sweep, not one per minute it skipped.
      const sweep = Effect.andThen(
        wallPause(retentionSweepMs),
        Effect.ignore(Effect.flatMap(Clock.currentTimeMillis, expireRetained))
      )
      yield* Effect.forkScoped(Effect.forever(sweep))

      return Serving.of({
        kinds: new Set(["Function"]),
        load: (object, attempts, now) =>
          Effect.sync(() => {
            const pool = servedPool(object)
            advance(pool, attempts, now)
            return loadOf(pool, now)
          }),
        stepped: (object, status, attempts, now) =>
          Effect.gen(function*() {
            const pool = servedPool(object)
            yield* dispatch(pool, status as FunctionStatusType, attempts, now)
            yield* flush(pool, now, conditionIn((status as FunctionStatusType).conditions, "Funded"))
            yield* expireRetained(now)
            return nextAtOf(pool)
          }),
        removed: (object, now) => endPool(poolKey(object.namespace, object.name), now),
        onWake: (listener) => {
          wake = listener
        }
      })
    })
  )
