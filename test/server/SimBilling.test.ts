/**
 * The sim backend bills its runs on the server's ledger (docs/billing.md, "In the server"): every hold and charge is a
 * stored posting before the Job's status shows it, status.cost is a copy of those postings, a deleted Job's holds close
 * with its teardown charged, funding runs out as in the headless simulator, a restart over the same store charges
 * nothing twice, and the account events (billing.low_balance, billing.arrears_posted) reach the event stream.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Ledger } from "../../src/core/billing/Ledger.ts"
import { parseMicroUsd } from "../../src/core/Money.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { createJob, createProject, jobPath, mergePatch, v1 } from "../apiserver/api/Support.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

const advance = async (server: TestServer, by: string): Promise<void> => {
  const reply = await request(server, "POST", `${v1}/simulation/clock`, { body: { advance: by } })
  assert.strictEqual(reply.status, 200, reply.text)
}

const readJob = async (server: TestServer, project: string, name: string): Promise<any> => {
  const reply = await request(server, "GET", jobPath(project, name))
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body
}

/** The ledger as the store has it: every stored posting replayed (the server's own ledger is not consulted). */
const storedLedger = async (store: Store["Service"]): Promise<Ledger> =>
  Ledger.replay(await Effect.runPromise(store.postings(0, 1_000_000)))

const openHoldsOf = (ledger: Ledger, owner: string) => [...ledger.openHolds].filter((hold) => hold.owner === owner)

/** credits = available + held + charged − arrears (docs/billing.md, "The identity"). */
const assertIdentity = (ledger: Ledger) =>
  assert.strictEqual(ledger.credits, ledger.available + ledger.held + ledger.charged - ledger.arrears)

const duration = (value: string) => ({ annotations: { "sim.nodus.dev/duration": value } })

/** Eight H100s: about 20 to 40 USD an hour, so the 100 USD starter credits run out within hours. */
const bigGpus = { resources: { gpu: { type: ["H100"], count: 8 } }, placement: { interruptible: "Never" } }

/** One H100: a few USD an hour. */
const oneGpu = { resources: { gpu: { type: ["H100"], count: 1 } }, placement: { interruptible: "Never" } }

const startOver = (store: Store["Service"], starterCreditsMicro?: bigint) =>
  startTestServer({
    sim: { speed: 1 },
    store: Layer.succeed(Store, store),
    ...(starterCreditsMicro === undefined ? {} : { starterCreditsMicro })
  })

describe("the sim backend's billing", () => {
  let store: Store["Service"]
  let server: TestServer
  beforeAll(async () => {
    store = await Effect.runPromise(MemoryStore.make)
    server = await startOver(store)
    await createProject(server, "bill")
  })
  afterAll(() => server.stop())

  it("a finished Job's status.cost equals its stored charges, and every hold it had is closed", async () => {
    const created = await createJob(server, "bill", "short", duration("30m"))
    await advance(server, "2h")
    const job = await readJob(server, "bill", "short")
    assert.strictEqual(job.status.phase, "Succeeded", JSON.stringify(job.status))
    const cost = job.status.cost
    assert.isTrue(cost.final, JSON.stringify(cost))
    const ledger = await storedLedger(store)
    const charges = ledger.chargesFor(created.metadata.uid)
    assert.isAbove(Number(charges.total), 0)
    assert.strictEqual(parseMicroUsd(cost.totalUSD), charges.total)
    assert.strictEqual(parseMicroUsd(cost.bySegment.runningUSD), charges.bySegment.Running)
    assert.strictEqual(parseMicroUsd(cost.bySegment.bootUSD), charges.bySegment.Boot)
    assert.strictEqual(parseMicroUsd(cost.bySegment.teardownUSD), charges.bySegment.Teardown)
    assert.deepStrictEqual(openHoldsOf(ledger, created.metadata.uid), [])
    assertIdentity(ledger)
    // 30 minutes of work, charged per increment: at least half an hour at the placed rate.
    const rate = parseMicroUsd(job.status.placement.rateUSDPerHour)
    assert.isAtLeast(Number(charges.bySegment.Running), Number(rate) / 2 - 1)
  })

  it("a Job deleted while it runs is charged up to its stop and its teardown, and its holds close", async () => {
    const created = await createJob(server, "bill", "doomed", duration("5h"))
    await advance(server, "20m")
    const running = await readJob(server, "bill", "doomed")
    assert.strictEqual(running.status.phase, "Running", JSON.stringify(running.status))
    const before = (await storedLedger(store)).chargesFor(created.metadata.uid).total
    const deleted = await request(server, "DELETE", jobPath("bill", "doomed"))
    assert.strictEqual(deleted.status, 200, deleted.text)
    await advance(server, "30m")
    const ledger = await storedLedger(store)
    assert.deepStrictEqual(openHoldsOf(ledger, created.metadata.uid), [])
    const after = ledger.chargesFor(created.metadata.uid)
    assert.isAbove(Number(after.total), Number(before))
    assert.isAbove(Number(after.bySegment.Teardown), 0)
    assertIdentity(ledger)
  })

  it("a maxCostUSD the Job reaches suspends it with MaxCostReached; raising the cap resumes it", async () => {
    const capped = await createJob(server, "bill", "capped", duration("3h"), { ...oneGpu, maxCostUSD: "4.00" })
    await advance(server, "10h")
    let job = await readJob(server, "bill", "capped")
    if (job.status.phase !== "Suspended") assert.fail(`expected MaxCostReached: ${JSON.stringify(job.status)}`)
    assert.strictEqual(job.status.reason, "MaxCostReached")
    const charged = (await storedLedger(store)).chargesFor(capped.metadata.uid).total
    assert.isAtMost(
      Number(charged),
      4_000_000 + Number(parseMicroUsd(job.status.placement?.rateUSDPerHour ?? "0")) / 60 + 1
    )
    const patched = await mergePatch(server, jobPath("bill", "capped"), { spec: { maxCostUSD: "1000.00" } })
    assert.strictEqual(patched.status, 200, patched.text)
    await advance(server, "6h")
    job = await readJob(server, "bill", "capped")
    assert.notStrictEqual(job.status.reason, "MaxCostReached", JSON.stringify(job.status))
  })
})

describe("the sim backend when the money runs out", () => {
  let store: Store["Service"]
  let server: TestServer
  beforeAll(async () => {
    store = await Effect.runPromise(MemoryStore.make)
    server = await startOver(store)
    await createProject(server, "broke")
  })
  afterAll(() => server.stop())

  it("funding lost: Funded False, the stop by the funded edge, Suspended FundingLost, events in order, and low_balance", async () => {
    const created = await createJob(server, "broke", "train", duration("20h"), bigGpus)
    await advance(server, "12h")
    const job = await readJob(server, "broke", "train")
    assert.strictEqual(job.status.phase, "Suspended", JSON.stringify(job.status))
    assert.strictEqual(job.status.reason, "FundingLost")
    const funded = job.status.conditions.find((condition: any) => condition.type === "Funded")
    assert.strictEqual(funded.status, "False")
    assert.isString(job.status.stopByTime)
    const ledger = await storedLedger(store)
    // The credits went to this Job: nothing held any more, less than one increment of the rate left to spend.
    assert.deepStrictEqual(openHoldsOf(ledger, created.metadata.uid), [])
    assert.strictEqual(parseMicroUsd(job.status.cost.totalUSD), ledger.chargesFor(created.metadata.uid).total)
    assert.isBelow(Number(ledger.available), Number(parseMicroUsd(job.status.placement?.rateUSDPerHour ?? "1000")))
    assertIdentity(ledger)
    const types = (await server.streamed()).map((event) => event.type)
    assert.include(types, "job.funding_lost")
    assert.include(types, "billing.low_balance")
    const low = (await server.streamed()).find((event) => event.type === "billing.low_balance")!
    assert.strictEqual(low.data.object.kind, "Account")
    assert.match(low.data.event.message, /below the warning level of 10 USD/u)
    assert.isBelow(types.indexOf("job.started"), types.indexOf("job.funding_lost"))
  })

  it("a TopUp brings the credits back: funding_restored, and the Job runs to the end on them", async () => {
    const topUp = {
      apiVersion: "nodus.dev/v1",
      kind: "TopUp",
      metadata: { name: "refill" },
      spec: { amountUSD: "500" }
    }
    const paid = await request(server, "POST", `${v1}/topups`, { body: topUp })
    assert.strictEqual(paid.status, 201, paid.text)
    assert.strictEqual(paid.body.status.phase, "Succeeded", paid.text)
    await advance(server, "20h")
    const job = await readJob(server, "broke", "train")
    assert.strictEqual(job.status.phase, "Succeeded", JSON.stringify(job.status))
    assert.isString(job.status.suspendedDuration)
    const types = (await server.streamed()).map((event) => event.type)
    assert.isBelow(types.indexOf("topup.succeeded"), types.indexOf("job.funding_restored"))
    const ledger = await storedLedger(store)
    assert.strictEqual(parseMicroUsd(job.status.cost.totalUSD), ledger.chargesFor(job.metadata.uid).total)
    assert.deepStrictEqual(openHoldsOf(ledger, job.metadata.uid), [])
    assertIdentity(ledger)
  })
})

/**
 * A store where a first server ran a Job for `by` (simulated) and stopped, the Job then in `phase`: the store and its
 * uid.
 */
const ranBefore = async (project: string, name: string, runFor: string, by: string, phase: string) => {
  const store = await Effect.runPromise(MemoryStore.make)
  const first = await startOver(store)
  try {
    await createProject(first, project)
    const uid = (await createJob(first, project, name, duration(runFor))).metadata.uid as string
    await advance(first, by)
    assert.strictEqual((await readJob(first, project, name)).status.phase, phase)
    return { store, uid }
  } finally {
    await first.stop()
  }
}

describe("the sim backend's billing across a restart", () => {
  it("a Job that ran under an earlier process is billed on, and nothing is charged twice", async () => {
    const { store, uid } = await ranBefore("again", "survivor", "40m", "20m", "Running")
    const held = openHoldsOf(await storedLedger(store), uid)
    assert.strictEqual(held.length, 1)
    const second = await startOver(store)
    try {
      await advance(second, "3h")
      const job = await readJob(second, "again", "survivor")
      assert.strictEqual(job.status.phase, "Succeeded", JSON.stringify(job.status))
      const ledger = await storedLedger(store)
      assert.deepStrictEqual(openHoldsOf(ledger, uid), [])
      assert.strictEqual(parseMicroUsd(job.status.cost.totalUSD), ledger.chargesFor(uid).total)
      // The lost run's hold closed once: one Release posting per hold, and each key once (the store refuses twice).
      const postings = await Effect.runPromise(store.postings(0, 1_000_000))
      const releases = postings.filter((posting) => posting.kind === "Release" && posting.hold === held[0]!.id)
      assert.strictEqual(releases.length, 1)
      assertIdentity(ledger)
    } finally {
      await second.stop()
    }
  })
})

describe("status.cost after another process wrote it (issue 29, item 12)", () => {
  it("a cost its previous owner recorded but never posted is written back to the ledger's, for a Job finished before and one finished here", async () => {
    const { store, uid: before } = await ranBefore("late", "earlier", "10m", "1h", "Succeeded")
    // The owner now: one Job finished under the process before, one finishes under this one.
    const second = await startOver(store)
    try {
      const here = (await createJob(second, "late", "here", duration("10m"))).metadata.uid
      await advance(second, "1h")
      for (const [name, uid] of [["earlier", before], ["here", here]] as const) {
        const job = await readJob(second, "late", name)
        assert.strictEqual(job.status.phase, "Succeeded")
        const charged = (await storedLedger(store)).chargesFor(uid).total
        assert.strictEqual(parseMicroUsd(job.status.cost.totalUSD), charged)
        // A step of another process lands after this one took the Job in: its status shows money the ledger lacks
        // (recorded first, its postings refused once the shard had moved).
        const late = await mergePatch(second, `${jobPath("late", name)}/status`, {
          status: { cost: { ...job.status.cost, totalUSD: "4.999999" } }
        })
        assert.strictEqual(late.status, 200, late.text)
        let shown = "4.999999"
        for (let tries = 0; tries < 50 && parseMicroUsd(shown) !== charged; tries++) {
          await advance(second, "1s")
          shown = (await readJob(second, "late", name)).status.cost.totalUSD
        }
        assert.strictEqual(parseMicroUsd(shown), charged, `${name}: status.cost ${shown}, the ledger ${charged}`)
      }
    } finally {
      await second.stop()
    }
  })
})

describe("Budgets in the sim backend", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ sim: { speed: 1 } })
    for (const project of ["team", "other"]) await createProject(server, project)
  })
  afterAll(() => server.stop())

  const budget = (amountUSD: string) => ({
    apiVersion: "nodus.dev/v1",
    kind: "Budget",
    metadata: { name: "team-total" },
    spec: { amountUSD, period: "Total", selector: { projects: ["team"] } }
  })

  it("a create whose first hold does not fit the Budget is refused with BudgetExceeded and budget.exceeded", async () => {
    const created = await request(server, "POST", `${v1}/budgets`, { body: budget("1.00") })
    assert.strictEqual(created.status, 201, created.text)
    const refused = await request(server, "POST", `${v1}/namespaces/team/jobs`, {
      body: { apiVersion: "nodus.dev/v1", kind: "Job", metadata: { name: "big" }, spec: { image: "x", ...oneGpu } }
    })
    assert.strictEqual(refused.status, 402, refused.text)
    assert.strictEqual(refused.body.reason, "BudgetExceeded")
    assert.include(refused.body.message, "Budget team-total has 1 USD left this period")
    const exceeded = (await server.streamed()).filter((event) => event.type === "budget.exceeded")
    assert.strictEqual(exceeded.length, 1)
    assert.strictEqual(exceeded[0]!.data.object.metadata.name, "team-total")
    // Another project is not under this Budget.
    await createJob(server, "other", "big", {}, oneGpu)
  })

  it("running work stops when the Budget's room runs out, and resumes when the Budget is raised", async () => {
    // CPU at 0.20 USD an hour: the first hold fits in 1 USD, five hours do not. (Total: no period ends meanwhile.)
    await createJob(server, "team", "steady", duration("5h"))
    await advance(server, "8h")
    let job = await readJob(server, "team", "steady")
    assert.strictEqual(job.status.phase, "Suspended", JSON.stringify(job.status))
    assert.strictEqual(job.status.reason, "FundingLost")
    assert.include(
      job.status.conditions.find((condition: any) => condition.type === "Funded").message,
      "Budget team-total"
    )
    assert.isAtMost(Number(job.status.cost.totalUSD), 1)
    const current = await request(server, "GET", `${v1}/budgets/team-total`)
    assert.strictEqual(current.status, 200, current.text)
    const raised = await mergePatch(server, `${v1}/budgets/team-total`, { spec: { amountUSD: "50.00" } })
    assert.strictEqual(raised.status, 200, raised.text)
    await advance(server, "8h")
    job = await readJob(server, "team", "steady")
    assert.strictEqual(job.status.phase, "Succeeded", JSON.stringify(job.status))
    const types = (await server.streamed()).map((event) => event.type)
    assert.include(types, "job.funding_restored")
  })
})
