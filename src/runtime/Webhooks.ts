/**
 * Webhook deliveries (spec: Events, WebhookEndpoint, Webhook sub-resources; docs/webhooks.md).
 *
 * - **Fan-out.** Events of the spec's types are in the durable outbox (EventOutbox.ts), written in the commits of the
 *   changes that caused them. The dispatcher reads them in order and makes one delivery per event and subscribed
 *   endpoint (core/WebhookDelivery.ts `delivers`), committed with its progress through the outbox, so a crash loses no
 *   event and fans none out twice. A commit can land after one with a later outbox id (ids are taken before commits),
 *   so once a second the dispatcher reads the last `settleMs` of ids again for what it has not dispatched.
 * - **Deliveries** are records (WebhookLog.ts): the exact body, the webhook-id kept across retries, the phase, the
 *   attempts. The sender tries each when due, signing every attempt
 *   with each live secret (WebhookSigning.ts, WebhookSecrets.ts) and posting it through the transport
 *   (WebhookTransport.ts: public addresses only, checked after DNS on every attempt); a failure is tried again on the
 *   spec's schedule until 3 days after the event. An endpoint deleted or disabled abandons what is pending to it.
 * - **Status** (WebhookHealth.ts): `lastDelivery`, `deliveries24h`, `failingSince` and the Healthy condition follow
 *   the attempts, written at most once a second per endpoint; the third failure in a row records
 *   webhookendpoint.deliveries_failing.
 * - **One sender per store** (docs/scale-out.md): the dispatcher, the sender and the status writer are the engine,
 *   which runs as the singleton `nodus/webhooks` — in one process of the store at a time, its state read afresh from
 *   the store each time it starts, every commit fenced by its epoch (a process that lost it can no longer record a
 *   delivery, an attempt or a status). The sub-resources' operations run in every process: a replay is queued in the
 *   store for the engine (`replayQueueTable`), a rotation reaches the engine through the endpoint's change.
 *
 * Time is the service's Clock: under the simulator the schedule runs on virtual time (and its test clock). Only the
 * signature's `webhook-timestamp` is the wall clock's (WallClock.ts), since the receiver checks it against its own.
 */
import { Clock, Context, Deferred, Effect, Layer, Option, Queue, type Scope } from "effect"
import { createHash } from "node:crypto"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Resources, type WriteOptions } from "../apiserver/Resources.ts"
import { isObject, type JsonObject } from "../core/Json.ts"
import * as Limits from "../core/Limits.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { delivers, failingType, type Subscription } from "../core/WebhookDelivery.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { Store, type StoreError, type WriteOp } from "../store/Store.ts"
import { deliveredObjectOf, deliveryOf, EventOutbox, type OutboxEntry } from "./EventOutbox.ts"
import { followStore, surviving, wallPause } from "./Following.ts"
import { statusUpdater } from "./ObjectWriter.ts"
import { currentOwnership } from "./Ownership.ts"
import { SecretCipher } from "./SecretCipher.ts"
import { WallClock } from "./WallClock.ts"
import { Health } from "./WebhookHealth.ts"
import {
  afterAttempt,
  bodyOf,
  deliveriesTable,
  type Delivery,
  entryOf,
  iso,
  newDelivery,
  pageOf,
  projectOf,
  putDelivery,
  recordKey
} from "./WebhookLog.ts"
import { type EndpointSecrets, putSecrets, readSecrets, signingSecrets } from "./WebhookSecrets.ts"
import { newSecret, newWebhookId, signatureHeader } from "./WebhookSigning.ts"
import { makeTransport, type Resolver } from "./WebhookTransport.ts"
import { WorkQueue } from "./WorkQueue.ts"

export const cursorTable = "webhookcursor"
/** Rotations made under an Idempotency-Key: their answers, sealed, by endpoint uid and the key's SHA-256. */
export const rotationsTable = "webhookrotations"
/**
 * Replays waiting for the engine (made by any process): one record per replay, `<its delivery id>` → its record key.
 */
export const replayQueueTable = "webhookreplayqueue"
const cursorId = "outbox"

/** The engine's singleton: one process of the store sends (docs/scale-out.md). */
export const engineSingleton = "nodus/webhooks"

/** How far back (service time) the dispatcher reads outbox ids again, for commits that landed late. */
const settleMs = 10_000
/** Attempts in flight at once, over every endpoint. */
const inFlightMax = 256
/** The longest the sender sleeps (wall clock) before it reads the service's clock again. */
const recheckMs = 250
/** Outbox records read per dispatch pass. */
const dispatchBatch = 512
/**
 * The least time between two dispatch passes woken by changes of other processes (they may come thousands a second).
 */
const passSpacingMs = 10
/** Log records read at most for one page of a project-bound key (which skips other projects' deliveries). */
const deliveriesScanMax = 10_000
/** Queued replays taken per pass. */
const replayBatch = 256

interface Endpoint {
  readonly name: string
  readonly url: string
  readonly subscription: Subscription
}

export interface WebhookSettings {
  /** Development only (`--webhook-allow-loopback`): loopback receivers take deliveries (WebhookTransport.ts). */
  readonly allowLoopback: boolean
  /** Name resolution for the transport (tests stub it). */
  readonly resolve?: Resolver | undefined
  /** How long the sender waits for an answer (default 15 s; tests shorten it). */
  readonly timeoutMs?: number | undefined
}

const statusOf = (object: ResourceObject): JsonObject => (isObject(object.status) ? object.status : {})

const subscriptionOf = (object: ResourceObject): Endpoint => {
  const spec = isObject(object.spec) ? object.spec : {}
  const strings = (
    value: unknown
  ) => (Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [])
  return {
    name: object.metadata.name,
    url: typeof spec["url"] === "string" ? spec["url"] : "",
    subscription: {
      uid: object.metadata.uid,
      eventTypes: spec["eventTypes"] === undefined ? ["*"] : strings(spec["eventTypes"]),
      projects: strings(spec["projects"]),
      enabled: spec["enabled"] !== false
    }
  }
}

const internal = (message: string) => new ApiError({ code: "InternalError", message })

/** What the sub-resources' operations tell the engine, where it runs in their process. */
interface Engine {
  /** Replays were queued: they are taken now (other processes' are taken within a second). */
  readonly replaysQueued: () => void
  /** The endpoint's signing secrets changed: they are read again before its next attempt. */
  readonly secretsChanged: (uid: string) => void
}

const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Ignore", fieldManager: "nodus-webhooks" }

/** What the engine and the operations both need. */
const partsOf = (settings: WebhookSettings) =>
  Effect.gen(function*() {
    return {
      settings,
      store: yield* Store,
      outbox: yield* EventOutbox,
      resources: yield* Resources,
      cipher: yield* SecretCipher,
      feed: yield* ChangeFeed,
      ownership: yield* currentOwnership,
      ref: refOfKind((yield* ApiConfig).group, "WebhookEndpoint"),
      updateStatus: statusUpdater(yield* Resources, writeOptions)
    }
  })

type Parts = Effect.Success<ReturnType<typeof partsOf>>

const now = Clock.currentTimeMillis

/**
 * The engine: the dispatcher, the sender and the status writer, everything they hold read from the store when it
 * starts. It runs while this process holds the singleton `nodus/webhooks`; every commit it makes carries the
 * singleton's fence, so once another process took it over nothing this one still does is recorded (an attempt already
 * on its way is sent once more by the next engine: deliveries are at least once).
 */
const engine = (parts: Parts): Effect.Effect<Engine, StoreError, Scope.Scope> =>
  Effect.gen(function*() {
    const { settings, store, outbox, cipher, feed, ownership, ref, updateStatus } = parts
    const transport = makeTransport({
      allowLoopback: settings.allowLoopback,
      resolve: settings.resolve,
      timeoutMs: settings.timeoutMs
    })
    /** Read for each commit: a claim made anew (the epoch superseded, then taken again) fences with its new epoch. */
    const fence = () => ownership.fence(engineSingleton)
    const wall = yield* WallClock

    const endpoints = new Map<string, Endpoint>()
    const health = new Map<string, Health>()
    const secrets = new Map<string, EndpointSecrets>()
    const pending = new Map<string, Delivery>()
    /** Deliveries taken by the sender whose attempt is not recorded yet. */
    const attempting = new Set<string>()
    const due = new WorkQueue()
    const wakeSender = yield* Queue.sliding<void>(1)
    const wakeDispatcher = yield* Queue.sliding<void>(1)
    const wakeStatus = yield* Queue.sliding<void>(1)
    const wakeReplays = yield* Queue.sliding<void>(1)
    due.onWork = () => Queue.offerUnsafe(wakeSender, undefined)
    let inFlight = 0

    const healthOf = (uid: string): Health => {
      let found = health.get(uid)
      if (found === undefined) health.set(uid, found = new Health())
      return found
    }

    // -----------------------------------------------------------------------------------------------------------------
    // Endpoints, followed through the change feed

    const track = (object: ResourceObject) => {
      const endpoint = subscriptionOf(object)
      endpoints.set(object.metadata.uid, endpoint)
      // A rotation made by any process changes the endpoint: its secrets are read again before the next attempt.
      secrets.delete(object.metadata.uid)
      const status = statusOf(object)
      // A restarted server takes up the health its status shows.
      const known = healthOf(object.metadata.uid)
      if (typeof status["failingSince"] === "string") known.resume(Date.parse(status["failingSince"]))
      // A paused endpoint drops what is pending to it.
      if (!endpoint.subscription.enabled) {
        for (const delivery of pending.values()) {
          if (delivery.endpoint === object.metadata.uid) due.add(recordKey(delivery.endpoint, delivery.id))
        }
      }
    }

    const untrack = (uid: string) => {
      endpoints.delete(uid)
      health.delete(uid)
      secrets.delete(uid)
      for (const delivery of pending.values()) {
        if (delivery.endpoint === uid) due.add(recordKey(delivery.endpoint, delivery.id))
      }
    }

    /**
     * The endpoints are known once the first resync is done: before that, an event would fan out to none of them and a
     * pending delivery would seem to have lost its endpoint (abandoned), so nothing dispatches or sends until then.
     */
    const endpointsKnown = yield* Deferred.make<void>()

    const resync = Effect.gen(function*() {
      const page = yield* store.list({ resource: ref.info.plural })
      const seen = new Set(page.items.map((object) => object.metadata.uid))
      for (const uid of [...endpoints.keys()]) if (!seen.has(uid)) untrack(uid)
      for (const object of page.items) if (object.metadata.deletionTimestamp === undefined) track(object)
      yield* Deferred.succeed(endpointsKnown, undefined)
    })

    yield* followStore("webhooks", feed, resync, (change) =>
      Effect.sync(() => {
        // Other processes' commits do not wake this one's dispatcher: their changes do (they may have recorded events).
        if (!ownership.whole) Queue.offerUnsafe(wakeDispatcher, undefined)
        if (change.key.resource !== ref.info.plural) return
        if (change.type === "DELETED" || change.object.metadata.deletionTimestamp !== undefined) {
          untrack(change.object.metadata.uid)
        } else track(change.object)
      }))

    // -----------------------------------------------------------------------------------------------------------------
    // Deliveries: stored, and queued when pending

    const enqueue = (delivery: Delivery) => {
      if (delivery.phase !== "Pending") return
      const key = recordKey(delivery.endpoint, delivery.id)
      pending.set(key, delivery)
      due.at(key, delivery.nextAttemptAt ?? delivery.createdAt)
    }

    /** What the store holds of deliveries: the pending ones are queued, and each endpoint's last day is counted. */
    const loadDeliveries = Effect.gen(function*() {
      const at = yield* now
      let after = ""
      for (;;) {
        const page = yield* store.records(deliveriesTable, after, 1_000, at)
        for (const entry of page) {
          const delivery = entry.value as unknown as Delivery
          enqueue(delivery)
          const known = healthOf(delivery.endpoint)
          known.load(delivery, at)
        }
        if (page.length < 1_000) return
        after = page[page.length - 1]!.id
      }
    })

    // -----------------------------------------------------------------------------------------------------------------
    // Fan-out: the outbox's events become deliveries

    /**
     * Where the dispatcher is. Every outbox id up to `cursor` is dispatched (it is stored, with the deliveries it
     * made); `high` is the newest id dispatched, and `dispatched` the ids between the two. New events are read after
     * `high`; once a second the window from `cursor` to `high` is read again for records whose commit landed after a
     * later id's, and the cursor moves up to what is older than `settleMs`.
     */
    let cursor: string | undefined
    let high = ""
    const dispatched = new Set<string>()
    /**
     * Ids made before this engine started may have been dispatched by the one before it (a crash, or another process
     * that held the singleton): looked up first. Among several processes, up to `settleMs` past the start: ids come
     * from the recording process's clock (the sim backend's clocks agree only to about a second).
     */
    let startedPrefix = ""

    const loadCursor = Effect.gen(function*() {
      if (cursor !== undefined) return cursor
      const stored = yield* store.getRecord(cursorTable, cursorId, 0)
      cursor = Option.isSome(stored) && isObject(stored.value) && typeof stored.value["after"] === "string"
        ? stored.value["after"]
        : ""
      high = cursor
      startedPrefix = String((yield* now) + (ownership.whole ? 0 : settleMs)).padStart(15, "0")
      return cursor
    })

    const cursorOp = (after: string): WriteOp => ({
      _tag: "PutRecord",
      table: cursorTable,
      id: cursorId,
      value: { after }
    })

    /** Makes the deliveries of `entries` (none dispatched yet) and commits them with the cursor. */
    const dispatch = (entries: ReadonlyArray<OutboxEntry>, at: number) =>
      Effect.gen(function*() {
        const made: Array<Delivery> = []
        for (const entry of entries) {
          const object = entry.event.data.object
          const event = { type: entry.event.type, namespace: object.metadata.namespace, uid: object.metadata.uid }
          const body = bodyOf(entry.event)
          for (const [uid, endpoint] of endpoints) {
            if (!delivers(endpoint.subscription, event)) continue
            if (
              entry.id < startedPrefix &&
              Option.isSome(yield* store.getRecord(deliveriesTable, recordKey(uid, entry.id), 0))
            ) continue
            made.push(
              newDelivery(uid, entry.id, entry.event.type, body, Date.parse(entry.event.timestamp), at, event.namespace)
            )
          }
        }
        // Most events go to no endpoint: then nothing is written (the cursor is stored once a second by the rescan).
        if (made.length > 0) yield* store.commit([...made.map(putDelivery), cursorOp(cursor!), ...fence()])
        for (const entry of entries) {
          dispatched.add(entry.id)
          if (entry.id > high) high = entry.id
        }
        for (const delivery of made) enqueue(delivery)
      })

    /** New events: everything after the newest id dispatched. */
    const dispatchNew = Effect.gen(function*() {
      yield* loadCursor
      for (;;) {
        const entries = yield* outbox.read(high, dispatchBatch, yield* now)
        if (entries.length > 0) yield* dispatch(entries, yield* now)
        if (entries.length < dispatchBatch) return
      }
    })

    /** Late commits: the window read again; then the cursor moves past what has settled. */
    const rescan = Effect.gen(function*() {
      yield* loadCursor
      const at = yield* now
      let after = cursor!
      while (after < high) {
        const page = (yield* outbox.read(after, dispatchBatch, at)).filter((entry) => entry.id <= high)
        const late = page.filter((entry) => !dispatched.has(entry.id))
        if (late.length > 0) yield* dispatch(late, at)
        if (page.length < dispatchBatch) break
        after = page[page.length - 1]!.id
      }
      const settled = String(at - settleMs).padStart(15, "0")
      const next = high < settled ? high : settled
      if (next <= cursor!) return
      cursor = next
      for (const id of dispatched) if (id <= next) dispatched.delete(id)
      yield* store.commit([cursorOp(next), ...fence()])
    })

    // -----------------------------------------------------------------------------------------------------------------
    // Attempts

    const secretsOf = (uid: string) =>
      Effect.gen(function*() {
        const cached = secrets.get(uid)
        if (cached !== undefined) return cached
        const read = yield* readSecrets(store, cipher, uid)
        if (read !== undefined) secrets.set(uid, read)
        return read
      })

    const finish = (delivery: Delivery) =>
      Effect.gen(function*() {
        const key = recordKey(delivery.endpoint, delivery.id)
        yield* store.commit([putDelivery(delivery), ...fence()])
        if (delivery.phase === "Pending") enqueue(delivery)
        else {
          pending.delete(key)
          due.forget(key)
        }
      })

    const abandon = (delivery: Delivery, why: string) =>
      finish({ ...delivery, phase: "Abandoned", nextAttemptAt: undefined, error: why })

    const attempt = (delivery: Delivery) =>
      Effect.gen(function*() {
        const endpoint = endpoints.get(delivery.endpoint)
        if (endpoint === undefined) return yield* abandon(delivery, "the endpoint was deleted")
        if (!endpoint.subscription.enabled) return yield* abandon(delivery, "the endpoint was disabled")
        const live = yield* secretsOf(delivery.endpoint)
        if (live === undefined) return yield* abandon(delivery, "the endpoint was deleted")
        const signedAt = yield* now
        // The signature's time is the wall clock's when it is sent (a receiver checks it against its own); the
        // schedule's and the body's times stay on the service's clock (virtual under the simulator).
        const timestamp = Math.floor(wall.millis() / 1_000)
        const headers = {
          "webhook-id": delivery.webhookId,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signatureHeader(
            signingSecrets(live, signedAt),
            delivery.webhookId,
            timestamp,
            delivery.body
          )
        }
        const result = yield* Effect.promise(() => transport.send({ url: endpoint.url, headers, body: delivery.body }))
        // An attempt counts from when it was signed: the schedule's waits run from there, to the second.
        const next = afterAttempt(delivery, result, signedAt)
        yield* finish(next)
        if (endpoints.has(delivery.endpoint)) {
          healthOf(delivery.endpoint).observe(next, signedAt)
          Queue.offerUnsafe(wakeStatus, undefined)
        }
      })

    const sender = Effect.gen(function*() {
      for (;;) {
        const at = yield* now
        for (
          let key = inFlight < inFlightMax ? due.next(at) : undefined;
          key !== undefined;
          key = inFlight < inFlightMax ? due.next(at) : undefined
        ) {
          const delivery = pending.get(key)
          if (delivery === undefined) continue
          pending.delete(key)
          attempting.add(key)
          inFlight++
          yield* Effect.forkDetach(
            surviving("webhooks", `delivering ${delivery.webhookId}`)(attempt(delivery)).pipe(
              Effect.ensuring(Effect.sync(() => {
                inFlight--
                attempting.delete(key)
                Queue.offerUnsafe(wakeSender, undefined)
              }))
            )
          )
        }
        const nextAt = due.hasReady ? undefined : due.nextAt()
        const wait = Queue.take(wakeSender)
        // Sleeping is on the wall clock while the schedule is on the service's (virtual under the simulator, and moved
        // by its test clock): the sender looks again at least every `recheckMs`.
        yield* nextAt === undefined
          ? wait
          : Effect.raceFirst(wait, Effect.sleep(Math.min(Math.max(0, nextAt - at), recheckMs)))
      }
    })

    // -----------------------------------------------------------------------------------------------------------------
    // Status

    const writeStatus = (uid: string, known: Health) =>
      Effect.gen(function*() {
        const endpoint = endpoints.get(uid)
        if (endpoint === undefined) return
        known.dirty = false
        const announce = known.announce
        known.announce = false
        const at = yield* now
        const failing = known.failing()
        const message =
          `The last ${failing.inARow} delivery attempts to this endpoint failed; the last: ${failing.lastError}.`
        yield* updateStatus(
          ref,
          undefined,
          endpoint.name,
          (current) => (current.metadata.uid === uid ? known.statusOf(current, at) : undefined),
          (shown) => [
            ...fence(),
            ...(announce
              ? [
                outbox.record(
                  deliveryOf(failingType, at, { reason: "DeliveriesFailing", message }, deliveredObjectOf(shown))
                )
              ]
              : [])
          ]
        ).pipe(
          Effect.catchIf((error) => error.code === "NotFound", () => Effect.void),
          Effect.tapError(() =>
            Effect.sync(() => {
              known.dirty = true
              known.announce ||= announce
            })
          )
        )
      })

    const statusWriter = Effect.gen(function*() {
      for (const [uid, known] of health) {
        if (known.dirty) yield* surviving("webhooks", "writing an endpoint's status")(writeStatus(uid, known))
      }
      // At most once a second per endpoint: a busy receiver does not turn every attempt into a status write.
      yield* Effect.sleep("1 second")
      yield* Queue.take(wakeStatus)
    })

    // -----------------------------------------------------------------------------------------------------------------
    // Replays queued by any process

    /** Queued replays: each is queued for the sender (unless it is already), and leaves the queue. */
    const takeReplays = Effect.gen(function*() {
      const at = yield* now
      const queued = yield* store.records(replayQueueTable, "", replayBatch, at)
      if (queued.length === 0) return
      for (const entry of queued) {
        const key = isObject(entry.value) && typeof entry.value["key"] === "string" ? entry.value["key"] : ""
        if (pending.has(key) || attempting.has(key)) continue
        const found = yield* store.getRecord(deliveriesTable, key, at)
        if (Option.isSome(found)) enqueue(found.value as unknown as Delivery)
      }
      yield* store.commit([
        ...queued.map((entry): WriteOp => ({ _tag: "DeleteRecord", table: replayQueueTable, id: entry.id })),
        ...fence()
      ])
    })

    // -----------------------------------------------------------------------------------------------------------------
    // Running

    yield* loadDeliveries
    // A commit wakes the dispatcher when this process recorded events since its last pass (most commits record none).
    let recordedSeen = -1
    const wakeOnCommit = yield* store.onCommit(() => {
      if (outbox.recorded() !== recordedSeen) Queue.offerUnsafe(wakeDispatcher, undefined)
    })
    yield* Effect.addFinalizer(() => wakeOnCommit)
    const pass = Effect.suspend(() => {
      recordedSeen = outbox.recorded()
      return dispatchNew
    })
    // Among several processes passes are spaced: their changes wake the dispatcher too, and may come thousands a
    // second.
    const spacing = ownership.whole ? Effect.void : wallPause(passSpacingMs)
    const dispatcher = Effect.andThen(
      Queue.take(wakeDispatcher),
      Effect.andThen(surviving("webhooks", "dispatching events")(pass), spacing)
    )
    const afterEndpoints = <A, E, R>(loop: Effect.Effect<A, E, R>) =>
      Effect.forkScoped(Effect.andThen(Deferred.await(endpointsKnown), loop))
    yield* afterEndpoints(Effect.forever(dispatcher))
    yield* afterEndpoints(
      Effect.forever(Effect.andThen(Effect.sleep("1 second"), surviving("webhooks", "reading late events")(rescan)))
    )
    yield* afterEndpoints(Effect.forever(surviving("webhooks", "sending")(sender)))
    yield* afterEndpoints(
      Effect.forever(
        Effect.andThen(
          Effect.raceFirst(Queue.take(wakeReplays), wallPause(1_000)),
          surviving("webhooks", "taking replays")(takeReplays)
        )
      )
    )
    yield* Effect.forkScoped(Effect.forever(surviving("webhooks", "writing statuses")(statusWriter)))
    // Outbox records whose commit woke nothing (another process's, when no change of theirs reached this one's feed)
    // are looked for every second.
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(
      Effect.sleep("1 second"),
      Effect.sync(() => Queue.offerUnsafe(wakeDispatcher, undefined))
    )))
    Queue.offerUnsafe(wakeDispatcher, undefined)
    Queue.offerUnsafe(wakeReplays, undefined)

    return {
      replaysQueued: () => Queue.offerUnsafe(wakeReplays, undefined),
      secretsChanged: (uid) => secrets.delete(uid)
    } satisfies Engine
  })

/**
 * The service: the engine as a singleton (read afresh each time this process takes it up: another may have sent
 * meanwhile), and the sub-resources' operations, which any process serves.
 */
const make = (settings: WebhookSettings) =>
  Effect.gen(function*() {
    const parts = yield* partsOf(settings)
    const { store, resources, cipher, ref, updateStatus } = parts
    const storeError = Effect.mapError((error: { readonly message: string }) => internal(error.message))
    let running: Engine | undefined
    const tenure = Effect.scoped(Effect.gen(function*() {
      const started = yield* engine(parts)
      running = started
      yield* Effect.addFinalizer(() => Effect.sync(() => (running = running === started ? undefined : running)))
      return yield* Effect.never
    }))
    // An engine that could not start (the store unreachable) is started again a second later.
    yield* parts.ownership.singleton(
      engineSingleton,
      Effect.forever(Effect.andThen(surviving("webhooks", "starting")(tenure), wallPause(1_000)))
    )

    // -----------------------------------------------------------------------------------------------------------------
    // Operations of the sub-resources

    const endpointNamed = (name: string) => resources.get(ref, undefined, name)

    /**
     * A page of the log. A key bound to a project sees only its project's deliveries (docs/auth.md): the page is read
     * on past the others, at most `scanMax` records, and then ends where the reading stopped (fewer items, or none,
     * with a `continue`).
     */
    const deliveries = (name: string, after: string, limit: number, project: string | undefined) =>
      Effect.gen(function*() {
        const object = yield* endpointNamed(name)
        const prefix = `${object.metadata.uid}/`
        const at = yield* now
        const shown: Array<Delivery> = []
        let from = after
        for (let scanned = 0; scanned < deliveriesScanMax;) {
          const page = (yield* storeError(store.records(deliveriesTable, `${prefix}${from}`, limit + 1, at))).filter((
            entry
          ) => entry.id.startsWith(prefix))
          for (const entry of page) {
            const delivery = entry.value as unknown as Delivery
            if (project === undefined || projectOf(delivery) === project) shown.push(delivery)
            from = delivery.id
            if (shown.length > limit) break
          }
          scanned += page.length
          if (shown.length > limit || page.length <= limit) return pageOf(shown, limit)
        }
        return { items: shown.map(entryOf), continue: from }
      })

    const replay = (name: string, id: string) =>
      Effect.gen(function*() {
        const object = yield* endpointNamed(name)
        const at = yield* now
        const found = yield* storeError(store.getRecord(deliveriesTable, recordKey(object.metadata.uid, id), at))
        if (Option.isNone(found)) {
          return yield* Effect.fail(
            new ApiError({
              code: "NotFound",
              message: `webhookendpoints "${name}" has no delivery "${id}" (the log keeps 7 days)`
            })
          )
        }
        const original = found.value as unknown as Delivery
        const replayId = `${String(at).padStart(15, "0")}.replay.${newWebhookId().slice(4, 16)}`
        const delivery = newDelivery(
          object.metadata.uid,
          replayId,
          original.type,
          original.body,
          at,
          at,
          original.project,
          original.id
        )
        const key = recordKey(delivery.endpoint, delivery.id)
        const queued: WriteOp = {
          _tag: "PutRecord",
          table: replayQueueTable,
          id: key,
          value: { key },
          expiresAt: at + Limits.webhookLogRetentionMs
        }
        yield* storeError(store.commit([putDelivery(delivery), queued]))
        running?.replaysQueued()
        return entryOf(delivery)
      })

    /**
     * A new secret; the previous one signs until the TTL ends. Under an Idempotency-Key the answer is kept (sealed, as
     * the secrets are, for the 24 hours keys are kept): a retry gets the same secret, another body under it is refused.
     */
    const rotate = (
      name: string,
      previousSecretTtlMs: number,
      idempotency: { readonly key: string; readonly fingerprint: string } | undefined
    ) =>
      Effect.gen(function*() {
        const object = yield* endpointNamed(name)
        const uid = object.metadata.uid
        const at = yield* now
        const shown = (endpoint: ResourceObject, secret: string): ResourceObject => ({
          ...endpoint,
          status: { ...statusOf(endpoint), signingSecret: secret }
        })
        const kept = idempotency === undefined
          ? undefined
          : `${uid}/${createHash("sha256").update(idempotency.key).digest("hex")}`
        if (kept !== undefined) {
          const found = yield* storeError(store.getRecord(rotationsTable, kept, at))
          if (Option.isSome(found)) {
            const answer = yield* cipher.open(
              `${rotationsTable}/${kept}`,
              found.value,
              `the rotation of WebhookEndpoint ${name}`
            )
            if (answer["fingerprint"] !== idempotency!.fingerprint) {
              return yield* Effect.fail(
                new ApiError({
                  code: "IdempotencyKeyReused",
                  message: "the Idempotency-Key was already used with a different request payload"
                })
              )
            }
            return shown(object, String(answer["secret"]))
          }
        }
        const current = yield* readSecrets(store, cipher, uid)
        if (current === undefined) return yield* Effect.fail(internal(`WebhookEndpoint ${name} has no signing secret`))
        const secret = newSecret()
        const rotated: EndpointSecrets = {
          current: secret,
          previous: { secret: current.current, until: at + previousSecretTtlMs }
        }
        const keep: ReadonlyArray<WriteOp> = kept === undefined ? [] : [{
          _tag: "PutRecord",
          table: rotationsTable,
          id: kept,
          ifAbsent: true,
          expiresAt: at + Limits.dayMs,
          value: cipher.seal(`${rotationsTable}/${kept}`, { fingerprint: idempotency!.fingerprint, secret })
        }]
        const replaced = yield* updateStatus(
          ref,
          undefined,
          name,
          (current) => (current.metadata.uid === uid
            ? { ...statusOf(current), secretRotation: iso(at + previousSecretTtlMs) }
            : undefined),
          () => [putSecrets(cipher, uid, rotated), ...keep]
        )
        if (!replaced.written) {
          return yield* Effect.fail(
            new ApiError({ code: "NotFound", message: `webhookendpoints "${name}" was deleted during its rotation` })
          )
        }
        running?.secretsChanged(uid)
        return shown(replaced.object, secret)
      })

    return WebhookService.of({ deliveries, replay, rotate })
  })

/** One page of a delivery log: its entries, oldest first, and where the next page starts. */
export interface DeliveryPage {
  readonly items: ReadonlyArray<JsonObject>
  readonly continue: string | undefined
}

/**
 * The operations of a WebhookEndpoint's sub-resources (spec: Webhook sub-resources) the HTTP layer calls: an
 * endpoint's delivery log, a replay of one delivery, and a rotation of its signing secret.
 */
export class WebhookService extends Context.Service<WebhookService, {
  /**
   * The log of the endpoint `name` after `after` (a `continue` value; "" for the first page), at most `limit`; for a
   * key bound to `project`, only the deliveries of that project's events.
   */
  readonly deliveries: (
    name: string,
    after: string,
    limit: number,
    project: string | undefined
  ) => Effect.Effect<DeliveryPage, ApiError>
  /** A new delivery of the same body as delivery `id`, under a new webhook-id: the new entry. */
  readonly replay: (name: string, id: string) => Effect.Effect<JsonObject, ApiError>
  /**
   * A new signing secret; the previous one signs for `previousSecretTtlMs` more. Answers the endpoint with the new
   * secret shown. Under an idempotency key, a retry with the same fingerprint answers the same secret again.
   */
  readonly rotate: (
    name: string,
    previousSecretTtlMs: number,
    idempotency: { readonly key: string; readonly fingerprint: string } | undefined
  ) => Effect.Effect<ResourceObject, ApiError>
}>()("nodus/runtime/Webhooks") {}

/** The webhook service: the deliveries, and the operations of the sub-resources. */
export const layer = (settings: WebhookSettings) => Layer.effect(WebhookService, make(settings))
