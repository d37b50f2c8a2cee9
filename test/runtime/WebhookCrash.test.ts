/**
 * Webhook deliveries across a crash (docs/webhooks.md; the test): a server process killed with SIGKILL while
 * events are being made and deliveries are pending comes back on the same store and delivers every event at least
 * once — and none for a change that did not commit, since an event is recorded in the commit of its change. The
 * receiver verifies every signature (standardwebhooks).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { eventually } from "../support/Eventually.ts"
import { callAs, printedBy } from "../support/ServerProcess.ts"
import { type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

const root = join(import.meta.dirname, "..", "..")
const node = join(root, "node_modules", ".bin", "node")
const token = "nds_webhook-crash-token-0123456789abcdefghijklmnopq"
const dataDir = mkdtempSync(join(tmpdir(), "nodus-webhook-crash-"))
const v1 = "/apis/nodus.dev/v1"
const children: Array<ChildProcess> = []

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  rmSync(dataDir, { recursive: true, force: true })
})

const start = async (): Promise<{ url: string; child: ChildProcess }> => {
  const child = spawn(node, [join(root, "test", "support", "WebhookServer.ts"), dataDir, token], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  return { url: await printedBy(child).first(/serving (http:\/\/\S+)/u, 60_000), child }
}

const call = callAs(token)

describe("a server killed with deliveries pending", () => {
  let receiver: Receiver

  it("delivers every committed event after its restart, and none of a change that did not commit", async () => {
    receiver = await startReceiver()
    // The receiver is down at first: every delivery stays pending.
    receiver.answer(() => 503)
    const first = await start()
    const created = await call(first.url, "POST", `${v1}/webhookendpoints`, {
      apiVersion: "nodus.dev/v1",
      kind: "WebhookEndpoint",
      metadata: { name: "hooks" },
      spec: { url: `https://receiver.example.com:${receiver.port}/hooks`, eventTypes: ["topup.*", "webhookendpoint.*"] }
    })
    expect(created.status).toBe(201)
    const secret = created.body.status.signingSecret as string
    await eventually("the ping's first attempt", () => receiver.received.length > 0, { timeoutMs: 60_000 })
    // TopUps are made as fast as the server takes them, and the server is killed in the middle of it: some creates
    // committed without an answer, some never committed.
    const names = Array.from({ length: 40 }, (_, index) => `t${index}`)
    const answered = new Set<string>()
    const creates = names.map(async (name, index) => {
      await new Promise((resolve) => setTimeout(resolve, index * 10))
      const reply = await call(first.url, "POST", `${v1}/topups`, {
        apiVersion: "nodus.dev/v1",
        kind: "TopUp",
        metadata: { name },
        spec: { amountUSD: "1" }
      }).catch(() => undefined)
      if (reply?.status === 201) answered.add(name)
    })
    await new Promise((resolve) => setTimeout(resolve, 200))
    const exited = new Promise((resolve) => first.child.once("exit", resolve))
    first.child.kill("SIGKILL")
    await Promise.all([...creates, exited])

    receiver.answer(() => 200)
    const second = await start()
    // The topups of the store after the crash are the changes that committed.
    const stored: ReadonlyArray<string> = (await call(second.url, "GET", `${v1}/topups`)).body.items.map((item: any) =>
      item.metadata.name
    )
    for (const name of answered) expect(stored).toContain(name)
    // Pending deliveries wait for their next attempt: the test clock moves past it.
    await call(second.url, "POST", `${v1}/simulation/clock`, { advance: "1h" })
    const deliveredTopUps = () =>
      new Set(
        receiver.received.filter((got) => got.json.type === "topup.succeeded").map((got) =>
          got.json.data.object.metadata.name as string
        )
      )
    // The kill came before the last creates were sent: those never committed.
    expect(stored.length).toBeLessThan(names.length)
    await eventually(
      "every stored TopUp's event delivered",
      () => stored.every((name) => deliveredTopUps().has(name)),
      { timeoutMs: 60_000 }
    )
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect([...deliveredTopUps()].sort()).toEqual([...stored].sort())
    expect(
      receiver.received.some((got) =>
        got.json.type === "webhookendpoint.ping" && got.headers["webhook-id"] !== undefined
      )
    ).toBe(true)
    for (const got of receiver.received) {
      expect(receiver.verifies(secret, got, new Date(Number(got.headers["webhook-timestamp"]) * 1_000))).toBe(true)
    }
    // A redelivery keeps its webhook-id: each event is told under one id, whatever was sent before the crash.
    const ids = new Map<string, string>()
    for (const got of receiver.received) {
      const key = `${got.json.type}/${got.json.data.object.metadata.name}`
      expect(ids.get(key) ?? got.headers["webhook-id"]).toBe(got.headers["webhook-id"])
      ids.set(key, got.headers["webhook-id"]!)
    }
    const stopped = new Promise((resolve) => second.child.once("exit", resolve))
    second.child.kill("SIGTERM")
    await stopped
    await receiver.close()
  }, 240_000)
})
