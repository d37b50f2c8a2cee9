/**
 * The sim backend (docs/simulator.md, "The sim backend"): the API server with the simulator behind it. Jobs created
 * through the API are mirrored into a SimWorld, which runs the core's Job controller over simulated capacity; what
 * the controller decides comes back through the ordinary write paths:
 *
 * - the Job's status through the status subresource (retried on Conflict by reading again);
 * - an Attempt per run of capacity, owned by its Job (the garbage collector deletes them with it), with the
 *   placement explanation, and its status whenever the run's facts change;
 * - a core/v1 Event per controller event, in the Job's project, and for events of a spec type (job.succeeded, …) a
 *   delivery-shaped entry on the EventStream that webhooks will consume;
 * - the Job's deletion when ttlSecondsAfterFinished says so.
 *
 * Time is the VirtualClock: a fiber runs the engine up to it every `tickInterval`, and the test clock
 * (SimulationControl) runs it to any later instant at once, writing as it goes, before it answers.
 *
 * Only creates, deletions and spec changes (a new metadata.generation) of Jobs feed the simulation: the backend's own
 * status writes come back through the change feed with the same generation and are ignored, so nothing loops.
 */
import { Effect, Layer, Option, Result, Semaphore } from "effect"
import type { ApiError } from "../core/meta/ApiError.ts"
import { attemptStatusOf, factsFromAttempt, isEndedAttempt } from "../core/kinds/attempt/AttemptRecords.ts"
import { catalogPricebookVersion, offeringObject } from "../core/capacity/Catalog.ts"
import { aggregationKey, eventBody, type EventRecord, eventName, eventObject, type InvolvedObject } from "../core/meta/Events.ts"
import { type JobSpecType, type JobStatusType } from "../core/schemas/Job.ts"
import { equals, isObject, type Json, type JsonObject } from "../core/Json.ts"
import type { Ledger } from "../core/billing/Ledger.ts"
import { currentPricebook } from "../core/billing/Pricebook.ts"
import { apiVersionOf, byResource, eventKind, type KindInfo, type ResourceRef } from "../core/meta/Kinds.ts"
import { checkDns1123Label } from "../core/meta/Names.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { boundedSpec, priceBoundIn } from "../core/billing/PriceBound.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import { admitJobSpec } from "../core/kinds/job/JobAdmission.ts"
import { workloadFromAnnotations } from "../backends/sim/Workloads.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { type Change, Store, type WriteOp } from "../store/Store.ts"
import { deliveryOf, EventStream, type StreamEvent } from "../runtime/EventStream.ts"
import { followStore, surviving } from "../runtime/Following.ts"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Ids } from "../apiserver/Ids.ts"
import { LiveMarket } from "../runtime/LiveMarket.ts"
import { BudgetService } from "../runtime/Budgets.ts"
import { LedgerService } from "../runtime/LedgerService.ts"
import { Resources, type WriteOptions } from "../apiserver/Resources.ts"
import { type ClockReading, type ClockTarget, SimulationControl, targetTime } from "../apiserver/SimulationControl.ts"
import { defaultHostsPerVariant, defaultSimSeed, type Outbox, type PendingEvent, SimWorld, type Tracked, type TrackedAttempt } from "./SimWorld.ts"
import type { VirtualClock } from "./VirtualClock.ts"

export interface SimBackendOptions {
  readonly clock: VirtualClock
  readonly hostsPerVariant?: number
  readonly seed?: string
  readonly catalog?: ReadonlyArray<Offering>
}

/** `source.component` of its events and the field manager of its writes. */
export const simComponent = "nodus-sim"

/** Real time between two runs of the engine up to the clock: phases show within a tenth of a second at speed 1. */
export const tickInterval = "100 millis"

/** Real time between two saves of the clock, so a restart resumes near where simulated time was. */
const clockSaveIntervalMs = 5_000

const clockTable = "simulation"
const clockId = "clock"

const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: simComponent }

interface Refs {
  readonly job: ResourceRef
  readonly attempt: ResourceRef
  readonly offering: ResourceRef
  readonly event: ResourceRef
}

const refOf = (group: string, info: KindInfo): ResourceRef => ({ info, group, apiVersion: apiVersionOf(group, info) })

const refsOf = (group: string): Refs => ({
  job: refOf(group, byResource("v1", "jobs")!),
  attempt: refOf(group, byResource("v1", "attempts")!),
  offering: refOf(group, byResource("v1", "offerings")!),
  event: { info: eventKind, group: "", apiVersion: "v1" }
})

/** Logs a failed write and goes on: one object the store refuses must not stop the simulation. */
const quietly = (what: string) => <A>(effect: Effect.Effect<A, ApiError>): Effect.Effect<void> =>
  effect.pipe(Effect.asVoid, Effect.catch((error) => Effect.logWarning(`sim backend: ${what}: ${error.message}`)))


export const layer = (options: SimBackendOptions) => Layer.effect(SimulationControl, make(options))

function make(options: SimBackendOptions) {
  return Effect.gen(function*() {
    const store = yield* Store
    const resources = yield* Resources
    const feed = yield* ChangeFeed
    const ids = yield* Ids
    const stream = yield* EventStream
    const { group } = yield* ApiConfig
    const clock = options.clock
    const refs = refsOf(group)
    const ledgers = yield* LedgerService
    const budgets = yield* BudgetService
    const lastSimulated = yield* restoreClock(store, clock)
    // The ledger the engine bills on: the service lends it while the engine runs (see `makeRunner`).
    let lent: Ledger | undefined
    const world = new SimWorld({
      start: clock.now(),
      catalog: options.catalog ?? loadCatalog(),
      hostsPerVariant: options.hostsPerVariant ?? defaultHostsPerVariant,
      seed: options.seed ?? defaultSimSeed,
      billing: {
        ledger: () => {
          if (lent === undefined) throw new Error("the sim backend billed outside a ledger update")
          return lent
        },
        pricebook: currentPricebook,
        rooms: (tracked, ledger, now) => budgets.roomsFor(ledger, { namespace: tracked.namespace, labels: tracked.labels }, now)
      }
    })
    /**
     * Runs the engine to `at` on the server's ledger: the charges and holds of that instant are committed to the store
     * before its statuses are written (docs/billing.md, "In the server"). A commit the store refuses is logged; the
     * ledger service rebuilt its ledger from the store, and the next settle posts again what is missing, since every
     * billing key names its cumulative target.
     */
    const runEngine = (at: number) =>
      ledgers.update((ledger) => {
        lent = ledger
        try {
          world.engine.run(at)
          // A hold whose run is never settled again (its object vanished in a way nothing saw) ends Expired.
          ledger.expire(at)
        } finally {
          lent = undefined
        }
      }).pipe(Effect.catch((error) => Effect.logWarning(`sim backend: billing at ${timestamp(at)}: ${error.message}`)))
    // One at a time: the engine, the mirror and the writes of one instant are never interleaved.
    const lock = Semaphore.makeUnsafe(1)
    const writes = makeWrites({ resources, ids, stream, refs, budgets })
    // Runs live when the previous process stopped were lost with it, at the last instant it is known to have simulated
    // (its saved clock, or a later posting: the clock is saved every 5 s): nothing was simulated while no server ran,
    // so none of that time is charged, and no posting is older than the end it gives the run (docs/billing.md).
    const lastPosted = yield* ledgers.read((ledger) => ledger.postings.at(-1)?.at)
    const lastKnown = Math.max(lastSimulated ?? -Infinity, lastPosted ?? -Infinity)
    const lostAt = Number.isFinite(lastKnown) ? Math.min(lastKnown, world.engine.now) : world.engine.now
    const mirror = makeMirror({ store, world, refs, budgets, lostAt })
    // The estimates' placement preview reads this world's capacity while the backend runs (docs/billing.md).
    yield* (yield* LiveMarket).provide((namespace) => world.capacity.marketFor(namespace))
    const offerings = makeOfferings({ resources, refs, world, clock })
    const { runTo, catchUp } = makeRunner(world, clock, runEngine, writes.flush)
    const saveClock = saveClockOf(store, clock)
    let lastSave = Date.now()

    /**
     * Credits arrived, a top-up was refunded, a hold closed or a Budget changed: Jobs that money held back look again
     * (Funded False waits for this; a raised maxCostUSD is a spec change and reaches them anyway).
     */
    let fundsSeen = ""
    const noticeFunds = Effect.flatMap(ledgers.read((ledger) => `${ledger.available}/${ledger.arrears}/${budgets.generation()}`), (funds) => Effect.sync(() => {
      if (funds === fundsSeen) return
      fundsSeen = funds
      world.simulation.fundsChanged()
    }))

    const tick = lock.withPermit(Effect.gen(function*() {
      yield* noticeFunds
      yield* catchUp
      yield* offerings.refresh
      if (Date.now() - lastSave >= clockSaveIntervalMs) {
        lastSave = Date.now()
        yield* saveClock
      }
    }))

    const onChange = (change: Change) =>
      change.key.resource === refs.job.info.plural ? lock.withPermit(Effect.andThen(mirror.change(change), catchUp)) : Effect.void

    const advance = (target: ClockTarget) => lock.withPermit(Effect.gen(function*() {
      // A Job created just before the request may not have come through the change feed yet: read the store.
      yield* mirror.resync
      yield* noticeFunds
      yield* catchUp
      const at = yield* Effect.fromResult(targetTime(target, clock.now()))
      yield* runTo(at, true)
      yield* offerings.refresh
      yield* saveClock
      lastSave = Date.now()
      return { now: clock.now(), speed: clock.speed } satisfies ClockReading
    }))

    yield* offerings.seed
    // The stored Jobs are mirrored and settled before anything else runs the engine: a hold of a run the previous
    // process left live is captured and closed before the engine's expiry pass could let it lapse uncharged.
    const resyncAll = lock.withPermit(Effect.andThen(mirror.resync, catchUp))
    yield* resyncAll
    yield* followStore("sim backend", feed, resyncAll, onChange)
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(tickInterval), surviving("sim backend", "running the engine")(tick))))
    yield* Effect.addFinalizer(() => saveClock)

    return SimulationControl.of({
      read: Effect.sync(() => ({ now: clock.now(), speed: clock.speed })),
      advance
    })
  })
}

/**
 * Simulated time never goes back, across restarts too: the clock resumes at the time saved last. Answers that time (the
 * last instant the previous process is known to have simulated), or undefined on a first start.
 */
const restoreClock = (store: Store["Service"], clock: VirtualClock) =>
  Effect.map(store.getRecord(clockTable, clockId, 0).pipe(Effect.orElseSucceed(() => Option.none<Json>())), (saved) => {
    if (!(Option.isSome(saved) && isObject(saved.value) && typeof saved.value["now"] === "number")) return undefined
    clock.advanceTo(saved.value["now"])
    return saved.value["now"]
  })

const saveClockOf = (store: Store["Service"], clock: VirtualClock) =>
  Effect.ignore(Effect.suspend(() => store.commit([{ _tag: "PutRecord", table: clockTable, id: clockId, value: { now: clock.now() } }])))

/** Running the engine, and writing what it decided. */
function makeRunner(world: SimWorld, clock: VirtualClock, runEngine: (at: number) => Effect.Effect<void>, flush: (outbox: Outbox) => Effect.Effect<void>) {
  const flushPending = Effect.suspend(() => (world.pending ? flush(world.take()) : Effect.void))

  /**
   * Runs the engine to `target`, writing after every simulated instant at which something happened, so each phase
   * reaches the store (and watchers); `moveClock` takes the clock along (the test clock), else it is ahead already.
   */
  const runTo = (target: number, moveClock: boolean) => Effect.gen(function*() {
    for (;;) {
      const next = world.engine.peekTime()
      if (next === undefined || next > target) break
      if (moveClock) clock.advanceTo(next)
      yield* runEngine(next)
      yield* flushPending
    }
    if (moveClock) clock.advanceTo(target)
    yield* runEngine(target)
    yield* flushPending
  })

  /** Runs the engine up to the clock as it reads when this runs (not when it was built). */
  const catchUp = Effect.suspend(() => runTo(clock.now(), false))

  return { runTo, catchUp }
}

// ---------------------------------------------------------------------------------------------------------------------
// Mirroring the store's Jobs

interface MirrorServices {
  readonly store: Store["Service"]
  readonly world: SimWorld
  readonly refs: Refs
  readonly budgets: BudgetService["Service"]
  /** When the runs a previous process left live were lost. */
  readonly lostAt: number
}

function makeMirror(services: MirrorServices) {
  const { store, world, refs, budgets, lostAt } = services

  /** Budgets count a Job's charges by its project and labels, after it is gone too (docs/billing.md, "Budgets"). */
  const register = (object: ResourceObject) =>
    quietly(`billing owner ${keyOf(object)}`)(budgets.registerOwner({
      uid: object.metadata.uid,
      namespace: object.metadata.namespace ?? "",
      name: object.metadata.name,
      kind: refs.job.info.kind,
      labels: object.metadata.labels ?? {}
    }))
  const keyOf = (object: ResourceObject) => `${object.metadata.namespace ?? ""}/${object.metadata.name}`

  const decodeSpec = (object: ResourceObject): JobSpecType | undefined => {
    try {
      // Stored specs were admitted (normalized, defaults filled); decoding again only gives them their types. A create
      // bound by a dry run's ETag is never placed above its price bound (docs/billing.md, "Price consent").
      return boundedSpec(admitJobSpec(isObject(object.spec) ? object.spec : {}), priceBoundIn(object.metadata.annotations, refs.job.group))
    } catch {
      return undefined
    }
  }

  /** The Attempts a previous server process wrote for this Job, as facts (live ones end as NodeLost when it stopped). */
  const restoredAttempts = (object: ResourceObject) => Effect.gen(function*() {
    const dependents = yield* store.dependentsOf(object.metadata.uid).pipe(Effect.orElseSucceed(() => []))
    const attempts = dependents.filter((dependent) => dependent.kind === refs.attempt.info.kind)
    const variantOf = (offering: string, interruptible: boolean) => world.variantOf(offering, interruptible)
    const facts = attempts.flatMap((attempt) => factsFromAttempt(attempt as unknown as JsonObject, variantOf, lostAt) ?? [])
    const live = facts.filter((fact) => attempts.some((attempt) => attempt.metadata.name === fact.name && !isEndedAttempt(attempt as unknown as JsonObject)))
    return { facts, live }
  })

  const admit = (object: ResourceObject) => Effect.gen(function*() {
    const spec = decodeSpec(object)
    if (spec === undefined) return yield* Effect.logWarning(`sim backend: Job ${keyOf(object)} has a spec the Job schema refuses; it is not simulated`)
    const status = (isObject(object.status) ? object.status : {}) as JobStatusType
    yield* register(object)
    // A Job with a phase ran under an earlier server process: it comes back with its recorded runs.
    const restored = status.phase === undefined ? { facts: [], live: [] } : yield* restoredAttempts(object)
    world.admit({
      namespace: object.metadata.namespace ?? "",
      name: object.metadata.name,
      uid: object.metadata.uid,
      generation: object.metadata.generation,
      labels: object.metadata.labels ?? {},
      spec,
      workload: workloadFromAnnotations(object.metadata.annotations),
      status,
      attempts: restored.facts,
      live: restored.live
    })
  })

  /**
   * Brings the mirror of one stored Job up to date: new, re-created, spec changed, or being deleted. The object may be
   * older than what the mirror knows (a change that waited in the feed while a resync read the store): a Job let go
   * of stays gone, and a spec goes only forward.
   */
  const sync = (object: ResourceObject) => Effect.gen(function*() {
    if (world.gone.has(object.metadata.uid)) return
    const previous = world.tracked.get(keyOf(object))
    if (previous !== undefined && (previous.uid !== object.metadata.uid || object.metadata.deletionTimestamp !== undefined)) world.remove(previous)
    if (object.metadata.deletionTimestamp !== undefined) return
    const tracked = world.tracked.get(keyOf(object))
    if (tracked === undefined) return yield* admit(object)
    // Labels change without a new generation; Budgets match the current ones. (Registering again is free when the
    // owner is known and stored, and retries a record the store did not take.)
    if (object.metadata.generation >= tracked.generation) {
      tracked.labels = object.metadata.labels ?? {}
      yield* register(object)
    }
    if (object.metadata.generation <= tracked.generation) return
    const spec = decodeSpec(object)
    if (spec !== undefined) world.update(tracked, spec, object.metadata.generation)
  })

  const change = (change: Change) => {
    if (change.type !== "DELETED") return sync(change.object)
    // Nothing about this uid follows its deletion in the feed.
    world.gone.delete(change.object.metadata.uid)
    const tracked = world.tracked.get(keyOf(change.object))
    if (tracked !== undefined && tracked.uid === change.object.metadata.uid) world.remove(tracked)
    return Effect.void
  }

  /** Every stored Job mirrored, and every mirrored Job the store no longer has forgotten. */
  const resync = Effect.gen(function*() {
    const page = yield* store.list({ resource: refs.job.info.plural }).pipe(Effect.orElseSucceed(() => ({ items: [] as ReadonlyArray<ResourceObject> })))
    const present = new Set(page.items.map((object) => `${keyOf(object)}#${object.metadata.uid}`))
    for (const tracked of [...world.tracked.values()]) if (!present.has(`${tracked.key}#${tracked.uid}`)) world.remove(tracked)
    for (const object of page.items) yield* sync(object)
  })

  return { change, resync }
}

// ---------------------------------------------------------------------------------------------------------------------
// Writing what the simulation decided

interface WriteServices {
  readonly resources: Resources["Service"]
  readonly ids: Ids["Service"]
  readonly stream: EventStream["Service"]
  readonly refs: Refs
  readonly budgets: BudgetService["Service"]
}

/** Where a status goes: the object, its uid when it must still be that object, and the resourceVersion written last. */
interface StatusTarget {
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  readonly name: string
  readonly uid: string | undefined
  readonly resourceVersion: string | undefined
}

/**
 * Replaces the status of an object through the status subresource. It first tries the resourceVersion it wrote last
 * (no read; the usual case, since only the backend writes these statuses) and reads the object again when another
 * writer got there first. Answers the new resourceVersion, or undefined when the object is gone or is another object
 * now (a different uid).
 */
const statusWriter = (resources: Resources["Service"]) => (target: StatusTarget, status: Json) => {
  const { ref, namespace, name, uid } = target
  const replace = (resourceVersion: string) => {
    const metadata = { name, ...(namespace === undefined ? {} : { namespace }), ...(uid === undefined ? {} : { uid }), resourceVersion }
    const body = { apiVersion: ref.apiVersion, kind: ref.info.kind, metadata, status }
    return Effect.map(resources.replace(ref, namespace, name, body, writeOptions, "status"), (result) => result.object.metadata.resourceVersion)
  }
  const fresh = Effect.gen(function*() {
    const current = yield* Effect.result(resources.get(ref, namespace, name))
    if (Result.isFailure(current)) return current.failure.code === "NotFound" ? undefined : yield* current.failure
    if (uid !== undefined && current.success.metadata.uid !== uid) return undefined
    return yield* replace(current.success.metadata.resourceVersion)
  }).pipe(Effect.retry({ times: 5, while: (error) => error.code === "Conflict" }))
  if (target.resourceVersion === undefined) return fresh
  return replace(target.resourceVersion).pipe(Effect.catchIf((error) => error.code === "Conflict" || error.code === "NotFound", () => fresh))
}

function makeWrites(services: WriteServices) {
  const { resources, ids, stream, refs, budgets } = services
  const writeStatus = statusWriter(resources)
  let sequence = 0

  const jobLabel = `${refs.job.info.singular}`
  const labelsOf = (tracked: Tracked): Record<string, string> =>
    checkDns1123Label(tracked.name).length === 0 ? { [`${refs.job.group}/${jobLabel}`]: tracked.name } : {}

  const attemptBody = (tracked: Tracked, attempt: TrackedAttempt): JsonObject => ({
    apiVersion: refs.attempt.apiVersion,
    kind: refs.attempt.info.kind,
    metadata: {
      name: attempt.facts.name,
      namespace: tracked.namespace,
      labels: labelsOf(tracked),
      ownerReferences: [{ apiVersion: refs.job.apiVersion, kind: refs.job.info.kind, name: tracked.name, uid: tracked.uid, controller: true, blockOwnerDeletion: true }]
    },
    spec: {
      workload: { kind: refs.job.info.kind, name: tracked.name, uid: tracked.uid },
      index: attempt.facts.index,
      epoch: attempt.facts.number
    }
  })

  const jobKey = (tracked: Tracked) => ({ resource: refs.job.info.plural, namespace: tracked.namespace, name: tracked.name })

  /** Records about a Job are written only while it exists, so none outlives it uncollected. */
  const whileJobExists = (tracked: Tracked): ReadonlyArray<WriteOp> => [{ _tag: "Require", key: jobKey(tracked), notDeleting: false }]

  /** Creates the Attempt; one left by an earlier Job of the same name (not yet collected) makes way. */
  const createAttempt = (tracked: Tracked, attempt: TrackedAttempt) => Effect.gen(function*() {
    const create = resources.create(refs.attempt, tracked.namespace, attemptBody(tracked, attempt), { ...writeOptions, commitWith: () => whileJobExists(tracked) })
    const created = yield* Effect.result(create)
    if (Result.isFailure(created)) {
      if (created.failure.code === "NotFound") return
      if (created.failure.code !== "AlreadyExists") return yield* created.failure
      const existing = yield* resources.get(refs.attempt, tracked.namespace, attempt.facts.name)
      if (!(existing.metadata.ownerReferences ?? []).some((owner) => owner.uid === tracked.uid)) {
        yield* resources.remove(refs.attempt, tracked.namespace, attempt.facts.name, { dryRun: false, propagationPolicy: "Background", preconditions: { uid: existing.metadata.uid } })
        yield* create
      }
    } else {
      attempt.resourceVersion = created.success.object.metadata.resourceVersion
    }
    attempt.created = true
  })

  const writeAttempt = (tracked: Tracked, attempt: TrackedAttempt) => Effect.gen(function*() {
    if (!attempt.created) yield* createAttempt(tracked, attempt)
    const status = attemptStatusOf(attempt.facts, attempt.placement)
    const text = JSON.stringify(status)
    if (text !== attempt.written) {
      attempt.resourceVersion = yield* writeStatus({ ref: refs.attempt, namespace: tracked.namespace, name: attempt.facts.name, uid: undefined, resourceVersion: attempt.resourceVersion }, status)
      attempt.written = text
    }
    if (attempt.facts.phase === "Ended") tracked.attempts.delete(attempt.facts.name)
  })

  const writeJob = (tracked: Tracked) => Effect.gen(function*() {
    const status = tracked.job.status
    const text = JSON.stringify(status)
    if (text !== tracked.written && !tracked.finishedBefore) {
      const target = { ref: refs.job, namespace: tracked.namespace, name: tracked.name, uid: tracked.uid, resourceVersion: tracked.resourceVersion }
      tracked.resourceVersion = yield* writeStatus(target, status as unknown as Json)
      tracked.written = text
    }
    for (const attempt of [...tracked.attempts.values()]) yield* quietly(`Attempt ${tracked.namespace}/${attempt.facts.name}`)(writeAttempt(tracked, attempt))
  })

  const involvedOf = (tracked: Tracked): InvolvedObject =>
    ({ apiVersion: refs.job.apiVersion, kind: refs.job.info.kind, name: tracked.name, namespace: tracked.namespace, uid: tracked.uid })

  const eventKey = (record: EventRecord) => ({ resource: eventKind.plural, namespace: record.involved.namespace, name: record.name })

  const createEvent = (tracked: Tracked, record: EventRecord) =>
    resources.commit(refs.event, record.involved.namespace, record.name, [
      { _tag: "Create", key: eventKey(record), object: eventObject(record, ids.uid(), record.last) },
      // Events appear only in a live project (the namespace controller empties a terminating one).
      { _tag: "Require", key: { resource: "namespaces", namespace: "", name: record.involved.namespace }, notDeleting: true },
      ...whileJobExists(tracked)
    ]).pipe(Effect.catchIf((error) => error.code === "NotFound", () => Effect.void))

  /** The next occurrence of an aggregated event: its count and lastTimestamp move. */
  const updateEvent = (tracked: Tracked, record: EventRecord) => Effect.gen(function*() {
    const existing = yield* Effect.result(resources.get(refs.event, record.involved.namespace, record.name))
    if (Result.isFailure(existing)) return yield* createEvent(tracked, record)
    const object = { ...existing.success, ...eventBody(record) } as ResourceObject
    return yield* resources.commit(refs.event, record.involved.namespace, record.name, [
      { _tag: "Update", key: eventKey(record), object, previous: existing.success, expectedRv: existing.success.metadata.resourceVersion }
    ])
  })

  const streamEventOf = (pending: PendingEvent, record: EventRecord, type: string): StreamEvent =>
    deliveryOf(type, pending.at, record, {
      apiVersion: record.involved.apiVersion,
      kind: record.involved.kind,
      metadata: { name: record.involved.name, namespace: record.involved.namespace, uid: record.involved.uid },
      status: pending.status as unknown as JsonObject
    })

  const recordEvent = (pending: PendingEvent) => Effect.gen(function*() {
    const { tracked, event, at } = pending
    const involved = involvedOf(tracked)
    const key = aggregationKey(involved, event.reason, event.message, event.warning)
    const previous = tracked.events.get(key)
    const record: EventRecord = {
      name: previous?.name ?? eventName(tracked.name, at, sequence++),
      involved,
      reason: event.reason,
      message: event.message,
      warning: event.warning,
      count: (previous?.count ?? 0) + 1,
      first: previous?.first ?? at,
      last: at,
      component: simComponent
    }
    tracked.events.set(key, { name: record.name, count: record.count, first: record.first })
    yield* quietly(`Event ${involved.namespace}/${record.name}`)(previous === undefined ? createEvent(tracked, record) : updateEvent(tracked, record))
    if (event.type !== undefined) yield* stream.publish(streamEventOf(pending, record, event.type))
  })

  const deleteJob = (tracked: Tracked) =>
    resources.remove(refs.job, tracked.namespace, tracked.name, { dryRun: false, propagationPolicy: "Background", preconditions: { uid: tracked.uid } }).pipe(
      Effect.catchIf((error) => error.code === "NotFound" || error.code === "Conflict", () => Effect.void)
    )

  /** Status first, then events (a consumer of the stream then reads at least that state), then deletions. */
  const flush = (outbox: Outbox) => Effect.gen(function*() {
    for (const tracked of outbox.dirty) yield* quietly(`status of Job ${tracked.key}`)(writeJob(tracked))
    for (const pending of outbox.events) yield* recordEvent(pending)
    // budget.exceeded, once per Budget, Job and period (the service remembers which it reported).
    for (const { tracked, budget, message } of outbox.refusals) {
      yield* budgets.refused(budget, { kind: refs.job.info.kind, namespace: tracked.namespace, name: tracked.name }, message)
    }
    for (const tracked of outbox.deletes) yield* quietly(`deleting Job ${tracked.key}`)(deleteJob(tracked))
  })

  return { flush, writeStatus }
}

// ---------------------------------------------------------------------------------------------------------------------
// Offerings: the catalog, with whether each has capacity now

function makeOfferings(services: { readonly resources: Resources["Service"]; readonly refs: Refs; readonly world: SimWorld; readonly clock: VirtualClock }) {
  const { resources, refs, world, clock } = services
  const writeStatus = statusWriter(resources)
  const shown = new Map<string, boolean>()

  const writeAvailability = (offering: Offering, available: boolean) =>
    Effect.map(
      writeStatus({ ref: refs.offering, namespace: undefined, name: offering.id, uid: undefined, resourceVersion: undefined }, { available, pricebookVersion: catalogPricebookVersion, updatedTime: timestamp(clock.now()) }),
      () => shown.set(offering.id, available)
    )

  /** Creates the Offering, or replaces its spec when the catalog changed since it was written. */
  const ensure = (offering: Offering) => Effect.gen(function*() {
    const { metadata, spec } = offeringObject(offering, catalogPricebookVersion)
    const body = { apiVersion: refs.offering.apiVersion, kind: refs.offering.info.kind, metadata, spec }
    const found = yield* Effect.result(resources.get(refs.offering, undefined, offering.id))
    if (Result.isFailure(found)) {
      if (found.failure.code !== "NotFound") return yield* found.failure
      yield* resources.create(refs.offering, undefined, body, writeOptions)
    } else if (!equals(found.success.spec ?? null, spec as unknown as Json)) {
      yield* resources.replace(refs.offering, undefined, offering.id, { ...body, metadata: { ...metadata, resourceVersion: found.success.metadata.resourceVersion } }, writeOptions)
    } else if (isCurrent(found.success, world.available(offering))) {
      // A restart over the same catalog: nothing to write (a whole catalog of status writes costs a second on PGlite).
      return shown.set(offering.id, world.available(offering))
    }
    yield* writeAvailability(offering, world.available(offering))
  })

  const isCurrent = (object: ResourceObject, available: boolean): boolean =>
    isObject(object.status) && object.status["available"] === available && object.status["pricebookVersion"] === catalogPricebookVersion

  const seed = Effect.forEach(world.catalog, (offering) => quietly(`Offering ${offering.id}`)(ensure(offering)), { discard: true })

  /** Writes the offerings whose availability changed. */
  const refresh = Effect.forEach(world.catalog, (offering) => {
    const available = world.available(offering)
    return shown.get(offering.id) === available ? Effect.void : quietly(`Offering ${offering.id}`)(writeAvailability(offering, available))
  }, { discard: true })

  return { seed, refresh }
}
