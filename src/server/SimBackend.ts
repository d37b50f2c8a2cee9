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
 */
import { Effect, Layer, Option, Semaphore } from "effect"
import { CapacityPort } from "../core/capacity/Capacity.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import { defaultHostsPerVariant } from "../core/capacity/ProviderModels.ts"
import { currentPricebook } from "../core/billing/Pricebook.ts"
import { isObject, type Json } from "../core/Json.ts"
import { iso } from "../core/StatusText.ts"
import { Engine } from "../backends/sim/Engine.ts"
import { Prng } from "../backends/sim/Prng.ts"
import { defaultFleet, providerModelsOf } from "../backends/sim/Run.ts"
import { SimCapacity } from "../backends/sim/SimCapacity.ts"
import * as SimPort from "../backends/sim/SimPort.ts"
import { loadCatalog } from "../data/CatalogData.ts"
import { ApiConfig } from "../apiserver/ApiConfig.ts"
import { Resources } from "../apiserver/Resources.ts"
import { type ClockReading, type ClockTarget, SimulationControl, targetTime } from "../apiserver/SimulationControl.ts"
import { Store } from "../store/Store.ts"
import { surviving } from "../runtime/Following.ts"
import { LedgerService } from "../runtime/LedgerService.ts"
import { LiveMarket } from "../runtime/LiveMarket.ts"
import { makeOfferings } from "../runtime/Offerings.ts"
import * as FunctionDispatch from "../runtime/FunctionDispatch.ts"
import { Reconciler } from "../runtime/Reconciler.ts"
import { runUntil, type SteppedCapacity } from "../runtime/VirtualTime.ts"
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

const clockTable = "simulation"
const clockId = "clock"

/**
 * The sim backend: SimulationControl, the capacity port over the simulated fleet, and the reconciler running on it.
 * Needs the store, Resources, the runtime's services (LedgerService, BudgetService, EventOutbox, KindRegistry,
 * LiveMarket), the change feed and the ApiConfig.
 */
export const layer = (options: SimBackendOptions) => Layer.unwrap(Effect.gen(function*() {
  const store = yield* Store
  const ledgers = yield* LedgerService
  const clock = options.clock
  const catalog = options.catalog ?? loadCatalog()
  const lastSimulated = yield* restoreClock(store, clock)
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
  const reconciler = Reconciler.layer({ catalog: () => catalog, pricebook: currentPricebook, lostAt }).pipe(Layer.provide(FunctionDispatch.layer()), Layer.provideMerge(port))
  return Layer.effect(SimulationControl, make({ clock, engine, catalog, published: counted.published })).pipe(Layer.provideMerge(reconciler))
}))

interface Parts {
  readonly clock: VirtualClock
  readonly engine: Engine
  readonly catalog: ReadonlyArray<Offering>
  /** Changes the port has published so far. */
  readonly published: () => number
}

function make(parts: Parts) {
  return Effect.gen(function*() {
    const { clock, engine } = parts
    const store = yield* Store
    const resources = yield* Resources
    const ledgers = yield* LedgerService
    const reconciler = yield* Reconciler
    const port = yield* CapacityPort
    const { group } = yield* ApiConfig
    // The estimates' placement preview reads this fleet's capacity while the backend runs (docs/billing.md).
    yield* (yield* LiveMarket).provide((namespace) => port.market(namespace))
    const offerings = makeOfferings({ resources, group, catalog: parts.catalog, market: port.market("") })
    const saveClock = saveClockOf(store, clock)
    let lastSave = Date.now()
    // One at a time: the engine and the reconciles of one instant are never interleaved.
    const lock = Semaphore.makeUnsafe(1)

    const stepped: SteppedCapacity = { now: () => engine.now, nextAt: () => engine.peekTime(), runTo: (at) => engine.run(at), published: parts.published }
    /** A hold whose run is never settled again (its object vanished in a way nothing saw) ends Expired at each instant. */
    const expireHolds = (at: number) =>
      ledgers.update((ledger) => ledger.expire(at)).pipe(Effect.catch((error) => Effect.logWarning(`sim backend: expiring holds at ${iso(at)}: ${error.message}`)))

    /**
     * Runs every engine event and due key up to `target`, in time order (runtime/VirtualTime.ts); `moveClock` takes the
     * clock along (the test clock), else it is ahead already. A ledger commit the store refuses is logged: the ledger
     * service rebuilt its ledger from the store, and the next settle posts again what is missing.
     */
    const runTo = (target: number, moveClock: boolean) =>
      runUntil(reconciler, stepped, target, { ...(moveClock ? { before: (at: number) => clock.advanceTo(at) } : {}), after: expireHolds })

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

    const advance = (target: ClockTarget) => lock.withPermit(Effect.gen(function*() {
      // An object created just before the request may not have come through the change feed yet: read the store.
      yield* reconciler.resync
      yield* catchUp
      const at = yield* Effect.fromResult(targetTime(target, clock.now()))
      yield* runTo(at, true)
      yield* offerings.refresh
      yield* saveClock
      lastSave = Date.now()
      return { now: clock.now(), speed: clock.speed } satisfies ClockReading
    }))

    yield* offerings.seed
    // The stored objects are stepped before anything else runs: a hold of a run the previous process left live is
    // captured and closed before an expiry pass could let it lapse uncharged.
    yield* lock.withPermit(Effect.andThen(reconciler.resync, catchUp))
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(tickInterval), surviving("sim backend", "running the simulation")(tick))))
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
