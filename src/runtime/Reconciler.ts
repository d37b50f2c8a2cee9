/**
 * The reconciler: every object of every kind the registry holds (Registry.ts) is stepped by its machine, billed around
 * the step (core/controller/BilledStep.ts), its actions carried out through the capacity port
 * (core/capacity/Capacity.ts), and what it decided written back (ObjectWriter.ts). It names no kind and no driver:
 * the simulator and live hosts are two ports, Jobs and every later kind are registry entries.
 *
 * Level-triggered, like a Kubernetes controller (style.md §3). A keyed work queue (WorkQueue.ts) holds what is due:
 * - an object whose stored spec, labels or existence changed (the store's change feed, followed with a resync);
 * - an object whose runs' facts changed, and every object waiting for capacity when capacity is freed (the port's
 *   changes); an object holding idle workers when another begins to wait for their offering (Contention.ts);
 * - an object money holds back, when funds change (credits, a hold closed, a Budget);
 * - an object at the time its step or its billing asked to be woken;
 * - a key whose reconcile failed, after its backoff.
 * `runDue(now)` reconciles every key due by `now`, one at a time. Who calls it and when is the backend's choice: the
 * sim backend at each instant of virtual time (src/server/SimBackend.ts), a live backend on the wall clock.
 *
 * An object deleted (by its owner, or by its own ttl) lets go of its runs; they are billed until their hosts are
 * released (docs/billing.md, "Release"), and only then does the port forget them.
 *
 * Several server processes on one store share the objects out (Ownership.ts, docs/scale-out.md): this reconciler
 * follows only the keys of the shards this process holds. Shards taken are read in (a resync; the runs their previous
 * owner left live end when they were taken, as after a restart); shards lost are dropped at once, their runs released
 * and nothing more written of them. Everything it writes for an object — status, Attempts, events, postings — carries
 * the fence of the object's shard, and a step that acts on capacity checks it first: a process that lost a shard
 * without knowing it yet cannot launch, bill or record for it.
 */
import { Context, Effect, Layer, Option, Semaphore, Stream } from "effect"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Ids } from "../apiserver/Ids.ts"
import { Resources } from "../apiserver/Resources.ts"
import type { Settled } from "../core/billing/Billing.ts"
import type { Pricebook } from "../core/billing/Pricebook.ts"
import { type AttemptFacts, CapacityPort, hostRequestOf, isLive, programRequestOf } from "../core/capacity/Capacity.ts"
import { type Offering, type Variant, variantsOf } from "../core/capacity/Offering.ts"
import type { Ranking } from "../core/capacity/Placement.ts"
import { billRemoved } from "../core/controller/BilledStep.ts"
import { conditionIn } from "../core/controller/Conditions.ts"
import { type ControllerEvent, isUnfunded, type LaunchAction } from "../core/controller/Controller.ts"
import {
  deletes,
  type EffectInterpreter,
  interpretEffect,
  rankingOf,
  reconcileStep
} from "../core/controller/Reconcile.ts"
import { equals, isObject, type Json, type JsonObject } from "../core/Json.ts"
import type { ApiError } from "../core/meta/ApiError.ts"
import { type ResourceRef } from "../core/meta/Kinds.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { parseTime } from "../core/StatusText.ts"
import { factsFromAttempt, isEndedAttempt, liveFactsFromAttempt } from "../kinds/attempt/AttemptRecords.ts"
import type { AnyRuntimeKind } from "../kinds/Kind.ts"
import { byKindName, refOfKind } from "../kinds/Kinds.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { type Change, Store } from "../store/Store.ts"
import { BudgetService } from "./Budgets.ts"
import { ContentionBook } from "./Contention.ts"
import { EventOutbox } from "./EventOutbox.ts"
import { followStore } from "./Following.ts"
import { LedgerService } from "./LedgerService.ts"
import { makeWriter, quietly, type WrittenObject } from "./ObjectWriter.ts"
import { currentOwnership, entityOf, type OwnershipChange } from "./Ownership.ts"
import { KindRegistry } from "./Registry.ts"
import { type ServedObject, Serving } from "./Serving.ts"
import { WorkQueue } from "./WorkQueue.ts"

export interface ReconcilerOptions {
  /**
   * The offerings placement ranks for a project's work (the catalog the backend's capacity sells it): fixed for the
   * simulator, the Nodes that said hello and serve the project for live hosts. A new array is a new catalog (rankings
   * are made again).
   */
  readonly catalog: (namespace: string) => ReadonlyArray<Offering>
  readonly pricebook: Pricebook
  /**
   * When the runs a previous server process left live were lost, for an object whose stored Attempts the port does not
   * know (the simulator's capacity does not survive a restart): they end then, as NodeLost, and recovery replaces them.
   */
  readonly lostAt: number
  /**
   * Offerings a stored Attempt may name that placement does not rank here: the hosts of the other servers of a shared
   * database (docs/scale-out.md, "Local hosts"). A takeover reads such an Attempt with its offering's rates.
   */
  readonly recorded?: (namespace: string) => ReadonlyArray<Offering>
}

/** An object the reconciler steps: what the writer keeps of it, and what its machine reads. */
interface Tracked extends WrittenObject {
  readonly key: string
  readonly kind: AnyRuntimeKind
  generation: number
  readonly createdAt: number | undefined
  labels: Readonly<Record<string, string>>
  annotations: Readonly<Record<string, string>>
  spec: unknown
  status: JsonObject
  readonly facts: Array<AttemptFacts>
  ranking: { readonly spec: unknown; readonly catalog: ReadonlyArray<Offering>; readonly ranking: Ranking } | undefined
  /** It had finished under an earlier server process: its status is final and stays as stored. */
  readonly finishedBefore: boolean
  /** Its status as stored when it was taken in, and its cost since (what is shown of an object finished before). */
  stored: JsonObject
  /** The resourceVersion it had when it was taken in. */
  readonly storedRv: string
}

/** A step's actions being carried out: the object, and what the step decided (a Delete writes it first). */
interface Stepping {
  readonly tracked: Tracked
  readonly status: JsonObject
  readonly events: ReadonlyArray<ControllerEvent>
  readonly now: number
}

export class Reconciler extends Context.Service<Reconciler, {
  /** Reconciles every key due by `now`, one at a time, until none is (a step may make others due at once). */
  readonly runDue: (now: number) => Effect.Effect<void>
  /** When the next key is due by a timer, if any. */
  readonly nextWakeAt: () => number | undefined
  /** Reads every object of every registered kind again (start-up; before the test clock moves). */
  readonly resync: Effect.Effect<void>
  /** Capacity changes taken in so far (the sim backend waits until it has seen every change its port published). */
  readonly changesReceived: () => number
  /** Waits until a key becomes due or a timer is set, or `ms` passed (a backend on the wall clock sleeps on it). */
  readonly awaitWork: (ms: number) => Effect.Effect<void>
}>()("nodus/runtime/Reconciler") {
  static readonly layer = (options: ReconcilerOptions) => Layer.effect(Reconciler, make(options))
}

/** Whether two `status.cost`s show the same money (the ledger's totals), whatever their seconds say. */
const sameMoney = (a: Json | undefined, b: Json): boolean => {
  if (!isObject(a) || !isObject(b)) return false
  return a["totalUSD"] === b["totalUSD"] && a["heldUSD"] === b["heldUSD"] && a["final"] === b["final"]
}

const objectKey = (ref: ResourceRef, namespace: string, name: string) => entityOf(ref.info.plural, namespace, name)
const removedKey = (uid: string) => `removed/${uid}`

/** What every part of the reconciler reads: its services, the kinds it runs, the writer of what it decides. */
const depsOf = (options: ReconcilerOptions) =>
  Effect.gen(function*() {
    const store = yield* Store
    const resources = yield* Resources
    const feed = yield* ChangeFeed
    const port = yield* CapacityPort
    const ledgers = yield* LedgerService
    const budgets = yield* BudgetService
    const outbox = yield* EventOutbox
    const ids = yield* Ids
    const { group } = yield* ApiConfig
    const { kinds } = yield* KindRegistry
    // The dispatcher of requests some kinds' runs serve (a Function's calls), where the server has one (Serving.ts).
    const serving = Option.getOrUndefined(yield* Effect.serviceOption(Serving))
    const ownership = yield* currentOwnership
    const kindsByPlural = new Map(
      kinds.map((kind) => [byKindName(kind.kind)!.plural, { kind, ref: refOfKind(group, kind.kind) }])
    )
    const writer = makeWriter({
      resources,
      store,
      ids,
      outbox,
      attemptRef: refOfKind(group, "Attempt"),
      fence: ownership.fence
    })
    /** Offerings by id, per catalog array (a catalog is the same array until it changes). */
    const indexed = new WeakMap<ReadonlyArray<Offering>, ReadonlyMap<string, Offering>>()
    const variantOf = (namespace: string) => (offering: string, interruptible: boolean): Variant | undefined => {
      const catalog = options.catalog(namespace)
      let byId = indexed.get(catalog)
      if (byId === undefined) {
        indexed.set(catalog, byId = new Map(catalog.map((candidate) => [candidate.id, candidate])))
      }
      const found = byId.get(offering) ?? options.recorded?.(namespace).find((candidate) => candidate.id === offering)
      return found === undefined
        ? undefined
        : variantsOf(found).find((variant) => variant.interruptible === interruptible)
    }

    return {
      options,
      store,
      resources,
      feed,
      port,
      ledgers,
      budgets,
      group,
      kindsByPlural,
      serving,
      ownership,
      writer,
      variantOf
    }
  })

type Deps = Effect.Success<ReturnType<typeof depsOf>>

/** What the reconciler keeps between reconciles. */
const stateOf = () => {
  const queue = new WorkQueue()
  /** The latest stored object of every key (the change feed's and the resyncs'). */
  const objects = new Map<string, ResourceObject>()
  const tracking = new Map<string, Tracked>()
  /** Owner (uid) → key, for the port's changes. */
  const owners = new Map<string, string>()
  /** Objects let go of whose runs are billed until their hosts are released, by uid. */
  const removed = new Map<string, Tracked>()
  /**
   * Uids of objects let go of (deleted by the reconciler, or found gone from the store) whose deletion the change feed
   * has not delivered yet: changes about them still queued in the feed are stale, not new objects.
   */
  const gone = new Set<string>()
  const waiting = new Set<string>()
  const contention = new ContentionBook()
  const unfunded = new Set<string>()
  const lock = Semaphore.makeUnsafe(1)
  /** When each shard was taken from another owner: the runs that owner left live end then. */
  const takenAt = new Map<string, number>()

  return {
    queue,
    objects,
    tracking,
    owners,
    removed,
    gone,
    waiting,
    contention,
    unfunded,
    lock,
    takenAt,
    /** Capacity changes taken in so far. */
    received: 0,
    /** The funds last seen (`noticeFunds`). */
    fundsSeen: ""
  }
}

type State = ReturnType<typeof stateOf>
type Due = ReturnType<typeof dueOf>
type Taking = ReturnType<typeof takingOf>
type Steps = ReturnType<typeof steppingOf>

/** What is due: the store's changes and resyncs, the port's changes, funds that changed. */
const dueOf = (deps: Deps, state: State) => {
  const { store, port, ledgers, budgets, kindsByPlural, ownership } = deps
  const { queue, objects, tracking, owners, removed, gone, waiting, unfunded } = state
  /** A stored object changed: due when the machine must see it (new, re-created, deleted, spec or labels changed). */
  /**
   * status.cost is the ledger's display copy, and only the owner posts: a status another process wrote after this one
   * took the object in (a step its previous owner recorded but could not post before the shard moved: docs/billing.md,
   * "In the server") may show money the ledger does not have. Its next step writes the ledger's again: what was
   * written is forgotten (the writer would take it as unchanged), and an object finished before is shown from it.
   */
  const costWrittenElsewhere = (tracked: Tracked, object: ResourceObject) => {
    if (tracked.uid !== object.metadata.uid) return
    const known = Number(tracked.resourceVersion ?? tracked.storedRv)
    if (!(Number(object.metadata.resourceVersion) > known)) return
    const status = isObject(object.status) ? object.status : {}
    const shown = tracked.finishedBefore ? tracked.stored["cost"] : tracked.status["cost"]
    if (shown === undefined || sameMoney(shown, status["cost"] ?? null)) return
    if (tracked.finishedBefore) tracked.stored = status
    tracked.written = undefined
    tracked.resourceVersion = object.metadata.resourceVersion
    queue.add(tracked.key)
  }

  const observe = (key: string, object: ResourceObject) => {
    if (gone.has(object.metadata.uid) || !ownership.owns(key)) return
    const cached = objects.get(key)
    // A resync may read an object older than a change already applied, and the feed may still bring changes older than
    // a resync read (after a takeover): an object only goes forward, its spec and its status (an object taken in from
    // an older status would show the money of that one: docs/billing.md, "In the server").
    if (
      cached !== undefined && cached.metadata.uid === object.metadata.uid &&
      (cached.metadata.generation > object.metadata.generation ||
        Number(cached.metadata.resourceVersion) > Number(object.metadata.resourceVersion))
    ) return
    objects.set(key, object)
    const tracked = tracking.get(key)
    if (tracked !== undefined) costWrittenElsewhere(tracked, object)
    if (
      tracked === undefined ||
      tracked.uid !== object.metadata.uid ||
      object.metadata.deletionTimestamp !== undefined ||
      object.metadata.generation > tracked.generation ||
      !equals(object.metadata.labels ?? {}, tracked.labels) ||
      !equals(object.metadata.annotations ?? {}, tracked.annotations)
    ) queue.add(key)
  }

  const onChange = (change: Change) =>
    Effect.sync(() => {
      const entry = kindsByPlural.get(change.key.resource)
      if (entry === undefined) return
      const key = objectKey(entry.ref, change.key.namespace, change.key.name)
      if (change.type !== "DELETED") return observe(key, change.object)
      if (!ownership.owns(key)) return
      // Nothing about this uid follows its deletion in the feed.
      gone.delete(change.object.metadata.uid)
      if (objects.get(key)?.metadata.uid === change.object.metadata.uid) objects.delete(key)
      queue.add(key)
    })

  const resync = Effect.gen(function*() {
    for (const [plural, { ref }] of kindsByPlural) {
      const page = yield* store.list({ resource: plural }).pipe(
        Effect.orElseSucceed(() => ({ items: [] as ReadonlyArray<ResourceObject> }))
      )
      const present = new Set<string>()
      for (const object of page.items) {
        const key = objectKey(ref, object.metadata.namespace ?? "", object.metadata.name)
        present.add(key)
        observe(key, object)
      }
      for (const key of [...objects.keys()]) {
        if (key.startsWith(`${plural}/`) && !present.has(key)) {
          objects.delete(key)
          queue.add(key)
        }
      }
    }
  })

  const onCapacity = Stream.runForEach(port.changes, (change) =>
    Effect.sync(() => {
      state.received++
      if (change._tag === "Freed") {
        for (const key of waiting) queue.add(key)
        return
      }
      const key = owners.get(change.owner)
      if (key !== undefined) queue.add(key)
      if (removed.has(change.owner)) queue.add(removedKey(change.owner))
    }))

  /** Credits arrived, a hold closed or a Budget changed: objects that money held back look again. */
  const noticeFunds = Effect.flatMap(
    ledgers.read((ledger) => `${ledger.available}/${ledger.arrears}/${budgets.generation()}`),
    (funds) =>
      Effect.sync(() => {
        if (funds === state.fundsSeen) return
        state.fundsSeen = funds
        for (const key of unfunded) queue.add(key)
      })
  )

  return { observe, onChange, resync, onCapacity, noticeFunds }
}

/** Taking an object in (a new one, or one a previous process or owner ran), following it, and letting it go. */
const takingOf = (deps: Deps, state: State, due: Due) => {
  const { options, store, port, budgets, group, serving, ownership, variantOf } = deps
  const { queue, objects, tracking, owners, removed, gone, waiting, contention, unfunded, lock, takenAt } = state
  const { resync } = due
  /** A run a previous process left live, taken back by a driver whose hosts outlive the server (the port's `adopt`). */
  const adopted = (object: ResourceObject, attempt: JsonObject) => {
    const live = port.adopt === undefined
      ? undefined
      : liveFactsFromAttempt(attempt, variantOf(object.metadata.namespace ?? ""))
    return live === undefined
      ? Effect.succeed(undefined)
      : port.adopt!(object.metadata.uid, object.metadata.namespace ?? "", live)
  }

  /**
   * The Attempts a previous server process (or the shard's previous owner) wrote for this object, as facts: those the
   * port does not know ended at `lostAt`.
   */
  const restoredAttempts = (object: ResourceObject, lostAt: number) =>
    Effect.gen(function*() {
      const dependents = yield* store.dependentsOf(object.metadata.uid).pipe(Effect.orElseSucceed(() => []))
      const facts: Array<AttemptFacts> = []
      const live: Array<AttemptFacts> = []
      for (const attempt of dependents) {
        if (attempt.kind !== "Attempt") continue
        const known = yield* port.facts(object.metadata.uid, attempt.metadata.name)
        const restored = known ?? (yield* adopted(object, attempt as unknown as JsonObject)) ??
          factsFromAttempt(attempt as unknown as JsonObject, variantOf(object.metadata.namespace ?? ""), lostAt)
        if (restored === undefined) continue
        facts.push(restored)
        if (!isEndedAttempt(attempt as unknown as JsonObject)) live.push(restored)
      }
      return { facts, live }
    })

  /** Budgets count an object's charges by its project and labels, after it is gone too (docs/billing.md, "Budgets"). */
  const register = (tracked: Tracked) =>
    quietly(`billing owner ${tracked.key}`)(
      budgets.registerOwner({
        uid: tracked.uid,
        namespace: tracked.namespace,
        name: tracked.name,
        kind: tracked.ref.info.kind,
        labels: tracked.labels
      })
    )

  const admit = (
    key: string,
    entry: { readonly kind: AnyRuntimeKind; readonly ref: ResourceRef },
    object: ResourceObject,
    now: number
  ) =>
    Effect.gen(function*() {
      const spec = entry.kind.specOf(object, group)
      if (spec === undefined) {
        yield* Effect.logWarning(`runtime: ${entry.kind.kind} ${key} has a spec its schema refuses; it is not run`)
        return undefined
      }
      const status = isObject(object.status) ? object.status : {}
      // An object with a phase ran under an earlier server process: it comes back with its recorded runs.
      // Never after the instant this step runs at (the clock that dated the takeover runs ahead of the engine's
      // instants).
      const lostAt = Math.min(takenAt.get(ownership.shardOf(key)) ?? options.lostAt, now)
      const restored = status["phase"] === undefined
        ? { facts: [], live: [] }
        : yield* restoredAttempts(object, lostAt)
      const tracked: Tracked = {
        key,
        kind: entry.kind,
        ref: entry.ref,
        namespace: object.metadata.namespace ?? "",
        name: object.metadata.name,
        uid: object.metadata.uid,
        generation: object.metadata.generation,
        createdAt: parseTime(object.metadata.creationTimestamp),
        labels: object.metadata.labels ?? {},
        annotations: object.metadata.annotations ?? {},
        spec,
        status,
        facts: [...restored.facts],
        ranking: undefined,
        finishedBefore: entry.kind.machine.isFinal(status),
        stored: status,
        storedRv: object.metadata.resourceVersion,
        written: undefined,
        resourceVersion: undefined,
        attempts: new Map(
          restored.live.map((
            facts
          ) => [facts.name, {
            facts,
            placement: undefined,
            created: true,
            written: undefined,
            resourceVersion: undefined
          }])
        ),
        events: new Map()
      }
      tracking.set(key, tracked)
      owners.set(tracked.uid, key)
      yield* register(tracked)
      return tracked
    })

  /** Follows the stored object: labels change without a new generation; a new generation brings a new spec. */
  const follow = (tracked: Tracked, object: ResourceObject) =>
    Effect.gen(function*() {
      const labels = object.metadata.labels ?? {}
      if (!equals(labels, tracked.labels)) {
        tracked.labels = labels
        yield* register(tracked)
      }
      // A request an annotation carries (a Sandbox's start-requested-at) is read into the spec, like a new generation.
      const annotations = object.metadata.annotations ?? {}
      const requested = !equals(annotations, tracked.annotations)
      tracked.annotations = annotations
      if (object.metadata.generation <= tracked.generation && !requested) return
      const spec = tracked.kind.specOf(object, group)
      if (spec === undefined) return
      tracked.spec = spec
      tracked.generation = Math.max(tracked.generation, object.metadata.generation)
    })

  /** The object as the dispatcher knows it, when its kind's runs serve requests. */
  const servedOf = (tracked: Tracked): ServedObject | undefined =>
    serving?.kinds.has(tracked.kind.kind) === true
      ? {
        kind: tracked.kind.kind,
        uid: tracked.uid,
        namespace: tracked.namespace,
        name: tracked.name,
        spec: tracked.spec
      }
      : undefined

  /** Stops following an object: its live runs are released, and billed until their hosts are. */
  const letGo = (tracked: Tracked, now: number) =>
    Effect.gen(function*() {
      const served = servedOf(tracked)
      if (served !== undefined) yield* serving!.removed(served, now)
      if (tracking.get(tracked.key) === tracked) tracking.delete(tracked.key)
      owners.delete(tracked.uid)
      waiting.delete(tracked.key)
      contention.forget(tracked.key)
      unfunded.delete(tracked.key)
      gone.add(tracked.uid)
      for (const facts of tracked.facts) if (isLive(facts)) yield* port.release(tracked.uid, facts.name, 0)
      removed.set(tracked.uid, tracked)
      queue.add(removedKey(tracked.uid))
    })

  /**
   * Drops what this process followed of the shards it lost: their objects' runs are released here (the new owner ends
   * them as lost, from the Attempts), and nothing more is billed or written of them.
   */
  const dropShards = (lost: ReadonlySet<string>) =>
    Effect.gen(function*() {
      const inLost = (key: string) => lost.has(ownership.shardOf(key))
      for (const tracked of [...tracking.values()]) {
        if (!inLost(tracked.key)) continue
        // A healthy run is never stopped by a rebalance where the driver can leave it running for the new owner.
        if (port.handOver !== undefined) yield* port.handOver(tracked.uid)
        else {
          for (const facts of tracked.facts) if (isLive(facts)) yield* port.release(tracked.uid, facts.name, 0)
          yield* port.forget(tracked.uid)
        }
        tracking.delete(tracked.key)
        owners.delete(tracked.uid)
      }
      for (const [uid, tracked] of [...removed]) {
        if (!inLost(tracked.key)) continue
        yield* port.forget(uid)
        removed.delete(uid)
        queue.forget(removedKey(uid))
      }
      for (const key of [...objects.keys()]) if (inLost(key)) objects.delete(key)
      for (const set of [waiting, unfunded]) for (const key of [...set]) if (inLost(key)) set.delete(key)
      contention.forgetWhere(inLost)
      // A removed object's key names its uid, not its shard: those went with `removed` above.
      for (const key of queue.keys()) if (!key.startsWith("removed/") && inLost(key)) queue.forget(key)
    })

  /** Shards lost are dropped; shards taken are read in, their previous owner's live runs ending now. */
  const onOwnership = (change: OwnershipChange) =>
    lock.withPermit(Effect.gen(function*() {
      if (change.lost.length > 0) yield* dropShards(new Set(change.lost))
      for (const shard of change.lost) takenAt.delete(shard)
      if (change.acquired.length === 0) return
      for (const shard of change.acquired) takenAt.set(shard, Math.max(options.lostAt, change.at))
      yield* resync
    }))

  return { adopted, admit, follow, servedOf, letGo, dropShards, onOwnership }
}

/**
 * The step: an object observed, stepped through the reconcile core, its actions carried out, what it decided written.
 */
const steppingOf = (deps: Deps, state: State, taking: Taking) => {
  const { options, resources, port, ledgers, budgets, serving, ownership, writer } = deps
  const { queue, waiting, contention, unfunded } = state
  const { letGo, servedOf } = taking
  /** The facts of the object's runs as the port knows them now (runs it no longer knows keep their last facts). */
  const refresh = (tracked: Tracked) =>
    Effect.gen(function*() {
      for (let index = 0; index < tracked.facts.length; index++) {
        const facts = tracked.facts[index]!
        if (!isLive(facts) && facts.releasedAt !== undefined) continue
        const current = yield* port.facts(tracked.uid, facts.name)
        if (current === undefined) continue
        tracked.facts[index] = current
        const record = tracked.attempts.get(facts.name)
        if (record !== undefined) record.facts = current
      }
    })

  const trackedRanking = (tracked: Tracked, market: ReturnType<typeof port.market>): Ranking => {
    const cached = tracked.ranking
    const catalog = options.catalog(tracked.namespace)
    if (cached !== undefined && cached.spec === tracked.spec && cached.catalog === catalog) return cached.ranking
    const ranking = rankingOf(tracked.kind, tracked.spec, catalog, market)
    tracked.ranking = { spec: tracked.spec, catalog, ranking }
    return ranking
  }

  /** The Budget that holds the object back after this step, if one does: budget.exceeded (once per period). */
  const budgetRefusal = (status: JsonObject, settled: Settled | undefined) => {
    const funding = settled?.funding
    if (funding === undefined) return undefined
    if (funding.stop?.budget !== undefined) return { budget: funding.stop.budget, message: funding.stop.message }
    const funded = conditionIn(
      status["conditions"] as ReadonlyArray<{ type: string; status: string; reason: string }> | undefined,
      "Funded"
    )
    const blocked = funding.blocked
    if (funded?.status === "False" && funded.reason === "BudgetExceeded" && blocked?.budget !== undefined) {
      return { budget: blocked.budget, message: blocked.message }
    }
    return undefined
  }

  /**
   * The status a step writes. One finished under an earlier process (or owner) stays as stored, but for its cost, the
   * ledger's display copy: its hosts' teardown may be charged after it finished (spec: Conventions 3).
   */
  const shownStatus = (tracked: Tracked, status: JsonObject): JsonObject | undefined => {
    if (!tracked.finishedBefore) return status
    const stored = tracked.stored
    const cost = status["cost"]
    // What its restored runs say of the seconds is less than it knew (their teardowns are not recorded): only money
    // moved since is shown.
    return cost === undefined || sameMoney(stored["cost"], cost) ? undefined : { ...stored, cost }
  }

  const eventsOf = (events: ReadonlyArray<ControllerEvent>, now: number) => events.map((event) => ({ event, at: now }))

  const launch = (tracked: Tracked, action: LaunchAction) =>
    Effect.gen(function*() {
      const request = {
        ...action,
        owner: tracked.uid,
        namespace: tracked.namespace,
        annotations: tracked.annotations
      }
      const facts = yield* port.acquire(hostRequestOf(request))
      tracked.facts.push(facts)
      // A launch that found its capacity taken never ran: no Attempt records it, and the object looks again now.
      if (facts.outcome?.type === "Unavailable") return queue.add(tracked.key)
      yield* port.start(tracked.uid, action.attempt, programRequestOf(request))
      tracked.attempts.set(facts.name, {
        facts,
        placement: action.explain(),
        created: false,
        written: undefined,
        resourceVersion: undefined
      })
    })

  /** The capacity port, carrying out a step's actions in the core's order (core/controller/Reconcile.ts). */
  const interpreter: EffectInterpreter<Stepping, ApiError, never> = {
    launch: ({ tracked }, action) => launch(tracked, action),
    checkpoint: ({ tracked }, attempt, episode) => port.checkpoint(tracked.uid, attempt, episode),
    stop: ({ tracked }, attempt, keepWarmMs) => port.release(tracked.uid, attempt, keepWarmMs),
    // Spec: ttlSecondsAfterFinished, a Sandbox's maxLifetime and onIdle Delete. What the step says of it (its
    // Terminating phase, the Event that says why) is written first, so watchers and webhooks hear why it went.
    delete: ({ events, now, status, tracked }) =>
      Effect.gen(function*() {
        yield* writer.write(tracked, shownStatus(tracked, status), eventsOf(events, now))
        yield* writer.remove(tracked)
        yield* letGo(tracked, now)
      })
  }

  const step = (tracked: Tracked, now: number) =>
    Effect.gen(function*() {
      yield* refresh(tracked)
      const market = port.market(tracked.namespace)
      const ranking = trackedRanking(tracked, market)
      const served = servedOf(tracked)
      const load = served === undefined ? undefined : yield* serving!.load(served, tracked.facts, now)
      const observation = {
        name: tracked.name,
        namespace: tracked.namespace,
        uid: tracked.uid,
        generation: tracked.generation,
        createdAt: tracked.createdAt,
        spec: tracked.spec,
        status: tracked.status,
        attempts: tracked.facts,
        serving: load
      }
      const owner = { namespace: tracked.namespace, labels: tracked.labels }
      const fence = ownership.fence(tracked.key)
      // What the step charges is recorded first (its status, Attempts and events), then posted: a process stopped
      // between the two commits leaves the ledger behind the records, which the next settle catches up. Except a step
      // that launches (its holds are stored before capacity starts) or deletes: its postings go first, as its actions
      // need.
      let recorded = false
      const { answer: billed, posted } = yield* ledgers.updateAfter(
        (ledger) =>
          reconcileStep(tracked.kind, observation, {
            now,
            market,
            ranking,
            contention: contention.contentionFor(tracked.key)
          }, { ledger, pricebook: options.pricebook, rooms: budgets.roomsFor(ledger, owner, now) }),
        fence,
        (billed) => {
          if (
            deletes(billed.result.actions) || billed.result.actions.some((action) => action._tag === "Launch")
          ) return undefined
          recorded = true
          return writer.write(
            tracked,
            shownStatus(tracked, billed.result.status as JsonObject),
            eventsOf(billed.result.events, now)
          )
        }
      )
      const { result } = billed
      // Its record is made, its postings are not (another process posted first): settled again at once.
      if (!posted) queue.add(tracked.key)
      // Only the shard's owner acts on capacity: the fence is checked before (the ledger's commit checked it when the
      // step posted anything), so a process that lost the shard without knowing it yet launches and stops nothing.
      if (fence.length > 0 && billed.postings.length === 0 && result.actions.length > 0) {
        yield* resources.commit(tracked.ref, tracked.namespace, tracked.name, fence)
      }
      const status = result.status as JsonObject
      if (result.waitingForCapacity) {
        waiting.add(tracked.key)
      } else waiting.delete(tracked.key)
      const who = `${tracked.ref.info.kind} ${tracked.namespace}/${tracked.name}`
      for (
        const holder of contention.stepped(tracked.key, who, { ...result, ranking, facts: tracked.facts, load })
      ) {
        queue.add(holder)
      }
      if (isUnfunded(result.status)) unfunded.add(tracked.key)
      else unfunded.delete(tracked.key)
      const refusal = budgetRefusal(status, billed.settled)
      if (refusal !== undefined) {
        yield* budgets.refused(refusal.budget, {
          kind: tracked.ref.info.kind,
          namespace: tracked.namespace,
          name: tracked.name
        }, refusal.message)
      }
      if (!(yield* interpretEffect(result.actions, interpreter, { tracked, status, events: result.events, now }))) {
        return
      }
      const shown = shownStatus(tracked, status)
      if (!recorded) yield* writer.write(tracked, shown, eventsOf(result.events, now))
      // Only a status that is stored is what the next step starts from: after a failed write the step runs again from
      // the last stored one, and its moves, with their events, are made (and written together) again.
      tracked.status = status
      if (tracked.finishedBefore && shown !== undefined) tracked.stored = shown
      if (billed.wakeAt !== undefined) queue.at(tracked.key, billed.wakeAt)
      if (served !== undefined) {
        const again = yield* serving!.stepped(served, status, tracked.facts, now)
        if (again !== undefined) queue.at(tracked.key, again)
      }
    })

  return { refresh, step }
}

/** Running what is due, one key at a time. */
const runningOf = (deps: Deps, state: State, due: Due, taking: Taking, stepping: Steps) => {
  const { options, port, ledgers, kindsByPlural, ownership } = deps
  const { queue, objects, tracking, removed, gone, lock } = state
  const { noticeFunds } = due
  const { admit, follow, letGo } = taking
  const { refresh, step } = stepping
  const reconcileObject = (key: string, now: number): Effect.Effect<void, ApiError> =>
    Effect.gen(function*() {
      const object = objects.get(key)
      const known = tracking.get(key)
      if (
        known !== undefined &&
        (object === undefined || object.metadata.uid !== known.uid || object.metadata.deletionTimestamp !== undefined)
      ) yield* letGo(known, now)
      if (
        object === undefined || object.metadata.deletionTimestamp !== undefined || gone.has(object.metadata.uid)
      ) return
      const entry = kindsByPlural.get(key.slice(0, key.indexOf("/")))!
      const tracked = tracking.get(key) ?? (yield* admit(key, entry, object, now))
      if (tracked === undefined) return
      yield* follow(tracked, object)
      yield* step(tracked, now)
    })

  /** A removed object's runs billed until their hosts are released; then the port forgets them. */
  const reconcileRemoved = (uid: string, now: number): Effect.Effect<void, ApiError> =>
    Effect.gen(function*() {
      const tracked = removed.get(uid)
      if (tracked === undefined) return
      yield* refresh(tracked)
      const maxCost = tracked.kind.machine.maxCostOf(tracked.spec)
      const billed = yield* ledgers.update(
        (ledger) => billRemoved({ ledger, pricebook: options.pricebook, rooms: [] }, uid, maxCost, tracked.facts, now),
        ownership.fence(tracked.key)
      )
      if (billed.done) {
        removed.delete(uid)
        queue.forget(removedKey(uid))
        return yield* port.forget(uid)
      }
      if (billed.wakeAt !== undefined) queue.at(removedKey(uid), billed.wakeAt)
    })

  const reconcile = (key: string, now: number) =>
    key.startsWith("removed/") ? reconcileRemoved(key.slice("removed/".length), now) : reconcileObject(key, now)

  const runDue = (now: number) =>
    lock.withPermit(Effect.gen(function*() {
      yield* noticeFunds
      for (;;) {
        const key = queue.next(now)
        if (key === undefined) return
        const outcome = yield* Effect.result(reconcile(key, now))
        if (outcome._tag === "Success") queue.succeeded(key)
        else if (!key.startsWith("removed/") && !ownership.owns(key)) {
          // Fenced: its shard went to another process, which this one hears of next (dropShards).
          queue.forget(key)
          yield* Effect.logDebug(
            `runtime: ${key} is no longer this process's to reconcile (${outcome.failure.message})`
          )
        } else {
          const retryAt = queue.failed(key, now)
          yield* Effect.logWarning(
            `runtime: reconciling ${key} failed (${outcome.failure.message}); again at ${
              new Date(retryAt).toISOString()
            }`
          )
        }
      }
    }))

  return { runDue }
}

/** Waits until a key of `queue` becomes due or a timer is set, or `ms` passed. */
const awaitWork = (queue: WorkQueue, ms: number) =>
  Effect.callback<void>((resume) => {
    if (queue.hasReady) return resume(Effect.void)
    const wake = () => {
      clearTimeout(timer)
      if (queue.onWork === wake) queue.onWork = undefined
      resume(Effect.void)
    }
    const timer = setTimeout(wake, ms)
    queue.onWork = wake
    return Effect.sync(() => {
      clearTimeout(timer)
      if (queue.onWork === wake) queue.onWork = undefined
    })
  })

/**
 * The reconciler, of its parts: what is due, taking objects in and letting them go, the step, and running what is due.
 */
function make(options: ReconcilerOptions) {
  return Effect.gen(function*() {
    const deps = yield* depsOf(options)
    const state = stateOf()
    const due = dueOf(deps, state)
    const taking = takingOf(deps, state, due)
    const stepping = steppingOf(deps, state, taking)
    const { runDue } = runningOf(deps, state, due, taking, stepping)

    const { serving, ownership, feed } = deps
    const { queue, owners, lock } = state
    serving?.onWake((uid) => {
      const key = owners.get(uid)
      if (key !== undefined) queue.add(key)
    })

    // Subscribe to the port first (the fiber subscribes when it first runs), then read the store and follow it.
    yield* Effect.forkScoped(due.onCapacity)
    yield* Effect.forkScoped(Stream.runForEach(ownership.changes, taking.onOwnership))
    yield* Effect.yieldNow
    yield* followStore("runtime", feed, due.resync, due.onChange)

    return Reconciler.of({
      runDue: Effect.fn("Reconciler.runDue")(function*(now: number) {
        yield* runDue(now)
      }),
      nextWakeAt: () => queue.nextAt(),
      resync: lock.withPermit(due.resync).pipe(Effect.withSpan("Reconciler.resync")),
      changesReceived: () => state.received,
      awaitWork: Effect.fn("Reconciler.awaitWork")(function*(ms: number) {
        yield* awaitWork(queue, ms)
      })
    })
  })
}
