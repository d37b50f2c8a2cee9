/**
 * Webhook retries, health and rotations on the test clock (docs/webhooks.md; spec: Events, retry rules; Webhook
 * sub-resources). The server runs on simulated time that stands still unless the test moves it, so every attempt
 * happens exactly when the schedule says, to the second of the simulated clock when it arrives (its webhook-timestamp
 * is the wall clock's): 30 s after the first failure, doubling to 8 h, for 3 days after the event, then Failed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Limits from "../../src/core/Limits.ts"
import { nextAttemptAt, retryDelayMs } from "../../src/core/WebhookDelivery.ts"
import { deliveriesTable } from "../../src/runtime/WebhookLog.ts"
import { secretsTable } from "../../src/runtime/WebhookSecrets.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"
import { type Received, type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

const v1 = "/apis/nodus.dev/v1"
const endpoints = `${v1}/webhookendpoints`
const resolve = async (host: string) => {
  if (host !== "receiver.example.com") throw new Error(`getaddrinfo ENOTFOUND ${host}`)
  return [{ address: "127.0.0.1", family: 4 }]
}

let server: TestServer
let receiver: Receiver

const advance = async (seconds: number) => {
  const reply = await request(server, "POST", `${v1}/simulation/clock`, { body: { advance: `${seconds}s` } })
  expect(reply.status, reply.text).toBe(200)
}

const simulatedNow = async () => Date.parse((await request(server, "GET", `${v1}/simulation/clock`)).body.now)

const at = (path: string) => receiver.received.filter((got) => got.path === path)

/** Waits for the `count`-th request to `path`. */
const nth = async (path: string, count: number) => {
  const got = await eventually(
    `request ${count} to ${path}`,
    () => (at(path).length >= count ? at(path)[count - 1] : undefined)
  )
  if (!arrivedAt.has(got)) arrivedAt.set(got, Math.floor((await simulatedNow()) / 1_000))
  return got
}

/** The simulated second each request arrived at (the clock stands still but for the test's moves). */
const arrivedAt = new Map<Received, number>()
const timestampOf = (got: Received) => arrivedAt.get(got)!

const createEndpoint = async (name: string, spec: Record<string, unknown> = {}) => {
  const reply = await request(server, "POST", endpoints, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "WebhookEndpoint",
      metadata: { name },
      spec: { url: `https://receiver.example.com:${receiver.port}/${name}`, eventTypes: ["topup.*"], ...spec }
    }
  })
  expect(reply.status, reply.text).toBe(201)
  return reply.body
}

const endpointStatus = async (name: string) => (await request(server, "GET", `${endpoints}/${name}`)).body.status ?? {}

beforeAll(async () => {
  receiver = await startReceiver()
  receiver.answer((got) => (["/flaky", "/down", "/refusing"].includes(got.path) ? 500 : 200))
  // Simulated time barely moves by itself: the test moves it.
  server = await startTestServer({ sim: { speed: 1e-9 }, webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 } })
})

afterAll(async () => {
  await server.stop()
  await receiver.close()
})

describe("a new endpoint's health", () => {
  it("is not Healthy True while its first delivery failed: Unknown until an attempt succeeds or three fail", async () => {
    await createEndpoint("refusing")
    await nth("/refusing", 1)
    const status = await eventually("the status after the first attempt", async () => {
      const shown = await endpointStatus("refusing")
      return shown.lastDelivery?.attempts === 1 ? shown : undefined
    })
    expect(status.lastDelivery).toMatchObject({ phase: "Pending", responseCode: 500 })
    expect(status.conditions).toEqual([
      expect.objectContaining({
        type: "Healthy",
        status: "Unknown",
        reason: "DeliveryFailed",
        message: expect.stringContaining("answered 500")
      })
    ])
    expect(status.failingSince).toBeUndefined()
  })
})

describe("the retry schedule", () => {
  it("waits 30 s after the first failure and doubles, to the second, and a success ends it", async () => {
    await createEndpoint("flaky")
    const first = await nth("/flaky", 1)
    expect(first.json.type).toBe("webhookendpoint.ping")
    for (const [index, seconds] of [30, 60, 120].entries()) {
      // Not a second early: one second short of the wait, nothing is sent.
      await advance(seconds - 1)
      await new Promise((resolve) => setTimeout(resolve, 400))
      expect(at("/flaky")).toHaveLength(index + 1)
      await advance(1)
      const next = await nth("/flaky", index + 2)
      expect(timestampOf(next) - timestampOf(at("/flaky")[index]!)).toBe(seconds)
      expect(next.headers["webhook-id"]).toBe(first.headers["webhook-id"])
      expect(next.body).toBe(first.body)
    }
    // Three failures in a row: unhealthy, with the event that says so.
    const failing = await eventually("Healthy False", async () => {
      const status = await endpointStatus("flaky")
      return status.failingSince === undefined ? undefined : status
    })
    expect(failing.conditions).toContainEqual(
      expect.objectContaining({ type: "Healthy", status: "False", reason: "DeliveriesFailing" })
    )
    expect(failing.deliveries24h).toEqual({ succeeded: 0, failed: 4 })
    expect(
      (await server.streamed()).filter((event) => event.type === "webhookendpoint.deliveries_failing").map((event) =>
        event.data.object.metadata.name
      )
    ).toContain("flaky")
    receiver.answer((got) => (got.path === "/down" ? 500 : 200))
    await advance(240)
    await nth("/flaky", 5)
    const healthy = await eventually("Healthy True", async () => {
      const status = await endpointStatus("flaky")
      return status.failingSince === undefined &&
          status.conditions?.some((condition: any) => condition.type === "Healthy" && condition.status === "True")
        ? status
        : undefined
    })
    expect(healthy.lastDelivery).toMatchObject({
      type: "webhookendpoint.ping",
      phase: "Succeeded",
      attempts: 5,
      responseCode: 200
    })
    const log = (await request(server, "GET", `${endpoints}/flaky/deliveries`)).body.items
    expect(log).toEqual([expect.objectContaining({ type: "webhookendpoint.ping", phase: "Succeeded", attempts: 5 })])
  })

  it("gives up 3 days after the event: Failed, after the attempts the schedule allows", async () => {
    await createEndpoint("down")
    const first = await nth("/down", 1)
    const eventAt = timestampOf(first) * 1_000
    // The schedule's attempts: the first, then each retry that falls within 3 days of the event.
    const times = [eventAt]
    for (
      let next = nextAttemptAt(eventAt, 1, eventAt);
      next !== undefined;
      next = nextAttemptAt(eventAt, times.length, times[times.length - 1]!)
    ) times.push(next)
    expect(retryDelayMs(20)).toBe(Limits.webhookRetryDelayMsMax)
    for (let index = 1; index < times.length; index++) {
      await advance((times[index]! - times[index - 1]!) / 1_000)
      const got = await nth("/down", index + 1)
      expect(timestampOf(got) * 1_000).toBe(times[index])
    }
    await advance(Limits.webhookRetryDelayMsMax / 1_000)
    const entry = await eventually("the delivery Failed", async () => {
      const items = (await request(server, "GET", `${endpoints}/down/deliveries`)).body.items
      return items?.[0]?.phase === "Failed" ? items[0] : undefined
    })
    expect(entry).toMatchObject({ attempts: times.length, responseCode: 500 })
    expect(at("/down")).toHaveLength(times.length)
    // Every retry was within 3 days of the event, and one more would not have been.
    expect(times[times.length - 1]! - eventAt).toBeLessThanOrEqual(Limits.webhookRetryWindowMs)
    expect(times[times.length - 1]! + Limits.webhookRetryDelayMsMax - eventAt).toBeGreaterThan(
      Limits.webhookRetryWindowMs
    )
  }, 60_000)

  it("abandons what is pending to an endpoint that is disabled", async () => {
    const topUp = await request(server, "POST", `${v1}/topups`, {
      body: { apiVersion: "nodus.dev/v1", kind: "TopUp", metadata: { name: "five" }, spec: { amountUSD: "5" } }
    })
    expect(topUp.status, topUp.text).toBe(201)
    await eventually("the top-up's first attempt", () => at("/down").find((got) => got.json.type === "topup.succeeded"))
    const paused = await request(server, "PATCH", `${endpoints}/down`, {
      body: { spec: { enabled: false } },
      contentType: "application/merge-patch+json"
    })
    expect(paused.status, paused.text).toBe(200)
    const entry = await eventually("the pending delivery Abandoned", async () => {
      await advance(30)
      const items = (await request(server, "GET", `${endpoints}/down/deliveries`)).body.items
      return items?.find((item: any) => item.type === "topup.succeeded" && item.phase === "Abandoned")
    })
    expect(entry.attempts).toBe(1)
  })
})

describe("a deleted endpoint", () => {
  it("abandons what is pending to it, and its secret goes with it", async () => {
    receiver.answer((got) => (got.path === "/doomed" ? 500 : 200))
    const created = await createEndpoint("doomed")
    const uid = created.metadata.uid as string
    await nth("/doomed", 1)
    expect((await request(server, "DELETE", `${endpoints}/doomed`)).status).toBe(200)
    const entry = await eventually("the ping Abandoned", async () => {
      await advance(30)
      const records = await server.withStore((store) => store.records(deliveriesTable, `${uid}/`, 10, 0))
      const mine = records.filter((record) => record.id.startsWith(`${uid}/`)).map((record) => record.value as any)
      return mine[0]?.phase === "Abandoned" ? mine[0] : undefined
    })
    expect(entry).toMatchObject({ type: "webhookendpoint.ping", attempts: 1, error: "the endpoint was deleted" })
    expect(at("/doomed")).toHaveLength(1)
    const secret = await server.withStore((store) => store.getRecord(secretsTable, uid, 0))
    expect(secret._tag).toBe("None")
  })
})

describe("a rotation", () => {
  it("shows the new secret once; both sign until previousSecretTTL ends, then the new one alone", async () => {
    const created = await createEndpoint("rotating", { eventTypes: ["*"] })
    const old = created.status.signingSecret as string
    await nth("/rotating", 1)
    const body = { previousSecretTTL: "1h" }
    const rotated = await request(server, "POST", `${endpoints}/rotating/rotations`, {
      body,
      headers: { "idempotency-key": "rotate-1" }
    })
    expect(rotated.status, rotated.text).toBe(200)
    const fresh = rotated.body.status.signingSecret as string
    expect(fresh).toMatch(/^whsec_/u)
    expect(fresh).not.toBe(old)
    expect(Date.parse(rotated.body.status.secretRotation) - (await simulatedNow())).toBeGreaterThan(3_500_000)
    // The same request again answers the same secret; another body under the key is refused.
    const again = await request(server, "POST", `${endpoints}/rotating/rotations`, {
      body,
      headers: { "idempotency-key": "rotate-1" }
    })
    expect(again.body.status.signingSecret).toBe(fresh)
    const reused = await request(server, "POST", `${endpoints}/rotating/rotations`, {
      body: { previousSecretTTL: "2h" },
      headers: { "idempotency-key": "rotate-1" }
    })
    expect(reused.status).toBe(409)
    expect(reused.body.reason).toBe("IdempotencyKeyReused")
    expect((await request(server, "GET", `${endpoints}/rotating`)).text).not.toContain(fresh.slice(6))

    const ping = (await request(server, "GET", `${endpoints}/rotating/deliveries`)).body.items[0]
    const during = await request(server, "POST", `${endpoints}/rotating/deliveries/${ping.id}/replays`)
    const signedDuring = await eventually(
      "the replay during the rotation",
      () => at("/rotating").find((got) => got.headers["webhook-id"] === during.body.webhookId)
    )
    expect(signedDuring.headers["webhook-signature"]!.split(" ")).toHaveLength(2)
    expect(receiver.verifies(fresh, signedDuring)).toBe(true)
    expect(receiver.verifies(old, signedDuring)).toBe(true)

    await advance(3_601)
    const after = await request(server, "POST", `${endpoints}/rotating/deliveries/${ping.id}/replays`)
    const signedAfter = await eventually(
      "the replay after the rotation",
      () => at("/rotating").find((got) => got.headers["webhook-id"] === after.body.webhookId)
    )
    expect(signedAfter.headers["webhook-signature"]!.split(" ")).toHaveLength(1)
    expect(receiver.verifies(fresh, signedAfter)).toBe(true)
    expect(receiver.verifies(old, signedAfter)).toBe(false)
  })
})
