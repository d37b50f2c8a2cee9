/**
 * A restarted server's webhook service starts from what the store holds (docs/webhooks.md): pending deliveries are
 * sent and new events fanned out only once its endpoints are known. Here the second server reads its endpoints
 * slowly (its store answers that list after a second), so a sender that ran before would abandon the pending delivery
 * ("the endpoint was deleted"), and a dispatcher fan the TopUp's event out to no endpoint.
 */
import { Effect, Layer } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { deliveriesTable, newDelivery, putDelivery } from "../../src/runtime/WebhookLog.ts"
import * as MemoryStore from "../../src/store/MemoryStore.ts"
import { Store } from "../../src/store/Store.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer } from "../support/TestServer.ts"
import { startReceiver } from "../support/WebhookReceiver.ts"

const resolve = async (host: string) => {
  if (host !== "receiver.example.com") throw new Error(`getaddrinfo ENOTFOUND ${host}`)
  return [{ address: "127.0.0.1", family: 4 }]
}

describe("a restarted server's webhook service", () => {
  const receiverStarted = startReceiver()
  afterAll(async () => (await receiverStarted).close())

  it("sends what was pending and fans out what was not dispatched, once its endpoints are known", async () => {
    const receiver = await receiverStarted
    const store = Effect.runSync(MemoryStore.make)
    const first = await startTestServer({
      store: Layer.succeed(Store, store),
      webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 }
    })
    const created = await request(first, "POST", "/apis/nodus.dev/v1/webhookendpoints", {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "WebhookEndpoint",
        metadata: { name: "hooks" },
        spec: { url: `https://receiver.example.com:${receiver.port}/hooks` }
      }
    })
    expect(created.status, created.text).toBe(201)
    await eventually("the ping", () => receiver.received.length > 0, { timeoutMs: 10_000 })
    await first.stop()
    // A delivery due now, as a server that stopped before trying it leaves one.
    const uid = created.body.metadata.uid as string
    const pending = newDelivery(
      uid,
      "000000000000000.left.0000000001",
      "webhookendpoint.ping",
      receiver.received[0]!.body,
      Date.now(),
      Date.now(),
      undefined
    )
    await Effect.runPromise(store.commit([putDelivery(pending)]))
    const slow = {
      ...store,
      list: (query: Parameters<typeof store.list>[0]) =>
        Effect.andThen(Effect.sleep(query.resource === "webhookendpoints" ? "1 second" : "0 millis"), store.list(query))
    }
    const second = await startTestServer({
      store: Layer.succeed(Store, slow),
      webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 }
    })
    try {
      // An event made before the second server knows its endpoints.
      const topUp = await request(second, "POST", "/apis/nodus.dev/v1/topups", {
        body: { apiVersion: "nodus.dev/v1", kind: "TopUp", metadata: { name: "after" }, spec: { amountUSD: "1" } }
      })
      expect(topUp.status, topUp.text).toBe(201)
      await eventually(
        "the pending delivery and the TopUp's event received",
        () =>
          receiver.received.some((got) => got.headers["webhook-id"] === pending.webhookId) &&
          receiver.received.some((got) => got.json.type === "topup.succeeded"),
        { timeoutMs: 30_000 }
      )
      const records = (await second.withStore((s) => s.records(deliveriesTable, `${uid}/`, 100, 0))).map((record) =>
        record.value as any
      )
      expect(records.find((record) => record.webhookId === pending.webhookId)).toMatchObject({
        phase: "Succeeded",
        attempts: 1
      })
    } finally {
      await second.stop()
    }
  }, 90_000)
})
