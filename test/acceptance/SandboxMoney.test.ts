/**
 * Acceptance: the money rows of a Sandbox's table on a live host (docs/kinds/Sandbox.md, "The machine") — real
 * bubblewrap boxes, the in-process agent, the server's ledger: maxCostUSD reached stops it (Stopped, MaxCostReached,
 * /workspace saved) and raising the cap starts it again; without credits its create is refused (InsufficientCredits),
 * and once credits paid for it, their running out stops it (FundingLost, /workspace saved) and a TopUp starts it again.
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
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer, type TestServerOptions } from "../support/TestServer.ts"

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
  const reply = await request(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
  return server
}

afterEach(async () => {
  await server?.stop()
  server = undefined
  // Only once no server runs: real time is behind the moved clock.
  vi.useRealTimers()
})

const sandbox = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Sandbox",
  metadata: { name },
  spec: { image: "debian:12", lifecycle: { idleTimeout: "0s" }, ...spec }
})

const statusOf = async (name: string) => (await request(server!, "GET", at(name))).body?.status

const conditionOf = (status: any, type: string) =>
  (status?.conditions ?? []).find((condition: any) => condition.type === type)

const patch = async (name: string, body: unknown) => {
  const reply = await request(server!, "PATCH", at(name), { body, contentType: "application/merge-patch+json" })
  assert.strictEqual(reply.status, 200, reply.text)
}

const run = async (name: string, script: string) => {
  const reply = await request(server!, "POST", `${at(name)}/commands`, { body: { command: ["sh", "-c", script] } })
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body.stdout as string
}

/** The estimate a dry run of the Sandbox gives: its first hold and rate in micro-USD, and its blocking codes. */
const estimateOf = async (name: string) => {
  const dry = await request(server!, "POST", `${sandboxes}?dryRun=All`, { body: sandbox(name) })
  assert.strictEqual(dry.status, 201, dry.text)
  const estimate = dry.body.status.estimate
  const blocking: ReadonlyArray<string> = (estimate.blockingReasons ?? []).map((reason: { readonly code: string }) =>
    reason.code
  )
  return { hold: parseMicroUsd(estimate.holdUSD), rate: parseMicroUsd(estimate.rateUSDPerHour), blocking }
}

/** Credits through a TopUp (the embedded payment processor pays it at once). */
const topUp = async (name: string, micro: bigint) => {
  const paid = await request(server!, "POST", "/apis/nodus.dev/v1/topups", {
    body: { apiVersion: "nodus.dev/v1", kind: "TopUp", metadata: { name }, spec: { amountUSD: formatMicroUsd(micro) } }
  })
  assert.strictEqual(paid.status, 201, paid.text)
  assert.strictEqual(paid.body.status.phase, "Succeeded", paid.text)
}

const streamedTypes = async () =>
  (await server!.streamed()).map((event) => event.type).filter((type) => type.startsWith("sandbox."))

/** Creates the Sandbox and waits for it to run, funded; it writes a file to /workspace. */
const createRunning = async (name: string, spec: Record<string, unknown> = {}) => {
  const created = await request(server!, "POST", sandboxes, { body: sandbox(name, spec) })
  assert.strictEqual(created.status, 201, created.text)
  await eventually(`${name} runs`, async () => (await statusOf(name))?.phase === "Running", { timeoutMs: 30_000 })
  assert.deepInclude(conditionOf(await statusOf(name), "Funded"), { status: "True" })
  await run(name, "echo kept > /workspace/note")
}

/**
 * Waits for the box's hold to be placed and moves the clock to five minutes before the money held stops paying: the
 * next settle finds it cannot top the hold up and tells the box to stop by then. It must stop with /workspace saved by
 * that stop, Funded False with the reason, the events recorded, and no more spent than `limit`.
 */
const stopsForMoney = async (name: string, reason: "MaxCostReached" | "FundingLost", limit: bigint) => {
  await eventually(
    `${name}'s hold says how long it pays`,
    async () => (await statusOf(name))?.cost?.fundedUntilTime !== undefined,
    { timeoutMs: 30_000 }
  )
  const fundedUntil = Date.parse((await statusOf(name)).cost.fundedUntilTime)
  // Nothing stops it early on the wall clock: the first hold pays for the best part of an hour.
  assert.isAbove(fundedUntil, Date.now() + 45 * minute)
  vi.setSystemTime(fundedUntil - 5 * minute)
  const jumpedAt = Date.now()
  await eventually(`${name} stops for ${reason}`, async () => (await statusOf(name))?.phase === "Stopped", {
    timeoutMs: 30_000
  })
  const status = await statusOf(name)
  assert.strictEqual(status.stopReason, reason)
  assert.deepInclude(conditionOf(status, "Funded"), { status: "False", reason })
  assert.strictEqual(status.snapshot?.reason, "Stop")
  assert.isAtLeast(Date.parse(status.snapshot.time), jumpedAt)
  assert.deepInclude(conditionOf(status, "StateSaved"), { status: "True" })
  assert.isTrue(
    parseMicroUsd(status.cost.totalUSD) <= limit,
    `${status.cost.totalUSD} USD spent, above ${formatMicroUsd(limit)}`
  )
  const lost = reason === "MaxCostReached" ? "sandbox.max_cost_reached" : "sandbox.funding_lost"
  assert.deepStrictEqual(await streamedTypes(), ["sandbox.started", lost, "sandbox.stopped"])
  const refused = await request(server!, "POST", `${at(name)}/commands`, { body: { command: ["true"] } })
  assert.strictEqual(refused.status, 409, refused.text)
  return lost
}

/**
 * The stop was not its owner's: once money allows, it starts again by itself (a new epoch), from the saved /workspace.
 */
const startsAgain = async (name: string, lost: string) => {
  await eventually(`${name} runs again`, async () => (await statusOf(name))?.phase === "Running", { timeoutMs: 30_000 })
  const again = await statusOf(name)
  assert.strictEqual(again.attempt.epoch, 2)
  assert.isUndefined(again.stopReason)
  assert.deepInclude(conditionOf(again, "Funded"), { status: "True" })
  assert.strictEqual(await run(name, "cat /workspace/note"), "kept\n")
  assert.deepStrictEqual(await streamedTypes(), [
    "sandbox.started",
    lost,
    "sandbox.stopped",
    "sandbox.funding_restored",
    "sandbox.started"
  ])
}

describe("a Sandbox and money on a live host", () => {
  it("stops at maxCostUSD with /workspace saved, and starts again when the cap is raised", async () => {
    await start()
    const { hold, rate } = await estimateOf("capped")
    // The cap pays the first hold and a minute more: the box runs until the held hour is nearly spent.
    const cap = hold + rate / 60n
    await createRunning("capped", { maxCostUSD: formatMicroUsd(cap) })
    const lost = await stopsForMoney("capped", "MaxCostReached", cap)
    await patch("capped", { spec: { maxCostUSD: formatMicroUsd(cap + hold * 4n) } })
    await startsAgain("capped", lost)
  }, 120_000)

  it(
    "is refused without credits, stops when they run out (FundingLost, /workspace saved), and starts again on a TopUp",
    async () => {
      await start({ starterCreditsMicro: 0n })
      const { hold, rate, blocking } = await estimateOf("broke")
      assert.include(blocking, "InsufficientCredits")
      const refused = await request(server!, "POST", sandboxes, { body: sandbox("broke") })
      assert.strictEqual(refused.status, 402, refused.text)
      assert.strictEqual(refused.body.reason, "InsufficientCredits")
      assert.include(refused.body.fix, "TopUp")
      // Credits for the first hold and a minute more: the box runs until the held hour is nearly spent.
      const credits = hold + rate / 60n
      await topUp("first", credits)
      await createRunning("broke")
      const lost = await stopsForMoney("broke", "FundingLost", credits)
      await topUp("second", hold * 4n)
      await startsAgain("broke", lost)
    },
    120_000
  )
})
