/**
 * Acceptance: the money rows of a Sandbox's table on a live host (docs/kinds/Sandbox.md, "The machine") — real
 * bubblewrap boxes, the in-process agent, the server's ledger: maxCostUSD reached stops it (Stopped, MaxCostReached,
 * /workspace saved) and raising the cap starts it again; funds running out stops it (FundingLost) and a TopUp starts
 * it again.
 *
 * A hold pays an hour ahead and a run is told to stop only when what is held pays for less than ten minutes more
 * (docs/billing.md, "Holds and funding"), whatever the rate: on the wall clock a cap or the credits bind about fifty
 * minutes after the start. So these tests move the wall clock of this process — the server and its agent run in it,
 * and read Date.now() for every fact, lease, settle and step — past that hour at once; the boxes themselves never
 * read it. Everything else (timers, the boxes, the snapshots) runs in real time.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { vi } from "vitest"
import { formatMicroUsd, parseMicroUsd } from "../../src/core/Money.ts"
import { request, startTestServer, type TestServer, type TestServerOptions } from "../support/TestServer.ts"
import { eventually } from "./Clients.ts"

const namespace = "money"
const minute = 60_000
const hour = 60 * minute
const sandboxes = `/apis/nodus.dev/v1/namespaces/${namespace}/sandboxes`
const at = (name: string) => `${sandboxes}/${name}`

let server: TestServer | undefined

/**
 * A server whose Node's lease outlasts the jump (a lease lapsing would lose the box: NodeLost, not the row under test),
 * on a wall clock the test may move forward.
 */
const start = async (options: TestServerOptions = {}) => {
  vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true })
  server = await startTestServer({ local: { lease: { renewMs: 1_000, expiryMs: 3 * hour } }, ...options })
  const reply = await request(server, "POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } } })
  assert.strictEqual(reply.status, 201, reply.text)
  return server
}

afterEach(async () => {
  await server?.stop()
  server = undefined
  // Only once no server runs: real time is behind the moved clock.
  vi.useRealTimers()
})

const sandbox = (name: string, spec: Record<string, unknown> = {}) =>
  ({ apiVersion: "nodus.dev/v1", kind: "Sandbox", metadata: { name }, spec: { image: "debian:12", lifecycle: { idleTimeout: "0s" }, ...spec } })

const statusOf = async (name: string) => (await request(server!, "GET", at(name))).body?.status

const conditionOf = (status: any, type: string) => (status?.conditions ?? []).find((condition: any) => condition.type === type)

const patch = async (name: string, body: unknown) => {
  const reply = await request(server!, "PATCH", at(name), { body, contentType: "application/merge-patch+json" })
  assert.strictEqual(reply.status, 200, reply.text)
}

const run = async (name: string, script: string) => {
  const reply = await request(server!, "POST", `${at(name)}/commands`, { body: { command: ["sh", "-c", script] } })
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body.stdout as string
}

/** The estimate a dry run of the Sandbox gives: its first hold and rate in micro-USD. */
const estimateOf = async (name: string) => {
  const dry = await request(server!, "POST", `${sandboxes}?dryRun=All`, { body: sandbox(name) })
  assert.strictEqual(dry.status, 201, dry.text)
  const estimate = dry.body.status.estimate
  return { hold: parseMicroUsd(estimate.holdUSD), rate: parseMicroUsd(estimate.rateUSDPerHour) }
}

const streamedTypes = async () => (await server!.streamed()).map((event) => event.type).filter((type) => type.startsWith("sandbox."))

/**
 * Waits for the box's hold to be placed and moves the clock to five minutes before the money held stops paying: the
 * next settle finds it cannot top the hold up and tells the box to stop by then.
 */
const nearFundedEdge = async (name: string) => {
  await eventually(`${name}'s hold says how long it pays`, async () => (await statusOf(name))?.cost?.fundedUntilTime !== undefined, 30_000)
  const fundedUntil = Date.parse((await statusOf(name)).cost.fundedUntilTime)
  // Nothing stops it early on the wall clock: the first hold pays for the best part of an hour.
  assert.isAbove(fundedUntil, Date.now() + 45 * minute)
  vi.setSystemTime(fundedUntil - 5 * minute)
}

/** Stopped for money: /workspace saved by the stop, Funded False with the reason, the events recorded. */
const assertMoneyStop = async (name: string, reason: "MaxCostReached" | "FundingLost", jumpedAt: number) => {
  await eventually(`${name} stops for ${reason}`, async () => (await statusOf(name))?.phase === "Stopped", 30_000)
  const status = await statusOf(name)
  assert.strictEqual(status.stopReason, reason)
  assert.deepInclude(conditionOf(status, "Funded"), { status: "False", reason })
  assert.strictEqual(status.snapshot?.reason, "Stop")
  assert.isAtLeast(Date.parse(status.snapshot.time), jumpedAt)
  assert.deepInclude(conditionOf(status, "StateSaved"), { status: "True" })
  return status
}

describe("a Sandbox and money on a live host", () => {
  it("stops at maxCostUSD with /workspace saved, and starts again when the cap is raised", async () => {
    await start()
    const { hold, rate } = await estimateOf("capped")
    // The cap pays the first hold and a minute more: the box runs until the held hour is nearly spent.
    const cap = hold + rate / 60n
    const created = await request(server!, "POST", sandboxes, { body: sandbox("capped", { maxCostUSD: formatMicroUsd(cap) }) })
    assert.strictEqual(created.status, 201, created.text)
    await eventually("capped runs", async () => (await statusOf("capped"))?.phase === "Running", 30_000)
    assert.deepInclude(conditionOf(await statusOf("capped"), "Funded"), { status: "True" })
    await run("capped", "echo kept > /workspace/note")

    await nearFundedEdge("capped")
    const jumpedAt = Date.now()
    const stopped = await assertMoneyStop("capped", "MaxCostReached", jumpedAt)
    assert.isTrue(parseMicroUsd(stopped.cost.totalUSD) <= cap, `${stopped.cost.totalUSD} USD spent, above the cap`)
    assert.deepStrictEqual(await streamedTypes(), ["sandbox.started", "sandbox.max_cost_reached", "sandbox.stopped"])
    const refused = await request(server!, "POST", `${at("capped")}/commands`, { body: { command: ["true"] } })
    assert.strictEqual(refused.status, 409, refused.text)

    // The stop was not its owner's: raising the cap starts it again by itself, from the saved /workspace.
    await patch("capped", { spec: { maxCostUSD: formatMicroUsd(cap + hold * 4n) } })
    await eventually("capped runs again", async () => (await statusOf("capped"))?.phase === "Running", 30_000)
    const again = await statusOf("capped")
    assert.strictEqual(again.attempt.epoch, 2)
    assert.isUndefined(again.stopReason)
    assert.deepInclude(conditionOf(again, "Funded"), { status: "True" })
    assert.strictEqual(await run("capped", "cat /workspace/note"), "kept\n")
    assert.deepStrictEqual(await streamedTypes(), ["sandbox.started", "sandbox.max_cost_reached", "sandbox.stopped", "sandbox.funding_restored", "sandbox.started"])
  }, 120_000)
})
