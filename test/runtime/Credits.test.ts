/**
 * Credits arriving over real HTTP (src/runtime/Credits.ts, Payments.ts; docs/billing.md, "Credits"): a TopUp charges
 * the embedded processor and grants its credits once, with a CreditGrant and topup.succeeded; a declined one ends
 * Failed with topup.failed and no credits; the operator refunds (topup.refunded, credits gone) and grants (admin only);
 * an Idempotency-Key retry and a restarted server never grant twice; remainingUSD follows spending, oldest grant first.
 * Faults: a store that fails a read or a commit, and a server that stopped mid-step, leave nothing half done for long.
 */
import { afterAll, afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Option } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Ledger, type Posting } from "../../src/core/billing/Ledger.ts"
import { isObject, type JsonObject } from "../../src/core/Json.ts"
import { errorCodeInfo } from "../../src/core/meta/ErrorCodes.ts"
import { topUpMoveAllowed, type TopUpPhase } from "../../src/runtime/Credits.ts"
import { Payments } from "../../src/runtime/Payments.ts"
import * as Server from "../../src/server/Server.ts"
import { defaultFeedOptions } from "../../src/store/ChangeFeed.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { type ObjectKey, Store, StoreError, type StoreShape, type WriteOp } from "../../src/store/Store.ts"
import { assertStatus, causeFields, createProject, v1 } from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"
import { adminToken, request, startTestServer, type TestServer } from "../support/TestServer.ts"

const topUpsPath = `${v1}/topups`
const grantsPath = `${v1}/creditgrants`
const operatorGrantsPath = `${v1}/operator/creditgrants`
const refundPath = (name: string) => `${v1}/operator/topups/${name}/refund`

const topUp = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: "nodus.dev/v1",
  kind: "TopUp",
  metadata: { name },
  spec
})
const grant = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: "nodus.dev/v1",
  kind: "CreditGrant",
  metadata: { name },
  spec
})

const postingsOf = (store: StoreShape) => Effect.runPromise(store.postings(0, 10_000))
const availableOf = async (store: StoreShape) => Ledger.replay(await postingsOf(store)).available
const grantKeys = async (store: StoreShape) =>
  (await postingsOf(store)).filter((posting) => posting.kind === "Grant").map((posting) => posting.key)
const refundKeys = async (store: StoreShape) =>
  (await postingsOf(store)).filter((posting) => posting.kind === "Refund").map((posting) => posting.key)
/** The state of the embedded processor's charge under `uid` (docs/billing.md: its record table `payments`). */
const chargeStateOf = async (store: StoreShape, uid: string) => {
  const record = await Effect.runPromise(store.getRecord("payments", uid, 0))
  return Option.isSome(record) ? (record.value as { state?: string }).state : undefined
}

/** A TopUp (uid `uid-<name>`) as a server that stopped left it in the store, with the status it had written. */
const storedTopUp = (name: string, amountUSD: string, status?: JsonObject): WriteOp => ({
  _tag: "Create",
  key: { resource: "topups", namespace: "", name },
  object: {
    apiVersion: "nodus.dev/v1",
    kind: "TopUp",
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: "0",
      generation: 1,
      creationTimestamp: "2026-01-01T00:00:00Z"
    },
    spec: { amountUSD },
    ...(status === undefined ? {} : { status })
  }
})

/** The embedded processor's record of a charge that settled under `uid`. */
const settledCharge = (uid: string, amountMicro: bigint): WriteOp => ({
  _tag: "PutRecord",
  table: "payments",
  id: uid,
  value: { state: "Settled", amountMicro: String(amountMicro), method: "pm_test_visa", at: 0 }
})

const phaseAt = async (server: TestServer, name: string) =>
  (await request(server, "GET", `${topUpsPath}/${name}`)).body.status?.phase

/** A key with billing:read and billing:write in project `p`, but not admin. */
const payerKey = async (server: TestServer): Promise<string> => {
  await createProject(server, "p")
  const account = await request(server, "POST", `${v1}/namespaces/p/serviceaccounts`, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "ServiceAccount",
      metadata: { name: "payer" },
      spec: { scopes: ["billing:read", "billing:write"] }
    }
  })
  assert.strictEqual(account.status, 201, account.text)
  const issued = await request(server, "POST", `${v1}/namespaces/p/serviceaccounts/payer/tokens`, { body: {} })
  assert.strictEqual(issued.status, 201, issued.text)
  return issued.body.status.token
}

describe("TopUps and CreditGrants", () => {
  let server: TestServer
  let store: StoreShape
  let payer: string
  beforeAll(async () => {
    store = await Effect.runPromise(MemoryStore.make)
    server = await startTestServer({ store: Layer.succeed(Store, store) })
    payer = await payerKey(server)
  })
  afterAll(() => server.stop())

  it("the starter credits show as the CreditGrant starter", async () => {
    const starter = await request(server, "GET", `${grantsPath}/starter`)
    assert.strictEqual(starter.status, 200, starter.text)
    assert.deepStrictEqual(starter.body.spec.amountUSD, "100")
    assert.strictEqual(starter.body.spec.source, "Starter")
    assert.deepStrictEqual({ remainingUSD: starter.body.status.remainingUSD, phase: starter.body.status.phase }, {
      remainingUSD: "100",
      phase: "Active"
    })
  })

  it("a TopUp settles at once: credits in the ledger, a CreditGrant, topup.succeeded", async () => {
    const before = await availableOf(store)
    const created = await request(server, "POST", topUpsPath, {
      body: topUp("fifty", { amountUSD: "50" }),
      token: payer
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.status.phase, "Succeeded", created.text)
    assert.strictEqual(created.body.status.creditGrant, "topup-fifty")
    assert.isString(created.body.status.completionTime)
    assert.deepStrictEqual(
      created.body.status.conditions.map((condition: any) => [condition.type, condition.status, condition.reason]),
      [["Paid", "True", "PaymentSettled"]]
    )
    assert.strictEqual(await availableOf(store), before + 50_000_000n)
    const shown = await request(server, "GET", `${grantsPath}/topup-fifty`, { token: payer })
    assert.strictEqual(shown.status, 200, shown.text)
    assert.deepStrictEqual([
      shown.body.spec.amountUSD,
      shown.body.spec.source,
      shown.body.status.remainingUSD,
      shown.body.status.phase
    ], ["50", "TopUp", "50", "Active"])
    const event = await eventually(
      "topup.succeeded",
      async () => (await server.streamed()).find((entry) => entry.type === "topup.succeeded"),
      { until: (found) => found !== undefined }
    )
    assert.deepStrictEqual(event!.data.object.metadata, { name: "fifty", uid: created.body.metadata.uid })
    assert.strictEqual(event!.data.object.status["phase"], "Succeeded")
  })

  it("a TopUp whose name is too long for its grant's name is named by its uid, and the grant says so", async () => {
    // 251 characters, a valid object name; "topup-" and it would pass the 253 an object name may have.
    const name = ["a", "b", "c", "d"].map((label) => label.repeat(62)).join(".")
    const created = await request(server, "POST", topUpsPath, { body: topUp(name, { amountUSD: "1" }) })
    assert.strictEqual(created.status, 201, created.text)
    const uid = created.body.metadata.uid
    assert.strictEqual(created.body.status.creditGrant, `topup-${uid}`)
    const shown = await request(server, "GET", `${grantsPath}/topup-${uid}`)
    assert.strictEqual(shown.body.spec.reason, `Paid by the TopUp whose uid is ${uid}.`)
  })

  it("a declined payment ends Failed with topup.failed, and grants nothing", async () => {
    const before = await grantKeys(store)
    const created = await request(server, "POST", topUpsPath, {
      body: topUp("declined", { amountUSD: "20", paymentMethod: "pm_test_declined" })
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.strictEqual(created.body.status.phase, "Failed", created.text)
    assert.match(created.body.status.failureReason, /declined/u)
    assert.deepStrictEqual(await grantKeys(store), before)
    assert.strictEqual((await request(server, "GET", `${grantsPath}/topup-declined`)).status, 404)
    const event = await eventually(
      "topup.failed",
      async () => (await server.streamed()).find((entry) => entry.type === "topup.failed"),
      { until: (found) => found !== undefined }
    )
    assert.strictEqual(event!.data.object.metadata.name, "declined")
  })

  it("the operator refunds a Succeeded TopUp: Refunded, topup.refunded, its credits gone", async () => {
    await request(server, "POST", topUpsPath, { body: topUp("back", { amountUSD: "30" }) })
    const before = await availableOf(store)
    assertStatus(server, await request(server, "POST", refundPath("back"), { token: payer }), 403, "Forbidden")
    const refunded = await request(server, "POST", refundPath("back"))
    assert.strictEqual(refunded.status, 200, refunded.text)
    assert.strictEqual(refunded.body.status.phase, "Refunded")
    assert.strictEqual(await availableOf(store), before - 30_000_000n)
    const shown = await request(server, "GET", `${grantsPath}/topup-back`)
    assert.deepStrictEqual([shown.body.status.remainingUSD, shown.body.status.phase], ["0", "Exhausted"])
    // Asking again answers the Refunded TopUp and takes nothing more.
    assert.strictEqual((await request(server, "POST", refundPath("back"))).body.status.phase, "Refunded")
    assert.strictEqual(await availableOf(store), before - 30_000_000n)
    const event = await eventually(
      "topup.refunded",
      async () => (await server.streamed()).filter((entry) => entry.type === "topup.refunded"),
      { until: (found) => found.length > 0 }
    )
    assert.strictEqual(event.length, 1)
    assertStatus(server, await request(server, "POST", refundPath("declined")), 409, "Conflict")
    assertStatus(server, await request(server, "GET", refundPath("back")), 405, "MethodNotAllowed")
  })

  it("a retried create with the same Idempotency-Key answers the same TopUp and grants once", async () => {
    const headers = { "idempotency-key": "topup-retry-1" }
    const first = await request(server, "POST", topUpsPath, { body: topUp("retried", { amountUSD: "5" }), headers })
    const second = await request(server, "POST", topUpsPath, { body: topUp("retried", { amountUSD: "5" }), headers })
    assert.strictEqual(first.status, 201, first.text)
    assert.strictEqual(second.status, 201, second.text)
    assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
    assert.strictEqual(second.body.metadata.uid, first.body.metadata.uid)
    assert.deepStrictEqual(
      (await grantKeys(store)).filter((key) => key.startsWith(`topup/${first.body.metadata.uid}`)),
      [`topup/${first.body.metadata.uid}#0`]
    )
  })

  it("refuses what cannot be paid: over the limit, unknown promo codes and payment methods", async () => {
    const over = assertStatus(
      server,
      await request(server, "POST", topUpsPath, { body: topUp("huge", { amountUSD: "10000.01" }) }),
      402,
      "TopUpLimitReached"
    )
    assert.include(over.message, "10000.01")
    assert.include(over.message, "10000 USD")
    const promo = assertStatus(
      server,
      await request(server, "POST", topUpsPath, { body: topUp("promo", { amountUSD: "5", promoCode: "WELCOME" }) }),
      422,
      "Invalid"
    )
    assert.deepStrictEqual(causeFields(promo), ["spec.promoCode"])
    const unknown = assertStatus(
      server,
      await request(server, "POST", topUpsPath, { body: topUp("card", { amountUSD: "5", paymentMethod: "pm_nope" }) }),
      422,
      "Invalid"
    )
    assert.deepStrictEqual(causeFields(unknown), ["spec.paymentMethod"])
    assert.include(unknown.message, "pm_nope")
    // The kind's schema still answers first for a malformed amount.
    assertStatus(
      server,
      await request(server, "POST", topUpsPath, { body: topUp("bad", { amountUSD: "-1" }) }),
      422,
      "Invalid"
    )
    for (const name of ["huge", "promo", "card", "bad"]) {
      assert.strictEqual((await request(server, "GET", `${topUpsPath}/${name}`)).status, 404)
    }
  })

  it("the operator grants credits (admin only, keyed); users still only list and read", async () => {
    const denied = assertStatus(
      server,
      await request(server, "POST", operatorGrantsPath, { body: grant("gift", { amountUSD: "25" }), token: payer }),
      403,
      "Forbidden"
    )
    assert.include(denied.message, "admin")
    const headers = { "idempotency-key": "grant-gift-1" }
    const created = await request(server, "POST", operatorGrantsPath, {
      body: grant("gift", { amountUSD: "25", reason: "sorry for the outage" }),
      headers
    })
    assert.strictEqual(created.status, 201, created.text)
    assert.deepStrictEqual([
      created.body.spec.source,
      created.body.spec.reason,
      created.body.status.remainingUSD,
      created.body.status.phase
    ], ["Admin", "sorry for the outage", "25", "Active"])
    const again = await request(server, "POST", operatorGrantsPath, {
      body: grant("gift", { amountUSD: "25", reason: "sorry for the outage" }),
      headers
    })
    assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
    assert.deepStrictEqual(
      (await grantKeys(store)).filter((key) => key.startsWith(`grant/${created.body.metadata.uid}`)),
      [`grant/${created.body.metadata.uid}#0`]
    )
    assertStatus(
      server,
      await request(server, "POST", operatorGrantsPath, {
        body: grant("later", { amountUSD: "1", expiresAt: "2030-01-01T00:00:00Z" })
      }),
      501,
      "Unsupported"
    )
    assert.include(
      causeFields(
        assertStatus(
          server,
          await request(server, "POST", operatorGrantsPath, { body: grant("starter", { amountUSD: "1" }) }),
          422,
          "Invalid"
        )
      ),
      "metadata.name"
    )
    assert.include(
      causeFields(
        assertStatus(
          server,
          await request(server, "POST", operatorGrantsPath, { body: grant("x", { amountUSD: "1", source: "TopUp" }) }),
          422,
          "Invalid"
        )
      ),
      "spec.source"
    )
    // Users keep the spec's operations on creditgrants (list, read), the operator too.
    assertStatus(
      server,
      await request(server, "POST", grantsPath, { body: grant("direct", { amountUSD: "1" }) }),
      405,
      "MethodNotAllowed"
    )
    assertStatus(
      server,
      await request(server, "PUT", `${grantsPath}/gift`, { body: created.body }),
      405,
      "MethodNotAllowed"
    )
    assertStatus(server, await request(server, "GET", operatorGrantsPath), 405, "MethodNotAllowed")
    assertStatus(server, await request(server, "POST", `${v1}/operator/budgets`, { body: {} }), 404, "NotFound")
    const listed = await request(server, "GET", grantsPath, { token: payer })
    assert.includeMembers(listed.body.items.map((item: any) => item.metadata.name), ["starter", "topup-fifty", "gift"])
  })
})

describe("the operator's commands", () => {
  const root = join(import.meta.dirname, "..", "..")
  const nodus = (server: Pick<TestServer, "url" | "token">, args: ReadonlyArray<string>) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const flags = [
        "--addr",
        new URL(server.url).host,
        "--tls",
        "off",
        "--bootstrap-token",
        server.token,
        "--data-dir",
        mkdtempSync(join(tmpdir(), "nodus-grant-"))
      ]
      const env = Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
      )
      execFile(
        join(root, "node_modules", ".bin", "node"),
        [join(root, "bin", "nodus.js"), ...args, ...flags],
        { cwd: root, env, timeout: 60_000 },
        (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
      )
    })

  it("nodus grant creates an Admin CreditGrant; nodus refund refunds a TopUp; failures say why", async () => {
    const server = await startTestServer()
    try {
      const granted = await nodus(server, ["grant", "12.5", "--reason", "conference credit", "--name", "conf"])
      assert.strictEqual(granted.code, 0, granted.stderr)
      assert.include(granted.stdout, "creditgrant/conf granted 12.5 USD")
      const shown = await request(server, "GET", `${grantsPath}/conf`)
      assert.deepStrictEqual([shown.body.spec.source, shown.body.spec.reason, shown.body.status.remainingUSD], [
        "Admin",
        "conference credit",
        "12.5"
      ])
      await request(server, "POST", topUpsPath, { body: topUp("paid", { amountUSD: "3" }) })
      const refunded = await nodus(server, ["refund", "paid"])
      assert.strictEqual(refunded.code, 0, refunded.stderr)
      assert.include(refunded.stdout, "topup/paid Refunded")
      const bad = await nodus(server, ["grant", "-5"])
      assert.strictEqual(bad.code, 1)
      assert.include(bad.stderr, "Invalid")
    } finally {
      await server.stop()
    }
  })

  it("nodus grant waits out a request in progress and an unavailable server, with the same Idempotency-Key", async () => {
    // A server that answers 409 RequestInProgress (come back in 1 s), then 503 Unavailable, then creates the grant.
    const answers = [
      {
        code: 409,
        body: { kind: "Status", reason: "RequestInProgress", code: 409, details: { retryAfterSeconds: 1 } }
      },
      { code: 503, body: { kind: "Status", reason: "Unavailable", code: 503, details: { retryAfterSeconds: 0 } } },
      { code: 201, body: { kind: "CreditGrant", metadata: { name: "patient" }, spec: { amountUSD: "7" } } }
    ]
    const seen: Array<{ readonly key: string | undefined; readonly at: number }> = []
    const fake = createServer((incoming, outgoing) => {
      incoming.resume()
      incoming.on("end", () => {
        const key = incoming.headers["idempotency-key"]
        seen.push({ key: typeof key === "string" ? key : undefined, at: Date.now() })
        const answer = answers[Math.min(seen.length, answers.length) - 1]!
        outgoing.writeHead(answer.code, { "content-type": "application/json" }).end(JSON.stringify(answer.body))
      })
    })
    await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve))
    try {
      const granted = await nodus({
        url: `http://127.0.0.1:${(fake.address() as AddressInfo).port}`,
        token: adminToken
      }, ["grant", "7", "--name", "patient"])
      assert.strictEqual(granted.code, 0, granted.stderr)
      assert.include(granted.stdout, "creditgrant/patient granted 7 USD")
      assert.strictEqual(seen.length, 3)
      assert.isString(seen[0]!.key)
      assert.deepStrictEqual(seen.map((attempt) => attempt.key), [seen[0]!.key, seen[0]!.key, seen[0]!.key])
      assert.isAtLeast(seen[1]!.at - seen[0]!.at, 900, "retryAfterSeconds is honoured")
    } finally {
      await new Promise((resolve) => fake.close(resolve))
    }
  })
})

describe("credits across restarts", () => {
  it("a restarted server finishes a stored TopUp once, never grants again, and shows spending oldest grant first", async () => {
    const store = await Effect.runPromise(MemoryStore.make)
    const storeLayer = Layer.succeed(Store, store)
    // A TopUp stored while no server ran (as if the server stopped right after the create): the next one settles it.
    await Effect.runPromise(store.commit([storedTopUp("offline", "50")]))
    const first = await startTestServer({ store: storeLayer })
    const settled = await eventually(
      "offline TopUp settled",
      async () => (await request(first, "GET", `${topUpsPath}/offline`)).body,
      { until: (body) => body.status?.phase === "Succeeded" }
    )
    assert.strictEqual(settled.status.creditGrant, "topup-offline")
    await first.stop()
    assert.deepStrictEqual(await grantKeys(store), ["grant/starter#0", "topup/uid-offline#0"])

    // 120 USD spent while no server ran: the starter credits (oldest) go first, then 20 of the TopUp's 50.
    const ledger = Ledger.replay(await postingsOf(store))
    ledger.hold("hold/spend", 0, { hold: "spend", owner: "job-uid", amount: 120_000_000n, expiresAt: 10 })
    ledger.capture("capture/spend", 1, { hold: "spend", owner: "job-uid", segment: "Running", amount: 120_000_000n })
    await Effect.runPromise(
      store.commit(ledger.drain().map((posting: Posting) => ({ _tag: "Post" as const, posting })))
    )

    const second = await startTestServer({ store: storeLayer })
    try {
      const starter = await request(second, "GET", `${grantsPath}/starter`)
      const paid = await request(second, "GET", `${grantsPath}/topup-offline`)
      assert.deepStrictEqual([starter.body.status.remainingUSD, starter.body.status.phase], ["0", "Exhausted"])
      assert.deepStrictEqual([paid.body.status.remainingUSD, paid.body.status.phase], ["30", "Active"])
      assert.deepStrictEqual(await grantKeys(store), ["grant/starter#0", "topup/uid-offline#0"])
      // The outbox is durable: the first server's topup.succeeded is there, once; the restart announced nothing again.
      assert.deepStrictEqual(
        (await second.streamed()).filter((entry) => entry.type.startsWith("topup.")).map((entry) => entry.type),
        ["topup.succeeded"]
      )
    } finally {
      await second.stop()
    }
  })
})

describe("a server starting on what a stopped one left half done", () => {
  let store: StoreShape
  let server: TestServer
  const paid = (grant: string): JsonObject => ({
    phase: "Succeeded",
    creditGrant: grant,
    completionTime: "2026-01-01T00:00:01Z"
  })
  beforeAll(async () => {
    store = await Effect.runPromise(MemoryStore.make)
    const ledger = Ledger.replay([])
    ledger.grant("topup/uid-refunding", 0, 30_000_000n, "topup-refunding")
    ledger.refund("refund/uid-refunding", 1, 30_000_000n, "topup-refunding")
    await Effect.runPromise(store.commit([
      // The ledger took the credits back, and the server stopped before the processor refunded.
      storedTopUp("refunding", "30", paid("topup-refunding")),
      settledCharge("uid-refunding", 30_000_000n),
      // Succeeded, but the commit of its grant was lost.
      storedTopUp("ungranted", "20", paid("topup-ungranted")),
      settledCharge("uid-ungranted", 20_000_000n),
      // Succeeded, with an amount that no longer reads as one (as an older version might have stored it).
      storedTopUp("changed", "twelve", paid("topup-changed")),
      ...ledger.drain().map((posting: Posting) => ({ _tag: "Post" as const, posting }))
    ]))
    server = await startTestServer({ store: Layer.succeed(Store, store) })
  })
  afterAll(() => server.stop())

  it("finishes a refund the ledger took: the processor refunds, then the status, each once", async () => {
    await eventually("refunding Refunded", () => phaseAt(server, "refunding"), {
      until: (phase) => phase === "Refunded"
    })
    assert.strictEqual(await chargeStateOf(store, "uid-refunding"), "Refunded")
    assert.deepStrictEqual(await refundKeys(store), ["refund/uid-refunding#0"])
    const announced = (await server.streamed()).filter((entry) => entry.type === "topup.refunded").map((entry) =>
      entry.data.object.metadata.name
    )
    assert.deepStrictEqual(announced, ["refunding"])
  })

  it("grants a Succeeded TopUp's lost credits again under the same key, once, and announces nothing", async () => {
    await eventually(
      "topup/uid-ungranted granted",
      () => grantKeys(store),
      { until: (keys) => keys.includes("topup/uid-ungranted#0") }
    )
    assert.deepStrictEqual((await grantKeys(store)).filter((key) => key.startsWith("topup/uid-ungranted")), [
      "topup/uid-ungranted#0"
    ])
    const shown = await request(server, "GET", `${grantsPath}/topup-ungranted`)
    assert.deepStrictEqual([shown.body.spec.source, shown.body.status.remainingUSD], ["TopUp", "20"])
    assert.strictEqual(await phaseAt(server, "ungranted"), "Succeeded")
    assert.isUndefined((await server.streamed()).find((entry) => entry.type === "topup.succeeded"))
  })

  it("never moves a Succeeded TopUp to Failed", async () => {
    // The start-up pass goes through TopUps by name: once "ungranted" is granted, "changed" was reconciled.
    await eventually(
      "topup/uid-ungranted granted",
      () => grantKeys(store),
      { until: (keys) => keys.includes("topup/uid-ungranted#0") }
    )
    assert.strictEqual(await phaseAt(server, "changed"), "Succeeded")
    assert.isUndefined((await server.streamed()).find((entry) => entry.type === "topup.failed"))
  })
})

describe("credits when the store fails", () => {
  // The store refuses what `faults` names, as a database briefly out of reach, and counts its refusals.
  const healthy = { read: (_key: ObjectKey) => false, commit: (_ops: ReadonlyArray<WriteOp>) => false }
  let faults = healthy
  let refused = 0
  let store: StoreShape
  let server: TestServer
  const refuse = Effect.suspend(() => {
    refused++
    return Effect.fail(new StoreError({ message: "injected: the store is out of reach" }))
  })
  beforeAll(async () => {
    const memory = await Effect.runPromise(MemoryStore.make)
    store = {
      ...memory,
      get: (key) => (faults.read(key) ? refuse : memory.get(key)),
      commit: (ops) => (faults.commit(ops) ? refuse : memory.commit(ops))
    }
    // A TopUp stored while no server ran, which the start-up pass cannot read.
    await Effect.runPromise(memory.commit([storedTopUp("hiccup", "5")]))
    faults = { ...healthy, read: (key) => key.resource === "topups" && key.name === "hiccup" }
    server = await startTestServer({ store: Layer.succeed(Store, store) })
  })
  afterEach(() => {
    faults = healthy
  })
  afterAll(() => server.stop())

  const createPaid = async (name: string, amountUSD: string) => {
    const created = await request(server, "POST", topUpsPath, { body: topUp(name, { amountUSD }) })
    assert.strictEqual(created.body.status?.phase, "Succeeded", created.text)
    return created.body.metadata.uid as string
  }

  it("a TopUp the store could not read is tried again at the next pass, not dropped", async () => {
    await eventually("the start-up pass read hiccup", async () => refused, { until: (count) => count >= 1 })
    faults = healthy
    await eventually("hiccup settled", () => phaseAt(server, "hiccup"), { until: (phase) => phase === "Succeeded" })
  })

  it("a refund whose ledger posting failed has not refunded the payment either", async () => {
    const uid = await createPaid("kept", "30")
    const before = await availableOf(store)
    faults = { ...healthy, commit: (ops) => ops.some((op) => op._tag === "Post" && op.posting.kind === "Refund") }
    assertStatus(server, await request(server, "POST", refundPath("kept")), 503, "Unavailable")
    assert.strictEqual(await chargeStateOf(store, uid), "Settled")
    assert.strictEqual(await availableOf(store), before)
    faults = healthy
    // The operator asks again, and the refund happens once.
    assert.strictEqual((await request(server, "POST", refundPath("kept"))).body.status?.phase, "Refunded")
    assert.strictEqual(await chargeStateOf(store, uid), "Refunded")
    assert.strictEqual(await availableOf(store), before - 30_000_000n)
  })

  it("a refund whose processor call failed is finished by the next pass: the credits went back first", async () => {
    const uid = await createPaid("returned", "20")
    const before = await availableOf(store)
    faults = {
      ...healthy,
      commit: (ops) =>
        ops.some((op) =>
          op._tag === "PutRecord" && op.table === "payments" && isObject(op.value) && op.value["state"] === "Refunded"
        )
    }
    assertStatus(server, await request(server, "POST", refundPath("returned")), 503, "Unavailable")
    assert.strictEqual(await availableOf(store), before - 20_000_000n)
    assert.strictEqual(await chargeStateOf(store, uid), "Settled")
    assert.strictEqual(await phaseAt(server, "returned"), "Succeeded")
    faults = healthy
    await eventually("returned Refunded", () => phaseAt(server, "returned"), { until: (phase) => phase === "Refunded" })
    assert.strictEqual(await chargeStateOf(store, uid), "Refunded")
    assert.deepStrictEqual((await refundKeys(store)).filter((key) => key.startsWith(`refund/${uid}`)), [
      `refund/${uid}#0`
    ])
    assert.strictEqual(await availableOf(store), before - 20_000_000n)
    assert.lengthOf(
      (await server.streamed()).filter((entry) =>
        entry.type === "topup.refunded" && entry.data.object.metadata.name === "returned"
      ),
      1
    )
  })
})

describe("servers without starter credits or payments", () => {
  it("a production-like server shows no starter grant, and refuses TopUps with PaymentsNotConfigured", async () => {
    let announced: (url: string) => void = () => {}
    const listening = new Promise<string>((resolve) => (announced = resolve))
    const runtime = ManagedRuntime.make(Server.layerWith({
      host: "127.0.0.1",
      port: 0,
      apiGroup: "nodus.dev",
      tls: undefined,
      adminToken,
      bookmarkInterval: "30 seconds",
      feed: defaultFeedOptions,
      onListening: (url) => announced(url),
      starterCreditsMicro: 0n,
      payments: "none"
    }, Layer.fresh(MemoryStore.layer)))
    await runtime.runPromise(Effect.void)
    const server = { url: await listening, token: adminToken } as TestServer
    try {
      const listed = await request(server, "GET", grantsPath)
      assert.strictEqual(listed.status, 200, listed.text)
      assert.deepStrictEqual(listed.body.items, [])
      assertStatus(
        server,
        await request(server, "POST", topUpsPath, { body: topUp("t", { amountUSD: "5" }) }),
        501,
        "PaymentsNotConfigured"
      )
      // The operator's grant is how credits arrive here.
      const granted = await request(server, "POST", operatorGrantsPath, { body: grant("opening", { amountUSD: "10" }) })
      assert.strictEqual(granted.status, 201, granted.text)
      assert.strictEqual(granted.body.status.remainingUSD, "10")
    } finally {
      await runtime.dispose()
    }
  })
})

describe.skipIf(databaseUrl === undefined)("credits on PostgreSQL", () => {
  it("a TopUp, a refund and an operator's grant survive a restart, each counted once", async () => {
    const database = await createDatabase(databaseUrl!)
    const serve = () => startTestServer({ store: Layer.fresh(SqlStore.layerPostgres(database.url)) })
    try {
      const first = await serve()
      assert.strictEqual(
        (await request(first, "POST", topUpsPath, { body: topUp("kept", { amountUSD: "40" }) })).body.status.phase,
        "Succeeded"
      )
      assert.strictEqual(
        (await request(first, "POST", topUpsPath, { body: topUp("returned", { amountUSD: "15" }) })).body.status.phase,
        "Succeeded"
      )
      assert.strictEqual((await request(first, "POST", refundPath("returned"))).body.status.phase, "Refunded")
      assert.strictEqual(
        (await request(first, "POST", operatorGrantsPath, { body: grant("bonus", { amountUSD: "5" }) })).status,
        201
      )
      await first.stop()
      const second = await serve()
      try {
        const remaining = async (name: string) =>
          (await request(second, "GET", `${grantsPath}/${name}`)).body.status.remainingUSD
        assert.deepStrictEqual([
          await remaining("starter"),
          await remaining("topup-kept"),
          await remaining("topup-returned"),
          await remaining("bonus")
        ], ["100", "40", "0", "5"])
        assert.strictEqual((await request(second, "POST", refundPath("returned"))).body.status.phase, "Refunded")
        assert.strictEqual(await remaining("topup-kept"), "40")
        // The outbox is durable: the first server's events are there, each once; the restart added none.
        assert.deepStrictEqual(
          (await second.streamed()).filter((entry) => entry.type.startsWith("topup.")).map((entry) =>
            `${entry.type} ${entry.data.object.metadata.name}`
          ).sort(),
          [
            "topup.refunded returned",
            "topup.succeeded kept",
            "topup.succeeded returned"
          ]
        )
      } finally {
        await second.stop()
      }
    } finally {
      await database.drop()
    }
  })
})

describe("TopUp phases", () => {
  it("move only Pending to Succeeded or Failed, and Succeeded to Refunded", () => {
    const phases: ReadonlyArray<TopUpPhase> = ["Pending", "Succeeded", "Failed", "Refunded"]
    const moves = phases.flatMap((from) =>
      phases.filter((to) => topUpMoveAllowed(from, to)).map((to) => `${from} -> ${to}`)
    )
    assert.deepStrictEqual(moves, ["Pending -> Succeeded", "Pending -> Failed", "Succeeded -> Refunded"])
  })
})

describe("the embedded processor", () => {
  it.effect("a refund with no settled charge is a Conflict with a fix of its own", () =>
    Effect.gen(function*() {
      const payments = yield* Payments
      assert.strictEqual(
        (yield* payments.charge({ key: "declined", amountMicro: 1n, method: "pm_test_declined" }))._tag,
        "Declined"
      )
      for (const key of ["declined", "never-charged"]) {
        const error = yield* Effect.flip(payments.refund(key))
        assert.strictEqual(error.code, "Conflict")
        assert.isString(error.fix)
        assert.notStrictEqual(error.fix, errorCodeInfo("Conflict").fix)
      }
    }).pipe(Effect.provide(Payments.layerEmbedded.pipe(Layer.provide(Layer.fresh(MemoryStore.layer))))))
})
