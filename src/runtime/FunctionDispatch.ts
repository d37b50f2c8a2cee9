/**
 * The dispatcher of FunctionCalls (spec: FunctionCall; docs/functions.md, "Dispatch"): the I/O around the queue of each
 * Function's calls on its warm workers (kinds/function/FunctionQueue.ts, the pure model: which call goes to which
 * worker, what an answer, a loss, a cancel, a deadline or a backoff does, the load the Function is sized to). It holds
 * every unfinished call in memory, per Function, sends each dispatch to its worker through the capacity port's `box` (a
 * `Call`), hears the answers, and writes the calls' statuses. It is the reconciler's `Serving` (Serving.ts) for
 * Functions: everything it decides happens inside the Function's reconcile — the load before the step (what the
 * Function machine sizes its workers to), the dispatch after it — so the moves are made at the instants the reconciler
 * runs, on the simulator's virtual time as on the wall clock.
 *
 * - Calls come from the change feed (created, cancelled, deleted) and, after a restart, from the store: a call that was
 *   running under the previous process lost its answer with it, and is recovered as from a lost worker.
 * - Calls follow their Function's shard (docs/scale-out.md): a process holds only the calls of the Functions it owns
 *   (runtime/Ownership.ts), reads those of a shard it takes from the store (a call running under the previous owner is
 *   recovered so), drops those of a shard it loses (answers heard for them later are ignored), and every write about a
 *   call (its status, its deletion at the end of its retention) carries the fence of its Function's shard: a process
 *   that lost the shard records nothing more of its calls. One process owning everything fences nothing.
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
import { type AttemptFacts, type BoxReply, CapacityPort } from "../core/capacity/Capacity.ts"
import { conditionIn } from "../core/controller/Conditions.ts"
import { isObject, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import * as Call from "../kinds/function/FunctionCallMachine.ts"
import type { FunctionCallSpecType, FunctionCallStatusType } from "../kinds/function/FunctionCallSchema.ts"
import * as Queue from "../kinds/function/FunctionQueue.ts"
import type { FunctionSpecType, FunctionStatusType } from "../kinds/function/FunctionSchema.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change, WriteOp } from "../store/Store.ts"
import { followStore, surviving, wallPause } from "./Following.ts"
import { methodAnnotation } from "./FunctionAdmission.ts"
import { runtimeComponent, statusWriter } from "./ObjectWriter.ts"
import { currentOwnership, entityOf, type OwnershipChange } from "./Ownership.ts"
import { type ServedObject, Serving } from "./Serving.ts"

/** One call the dispatcher holds: the queue's (kinds/function/FunctionQueue.ts), with what its writes need. */
interface HeldCall extends Queue.QueuedCall {
  readonly namespace: string
  readonly name: string
  readonly annotations: Readonly<Record<string, string>>
  /** The status as last written (or read), which the next write starts from. */
  status: FunctionCallStatusType
  written: string | undefined
  resourceVersion: string | undefined
}

/** A Function's warm workers and its calls queued on them, as the dispatcher holds them. */
type Group = Queue.WorkerGroup<HeldCall>

/** How soon a call's status the store did not take is written again. */
const rewriteAfterMs = 1_000

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
      const { group: apiGroup } = yield* ApiConfig
      const callRef = refOfKind(apiGroup, "FunctionCall")
      const functionRef = refOfKind(apiGroup, "Function")
      const method = methodAnnotation(apiGroup)
      const writeStatus = statusWriter(resources)
      const statusWrites: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: runtimeComponent }
      const scope = yield* Effect.scope
      const ownership = yield* currentOwnership
      /** A Function's entity: its calls are held, and written, by the owner of its shard. */
      const functionEntity = (namespace: string, fn: string) => entityOf(functionRef.info.plural, namespace, fn)
      const ownsFunction = (namespace: string, fn: string) => ownership.owns(functionEntity(namespace, fn))
      const fenceOf = (namespace: string, fn: string): ReadonlyArray<WriteOp> =>
        ownership.fence(functionEntity(namespace, fn))

      const groups = new Map<string, Group>()
      const callGroups = new Map<string, Group>()
      let wake: (uid: string) => void = () => undefined

      const groupOf = (namespace: string, fn: string): Group => {
        const key = Queue.groupKey(namespace, fn)
        let group = groups.get(key)
        if (group === undefined) groups.set(key, group = Queue.makeGroup<HeldCall>(namespace, fn))
        return group
      }

      /** The group of a Function the reconciler steps, with its uid and spec as of this step. */
      const servedGroup = (object: ServedObject): Group => {
        const group = groupOf(object.namespace, object.name)
        group.uid = object.uid
        group.spec = object.spec as FunctionSpecType
        return group
      }

      const poke = (group: Group) => {
        if (group.uid !== undefined) wake(group.uid)
      }

      // ---------------------------------------------------------------------------------------------------------------
      // Retention (spec: FunctionCall, "kept 7 days after it ends")

      const retention = new Queue.Retention()

      /**
       * Deletes the ended calls whose retention is over by `now` (the same object: its uid is a precondition); one the
       * store did not delete (unavailable) is tried again an hour later.
       */
      const expireRetained = (now: number) =>
        Effect.gen(function*() {
          const expired = retention.expire(now)
          if (expired.length === 0) return
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
                    retention.retain(call, now + Limits.hourMs - Limits.functionCallRetentionMs)
                  }
                })
              )
            ), { concurrency: writeConcurrency, discard: true })
        })

      // ---------------------------------------------------------------------------------------------------------------
      // Calls in from the store

      /** Takes a call in (or a change of one); what it answers is to be run: a check of a Function not stepped yet. */
      const take = (object: ResourceObject): Effect.Effect<unknown> => {
        const spec = object.spec as FunctionCallSpecType
        if (!isObject(object.spec) || typeof spec.function !== "string") return Effect.void
        const namespace = object.metadata.namespace ?? ""
        const known = callGroups.get(object.metadata.uid)?.calls.get(object.metadata.uid)
        if (known !== undefined) {
          if (spec.state === "Cancelled" && !known.cancelAsked && Call.isUnfinished(known.state)) {
            const group = callGroups.get(known.uid)!
            known.cancelAsked = true
            group.attention.add(known.uid)
            poke(group)
          }
          return Effect.void
        }
        // Another process owns its Function's shard: that one holds it (this one reads it when it takes the shard).
        if (!ownsFunction(namespace, spec.function)) return Effect.void
        // A call that ended here is final: a change of it from before its end (a lagging feed, a resync's listing) is
        // old.
        if (retention.has(object.metadata.uid)) return Effect.void
        const status = (isObject(object.status) ? object.status : {}) as FunctionCallStatusType
        const state = Call.stateOf(status)
        if (!Call.isUnfinished(state)) {
          retention.retain(
            { uid: object.metadata.uid, namespace, name: object.metadata.name, fn: spec.function },
            state.completionTime
          )
          return Effect.void
        }
        const unserved = !groups.has(Queue.groupKey(namespace, spec.function))
        const group = groupOf(namespace, spec.function)
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
        // A new call's status (Queued) is written at the next step; a restarted or cancelled one has a move to make
        // first.
        Queue.admitCall(group, call)
        callGroups.set(call.uid, group)
        poke(group)
        return unserved
          ? checkUnserved(Queue.groupKey(namespace, spec.function), namespace, spec.function)
          : Effect.void
      }

      const drop = (uid: string) => {
        retention.unretain(uid)
        const group = callGroups.get(uid)
        const call = group?.calls.get(uid)
        if (group === undefined || call === undefined) return
        Queue.dropCall(group, call)
        callGroups.delete(uid)
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
        for (const uid of [...callGroups.keys()]) if (!listed.has(uid)) drop(uid)
        for (const object of page.items) yield* take(object)
      }))

      /**
       * Shards lost: their calls are dropped (their writes would fail on the fence now), with the ended ones waiting
       * out their retention. Shards taken: their calls are read from the store (`take` keeps those of owned Functions;
       * one running under the previous owner is recovered as lost). Nothing held is dropped then: the change feed,
       * followed meanwhile, may have brought calls the listing does not show.
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
        for (const [key, group] of [...groups]) {
          if (!inShards(lost, group.namespace, group.fn)) continue
          for (const uid of [...group.calls.keys()]) drop(uid)
          // A dispatch still out files its answer on this group, which nothing reads any more.
          groups.delete(key)
        }
        for (const call of retention.all()) if (inShards(lost, call.namespace, call.fn)) retention.unretain(call.uid)
      }

      // ---------------------------------------------------------------------------------------------------------------
      // Moves (kinds/function/FunctionQueue.ts)

      /** Why a call running under a previous process (or owner of its Function) lost its answer. */
      const lostUnder = ownership.whole
        ? "the server restarted under it"
        : "the server that ran it stopped or gave its Function up"

      // ---------------------------------------------------------------------------------------------------------------
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
      const send = (group: Group, call: HeldCall, flight: Queue.InFlight, timeoutMs: number, owner: string) =>
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
              call: Queue.flightKey(call.uid, flight.epoch),
              encoding: input.success.encoding,
              input: input.success.bytes,
              timeoutMs,
              method: call.annotations[method],
              annotations: call.annotations
            })
          group.heard.push({ flight, reply })
          wake(owner)
          // Started at once: the call reaches its worker at the instant of its dispatch (an inline input is read with
          // no pause), which the simulator's clock must see before it moves on.
        }).pipe(Effect.forkIn(scope, { startImmediately: true }))

      /** The calls waiting go to the workers' free slots (FunctionQueue.nextDispatch), each sent as it is taken. */
      const dispatch = (group: Group, status: FunctionStatusType, attempts: ReadonlyArray<AttemptFacts>, now: number) =>
        Effect.gen(function*() {
          if (port.box === undefined) return
          const owner = group.uid!
          const slots = Queue.slotsOf(group, status, attempts)
          for (let next = Queue.nextDispatch(group, slots, now); next !== undefined;) {
            yield* send(group, next.call, next.flight, Queue.policyOf(group, next.call).timeoutMs, owner)
            next = Queue.nextDispatch(group, slots, now)
          }
        })

      // ---------------------------------------------------------------------------------------------------------------
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

      /**
       * A call's status to write now; "unchanged" when it is what was written last, "failed" when it cannot be made
       * now.
       */
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
      const writeOne = (group: Group, pending: Pending) => {
        const { call } = pending
        const target = {
          ref: callRef,
          namespace: call.namespace,
          name: call.name,
          uid: call.uid,
          resourceVersion: call.resourceVersion
        }
        return Effect.map(
          writeStatus(target, pending.next as unknown as JsonObject, () => fenceOf(group.namespace, group.fn)),
          (resourceVersion) => resourceVersion === undefined ? drop(call.uid) : written(pending, resourceVersion)
        ).pipe(
          Effect.catch((error) =>
            Effect.logWarning(`functions: writing FunctionCall ${call.namespace}/${call.name}: ${error.message}`)
          )
        )
      }

      /**
       * The statuses of one step, in one store commit where each is at the resourceVersion written last (the usual
       * case: only the dispatcher writes them); any refusal writes them one by one instead, each read again as needed.
       */
      const writeAll = (group: Group, pending: ReadonlyArray<Pending>) =>
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
                  namespace: group.namespace,
                  uid: call.uid,
                  resourceVersion: call.resourceVersion
                },
                status: next
              }
            }))
            const fenced: WriteOptions = { ...statusWrites, commitWith: () => fenceOf(group.namespace, group.fn) }
            const together = yield* Effect.result(resources.replaceStatusMany(callRef, group.namespace, items, fenced))
            if (together._tag === "Success") {
              return pending.forEach((one, index) =>
                written(one, together.success[index]!.object.metadata.resourceVersion)
              )
            }
          }
          yield* Effect.forEach(pending, (one) => writeOne(group, one), {
            concurrency: writeConcurrency,
            discard: true
          })
        })

      /** Writes what changed, and lets go of the calls that ended (their statuses are final). */
      const flush = (group: Group, now: number, funded: Call.ShownCondition | undefined) =>
        Effect.gen(function*() {
          const changed: Array<HeldCall> = []
          for (const uid of group.dirty) {
            const call = group.calls.get(uid)
            if (call === undefined) group.dirty.delete(uid)
            else if (!Queue.showsRunningLater(call, now, options.runningShownAfterMs)) {
              changed.push(call)
              group.dirty.delete(uid)
            }
          }
          const made = yield* Effect.forEach(changed, (call) => nextStatus(call, now, funded))
          const pending = made.flatMap((one) => typeof one === "string" ? [] : [one])
          // A group's calls are of one project: its Function's.
          yield* writeAll(group, pending)
          changed.forEach((call, index) => {
            const one = made[index]!
            const stored = call.deleted || one === "unchanged" || (one !== "failed" && call.written === one.text)
            // A status the store did not take is written again a second later; the call is held until it is.
            if (!stored) {
              group.dirty.add(call.uid)
              group.rewriteAt = now + rewriteAfterMs
              return
            }
            if (Call.isUnfinished(call.state)) return
            group.calls.delete(call.uid)
            callGroups.delete(call.uid)
            if (!call.deleted) {
              retention.retain(
                { uid: call.uid, namespace: call.namespace, name: call.name, fn: group.fn },
                call.state.completionTime
              )
            }
          })
        })

      /** The Function is gone: every unfinished call of it is Failed FunctionDeleted (the try running then is paid). */
      const endGroup = (key: string, now: number) =>
        Effect.gen(function*() {
          const group = groups.get(key)
          if (group === undefined) return
          groups.delete(key)
          Queue.endAll(group, now)
          yield* flush(group, now, undefined)
        })

      /**
       * Calls of a Function the reconciler has not stepped a while after they came: its Function was deleted between
       * the call's admission and now (the reconciler will never step it), or it is still being taken in. The store says
       * which.
       */
      const checkUnserved = (key: string, namespace: string, fn: string) =>
        Effect.gen(function*() {
          yield* wallPause(unservedCheckMs)
          // Stepped meanwhile, or its shard went to another process (which checks for itself).
          if (groups.get(key)?.uid !== undefined || !ownsFunction(namespace, fn)) return
          const found = yield* Effect.result(resources.get(functionRef, namespace, fn))
          const gone = found._tag === "Failure"
            ? found.failure.code === "NotFound"
            : found.success.metadata.deletionTimestamp !== undefined
          if (gone) yield* endGroup(key, yield* Clock.currentTimeMillis)
        }).pipe(Effect.ignore, Effect.forkIn(scope))

      const nextAtOf = (group: Group) => Queue.nextAtOf(group, options.runningShownAfterMs, retention.next())

      // Subscribed to the shards' changes first (the fiber subscribes when it first runs), then the store read and
      // followed. One process owning everything has none.
      if (!ownership.whole) {
        yield* Effect.forkScoped(Stream.runForEach(ownership.changes, onOwnership))
        yield* Effect.yieldNow
      }
      yield* followStore("functions", feed, resync, onChange)
      // Ended calls go on the server's clock (simulated time under the sim backend) even where no Function is stepped
      // (those of the Functions this process owns: it holds no other's). The pause between sweeps is wall time,
      // whatever the clock: a clock moved days ahead at once runs one sweep, not one per minute it skipped.
      const sweep = Effect.andThen(
        wallPause(retentionSweepMs),
        Effect.ignore(Effect.flatMap(Clock.currentTimeMillis, expireRetained))
      )
      yield* Effect.forkScoped(Effect.forever(sweep))

      return Serving.of({
        kinds: new Set(["Function"]),
        load: Effect.fn("FunctionDispatch.load")(function*(object, attempts, now) {
          const group = servedGroup(object)
          Queue.advance(group, attempts, now, lostUnder)
          return Queue.loadOf(group, now, nextAtOf(group))
        }),
        stepped: Effect.fn("FunctionDispatch.stepped")(function*(object, status, attempts, now) {
          const group = servedGroup(object)
          yield* dispatch(group, status as FunctionStatusType, attempts, now)
          yield* flush(group, now, conditionIn((status as FunctionStatusType).conditions, "Funded"))
          yield* expireRetained(now)
          return nextAtOf(group)
        }),
        removed: Effect.fn("FunctionDispatch.removed")(function*(object, now) {
          yield* endGroup(Queue.groupKey(object.namespace, object.name), now)
        }),
        onWake: (listener) => {
          wake = listener
        }
      })
    })
  )
