/**
 * FunctionCalls whose workers are lost (spec: States and transitions, the FunctionCall rows "worker lost → Recovering,
 * then re-dispatched, recoveries incremented" and "recovery limit exceeded → Failed RecoveryLimitExceeded"), and
 * fencing ("a result from another epoch is fenced"), and a call's own stale changes heard after its end: the reconciler
 * and the dispatcher (runtime/FunctionDispatch.ts) over the simulator's capacity, whose hosts a test loses at will, on
 * the test's own virtual time. And calls held by the owner of their Function's shard only (docs/scale-out.md), under an
 * ownership the test hands over and takes back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, PubSub, Stream } from "effect"
import { TestClock } from "effect/testing"
import { Resources, type WriteOptions } from "../../src/apiserver/Resources.ts"
import { Engine } from "../../src/backends/sim/Engine.ts"
import { Prng } from "../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../src/backends/sim/SimCapacity.ts"
import * as SimPort from "../../src/backends/sim/SimPort.ts"
import type { BoxReply } from "../../src/core/capacity/Capacity.ts"
import { eventRef, namespaceRef } from "../../src/core/meta/Kinds.ts"
import type { FunctionCallStatusType } from "../../src/kinds/function/FunctionCallSchema.ts"
import { functionKind } from "../../src/kinds/function/FunctionKind.ts"
import type { FunctionStatusType } from "../../src/kinds/function/FunctionSchema.ts"
import { refOfKind } from "../../src/kinds/Kinds.ts"
import {
  closedFence,
  entityOf,
  Ownership,
  type OwnershipChange,
  type OwnershipShape
} from "../../src/runtime/Ownership.ts"
import { Reconciler } from "../../src/runtime/Reconciler.ts"
import * as VirtualTime from "../../src/runtime/VirtualTime.ts"
import { inProcessRuntime, pushedFeed } from "../../src/server/InProcessRuntime.ts"
import { ChangeFeed } from "../../src/store/ChangeFeed.ts"
import { catalog, minute, T0 } from "../core/Fixtures.ts"

const group = "nodus.dev"
const functions = refOfKind(group, "Function")
const calls = refOfKind(group, "FunctionCall")
const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Strict", fieldManager: "test" }
const second = 1_000

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64")
const unb64 = (text: string | undefined) => JSON.parse(Buffer.from(text ?? "", "base64").toString("utf8"))

/**
 * Hosts booting in 30 s that never fail by themselves, `hosts` of each offering; `hold` keeps a call's answer back
 * until the test lets it go.
 */
const makeDriver = (hold?: { readonly epoch: number; readonly release: Deferred.Deferred<BoxReply> }, hosts = 4) => {
  const engine = new Engine(T0)
  const capacity = new SimCapacity(engine, new Prng("functions"), () => ({
    capacity: hosts,
    bootMedianMs: 30_000,
    bootSigma: 0,
    bootFailureRate: 0,
    preemptionMtbfMs: undefined,
    preemptionTrace: undefined,
    nodeLossMtbfMs: undefined,
    teardownMs: 10_000,
    warmStartMs: 5_000,
    restoreBytesPerSecond: 2 ** 30
  }))
  return Effect.map(SimPort.makeCounted(capacity), (counted) => {
    const port: typeof counted.port = {
      ...counted.port,
      // The held dispatch is answered with whatever the test releases, after its real answer (a stale answer, forged).
      box: (owner, attempt, request) =>
        request._tag === "Call" && hold !== undefined && request.call.endsWith(`.${hold.epoch}`)
          ? Effect.andThen(counted.port.box!(owner, attempt, request), Deferred.await(hold.release))
          : counted.port.box!(owner, attempt, request)
    }
    return {
      capacity,
      driver: {
        port,
        now: () => engine.now,
        nextAt: () => engine.peekTime(),
        runTo: (at: number) => engine.run(at),
        published: counted.published
      }
    }
  })
}

type Driver = Effect.Success<ReturnType<typeof makeDriver>>["driver"]

/** A gate the change feed's FunctionCall MODIFIED changes wait behind (a follower that lags), while it is closed. */
interface FeedGate {
  current: Deferred.Deferred<void>
}

/** The change feed, its FunctionCall MODIFIED changes held behind `gate` when one is given. */
const feedLayer = (gate: FeedGate | undefined) => {
  if (gate === undefined) return pushedFeed
  return Layer.effect(
    ChangeFeed,
    Effect.gen(function*() {
      const real = yield* ChangeFeed
      return ChangeFeed.of({
        resourceVersion: real.resourceVersion,
        subscribe: (after) =>
          Effect.map(real.subscribe(after), (subscription) => ({
            ...subscription,
            live: subscription.live.pipe(Stream.mapEffect((change) =>
              change.key.resource === "functioncalls" && change.type === "MODIFIED"
                ? Effect.as(Deferred.await(gate.current), change)
                : Effect.succeed(change)
            ))
          }))
      })
    })
  ).pipe(Layer.provide(pushedFeed))
}

const runtimeOver = (driver: Driver, gate?: FeedGate) =>
  inProcessRuntime({
    port: driver.port,
    catalog,
    kinds: [functionKind],
    lostAt: T0,
    starterMicro: 100_000_000n,
    feed: feedLayer(gate)
  })

/** Moves the driver, the reconciler and the test clock together to `target`, letting the dispatcher take calls in. */
const runUntil = (driver: Driver, target: number) =>
  Effect.gen(function*() {
    const reconciler = yield* Reconciler
    for (let index = 0; index < 20; index++) yield* Effect.yieldNow
    yield* VirtualTime.runUntil(reconciler, driver, target)
    yield* TestClock.setTime(target)
  })

const readCall = (name: string) =>
  Effect.map(
    Effect.flatMap(Resources, (resources) => resources.get(calls, "demo", name)),
    (object) => (object.status ?? {}) as FunctionCallStatusType
  )
const readFunction = Effect.map(
  Effect.flatMap(Resources, (resources) => resources.get(functions, "demo", "fn")),
  (object) => (object.status ?? {}) as FunctionStatusType
)

const setUp = (spec: Record<string, unknown>) =>
  Effect.gen(function*() {
    const resources = yield* Resources
    yield* TestClock.setTime(T0)
    yield* Effect.ignore(
      resources.create(
        namespaceRef,
        undefined,
        { apiVersion: "v1", kind: "Namespace", metadata: { name: "demo" } },
        writeOptions
      )
    )
    const fn = {
      apiVersion: functions.apiVersion,
      kind: "Function",
      metadata: { name: "fn", annotations: { "sim.nodus.dev/call-duration": "1m" } },
      spec: {
        image: "python:3.12",
        code: { module: "app", qualname: "f" },
        scaling: { minWorkers: 1, maxWorkers: 1 },
        ...spec
      }
    }
    return (yield* resources.create(functions, "demo", fn, writeOptions)).object.metadata.uid
  })

const call = (name: string, value: unknown) =>
  Effect.flatMap(Resources, (resources) =>
    resources.create(calls, "demo", {
      apiVersion: calls.apiVersion,
      kind: "FunctionCall",
      metadata: { name },
      spec: { function: "fn", timeout: "10m", input: { encoding: "JSON", inline: b64({ args: [value], kwargs: {} }) } }
    }, writeOptions))

const sim = <A, E>(
  body: (driver: Driver, capacity: SimCapacity) => Effect.Effect<A, E, Reconciler | Resources>,
  hold?: { readonly epoch: number; readonly release: Deferred.Deferred<BoxReply> },
  gate?: FeedGate
) =>
  Effect.gen(function*() {
    const { driver, capacity } = yield* makeDriver(hold)
    return yield* body(driver, capacity).pipe(Effect.provide(runtimeOver(driver, gate)))
  })

describe("FunctionCalls whose workers are lost", () => {
  it.effect("worker lost under a call → Recovering, recoveries 1, then dispatched again to its replacement, which answers", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* setUp({})
        yield* runUntil(driver, T0 + minute)
        assert.strictEqual((yield* readFunction).workers?.ready, 1)
        yield* call("one", "hello")
        yield* runUntil(driver, T0 + minute + 10 * second)
        let status = yield* readCall("one")
        assert.strictEqual(status.phase, "Running")
        assert.deepStrictEqual(status.worker, { attempt: "fn-1", epoch: 1 })
        capacity.loseNode(uid, "fn-1")
        yield* runUntil(driver, T0 + minute + 11 * second)
        status = yield* readCall("one")
        assert.strictEqual(status.phase, "Recovering")
        assert.strictEqual(status.recoveries, 1)
        assert.match(status.message ?? "", /recovery 1 of 5/u)
        // The replacement boots in 30 s; the call runs its minute there, under epoch 2.
        yield* runUntil(driver, T0 + 2 * minute)
        status = yield* readCall("one")
        assert.strictEqual(status.phase, "Running")
        assert.deepStrictEqual(status.worker, { attempt: "fn-2", epoch: 2 })
        yield* runUntil(driver, T0 + 3 * minute)
        status = yield* readCall("one")
        assert.strictEqual(status.phase, "Succeeded")
        assert.strictEqual(unb64(status.result?.inline), "hello")
        assert.strictEqual(status.recoveries, 1)
      })
    ))

  it.effect("past the Function's recovery limit → Failed RecoveryLimitExceeded", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* setUp({ recovery: { maxAttempts: 1 } })
        yield* runUntil(driver, T0 + minute)
        yield* call("unlucky", 1)
        yield* runUntil(driver, T0 + minute + second)
        capacity.loseNode(uid, "fn-1")
        yield* runUntil(driver, T0 + 2 * minute)
        assert.deepStrictEqual((yield* readCall("unlucky")).worker, { attempt: "fn-2", epoch: 2 })
        capacity.loseNode(uid, "fn-2")
        yield* runUntil(driver, T0 + 2 * minute + second)
        const status = yield* readCall("unlucky")
        assert.strictEqual(status.phase, "Failed")
        assert.strictEqual(status.reason, "RecoveryLimitExceeded")
        assert.strictEqual(status.recoveries, 1)
      })
    ))

  it.effect("an answer of an older epoch, arriving while the call runs again, is fenced: the call's result is its own epoch's", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<BoxReply>()
      yield* sim((driver, capacity) =>
        Effect.gen(function*() {
          const uid = yield* setUp({})
          yield* runUntil(driver, T0 + minute)
          yield* call("fenced", "fresh")
          yield* runUntil(driver, T0 + minute + second)
          capacity.loseNode(uid, "fn-1")
          yield* runUntil(driver, T0 + 2 * minute)
          assert.deepStrictEqual((yield* readCall("fenced")).worker, { attempt: "fn-2", epoch: 2 })
          // Epoch 1's worker "answers" now, while epoch 2 runs: a forged success of the old try.
          yield* Deferred.succeed(release, {
            _tag: "Result",
            outcome: { ok: true, encoding: "JSON", result: b64("stale") }
          })
          yield* runUntil(driver, T0 + 2 * minute + second)
          let status = yield* readCall("fenced")
          assert.strictEqual(status.phase, "Running")
          assert.strictEqual(status.worker?.epoch, 2)
          yield* runUntil(driver, T0 + 3 * minute)
          status = yield* readCall("fenced")
          assert.strictEqual(status.phase, "Succeeded")
          assert.strictEqual(unb64(status.result?.inline), "fresh")
        }), { epoch: 1, release })
    }))

  it.effect("a change of a call heard late, after the call ended here, changes nothing: the call is not run again", () => {
    const gate: FeedGate = { current: Deferred.makeUnsafe<void>() }
    return sim(
      (driver) =>
        Effect.gen(function*() {
          yield* Deferred.succeed(gate.current, undefined)
          yield* setUp({})
          yield* runUntil(driver, T0 + minute)
          assert.strictEqual((yield* readFunction).workers?.ready, 1)
          // From now on the dispatcher hears of the call's own status writes only once it has ended.
          gate.current = Deferred.makeUnsafe<void>()
          yield* call("once", "hello")
          yield* runUntil(driver, T0 + 3 * minute)
          const ended = yield* readCall("once")
          assert.strictEqual(ended.phase, "Succeeded")
          yield* Deferred.succeed(gate.current, undefined)
          yield* runUntil(driver, T0 + 6 * minute)
          const later = yield* readCall("once")
          assert.deepStrictEqual([later.phase, later.worker?.epoch, later.recoveries, later.completionTime], [
            "Succeeded",
            1,
            0,
            ended.completionTime
          ])
        }),
      undefined,
      gate
    )
  })
})

/**
 * Ownership by hand, as another process sharing the store would leave it: every entity its own shard, owned once the
 * test gives it to this process; the fence of one not owned fails every commit.
 */
const handOwnership = Effect.map(PubSub.unbounded<OwnershipChange>(), (changes) => {
  const owned = new Set<string>()
  const shape: OwnershipShape = {
    whole: false,
    shardOf: (entity) => entity,
    owns: (entity) => owned.has(entity),
    fence: (entity) => owned.has(entity) ? [] : [closedFence(entity)],
    changes: Stream.fromPubSub(changes),
    singleton: (_name, run) => Effect.asVoid(Effect.forkScoped(run))
  }
  const give = (entity: string, at: number) =>
    Effect.andThen(Effect.sync(() => owned.add(entity)), PubSub.publish(changes, { acquired: [entity], lost: [], at }))
  const takeBack = (entity: string, at: number) =>
    Effect.andThen(
      Effect.sync(() => owned.delete(entity)),
      PubSub.publish(changes, { acquired: [], lost: [entity], at })
    )
  return { shape, give, takeBack }
})

const fnEntity = entityOf(functions.info.plural, "demo", "fn")

/** `sim` under ownership by hand: this process owns the Function `fn` only from `give` on. */
const shardedSim = <A, E>(
  body: (
    driver: Driver,
    capacity: SimCapacity,
    hand: Effect.Success<typeof handOwnership>
  ) => Effect.Effect<A, E, Reconciler | Resources>
) =>
  Effect.gen(function*() {
    const hand = yield* handOwnership
    const { driver, capacity } = yield* makeDriver()
    return yield* body(driver, capacity, hand).pipe(
      Effect.provide(runtimeOver(driver)),
      Effect.provideService(Ownership, hand.shape)
    )
  })

describe("FunctionCalls held by the owner of their Function's shard", () => {
  it.effect("calls of a Function owned elsewhere are not held: taken in from the store with its shard, as that owner left them", () =>
    shardedSim((driver, _capacity, hand) =>
      Effect.gen(function*() {
        const resources = yield* Resources
        yield* setUp({})
        yield* call("elsewhere", "mine")
        yield* call("waiting", "hello")
        yield* runUntil(driver, T0 + minute)
        // Nothing of them is written here while another process owns the Function.
        assert.deepStrictEqual(yield* readCall("waiting"), {})
        // That process ends one of them.
        const ended = {
          phase: "Succeeded",
          completionTime: new Date(T0 + minute).toISOString(),
          result: { encoding: "JSON", inline: b64("theirs") },
          worker: { attempt: "fn-9", epoch: 1 }
        }
        yield* resources.patch(calls, "demo", "elsewhere", "merge", { status: ended }, writeOptions, "status")
        yield* hand.give(fnEntity, T0 + minute)
        yield* runUntil(driver, T0 + 4 * minute)
        // The ended call stays as its owner left it (not run again here); the other one runs here.
        const kept = yield* readCall("elsewhere")
        assert.deepStrictEqual([kept.phase, unb64(kept.result?.inline), kept.worker], ["Succeeded", "theirs", {
          attempt: "fn-9",
          epoch: 1
        }])
        const ran = yield* readCall("waiting")
        assert.deepStrictEqual([ran.phase, unb64(ran.result?.inline), ran.worker?.epoch], ["Succeeded", "hello", 1])
      })
    ))

  it.effect("a shard lost: its calls are dropped, nothing more is written of them; taken again, a running call is recovered", () =>
    shardedSim((driver, _capacity, hand) =>
      Effect.gen(function*() {
        yield* hand.give(fnEntity, T0)
        yield* setUp({})
        yield* runUntil(driver, T0 + minute)
        yield* call("moved", "hello")
        yield* runUntil(driver, T0 + minute + 10 * second)
        assert.deepStrictEqual((yield* readCall("moved")).worker, { attempt: "fn-1", epoch: 1 })
        yield* hand.takeBack(fnEntity, T0 + minute + 10 * second)
        // Its minute runs out (the worker was released with the shard): nothing is recorded by a process that lost it.
        yield* runUntil(driver, T0 + 3 * minute)
        const left = yield* readCall("moved")
        assert.deepStrictEqual([left.phase, left.worker], ["Running", { attempt: "fn-1", epoch: 1 }])
        yield* hand.give(fnEntity, T0 + 3 * minute)
        yield* runUntil(driver, T0 + 3 * minute + second)
        const recovered = yield* readCall("moved")
        assert.deepStrictEqual([recovered.phase, recovered.recoveries], ["Recovering", 1])
        assert.match(recovered.message ?? "", /gave its Function up/u)
        yield* runUntil(driver, T0 + 6 * minute)
        const done = yield* readCall("moved")
        assert.deepStrictEqual([done.phase, unb64(done.result?.inline), done.worker?.epoch, done.recoveries], [
          "Succeeded",
          "hello",
          2,
          1
        ])
      })
    ))
})

/** Functions on `hosts` hosts (one by default) of one offering: a worker takes a host whole. */
const oneHost = <A, E>(body: (driver: Driver) => Effect.Effect<A, E, Reconciler | Resources>, hosts = 1) =>
  Effect.gen(function*() {
    const { driver } = yield* makeDriver(undefined, hosts)
    return yield* body(driver).pipe(Effect.provide(runtimeOver(driver)))
  })

/** The clock at T0 and the project demo. */
const inDemo = Effect.gen(function*() {
  const resources = yield* Resources
  yield* TestClock.setTime(T0)
  yield* Effect.ignore(
    resources.create(
      namespaceRef,
      undefined,
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "demo" } },
      writeOptions
    )
  )
})

const createFunction = (name: string, minWorkers: number) =>
  Effect.flatMap(Resources, (resources) =>
    resources.create(functions, "demo", {
      apiVersion: functions.apiVersion,
      kind: "Function",
      metadata: { name, annotations: { "sim.nodus.dev/call-duration": "1m" } },
      spec: {
        image: "python:3.12",
        code: { module: "app", qualname: "f" },
        placement: { offerings: ["cpu-4x-us"] },
        scaling: { minWorkers, maxWorkers: 1, scaledownWindow: "20m" }
      }
    }, writeOptions))

const callOf = (fn: string, name: string) =>
  Effect.flatMap(Resources, (resources) =>
    resources.create(calls, "demo", {
      apiVersion: calls.apiVersion,
      kind: "FunctionCall",
      metadata: { name },
      spec: { function: fn, timeout: "1h", input: { encoding: "JSON", inline: b64({ args: [1], kwargs: {} }) } }
    }, writeOptions))

const eventsOf = (name: string) =>
  Effect.map(
    Effect.flatMap(Resources, (resources) => resources.list(eventRef, "demo", {})),
    (list) =>
      list.items.filter((item) => (item["involvedObject"] as { name?: string } | undefined)?.name === name).map((
        item
      ) => ({ reason: String(item["reason"]), message: String(item["message"]) }))
  )

const readFunctionNamed = (name: string) =>
  Effect.map(
    Effect.flatMap(Resources, (resources) => resources.get(functions, "demo", name)),
    (object) => (object.status ?? {}) as FunctionStatusType
  )

describe("two Functions on one host (issue 29 #18)", () => {
  it.effect("an idle worker yields to another Function's first call at once, instead of holding the host through its scaledownWindow", () =>
    oneHost((driver) =>
      Effect.gen(function*() {
        yield* inDemo
        yield* createFunction("fn-a", 0)
        yield* createFunction("fn-b", 0)
        yield* callOf("fn-a", "a-1")
        yield* runUntil(driver, T0 + 3 * minute)
        assert.strictEqual((yield* readCall("a-1")).phase, "Succeeded")
        assert.strictEqual(
          (yield* readFunctionNamed("fn-a")).workers?.idle,
          1,
          "fn-a's worker is idle and holds the one host"
        )
        yield* callOf("fn-b", "b-1")
        // Its scaledownWindow (20m) would hold the host until T0 + 22m: b-1 is served well before.
        yield* runUntil(driver, T0 + 6 * minute)
        assert.strictEqual((yield* readCall("b-1")).phase, "Succeeded")
        const yielded = (yield* eventsOf("fn-a")).filter((event) => event.reason === "WorkerYielded")
        assert.lengthOf(yielded, 1)
        assert.include(yielded[0]!.message, "fn-a-1")
        assert.include(yielded[0]!.message, "Function demo/fn-b")
      })
    ))

  it.effect("one idle worker yields per wait: of two Functions' idle workers, one goes for a third Function's call", () =>
    oneHost((driver) =>
      Effect.gen(function*() {
        yield* inDemo
        for (const name of ["fn-a", "fn-b", "fn-c"]) yield* createFunction(name, 0)
        yield* callOf("fn-a", "a-1")
        yield* callOf("fn-b", "b-1")
        yield* runUntil(driver, T0 + 3 * minute)
        yield* callOf("fn-c", "c-1")
        yield* runUntil(driver, T0 + 6 * minute)
        assert.strictEqual((yield* readCall("c-1")).phase, "Succeeded")
        const yielded = [...(yield* eventsOf("fn-a")), ...(yield* eventsOf("fn-b"))].filter((event) =>
          event.reason === "WorkerYielded"
        )
        assert.lengthOf(yielded, 1, JSON.stringify(yielded))
        assert.include(yielded[0]!.message, "Function demo/fn-c")
      }), 2))

  it.effect("a warm worker kept by minWorkers stays, and the waiting Function's Unschedulable names it", () =>
    oneHost((driver) =>
      Effect.gen(function*() {
        yield* inDemo
        yield* createFunction("fn-a", 1)
        yield* runUntil(driver, T0 + minute)
        yield* createFunction("fn-b", 0)
        yield* callOf("fn-b", "b-1")
        yield* runUntil(driver, T0 + 3 * minute)
        assert.strictEqual((yield* readCall("b-1")).phase, "Queued")
        assert.deepStrictEqual((yield* eventsOf("fn-a")).filter((event) => event.reason === "WorkerYielded"), [])
        const scheduled = (yield* readFunctionNamed("fn-b")).conditions?.find((condition) =>
          condition.type === "Scheduled"
        )
        assert.strictEqual(scheduled?.reason, "Unschedulable")
        assert.include(scheduled?.message, "Idle worker fn-a-1 (Function demo/fn-a, on cpu-4x-us) hold it")
      })
    ))
})
