/**
 * The runtime's seam (issue: "a second kind registered in a test runs through the reconciler, the billing step and
 * both capacity drivers without one line of the runtime changed"). A toy machine for Sandboxes (the real one is
 * kinds/sandbox, registered in runtime/Registry.ts; this one stands for any kind a test adds) — hold one run while
 * spec.state is Running, release it when Stopped — is registered here, in the test, and run by the same reconciler as
 * Jobs, over the simulator's port and over the fake driver: it is placed, billed, written, evented and stopped.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { AdmissionPlugins } from "../../src/apiserver/AdmissionPlugins.ts"
import { ApiConfig } from "../../src/apiserver/ApiConfig.ts"
import { Ids } from "../../src/apiserver/Ids.ts"
import { Resources, type WriteOptions } from "../../src/apiserver/Resources.ts"
import { Engine } from "../../src/backends/sim/Engine.ts"
import { Prng } from "../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../src/backends/sim/SimCapacity.ts"
import * as SimPort from "../../src/backends/sim/SimPort.ts"
import { simAnnotationPrefix } from "../../src/backends/sim/Workloads.ts"
import { currentPricebook } from "../../src/core/billing/Pricebook.ts"
import { CapacityPort, type CapacityPortShape, isLive } from "../../src/core/capacity/Capacity.ts"
import { choose, explain } from "../../src/core/capacity/Placement.ts"
import { type Condition, conditionIn, withCondition } from "../../src/core/controller/Conditions.ts"
import type { Action, ControllerEvent, Machine } from "../../src/core/controller/Controller.ts"
import { isObject } from "../../src/core/Json.ts"
import { namespaceRef } from "../../src/core/meta/Kinds.ts"
import { formatMicroUsd } from "../../src/core/Money.ts"
import type { RuntimeKind } from "../../src/kinds/Kind.ts"
import { refOfKind } from "../../src/kinds/Kinds.ts"
import { BudgetService } from "../../src/runtime/Budgets.ts"
import { EventOutbox } from "../../src/runtime/EventOutbox.ts"
import { LedgerService } from "../../src/runtime/LedgerService.ts"
import { Reconciler } from "../../src/runtime/Reconciler.ts"
import { KindRegistry } from "../../src/runtime/Registry.ts"
import * as VirtualTime from "../../src/runtime/VirtualTime.ts"
import { ChangeFeed, defaultFeedOptions } from "../../src/store/ChangeFeed.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { fakeAnnotation, makeFakeCapacity } from "../backends/FakeCapacity.ts"
import { catalog, hour, minute, T0 } from "../core/Fixtures.ts"

interface HolderSpec {
  readonly state?: string
  readonly resources?: { readonly cpu?: string }
  readonly maxCostUSD?: string
}

interface HolderStatus {
  readonly phase?: string
  readonly conditions?: ReadonlyArray<Condition>
}

/** The toy machine: one run while spec.state is Running; the run released when it is Stopped. */
const holder: Machine<HolderSpec, HolderStatus> = {
  kind: "Sandbox",
  step: (observation, context) => {
    const live = observation.attempts.filter(isLive)
    const actions: Array<Action> = []
    let phase: string
    if (observation.spec.state === "Stopped") {
      for (const run of live) {
        if (run.phase !== "Terminating") actions.push({ _tag: "Stop", attempt: run.name, keepWarmMs: 0 })
      }
      phase = live.length === 0 ? "Stopped" : "Stopping"
    } else if (live.length > 0) {
      phase = live.some((run) => run.phase === "Running") ? "Running" : "Starting"
    } else {
      const candidate = choose(context.ranking, context.market)
      const funding = context.funding
      const paid = candidate !== undefined &&
        (funding === undefined || funding.launchBudget >= funding.initialHold(candidate.variant))
      if (candidate !== undefined && paid) {
        const number = observation.attempts.length + 1
        actions.push({
          _tag: "Launch",
          attempt: `${observation.name}-${number}`,
          index: 0,
          number,
          variant: candidate.variant,
          recovery: false,
          restoreFromSeq: undefined,
          resumeFromUnits: undefined,
          checkpointIntervalMs: undefined,
          keepWarmMs: 0,
          env: {},
          explain: () => explain(context.ranking, candidate, context.market)
        })
      }
      phase = actions.length > 0 ? "Starting" : "Pending"
    }
    const events: Array<ControllerEvent> = []
    if (phase !== observation.status.phase && (phase === "Running" || phase === "Stopped")) {
      events.push({
        type: phase === "Running" ? "sandbox.started" : "sandbox.stopped",
        reason: phase,
        message: `The Sandbox is ${phase}.`,
        warning: false
      })
    }
    const conditions = withCondition(
      observation.status.conditions ?? [],
      "Ready",
      phase === "Running" ? "True" : "False",
      phase,
      `The Sandbox is ${phase}.`,
      context.now
    )
    return {
      status: { ...observation.status, phase, conditions },
      actions,
      events,
      wakeAt: undefined,
      waitingForCapacity: false,
      waitingForFunds: false
    }
  },
  placementOf: (spec) => ({
    request: { ...(spec.resources === undefined ? {} : { resources: spec.resources }) },
    run: { workMs: hour, continuity: "Ephemeral", failOnInterruption: false }
  }),
  maxCostOf: (spec) => spec.maxCostUSD,
  isFinal: () => false
}

/** Its registration: one entry, written here; the runtime is not touched. */
const holderKind: RuntimeKind<HolderSpec, HolderStatus> = {
  kind: "Sandbox",
  machine: holder,
  specOf: (object) => (isObject(object.spec) ? (object.spec as HolderSpec) : undefined)
}

/** A capacity driver as this test drives it: its port, and its own time (runtime/VirtualTime.ts moves it). */
interface Driver extends VirtualTime.SteppedCapacity {
  readonly port: CapacityPortShape
}

const simDriver = Effect.gen(function*() {
  const engine = new Engine(T0)
  const capacity = new SimCapacity(engine, new Prng("second-kind"), () => ({
    capacity: 2,
    bootMedianMs: 2 * minute,
    bootSigma: 0,
    bootFailureRate: 0,
    preemptionMtbfMs: undefined,
    preemptionTrace: undefined,
    nodeLossMtbfMs: undefined,
    teardownMs: 30_000,
    warmStartMs: 5_000,
    restoreBytesPerSecond: 2 ** 30
  }))
  const counted = yield* SimPort.makeCounted(capacity)
  return {
    port: counted.port,
    now: () => engine.now,
    nextAt: () => engine.peekTime(),
    runTo: (at: number) => engine.run(at),
    published: counted.published
  } satisfies Driver
})

const fakeDriver = Effect.map(
  makeFakeCapacity({ hosts: 2, bootMs: 2 * minute, teardownMs: 30_000, warmStartMs: 5_000, start: T0 }),
  (fake) =>
    ({
      port: fake.port,
      now: fake.now,
      nextAt: fake.nextAt,
      runTo: (at: number) => fake.advance(at - fake.now()),
      published: fake.published
    }) satisfies Driver
)

const group = "nodus.dev"
const sandboxes = refOfKind(group, "Sandbox")
const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Strict", fieldManager: "test" }

/** The runtime over a fresh memory store and `driver`'s port, with only the toy kind registered. */
const runtimeOver = (driver: Driver) => {
  const store = Layer.fresh(MemoryStore.layer)
  const ids = Ids.layer
  const outbox = EventOutbox.layer.pipe(Layer.provideMerge(ids))
  const feed = ChangeFeed.layerWith({ ...defaultFeedOptions, pollInterval: "365 days" })
  const ledger = LedgerService.layer({ starterMicro: 100_000_000n }).pipe(Layer.provideMerge(outbox))
  const budgets = BudgetService.layer.pipe(Layer.provideMerge(Layer.mergeAll(feed, ledger)))
  const resources = Resources.layer.pipe(Layer.provideMerge(AdmissionPlugins.layerNone))
  const base = Layer.mergeAll(
    resources,
    budgets,
    Layer.succeed(ApiConfig, { group, publicUrl: () => "http://127.0.0.1", bookmarkInterval: "30 seconds" }),
    KindRegistry.layer([holderKind]),
    Layer.succeed(CapacityPort, driver.port)
  )
    .pipe(Layer.provideMerge(Layer.merge(store, ids)))
  return Reconciler.layer({ catalog: () => catalog, pricebook: currentPricebook, lostAt: T0 }).pipe(
    Layer.provideMerge(base)
  )
}

/** Runs the driver's events and the reconciler's due keys in time order up to `target`, as a backend does. */
const runUntil = (driver: Driver, target: number) =>
  Effect.flatMap(Reconciler, (reconciler) => VirtualTime.runUntil(reconciler, driver, target))

const readSandbox = Effect.flatMap(Resources, (resources) => resources.get(sandboxes, "demo", "box"))

const outboxTypes = Effect.flatMap(
  EventOutbox,
  (outbox) =>
    Effect.map(
      Effect.orDie(outbox.read("", 100, 0)),
      (entries) => entries.map((entry) => `${entry.event.type} ${entry.event.data.object.kind}`)
    )
)

const scenario = (driver: Driver) =>
  Effect.gen(function*() {
    const resources = yield* Resources
    const reconciler = yield* Reconciler
    const ledger = yield* LedgerService
    yield* resources.create(namespaceRef, undefined, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "demo" }
    }, writeOptions)
    const work = { [`${simAnnotationPrefix}duration`]: "10000h", [`${fakeAnnotation}work-ms`]: `${10_000 * hour}` }
    const created = yield* resources.create(sandboxes, "demo", {
      apiVersion: sandboxes.apiVersion,
      kind: "Sandbox",
      metadata: { name: "box", annotations: work },
      spec: { image: "python:3.12", resources: { cpu: "4" } }
    }, writeOptions)
    const uid = created.object.metadata.uid
    const cpu = catalog.find((offering) => offering.id === "cpu-4x-us")!
    const free = () =>
      driver.port.market("demo").available({
        offering: cpu,
        interruptible: false,
        rateMicroUsdPerHour: cpu.onDemandMicroUsdPerHour!
      })
    assert.strictEqual(free(), 2)

    // Placed on the cheapest CPU offering that fits, its first hold placed before capacity started.
    yield* reconciler.resync
    yield* runUntil(driver, T0)
    assert.strictEqual((yield* readSandbox).status?.["phase" as never], "Starting")
    assert.strictEqual(free(), 1)
    assert.isAbove(Number(yield* ledger.read((current) => current.heldBy(uid))), 0)

    // Booted: Running, Ready, sandbox.started (its Event and its outbox record in one commit), an Attempt it owns.
    yield* runUntil(driver, T0 + 3 * minute)
    const running = yield* readSandbox
    assert.strictEqual((running.status as { phase: string }).phase, "Running")
    assert.strictEqual(conditionIn((running.status as HolderStatus).conditions, "Ready")?.status, "True")
    assert.include(yield* outboxTypes, "sandbox.started Sandbox")
    const attempt = yield* resources.get(refOfKind(group, "Attempt"), "demo", "box-1")
    assert.strictEqual(attempt.metadata.ownerReferences?.[0]?.uid, uid)
    assert.strictEqual((attempt.status as { offering: string }).offering, "cpu-4x-us")

    // An hour later it has been billed, on the same ledger rules as a Job.
    yield* runUntil(driver, T0 + hour)
    const billed = (yield* readSandbox).status as { cost: { totalUSD: string } }
    assert.isAbove(Number(billed.cost.totalUSD), 0)

    // Stopped: the run is released, the host goes back, the holds close, the cost shown is the ledger's.
    yield* resources.patch(sandboxes, "demo", "box", "merge", { spec: { state: "Stopped" } }, writeOptions)
    yield* reconciler.resync
    yield* runUntil(driver, T0 + hour + 5 * minute)
    const stopped = (yield* readSandbox).status as { phase: string; cost: { totalUSD: string; heldUSD: string } }
    assert.strictEqual(stopped.phase, "Stopped")
    assert.strictEqual(free(), 2)
    assert.strictEqual(stopped.cost.heldUSD, "0")
    const charged = yield* ledger.read((current) => current.chargesFor(uid).total)
    assert.isAbove(Number(charged), 0)
    assert.strictEqual(stopped.cost.totalUSD, formatMicroUsd(charged))
    assert.includeMembers(yield* outboxTypes, ["sandbox.started Sandbox", "sandbox.stopped Sandbox"])
  })

describe("a second kind, registered in a test", () => {
  it.effect("runs through the reconciler, the billing step and the simulator's capacity port", () =>
    Effect.gen(function*() {
      const driver = yield* simDriver
      yield* scenario(driver).pipe(Effect.provide(runtimeOver(driver)))
    }))

  it.effect("runs the same way over the fake capacity driver", () =>
    Effect.gen(function*() {
      const driver = yield* fakeDriver
      yield* scenario(driver).pipe(Effect.provide(runtimeOver(driver)))
    }))
})
