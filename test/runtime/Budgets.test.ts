/**
 * Budgets in the server (src/runtime/Budgets.ts; docs/billing.md, "Budgets"). Over the real resource machinery, change
 * feed and ledger service on an in-memory store, with the test clock: a Budget's status counts what registered owners
 * spent and hold (postings made through LedgerService), thresholds record budget.threshold once per period, the period
 * rolls over, roomsFor matches by project and labels (Notify limits nothing), refused records budget.exceeded once per
 * Budget, object and period, and a restarted service still counts a gone owner's charges. Then the wiring: a server's
 * status loop writes the status of a Budget created over HTTP.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, type Scope } from "effect"
import { TestClock } from "effect/testing"
import { ApiConfig } from "../../src/apiserver/ApiConfig.ts"
import { Blobs } from "../../src/apiserver/Blobs.ts"
import { Ids } from "../../src/apiserver/Ids.ts"
import { Resources } from "../../src/apiserver/Resources.ts"
import type { Ledger } from "../../src/core/billing/Ledger.ts"
import { apiVersionOf, type ResourceRef } from "../../src/core/meta/Kinds.ts"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import { byPluralName } from "../../src/kinds/Kinds.ts"
import * as Admission from "../../src/runtime/Admission.ts"
import { BudgetService, type LedgerOwner, ownersTable } from "../../src/runtime/Budgets.ts"
import { budgetStatusWriter } from "../../src/runtime/BudgetStatus.ts"
import { Estimates } from "../../src/runtime/Estimates.ts"
import { EventOutbox } from "../../src/runtime/EventOutbox.ts"
import { LedgerService } from "../../src/runtime/LedgerService.ts"
import { SecretCipher } from "../../src/runtime/SecretCipher.ts"
import { Secrets } from "../../src/runtime/Secrets.ts"
import * as BlobStore from "../../src/store/BlobStore.ts"
import { ChangeFeed, defaultFeedOptions } from "../../src/store/ChangeFeed.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { v1 } from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, testSecretKey, type TestServer } from "../support/TestServer.ts"

const group = "nodus.dev"
const budgetInfo = byPluralName("budgets")!
const budgetRef: ResourceRef = { info: budgetInfo, group, apiVersion: apiVersionOf(group, budgetInfo) }
const writeOptions = { dryRun: false, fieldValidation: "Strict" as const, fieldManager: "test" }
const march = Date.parse("2026-03-15T12:00:00Z")
const usd = (amount: number): bigint => BigInt(Math.round(amount * 1_000_000))

/** The machinery the service runs over, on one store (given, so that a second build is a restart). */
const servicesOver = (store: Store["Service"]) => {
  const base = Layer.mergeAll(
    Estimates.layerNone,
    Layer.succeed(ApiConfig, { group, publicUrl: () => "http://127.0.0.1", bookmarkInterval: "30 seconds" }),
    // Its poll would run once per simulated second of every jump of the test clock: this process's commits wake it
    // anyway.
    ChangeFeed.layerWith({ ...defaultFeedOptions, pollInterval: "365 days" }),
    LedgerService.layer({ starterMicro: usd(1_000) }).pipe(
      Layer.provideMerge(EventOutbox.layer.pipe(Layer.provideMerge(Ids.layer)))
    ),
    Blobs.layer.pipe(Layer.provide(BlobStore.layerMemory))
  ).pipe(Layer.provideMerge(Layer.succeed(Store, store)))
  return Layer.mergeAll(
    Resources.layer.pipe(
      Layer.provide(Admission.layer),
      Layer.provide(Secrets.layer),
      Layer.provide(SecretCipher.layer(testSecretKey))
    ),
    BudgetService.layer
  ).pipe(Layer.provideMerge(base))
}

const owner = (uid: string, namespace: string, labels: Record<string, string> = {}): LedgerOwner => ({
  uid,
  namespace,
  name: uid,
  kind: "Job",
  labels
})

const createBudget = (name: string, spec: Record<string, unknown>) =>
  Effect.flatMap(
    Resources,
    (resources) =>
      resources.create(budgetRef, undefined, {
        apiVersion: budgetRef.apiVersion,
        kind: "Budget",
        metadata: { name },
        spec
      }, writeOptions)
  )

const readBudget = (name: string) =>
  Effect.flatMap(Resources, (resources) => resources.get(budgetRef, undefined, name)) as Effect.Effect<
    ResourceObject & { status: any },
    unknown,
    Resources
  >

/** Lets the change feed's follower run until `check` holds (the service follows the store asynchronously). */
const settled = <R>(what: string, check: Effect.Effect<boolean, never, R>) =>
  Effect.gen(function*() {
    for (let round = 0; round < 1_000; round++) {
      if (yield* check) return
      yield* Effect.yieldNow
    }
    assert.fail(`${what}: never happened`)
  })

const roomsOf = (target: { readonly namespace: string; readonly labels: Record<string, string> }) =>
  Effect.gen(function*() {
    const budgets = yield* BudgetService
    const ledger = yield* LedgerService
    return yield* ledger.read((current: Ledger) => budgets.roomsFor(current, target, march))
  })

/** A reader of the outbox: each run answers the records made since its last run. */
const outboxReader = Effect.gen(function*() {
  const outbox = yield* EventOutbox
  let after = ""
  return Effect.gen(function*() {
    const entries = yield* Effect.orDie(outbox.read(after, 1_000, 0))
    if (entries.length > 0) after = entries[entries.length - 1]!.id
    return entries.map((entry) => entry.event)
  })
})

/** A test on a fresh store at mid-March, over the services. */
const inMarch = <A, E>(
  body: Effect.Effect<A, E, BudgetService | LedgerService | Resources | EventOutbox | Scope.Scope>
) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(march)
    const store = yield* MemoryStore.make
    return yield* body.pipe(Effect.provide(servicesOver(store)))
  })

const reconcile = Effect.gen(function*() {
  const budgets = yield* BudgetService
  const resources = yield* Resources
  yield* budgets.reconcile(budgetStatusWriter(resources, group))
})

describe("BudgetService", () => {
  it.effect("status counts registered owners' spending and holds; thresholds once per period; the period rolls over", () =>
    inMarch(Effect.gen(function*() {
      const events = yield* outboxReader
      const budgets = yield* BudgetService
      const ledger = yield* LedgerService
      yield* createBudget("team", {
        amountUSD: "10",
        period: "Monthly",
        selector: { projects: ["ml"] },
        thresholds: [50, 80]
      })
      yield* budgets.registerOwner(owner("job-1", "ml"))
      yield* budgets.registerOwner(owner("job-2", "web"))
      yield* ledger.update((current) => {
        current.hold("hold/1", march, { hold: "h1", owner: "job-1", amount: usd(4), expiresAt: march + 7_200_000 })
        current.capture("capture/1", march, { hold: "h1", owner: "job-1", segment: "Running", amount: usd(3) })
        current.hold("hold/2", march, { hold: "h2", owner: "job-2", amount: usd(5), expiresAt: march + 7_200_000 })
        current.capture("capture/2", march, { hold: "h2", owner: "job-2", segment: "Running", amount: usd(5) })
      })
      yield* settled(
        "the Budget is followed",
        Effect.map(roomsOf({ namespace: "ml", labels: {} }), (rooms) => rooms.length === 1)
      )
      yield* reconcile
      let budget = yield* readBudget("team")
      assert.deepInclude(budget.status, {
        spentUSD: "3",
        heldUSD: "1",
        periodStart: "2026-03-01T00:00:00.000Z",
        periodEnd: "2026-04-01T00:00:00.000Z",
        thresholdsCrossed: [],
        observedGeneration: 1
      })
      assert.deepInclude(budget.status.conditions[0], { type: "Exceeded", status: "False", reason: "WithinAmount" })
      // 5.5 USD spent (1 from the hold, 1.5 from the balance): 50 % crossed, once however often the loop runs.
      yield* ledger.update((current) =>
        current.capture("capture/3", march + 1_000, {
          hold: "h1",
          owner: "job-1",
          segment: "Running",
          amount: usd(2.5)
        })
      )
      yield* reconcile
      yield* reconcile
      budget = yield* readBudget("team")
      assert.deepInclude(budget.status, { spentUSD: "5.5", heldUSD: "0", thresholdsCrossed: [50] })
      // Nothing moved: a pass writes nothing.
      yield* reconcile
      assert.strictEqual((yield* readBudget("team")).metadata.resourceVersion, budget.metadata.resourceVersion)
      const crossed = yield* events
      assert.deepStrictEqual(
        crossed.map((event) => [event.type, event.data.event.reason, event.data.object.metadata.name]),
        [["budget.threshold", "ThresholdCrossed", "team"]]
      )
      assert.match(crossed[0]!.data.event.message, /crossed 50% of 10 USD.*5\.5 USD spent/u)
      assert.strictEqual(crossed[0]!.data.object.metadata.namespace, undefined)
      // April: a new period, nothing spent in it yet, the thresholds start over.
      const april = Date.parse("2026-04-02T00:00:00.000Z")
      yield* TestClock.setTime(april)
      yield* reconcile
      budget = yield* readBudget("team")
      assert.deepInclude(budget.status, {
        spentUSD: "0",
        periodStart: "2026-04-01T00:00:00.000Z",
        periodEnd: "2026-05-01T00:00:00.000Z",
        thresholdsCrossed: []
      })
      yield* ledger.update((current) =>
        current.capture("capture/4", april, { hold: undefined, owner: "job-1", segment: "Running", amount: usd(8.5) })
      )
      yield* reconcile
      budget = yield* readBudget("team")
      assert.deepInclude(budget.status, { spentUSD: "8.5", thresholdsCrossed: [50, 80] })
      const aprilEvents = yield* events
      assert.deepStrictEqual(aprilEvents.map((event) => event.data.event.message.match(/crossed (\d+)%/u)?.[1]), [
        "50",
        "80"
      ])
    })))

  it.effect("roomsFor matches by project and labels, follows spec changes, and a Notify Budget limits nothing", () =>
    inMarch(Effect.gen(function*() {
      const budgets = yield* BudgetService
      const ledger = yield* LedgerService
      yield* createBudget("ml-only", { amountUSD: "10", period: "Monthly", selector: { projects: ["ml"] } })
      yield* createBudget("vision", { amountUSD: "20", period: "Daily", selector: { labels: { team: "vision" } } })
      yield* createBudget("watch", { amountUSD: "1", period: "Total", action: "Notify" })
      yield* budgets.registerOwner(owner("job-1", "ml", { team: "vision" }))
      yield* ledger.update((current) =>
        current.capture("c", march, { hold: undefined, owner: "job-1", segment: "Boot", amount: usd(3) })
      )
      const both = { namespace: "ml", labels: { team: "vision" } }
      yield* settled("every Budget is followed", Effect.map(roomsOf(both), (rooms) => rooms.length === 2))
      const named = (rooms: ReadonlyArray<{ readonly name: string; readonly room: bigint }>) =>
        Object.fromEntries(rooms.map((room) => [room.name, room.room]))
      assert.deepStrictEqual(named(yield* roomsOf(both)), { "ml-only": usd(7), vision: usd(17) })
      assert.deepStrictEqual(named(yield* roomsOf({ namespace: "ml", labels: {} })), { "ml-only": usd(7) })
      assert.deepStrictEqual(named(yield* roomsOf({ namespace: "web", labels: { team: "vision", other: "x" } })), {
        vision: usd(17)
      })
      assert.deepStrictEqual(yield* roomsOf({ namespace: "web", labels: {} }), [])
      // An owner whose labels change leaves the label Budget's usage.
      yield* budgets.registerOwner(owner("job-1", "ml", { team: "audio" }))
      assert.deepStrictEqual(named(yield* roomsOf(both)), { "ml-only": usd(7), vision: usd(20) })
      // A spec change (the amount lowered) reaches the rooms through the change feed.
      const resources = yield* Resources
      const current = yield* readBudget("ml-only")
      yield* resources.replace(budgetRef, undefined, "ml-only", {
        ...current,
        spec: { ...(current.spec as object), amountUSD: "2" }
      }, writeOptions)
      yield* settled(
        "the new amount is followed",
        Effect.map(roomsOf(both), (rooms) => named(rooms)["ml-only"] === usd(-1))
      )
    })))

  it.effect("refused records budget.exceeded once per Budget, object and period", () =>
    inMarch(Effect.gen(function*() {
      const events = yield* outboxReader
      const budgets = yield* BudgetService
      yield* createBudget("team", { amountUSD: "1", period: "Daily" })
      yield* settled(
        "the Budget is followed",
        Effect.map(roomsOf({ namespace: "ml", labels: {} }), (rooms) => rooms.length === 1)
      )
      const job = { kind: "Job", namespace: "ml", name: "train" }
      yield* budgets.refused("team", job, "the first hold of 2 USD does not fit 1 USD.")
      yield* budgets.refused("team", job, "the first hold of 2 USD does not fit 1 USD.")
      yield* budgets.refused("team", { ...job, name: "other" }, "again.")
      yield* budgets.refused("nobody", job, "no such Budget.")
      yield* TestClock.setTime(march + 86_400_000)
      yield* budgets.refused("team", job, "the next day.")
      const published = yield* events
      assert.deepStrictEqual(
        published.map((
          event
        ) => [event.type, event.data.event.reason, event.data.object.kind, event.data.object.metadata.name]),
        [
          ["budget.exceeded", "BudgetExceeded", "Budget", "team"],
          ["budget.exceeded", "BudgetExceeded", "Budget", "team"],
          ["budget.exceeded", "BudgetExceeded", "Budget", "team"]
        ]
      )
      assert.strictEqual(
        published[0]!.data.event.message,
        "Budget team refused a new run of Job ml/train: the first hold of 2 USD does not fit 1 USD."
      )
      assert.match(published[2]!.data.event.message, /the next day/u)
    })))

  it.effect("a restarted service still counts the charges of an owner whose object is gone", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(march)
      const store = yield* MemoryStore.make
      const target = { namespace: "ml", labels: {} }
      yield* Effect.gen(function*() {
        const budgets = yield* BudgetService
        const ledger = yield* LedgerService
        yield* createBudget("team", { amountUSD: "10", period: "Monthly" })
        yield* budgets.registerOwner(owner("gone-job", "ml"))
        yield* ledger.update((current) =>
          current.capture("c", march, { hold: undefined, owner: "gone-job", segment: "Running", amount: usd(4) })
        )
      }).pipe(Effect.provide(servicesOver(store)))
      const record = yield* store.records(ownersTable, "", 10, march)
      assert.deepStrictEqual(record, [{
        id: "gone-job",
        value: { namespace: "ml", name: "gone-job", kind: "Job", labels: {} }
      }])
      // A second build over the same store: no Job object exists, the owner record and the postings do.
      const rooms = yield* Effect.provide(roomsOf(target), servicesOver(store))
      assert.deepStrictEqual(rooms.map((room) => [room.name, room.room]), [["team", usd(6)]])
    }))
})

describe("Budgets in the server", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("the status loop writes a new Budget's status", async () => {
    const created = await request(server, "POST", `${v1}/budgets`, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Budget",
        metadata: { name: "org" },
        spec: { amountUSD: "50", period: "Weekly", thresholds: [80] }
      }
    })
    assert.strictEqual(created.status, 201, created.text)
    const budget = await eventually(
      "the Budget's status",
      () => request(server, "GET", `${v1}/budgets/org`),
      { until: (reply) => reply.body?.status?.spentUSD !== undefined }
    )
    assert.deepInclude(budget.body.status, {
      spentUSD: "0",
      heldUSD: "0",
      thresholdsCrossed: [],
      observedGeneration: 1
    })
    assert.match(budget.body.status.periodStart, /T00:00:00.000Z$/u)
    assert.strictEqual(new Date(budget.body.status.periodStart).getUTCDay(), 1)
    assert.strictEqual(
      Date.parse(budget.body.status.periodEnd) - Date.parse(budget.body.status.periodStart),
      7 * 86_400_000
    )
  })
})
