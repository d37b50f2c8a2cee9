/**
 * The Sandbox machine (spec: Sandbox; States and transitions) run by the reconciler over the simulator's capacity
 * port, with the test clock: every row of the table — stop with a snapshot, start again restoring it, idle Stop and
 * Delete, maxLifetime, the start request annotation, maxCostUSD — and the lost box recovered from its last snapshot.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { AdmissionPlugins } from "../../src/apiserver/AdmissionPlugins.ts"
import { ApiConfig } from "../../src/apiserver/ApiConfig.ts"
import { Blobs } from "../../src/apiserver/Blobs.ts"
import { Ids } from "../../src/apiserver/Ids.ts"
import { Resources, type WriteOptions } from "../../src/apiserver/Resources.ts"
import { Engine } from "../../src/backends/sim/Engine.ts"
import { Prng } from "../../src/backends/sim/Prng.ts"
import { SimCapacity } from "../../src/backends/sim/SimCapacity.ts"
import * as SimPort from "../../src/backends/sim/SimPort.ts"
import { currentPricebook } from "../../src/core/billing/Pricebook.ts"
import { type BoxReply, type BoxRequest, CapacityPort } from "../../src/core/capacity/Capacity.ts"
import { conditionIn } from "../../src/core/controller/Conditions.ts"
import { eventRef, namespaceRef } from "../../src/core/meta/Kinds.ts"
import { parseMicroUsd } from "../../src/core/Money.ts"
import { refOfKind } from "../../src/kinds/Kinds.ts"
import { sandboxKind } from "../../src/kinds/sandbox/SandboxKind.ts"
import type { SandboxStatusType } from "../../src/kinds/sandbox/SandboxSchema.ts"
import * as Admission from "../../src/runtime/Admission.ts"
import { BudgetService } from "../../src/runtime/Budgets.ts"
import { Estimates } from "../../src/runtime/Estimates.ts"
import { EventOutbox } from "../../src/runtime/EventOutbox.ts"
import { LedgerService } from "../../src/runtime/LedgerService.ts"
import { Reconciler } from "../../src/runtime/Reconciler.ts"
import { KindRegistry } from "../../src/runtime/Registry.ts"
import { SecretCipher } from "../../src/runtime/SecretCipher.ts"
import { Secrets } from "../../src/runtime/Secrets.ts"
import * as VirtualTime from "../../src/runtime/VirtualTime.ts"
import * as BlobStore from "../../src/store/BlobStore.ts"
import { ChangeFeed, defaultFeedOptions } from "../../src/store/ChangeFeed.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { catalog, hour, minute, T0 } from "../core/Fixtures.ts"
import { testSecretKey } from "../support/TestServer.ts"

const group = "nodus.dev"
const sandboxes = refOfKind(group, "Sandbox")
const writeOptions: WriteOptions = { dryRun: false, fieldValidation: "Strict", fieldManager: "test" }

/** The simulated hosts: 4 per offering booting in 30 s that never fail, unless a test says otherwise. */
interface Hosts {
  readonly nodeLossMtbfMs?: number
  readonly capacity?: number
  readonly bootMedianMs?: number
  readonly bootFailureRate?: number
}

/** What each box was started with: its program's Secret mounts, by attempt name (the port's `start`, recorded). */
type Started = Map<string, ReadonlyArray<{ readonly name: string; readonly version: number | undefined }>>

const makeDriver = (hosts: Hosts = {}) => {
  const engine = new Engine(T0)
  const capacity = new SimCapacity(engine, new Prng("sandbox"), () => ({
    capacity: hosts.capacity ?? 4,
    bootMedianMs: hosts.bootMedianMs ?? 30_000,
    bootSigma: 0,
    bootFailureRate: hosts.bootFailureRate ?? 0,
    preemptionMtbfMs: undefined,
    preemptionTrace: undefined,
    nodeLossMtbfMs: hosts.nodeLossMtbfMs,
    teardownMs: 10_000,
    warmStartMs: 5_000,
    restoreBytesPerSecond: 2 ** 30
  }))
  const started: Started = new Map()
  return Effect.map(SimPort.makeCounted(capacity), (counted) => {
    const port: typeof counted.port = {
      ...counted.port,
      start: (owner, attempt, program) => {
        started.set(attempt, program.workload?.secrets ?? [])
        return counted.port.start(owner, attempt, program)
      }
    }
    return {
      capacity,
      started,
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

const runtimeOver = (driver: Driver, starterMicro = 100_000_000n, admission = false) => {
  const store = Layer.fresh(MemoryStore.layer)
  const ids = Ids.layer
  const outbox = EventOutbox.layer.pipe(Layer.provideMerge(ids))
  const feed = ChangeFeed.layerWith({ ...defaultFeedOptions, pollInterval: "365 days" })
  const ledger = LedgerService.layer({ starterMicro }).pipe(Layer.provideMerge(outbox))
  const budgets = BudgetService.layer.pipe(Layer.provideMerge(Layer.mergeAll(feed, ledger)))
  // The runtime's own admission (Secrets sealed and pinned, estimates left out) where a test needs Secrets.
  const secrets = Secrets.layer.pipe(Layer.provideMerge(SecretCipher.layer(testSecretKey)))
  const blobs = Blobs.layer.pipe(Layer.provide(BlobStore.layerMemory))
  const plugins = admission
    ? Admission.layer.pipe(Layer.provide(Layer.mergeAll(secrets, Estimates.layerNone, outbox, blobs)))
    : AdmissionPlugins.layerNone
  const resources = Resources.layer.pipe(Layer.provideMerge(plugins))
  const base = Layer.mergeAll(
    resources,
    budgets,
    Layer.succeed(ApiConfig, { group, publicUrl: () => "http://127.0.0.1", bookmarkInterval: "30 seconds" }),
    KindRegistry.layer([sandboxKind]),
    Layer.succeed(CapacityPort, driver.port)
  )
    .pipe(Layer.provideMerge(Layer.merge(store, ids)))
  return Reconciler.layer({ catalog: () => catalog, pricebook: currentPricebook, lostAt: T0 }).pipe(
    Layer.provideMerge(base)
  )
}

/** Moves the driver, the reconciler and the test clock (object timestamps) together to `target`. */
const runUntil = (driver: Driver, target: number) =>
  Effect.gen(function*() {
    const reconciler = yield* Reconciler
    yield* reconciler.resync
    yield* VirtualTime.runUntil(reconciler, driver, target)
    yield* TestClock.setTime(target)
  })

const read = (name = "box") =>
  Effect.map(
    Effect.flatMap(Resources, (resources) => resources.get(sandboxes, "demo", name)),
    (object) => object.status as SandboxStatusType
  )

const exists = (name = "box") =>
  Effect.flatMap(
    Resources,
    (resources) =>
      Effect.match(resources.get(sandboxes, "demo", name), { onFailure: () => false, onSuccess: () => true })
  )

const outboxTypes = Effect.flatMap(
  EventOutbox,
  (outbox) => Effect.map(Effect.orDie(outbox.read("", 100, 0)), (entries) => entries.map((entry) => entry.event.type))
)

/** The spec-typed events of the Sandbox alone (the ledger's own, such as billing.low_balance, left out). */
const sandboxTypes = Effect.map(outboxTypes, (types) => types.filter((type) => type.startsWith("sandbox.")))

/** The Kubernetes Events recorded for the Sandboxes of the project, as "reason: message". */
const recordedEvents = Effect.flatMap(
  Resources,
  (resources) =>
    Effect.map(
      Effect.orDie(resources.list(eventRef, "demo", {})),
      (list) => list.items.map((event) => `${String(event["reason"])}: ${String(event["message"])}`)
    )
)

/** The phase of the Sandbox's last stored version before it was deleted, from the change log. */
const lastPhases = (name = "box") =>
  Effect.flatMap(Store, (store) =>
    Effect.map(Effect.orDie(store.changes(0, 100_000)), (page) => {
      const mine = page.changes.filter((change) => change.key.resource === "sandboxes" && change.key.name === name)
      const deleted = mine.findIndex((change) => change.type === "DELETED")
      const before = deleted <= 0 ? undefined : mine[deleted - 1]
      return before === undefined ? [] : [String((before.object.status as { phase?: string } | undefined)?.phase)]
    }))

/** status.cost.totalUSD in micro-USD (exact: the ledger's own unit). */
const totalMicro = (status: SandboxStatusType): bigint => parseMicroUsd((status.cost as { totalUSD: string }).totalUSD)

const patch = (body: unknown, name = "box") =>
  Effect.flatMap(Resources, (resources) => resources.patch(sandboxes, "demo", name, "merge", body, writeOptions))

const create = (spec: Record<string, unknown>, name = "box") =>
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
    const created = yield* resources.create(sandboxes, "demo", {
      apiVersion: sandboxes.apiVersion,
      kind: "Sandbox",
      metadata: { name },
      spec: { image: "python:3.12", resources: { cpu: "2" }, ...spec }
    }, writeOptions)
    return created.object.metadata.uid
  })

const sim = <A, E>(
  body: (
    driver: Driver,
    capacity: SimCapacity,
    started: Started
  ) => Effect.Effect<A, E, Reconciler | Resources | EventOutbox | LedgerService | Store>,
  options: Hosts & { readonly starterMicro?: bigint; readonly admission?: boolean } = {}
) =>
  Effect.gen(function*() {
    const { driver, capacity, started } = yield* makeDriver(options)
    return yield* body(driver, capacity, started).pipe(
      Effect.provide(runtimeOver(driver, options.starterMicro, options.admission))
    )
  })

describe("Sandbox machine under the simulator", () => {
  it.effect("starts, stops with a snapshot, and starts again restoring it (a new epoch)", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0)
        assert.strictEqual((yield* read()).phase, "Starting")
        yield* runUntil(driver, T0 + minute)
        let status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.deepStrictEqual(status.attempt, { epoch: 1, name: "box-1" })
        assert.strictEqual(status.expirationTime, new Date(T0 + 24 * hour).toISOString())
        assert.strictEqual(conditionIn(status.conditions, "Ready")?.status, "True")
        assert.strictEqual(status.activity, "Idle")

        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 2 * minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.strictEqual(status.stopReason, "Requested")
        assert.strictEqual(status.snapshot?.reason, "Stop")
        assert.strictEqual(conditionIn(status.conditions, "StateSaved")?.status, "True")
        assert.isUndefined(status.activity)
        const saved = capacity.facts(uid, "box-1")!
        assert.strictEqual(saved.suspend?.state, "Saved")

        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + 3 * minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.deepStrictEqual(status.attempt, { epoch: 2, name: "box-2" })
        assert.strictEqual(capacity.facts(uid, "box-2")?.restoreFromSeq, saved.checkpoint?.seq)
        assert.deepStrictEqual(yield* sandboxTypes, ["sandbox.started", "sandbox.stopped", "sandbox.started"])
      })
    ))

  it.effect("an Ephemeral Sandbox stops without a snapshot and starts from the image", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* create({ continuity: { mode: "Ephemeral" }, lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + minute)
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 2 * minute)
        const status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.isUndefined(status.snapshot)
        assert.isUndefined(capacity.facts(uid, "box-1")?.suspend)
        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + 3 * minute)
        assert.strictEqual((yield* read()).phase, "Running")
        assert.isUndefined(capacity.facts(uid, "box-2")?.restoreFromSeq)
      })
    ))

  it.effect("idle: onIdle Stop stops it, a start request annotation starts it again", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "5m" } })
        yield* runUntil(driver, T0 + 5 * minute)
        assert.strictEqual((yield* read()).phase, "Running")
        // Booted at T0 + 30 s: idle from then on, stopped 5 minutes later (and /workspace saved first).
        yield* runUntil(driver, T0 + 7 * minute)
        let status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.strictEqual(status.stopReason, "IdleTimeout")
        // It stays stopped while spec.state says Running...
        yield* runUntil(driver, T0 + 20 * minute)
        assert.strictEqual((yield* read()).phase, "Stopped")
        // ...until a start request.
        yield* patch({
          metadata: { annotations: { [`${group}/start-requested-at`]: new Date(T0 + 20 * minute).toISOString() } }
        })
        yield* runUntil(driver, T0 + 22 * minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.strictEqual(status.handledRequests?.["start-requested-at"], new Date(T0 + 20 * minute).toISOString())
        assert.strictEqual(status.attempt?.epoch, 2)
      })
    ))

  it.effect("idle: onIdle Delete deletes it", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "1m", onIdle: "Delete" } })
        yield* runUntil(driver, T0 + minute)
        assert.isTrue(yield* exists())
        yield* runUntil(driver, T0 + 3 * minute)
        assert.isFalse(yield* exists())
        // Why it went is recorded before it goes (the step's Event is written with its last status).
        assert.isTrue(
          (yield* recordedEvents).some((event) => event.startsWith("IdleTimeout: ")),
          (yield* recordedEvents).join("\n")
        )
        assert.deepStrictEqual(yield* lastPhases(), ["Terminating"])
      })
    ))

  it.effect("maxLifetime deletes it, stopped time included", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "0s", maxLifetime: "1h" } })
        yield* runUntil(driver, T0 + minute)
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 30 * minute)
        assert.strictEqual((yield* read()).phase, "Stopped")
        assert.strictEqual((yield* read()).expirationTime, new Date(T0 + hour).toISOString())
        yield* runUntil(driver, T0 + hour + minute)
        assert.isFalse(yield* exists())
        assert.isTrue(
          (yield* recordedEvents).some((event) => event.startsWith("MaxLifetimeReached: ")),
          (yield* recordedEvents).join("\n")
        )
        assert.deepStrictEqual(yield* lastPhases(), ["Terminating"])
      })
    ))

  it.effect("maxLifetime deletes a Failed Sandbox too (spec: any → deleted)", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "0s", maxLifetime: "1h" } })
        yield* runUntil(driver, T0 + 30 * minute)
        const status = yield* read()
        assert.strictEqual(status.phase, "Failed")
        assert.strictEqual(status.expirationTime, new Date(T0 + hour).toISOString())
        yield* runUntil(driver, T0 + hour + minute)
        assert.isFalse(yield* exists())
      }), { bootFailureRate: 1 }))

  it.effect("each start pins the newest Secret versions again: a new version reaches the next start, not the running box", () =>
    sim((driver, _capacity, started) =>
      Effect.gen(function*() {
        const secrets = refOfKind(group, "Secret")
        const writeSecret = (value: string) =>
          Effect.flatMap(Resources, (resources) =>
            Effect.matchEffect(resources.get(secrets, "demo", "token"), {
              onFailure: () =>
                resources.create(secrets, "demo", {
                  apiVersion: secrets.apiVersion,
                  kind: "Secret",
                  metadata: { name: "token" },
                  spec: { data: { TOKEN: value } }
                }, writeOptions),
              onSuccess: () =>
                resources.patch(secrets, "demo", "token", "merge", { spec: { data: { TOKEN: value } } }, writeOptions)
            }))
        yield* TestClock.setTime(T0)
        yield* Effect.ignore(Effect.flatMap(Resources, (resources) =>
          resources.create(
            namespaceRef,
            undefined,
            { apiVersion: "v1", kind: "Namespace", metadata: { name: "demo" } },
            writeOptions
          )))
        yield* writeSecret("one")
        yield* create({ lifecycle: { idleTimeout: "0s" }, secrets: ["token"] })
        yield* runUntil(driver, T0 + minute)
        assert.deepStrictEqual((yield* read()).secretVersions, { token: 1 })
        assert.deepStrictEqual(started.get("box-1"), [{ name: "token", version: 1 }])
        // Version 2 while box-1 runs: box-1 keeps version 1 (status too); the start after a stop takes version 2.
        yield* writeSecret("two")
        yield* runUntil(driver, T0 + 2 * minute)
        assert.deepStrictEqual((yield* read()).secretVersions, { token: 1 })
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 3 * minute)
        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + 4 * minute)
        let status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.deepStrictEqual(status.secretVersions, { token: 2 })
        assert.deepStrictEqual(started.get("box-2"), [{ name: "token", version: 2 }])
        // And again: version 3 reaches box-3.
        yield* writeSecret("three")
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 5 * minute)
        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + 6 * minute)
        status = yield* read()
        assert.deepStrictEqual(status.secretVersions, { token: 3 })
        assert.deepStrictEqual(started.get("box-3"), [{ name: "token", version: 3 }])
        // A client cannot choose what a start pins: admission replaces the annotation it sends.
        yield* patch({ metadata: { annotations: { [`${group}/secret-versions`]: JSON.stringify({ token: 1 }) } } })
        const stored = yield* Effect.flatMap(Resources, (resources) => resources.get(sandboxes, "demo", "box"))
        assert.strictEqual(stored.metadata.annotations?.[`${group}/secret-versions`], JSON.stringify({ token: 3 }))
      }), { admission: true }))

  it.effect("maxCostUSD reached: it stops paying (Stopped, MaxCostReached) and starts again when the cap is raised", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "0s" }, maxCostUSD: "0.5" })
        yield* runUntil(driver, T0 + minute)
        assert.strictEqual((yield* read()).phase, "Running")
        yield* runUntil(driver, T0 + 12 * hour)
        let status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.strictEqual(status.stopReason, "MaxCostReached")
        assert.include(yield* outboxTypes, "sandbox.max_cost_reached")
        assert.isAtMost(Number((status.cost as { totalUSD: string }).totalUSD), 0.5)
        // A start request does not undo a money stop; it is answered (handled) and an Event says why.
        const request = new Date(T0 + 12 * hour).toISOString()
        yield* patch({ metadata: { annotations: { [`${group}/start-requested-at`]: request } } })
        yield* runUntil(driver, T0 + 12 * hour + minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.strictEqual(status.handledRequests?.["start-requested-at"], request)
        assert.isTrue((yield* recordedEvents).some((event) =>
          event.startsWith(
            `StartRequestDeclined: The start request ${request} does not start the Sandbox: maxCostUSD is reached`
          )
        ))
        yield* patch({ spec: { maxCostUSD: "5" } })
        yield* runUntil(driver, T0 + 12 * hour + 3 * minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.include(yield* outboxTypes, "sandbox.funding_restored")
      })
    ))

  it.effect("a lost box is replaced (Recovering, NodeLost) and restored from its last snapshot", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + minute)
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 2 * minute)
        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + 3 * minute)
        const seq = capacity.facts(uid, "box-1")?.checkpoint?.seq
        assert.isDefined(seq)
        // The node under box-2 is lost.
        capacity.loseNode(uid, "box-2")
        yield* runUntil(driver, T0 + 3 * minute + 1)
        let status = yield* read()
        assert.strictEqual(status.phase, "Recovering")
        assert.strictEqual(status.reason, "NodeLost")
        assert.strictEqual(capacity.facts(uid, "box-3")?.restoreFromSeq, seq)
        yield* runUntil(driver, T0 + 5 * minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.strictEqual(status.attempt?.epoch, 3)
      })
    ))

  it.effect("takes commands and files in virtual time: files survive a stop and start, requests are activity", () =>
    sim((driver) =>
      Effect.gen(function*() {
        const uid = yield* create({ lifecycle: { idleTimeout: "5m" } })
        yield* patch({ metadata: { annotations: { "sim.nodus.dev/exec-exit-code": "3" } } })
        yield* runUntil(driver, T0 + minute)
        const box = (attempt: string, request: BoxRequest) => Effect.runSync(driver.port.box!(uid, attempt, request))
        const exec = box("box-1", {
          _tag: "Exec",
          command: "c1",
          argv: ["make"],
          env: {},
          workingDir: undefined,
          stdin: undefined,
          keepStdin: false,
          timeoutMs: undefined,
          background: false
        })
        assert.deepInclude(exec, { _tag: "Command" })
        assert.strictEqual((exec as Extract<BoxReply, { _tag: "Command" }>).state.exitCode, 3)
        assert.deepStrictEqual(
          box("box-1", { _tag: "WriteFile", path: "notes.txt", data: Buffer.from("kept").toString("base64") }),
          { _tag: "Done" }
        )
        // Requests every 4 minutes keep it from its 5-minute idle timeout.
        for (let at = 4; at <= 12; at += 4) {
          yield* runUntil(driver, T0 + at * minute)
          assert.strictEqual((yield* read()).phase, "Running")
          box("box-1", { _tag: "ReadFile", path: "/workspace/notes.txt", maxBytes: 100 })
        }
        yield* runUntil(driver, T0 + 18 * minute)
        assert.strictEqual((yield* read()).stopReason, "IdleTimeout")
        assert.deepInclude(box("box-1", { _tag: "ReadFile", path: "/workspace", maxBytes: 100 }), {
          _tag: "Refused",
          code: "SandboxNotRunning"
        })
        yield* patch({ metadata: { annotations: { [`${group}/start-requested-at`]: "again" } } })
        yield* runUntil(driver, T0 + 20 * minute)
        assert.strictEqual((yield* read()).phase, "Running")
        assert.deepStrictEqual(box("box-2", { _tag: "ReadFile", path: "/workspace", maxBytes: 100 }), {
          _tag: "Directory",
          entries: [{
            name: "notes.txt",
            size: 4,
            mode: "0644",
            modTime: new Date(T0 + 20 * minute).toISOString(),
            type: "file"
          }]
        })
      })
    ))

  it.effect("cost is on the ledger across every start: two boxes, stop then start, add up in status.cost", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + hour)
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + hour + 5 * minute)
        const first = yield* read()
        assert.strictEqual(first.phase, "Stopped")
        const firstMicro = totalMicro(first)
        assert.isTrue(firstMicro > 0n)
        // Stopped: nothing more is charged while no box runs.
        yield* runUntil(driver, T0 + 3 * hour)
        assert.strictEqual(totalMicro(yield* read()), firstMicro)
        // The second box runs as long as the first (booted 30 s in, stopped an hour later): it costs as much again.
        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + 4 * hour)
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + 4 * hour + 5 * minute)
        const second = yield* read()
        assert.strictEqual(second.phase, "Stopped")
        assert.deepStrictEqual(second.attempt, { epoch: 2, name: "box-2" })
        assert.strictEqual(totalMicro(second), 2n * firstMicro)
        const segments = second.cost?.["bySegment"] as Record<string, unknown>
        assert.strictEqual(segments["bootSeconds"], 60)
        assert.strictEqual(segments["teardownSeconds"], 20)
      })
    ))

  it.effect("maxCostUSD counts earlier runs: a start after a paid run stops at what is left of the cap", () =>
    sim((driver) =>
      Effect.gen(function*() {
        // 0.2 USD/h: the first hour spends about 0.2 of the 0.5 cap.
        yield* create({ lifecycle: { idleTimeout: "0s" }, maxCostUSD: "0.5" })
        yield* runUntil(driver, T0 + hour)
        yield* patch({ spec: { state: "Stopped" } })
        yield* runUntil(driver, T0 + hour + 5 * minute)
        const spent = totalMicro(yield* read())
        assert.isTrue(spent > 150_000n)
        yield* patch({ spec: { state: "Running" } })
        yield* runUntil(driver, T0 + hour + 10 * minute)
        assert.strictEqual((yield* read()).phase, "Running")
        // A cap counted per start would let box-2 run 2.5 h; counted across starts, it stops within 1.5 h.
        yield* runUntil(driver, T0 + hour + 100 * minute)
        const status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.strictEqual(status.stopReason, "MaxCostReached")
        assert.deepStrictEqual(status.attempt, { epoch: 2, name: "box-2" })
        assert.isTrue(totalMicro(status) > spent)
        assert.isTrue(totalMicro(status) <= 500_000n)
      })
    ))

  it.effect("Pending while no offering has capacity: Scheduled False (Unschedulable), no box, nothing charged", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + 2 * minute)
        const status = yield* read()
        assert.strictEqual(status.phase, "Pending")
        assert.isUndefined(status.attempt)
        assert.deepInclude(conditionIn(status.conditions, "Scheduled"), { status: "False", reason: "Unschedulable" })
        // It says it waits for a box, not that one starts, and Funded speaks of no box that does not exist.
        assert.deepInclude(conditionIn(status.conditions, "Ready"), { status: "False", reason: "Pending" })
        assert.notInclude(String(conditionIn(status.conditions, "Funded")?.message), "running box")
        assert.strictEqual(totalMicro(status), 0n)
        // Still waiting 5 minutes after the start: said once (sandbox.stuck), and it goes on waiting.
        yield* runUntil(driver, T0 + 30 * minute)
        assert.strictEqual((yield* read()).phase, "Pending")
        assert.deepStrictEqual(yield* sandboxTypes, ["sandbox.stuck"])
      }), { capacity: 0 }))

  it.effect("a box that never boots ends the Sandbox Failed (StartupFailed) with sandbox.setup_failed, and no more boxes", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + 10 * minute)
        const status = yield* read()
        assert.strictEqual(status.phase, "Failed")
        assert.strictEqual(status.reason, "StartupFailed")
        assert.deepInclude(conditionIn(status.conditions, "Ready"), { status: "False", reason: "StartupFailed" })
        // The first start and 5 recoveries (the recovery limit), each lost before the box was ready.
        const attempts = capacity.attemptsOf(uid)
        assert.strictEqual(attempts.length, 6)
        assert.isTrue(attempts.every((attempt) => attempt.outcome?.type === "BootFailed"))
        assert.deepStrictEqual(yield* sandboxTypes, ["sandbox.setup_failed"])
        yield* runUntil(driver, T0 + 20 * hour)
        assert.strictEqual(capacity.attemptsOf(uid).length, 6)
      }), { bootFailureRate: 1 }))

  it.effect("a box not ready 5 minutes after its start: sandbox.stuck once, Ready Stuck, and the start goes on", () =>
    sim((driver) =>
      Effect.gen(function*() {
        yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + 4 * minute)
        assert.deepInclude(conditionIn((yield* read()).conditions, "Ready"), { status: "False", reason: "Starting" })
        yield* runUntil(driver, T0 + 6 * minute)
        const stuck = yield* read()
        assert.strictEqual(stuck.phase, "Starting")
        assert.deepInclude(conditionIn(stuck.conditions, "Ready"), { status: "False", reason: "Stuck" })
        assert.deepStrictEqual(yield* sandboxTypes, ["sandbox.stuck"])
        // Booted at 10 minutes: Running after all.
        yield* runUntil(driver, T0 + 11 * minute)
        const running = yield* read()
        assert.strictEqual(running.phase, "Running")
        assert.deepInclude(conditionIn(running.conditions, "Ready"), { status: "True", reason: "Running" })
        assert.deepStrictEqual(yield* sandboxTypes, ["sandbox.stuck", "sandbox.started"])
      }), { bootMedianMs: 10 * minute }))

  it.effect("funds run out: it saves /workspace and stops paying (Stopped, FundingLost), and starts again when credits arrive", () =>
    sim((driver) =>
      Effect.gen(function*() {
        // 0.3 USD of starter credits at 0.2 USD/h: the holds run dry within the second hour.
        yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + minute)
        assert.deepInclude(conditionIn((yield* read()).conditions, "Funded"), { status: "True" })
        yield* runUntil(driver, T0 + 3 * hour)
        let status = yield* read()
        assert.strictEqual(status.phase, "Stopped")
        assert.strictEqual(status.stopReason, "FundingLost")
        assert.deepInclude(conditionIn(status.conditions, "Funded"), { status: "False", reason: "FundingLost" })
        assert.strictEqual(status.snapshot?.reason, "Stop")
        assert.isTrue(totalMicro(status) <= 300_000n)
        assert.deepStrictEqual(yield* sandboxTypes, ["sandbox.started", "sandbox.funding_lost", "sandbox.stopped"])
        yield* Effect.flatMap(LedgerService, (ledgers) =>
          ledgers.update((ledger) => ledger.grant("grant/more", T0 + 3 * hour, 10_000_000n, "test")))
        yield* runUntil(driver, T0 + 3 * hour + 2 * minute)
        status = yield* read()
        assert.strictEqual(status.phase, "Running")
        assert.deepInclude(conditionIn(status.conditions, "Funded"), { status: "True" })
        assert.deepStrictEqual(yield* sandboxTypes, [
          "sandbox.started",
          "sandbox.funding_lost",
          "sandbox.stopped",
          "sandbox.funding_restored",
          "sandbox.started"
        ])
      }), { starterMicro: 300_000n }))

  // No finalizer holds a deleted Sandbox, so no reader sees it Terminating: the object is gone at once, and the
  // reconciler lets its box go (Reconciler.ts letGo). Terminating is written only on the machine's own deletes.
  it.effect("deleted: the object goes at once, its box is released and nothing more is charged", () =>
    sim((driver, capacity) =>
      Effect.gen(function*() {
        const uid = yield* create({ lifecycle: { idleTimeout: "0s" } })
        yield* runUntil(driver, T0 + 10 * minute)
        assert.strictEqual(capacity.facts(uid, "box-1")?.phase, "Running")
        yield* Effect.flatMap(Resources, (resources) =>
          resources.remove(sandboxes, "demo", "box", { dryRun: false, propagationPolicy: "Background" }))
        yield* runUntil(driver, T0 + 10 * minute + 1)
        assert.isFalse(yield* exists())
        assert.notStrictEqual(capacity.facts(uid, "box-1")?.phase, "Running")
        const charged = Effect.flatMap(LedgerService, (ledgers) =>
          ledgers.read((ledger) => ({ total: ledger.chargesFor(uid).total, held: ledger.heldBy(uid) })))
        yield* runUntil(driver, T0 + 20 * minute)
        const afterTeardown = yield* charged
        assert.strictEqual(afterTeardown.held, 0n)
        assert.isTrue(afterTeardown.total > 0n)
        yield* runUntil(driver, T0 + 5 * hour)
        assert.deepStrictEqual(yield* charged, afterTeardown)
      })
    ))
})
