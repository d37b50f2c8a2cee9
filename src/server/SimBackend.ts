/**
 * The sim backend (docs/simulator.md, "The sim backend"): the runtime's reconciler over the simulator's capacity. The
 * simulated fleet — the whole catalog, `defaultHostsPerVariant` hosts of every variant under the provider defaults —
 * is the capacity port (backends/sim/SimPort.ts); the reconciler steps every object the store holds through it,
 * exactly as it would over live hosts.
 *
 * Time is the VirtualClock, and this module owns it: the engine's events and the reconciler's due keys run in time
 * order, instant by instant — at each instant the engine first (boots, exits, preemptions), then every key due
 * (the port's changes of that instant taken in first) — so each phase reaches the store, and watchers, at its
 * simulated time. A fiber runs everything up to the clock every `tickInterval`; the test clock (SimulationControl)
 * runs it to any later instant at once, writing as it goes, before it answers.
 *
 * Simulated time never goes back, across restarts too: the clock is saved every few seconds and restored at start.
 * Runs that were live when the previous process stopped are lost with its capacity (nothing survives in a simulator);
 * they end at the last instant that process is known to have simulated, so downtime is never charged.
 *
 * Several processes on one store (docs/scale-out.md) keep one clock: the saved clock carries the wall-clock time it
 * was read at, so every process can run at the same simulated instant (the saved one plus the wall time since, at the
 * same speed). Once a second every process compares its clock with the saved one: behind, it moves forward to it (a
 * test clock advanced through any process reaches the others so); ahead, or when the saved one is older than the save
 * interval, it saves its own, so all of them run at the latest and the saved clock stays recent while any process runs.
 * The holder of the `nodus/sim-clock` shard alone lets lapsed holds expire (fenced). Each process simulates its own
 * fleet for the objects it owns; a process that starts while the saved clock is recent joins it, one that starts after
 * every process stopped resumes where simulated time stopped.
 */
import { Effect, Layer, Option, Semaphore } from "effect"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Resources } from "../apiserver/Resources.ts"
import { Engine } from "../backends/sim/Engine.ts"
import { Prng } from "../backends/sim/Prng.ts"
import { defaultFleet, providerModelsOf } from "../backends/sim/Run.ts"
import { SimCapacity } from "../backends/sim/SimCapacity.ts"
import * as SimPort from "../backends/sim/SimPort.ts"
import { currentPricebook } from "../core/billing/Pricebook.ts"
import { CapacityPort } from "../core/capacity/Capacity.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import { defaultHostsPerVariant } from "../core/capacity/ProviderModels.ts"
import { isObject, type Json } from "../core/Json.ts"
import { iso } from "../core/StatusText.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import { surviving } from "../runtime/Following.ts"
import * as FunctionDispatch from "../runtime/FunctionDispatch.ts"
import { LedgerService } from "../runtime/LedgerService.ts"
import { LiveMarket } from "../runtime/LiveMarket.ts"
import { makeOfferings } from "../runtime/Offerings.ts"
import { currentOwnership, type OwnershipShape } from "../runtime/Ownership.ts"
import { Reconciler } from "../runtime/Reconciler.ts"
import { type ClockReading, type ClockTarget, SimulationControl, targetTime } from "../runtime/SimulationControl.ts"
import { runUntil, type SteppedCapacity } from "../runtime/VirtualTime.ts"
import { Store } from "../store/Store.ts"
import type { VirtualClock } from "./VirtualClock.ts"

export interface SimBackendOptions {
  readonly clock: VirtualClock
  readonly hostsPerVariant?: number
  readonly seed?: string
  readonly catalog?: ReadonlyArray<Offering>
}

/** The seed of every random draw of the server's simulator: the same requests give the same runs. */
export const defaultSimSeed = "nodus-sim"

/** Real time between two runs up to the clock: phases show within a tenth of a second at speed 1. */
export const tickInterval = "100 millis"

/** Real time between two saves of the clock, so a restart resumes near where simulated time was. */
const clockSaveIntervalMs = 5_000

/** Real time between two reads of the saved clock by processes that share a store. */
const clockFollowIntervalMs = 1_000

/** A saved clock younger than this (real time) is a running one: another process of the store keeps it. */
const clockLiveMs = 3 * clockSaveIntervalMs

/** Of a store shared by several processes, the holder of this name's shard lets lapsed holds expire. */
export const clockSingleton = "nodus/sim-clock"

const clockTable = "simulation"
const clockId = "clock"

/**
 * The sim backend: SimulationControl, the capacity port over the simulated fleet, and the reconciler running on it.
 * Needs the store, Resources, the runtime's services (LedgerService, BudgetService, EventOutbox, KindRegistry,
 * LiveMarket), the change feed and the ApiConfig.
 */
export const layer = (options: SimBackendOptions) =>
  Layer.unwrap(Effect.gen(function*() {
    const store = yield* Store
    const ledgers = yield* LedgerService
    const ownership = yield* currentOwnership
    const clock = options.clock
    const catalog = options.catalog ?? loadCatalog()
    const lastSimulated = yield* restoreClock(store, clock, ownership.whole ? undefined : Date.now())
    const engine = new Engine(clock.now())
    const models = providerModelsOf(defaultFleet(options.hostsPerVariant ?? defaultHostsPerVariant))
    const capacity = new SimCapacity(engine, new Prng(options.seed ?? defaultSimSeed).derive("capacity"), models)
    const counted = yield* SimPort.makeCounted(capacity)
    // Runs live when the previous process stopped were lost with it, at the last instant it is known to have simulated
    // (its saved clock, or a later posting: the clock is saved every 5 s): nothing was simulated while no server ran,
    // so none of that time is charged, and no posting is older than the end it gives the run (docs/billing.md).
    const lastPosted = yield* ledgers.read((ledger) => ledger.postings.at(-1)?.at)
    const lastKnown = Math.max(lastSimulated ?? -Infinity, lastPosted ?? -Infinity)
    const lostAt = Number.isFinite(lastKnown) ? Math.min(lastKnown, engine.now) : engine.now
    const port = Layer.succeed(CapacityPort, counted.port)
    const reconciler = Reconciler.layer({ catalog: () => catalog, pricebook: currentPricebook, lostAt }).pipe(
      Layer.provide(FunctionDispatch.layer()),
      Layer.provideMerge(port)
    )
    return Layer.effect(SimulationControl, make({ clock, engine, catalog, published: counted.published, ownership }))
      .pipe(Layer.provideMerge(reconciler))
  }))

interface Parts {
  readonly clock: VirtualClock
  readonly engine: Engine
  readonly catalog: ReadonlyArray<Offering>
  /** Changes the port has published so far. */
  readonly published: () => number
  readonly ownership: OwnershipShape
}

function make(parts: Parts) {
  return Effect.gen(function*() {
    const { clock, engine, ownership } = parts
    const store = yield* Store
    const resources = yield* Resources
    const ledgers = yield* LedgerService
    const reconciler = yield* Reconciler
    const port = yield* CapacityPort
    const { group } = yield* ApiConfig
    // The estimates' placement preview reads this fleet's capacity while the backend runs (docs/billing.md).
    yield* (yield* LiveMarket).provide((namespace) => port.market(namespace))
    const offerings = makeOfferings({ resources, group, catalog: parts.catalog, market: port.market("") })
    // One process alone saves as it goes; processes that share the store save as they follow the saved clock.
    const saveClock = ownership.whole ? saveClockOf(store, clock) : Effect.void
    let lastSave = Date.now()
    // One at a time: the engine and the reconciles of one instant are never interleaved.
    const lock = Semaphore.makeUnsafe(1)

    const stepped: SteppedCapacity = {
      now: () => engine.now,
      nextAt: () => engine.peekTime(),
      runTo: (at) => engine.run(at),
      published: parts.published
    }
    /**
     * A hold whose run is never settled again (its object vanished in a way nothing saw) ends Expired at each instant.
     */
    const expireHolds = (at: number) =>
      !ownership.owns(clockSingleton)
        ? Effect.void
        : ledgers.update((ledger) => ledger.expire(at), ownership.fence(clockSingleton)).pipe(
          Effect.catch((error) => Effect.logWarning(`sim backend: expiring holds at ${iso(at)}: ${error.message}`))
        )

    /**
     * Runs every engine event and due key up to `target`, in time order (runtime/VirtualTime.ts); `moveClock` takes the
     * clock along (the test clock), else it is ahead already. A ledger commit the store refuses is logged: the ledger
     * service rebuilt its ledger from the store, and the next settle posts again what is missing.
     */
    const runTo = (target: number, moveClock: boolean) =>
      runUntil(reconciler, stepped, target, {
        ...(moveClock ? { before: (at: number) => clock.advanceTo(at) } : {}),
        after: expireHolds
      })

    /** Runs up to the clock as it reads when this runs. */
    const catchUp = Effect.suspend(() => runTo(clock.now(), false))

    const tick = lock.withPermit(Effect.gen(function*() {
      yield* catchUp
      yield* offerings.refresh
      if (Date.now() - lastSave >= clockSaveIntervalMs) {
        lastSave = Date.now()
        yield* saveClock
      }
    }))

    const advance = (target: ClockTarget) =>
      lock.withPermit(Effect.gen(function*() {
        // An object created just before the request may not have come through the change feed yet: read the store.
        yield* reconciler.resync
        yield* catchUp
        const at = yield* Effect.fromResult(targetTime(target, clock.now()))
        yield* runTo(at, true)
        yield* offerings.refresh
        // Saved here whoever holds the clock: the other processes of the store follow it within a second.
        yield* saveClockOf(store, clock)
        lastSave = Date.now()
        return { now: clock.now(), speed: clock.speed } satisfies ClockReading
      }))

    yield* offerings.seed
    // The stored objects are stepped before anything else runs: a hold of a run the previous process left live is
    // captured and closed before an expiry pass could let it lapse uncharged.
    yield* lock.withPermit(Effect.andThen(reconciler.resync, catchUp))
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(Effect.sleep(tickInterval), surviving("sim backend", "running the simulation")(tick))
      )
    )
    yield* Effect.addFinalizer(() => saveClock)
    if (!ownership.whole) {
      yield* followClock(store, clock)
      yield* Effect.forkScoped(
        Effect.forever(Effect.andThen(Effect.sleep(clockFollowIntervalMs), followClock(store, clock)))
      )
    }

    return SimulationControl.of({
      read: Effect.sync(() => ({ now: clock.now(), speed: clock.speed })),
      advance
    })
  })
}

/** The clock as saved: the simulated time, and the wall-clock time it was read at (absent in older saves). */
const savedClock = (store: Store["Service"]) =>
  Effect.map(
    store.getRecord(clockTable, clockId, 0).pipe(Effect.catch((error) =>
      Effect.as(
        Effect.logWarning(`sim backend: the saved clock could not be read: ${error.message}`),
        Option.none<Json>()
      )
    )),
    (saved) => {
      if (!(Option.isSome(saved) && isObject(saved.value) && typeof saved.value["now"] === "number")) {
        return undefined
      }
      return {
        now: saved.value["now"],
        wall: typeof saved.value["wall"] === "number" ? saved.value["wall"] : undefined
      }
    }
  )

/**
 * Simulated time never goes back, across restarts too: the clock resumes at the time saved last. Answers that time (the
 * last instant the previous process is known to have simulated), or undefined on a first start. With `sharedAt` (the
 * wall clock now, for a store several processes share) a clock saved less than `clockLiveMs` ago is running: this
 * process joins it where it is now.
 */
const restoreClock = (store: Store["Service"], clock: VirtualClock, sharedAt: number | undefined) =>
  Effect.flatMap(savedClock(store), (saved) => {
    const running = saved !== undefined && sharedAt !== undefined && saved.wall !== undefined &&
      sharedAt - saved.wall < clockLiveMs
    if (saved !== undefined) clock.advanceTo(running ? runningNow(saved, clock) : saved.now)
    const how = saved === undefined
      ? "no clock saved: it starts now"
      : running
      ? "joined the store's running clock"
      : "resumed where it stopped"
    return Effect.as(Effect.logInfo(`sim backend: simulated time ${iso(clock.now())} (${how})`), saved?.now)
  })

/** Where a running clock saved at `saved` is now. */
const runningNow = (saved: { readonly now: number; readonly wall?: number | undefined }, clock: VirtualClock) =>
  saved.wall === undefined ? saved.now : saved.now + Math.max(0, Date.now() - saved.wall) * clock.speed

/** How far (real time) a process's clock may run ahead of the saved one before it saves its own. */
const clockAheadMs = 100

/**
 * Moves this process's clock to the store's running clock when that is ahead (another process started earlier, or
 * its test clock moved), and saves this one when it is ahead or the saved one is older than the save interval: every
 * process of the store runs at the latest, and a process starting while any runs finds a recent clock to join.
 */
const followClock = (store: Store["Service"], clock: VirtualClock) =>
  Effect.flatMap(savedClock(store), (saved) => {
    const running = saved === undefined ? undefined : Math.floor(runningNow(saved, clock))
    if (running !== undefined && running >= clock.now() - clockAheadMs * clock.speed) clock.advanceTo(running)
    const recent = saved?.wall !== undefined && Date.now() - saved.wall < clockSaveIntervalMs
    return running !== undefined && running >= clock.now() - clockAheadMs * clock.speed && recent
      ? Effect.void
      : saveClockOf(store, clock)
  })

/** Saves the clock, with the wall-clock time it was read at. */
const saveClockOf = (store: Store["Service"], clock: VirtualClock) =>
  Effect.ignore(
    Effect.suspend(() =>
      store.commit([{
        _tag: "PutRecord",
        table: clockTable,
        id: clockId,
        value: { now: clock.now(), wall: Date.now() }
      }])
    )
  )
