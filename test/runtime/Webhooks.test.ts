/**
 * Webhook deliveries end to end (docs/webhooks.md; spec: Events, WebhookEndpoint, Webhook sub-resources): a whole
 * server, a real HTTPS receiver on loopback, every delivery's signature verified by the `standardwebhooks` package.
 * Names resolve through a stub (no network): receiver.example.com is the receiver on loopback, which the development
 * switch lets take deliveries.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createJob, createProject } from "../apiserver/api/Support.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"
import { type Receiver, startReceiver } from "../support/WebhookReceiver.ts"

const endpoints = "/apis/nodus.dev/v1/webhookendpoints"
const resolve = async (host: string) => {
  const table: Record<string, string> = {
    "receiver.example.com": "127.0.0.1",
    "sneaky.example.com": "169.254.169.254",
    localhost: "127.0.0.1"
  }
  const address = table[host]
  if (address === undefined) throw new Error(`getaddrinfo ENOTFOUND ${host}`)
  return [{ address, family: 4 }]
}

let server: TestServer
let receiver: Receiver
let secret: string

const deliveriesOf = (type: string) => receiver.received.filter((got) => got.json.type === type)

const createEndpoint = async (name: string, spec: Record<string, unknown> = {}) => {
  const reply = await request(server, "POST", endpoints, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "WebhookEndpoint",
      metadata: { name },
      spec: { url: `https://receiver.example.com:${receiver.port}/${name}`, ...spec }
    }
  })
  expect(reply.status, reply.text).toBe(201)
  return reply.body
}

beforeAll(async () => {
  receiver = await startReceiver()
  server = await startTestServer({ webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 } })
  secret = (await createEndpoint("main")).status.signingSecret
})

afterAll(async () => {
  await server.stop()
  await receiver.close()
})

describe("a WebhookEndpoint's signing secret", () => {
  it("is in the create response once, whsec_ and base64 of 32 bytes, and never in a read or a list", async () => {
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/u)
    expect(Buffer.from(secret.slice(6), "base64")).toHaveLength(32)
    const read = await request(server, "GET", `${endpoints}/main`)
    expect(read.status).toBe(200)
    expect(read.text).not.toContain(secret.slice(6))
    expect(read.body.status?.signingSecret).toBeUndefined()
    const list = await request(server, "GET", endpoints)
    expect(list.text).not.toContain(secret.slice(6))
    // Nor in the store's plain JSON: its record is sealed.
    const stored = await server.withStore((store) => store.getRecord("webhooksecrets", read.body.metadata.uid, 0))
    expect(JSON.stringify(stored)).not.toContain(secret.slice(6))
  })
})

describe("deliveries", () => {
  it("sends a ping right after create, signed so that standardwebhooks verifies it", async () => {
    const ping = await eventually(
      "the ping",
      () => deliveriesOf("webhookendpoint.ping").find((got) => got.path === "/main")
    )
    expect(receiver.verifies(secret, ping)).toBe(true)
    expect(ping.headers["webhook-id"]).toMatch(/^msg_/u)
    expect(ping.json).toMatchObject({
      type: "webhookendpoint.ping",
      data: { event: { reason: "Ping", count: 1 }, object: { kind: "WebhookEndpoint", metadata: { name: "main" } } }
    })
    expect(Math.abs(Number(ping.headers["webhook-timestamp"]) - Date.now() / 1_000)).toBeLessThan(60)
  })

  it("delivers the events an endpoint subscribes to, and not the others", async () => {
    await createEndpoint("topups-only", { eventTypes: ["topup.*"] })
    await createEndpoint("jobs-only", { eventTypes: ["job.succeeded"] })
    const topUp = await request(server, "POST", "/apis/nodus.dev/v1/topups", {
      body: { apiVersion: "nodus.dev/v1", kind: "TopUp", metadata: { name: "ten" }, spec: { amountUSD: "10" } }
    })
    expect(topUp.status, topUp.text).toBe(201)
    const delivered = await eventually("topup.succeeded at both subscribers", () => {
      const got = deliveriesOf("topup.succeeded")
      return got.length >= 2 ? got : undefined
    })
    expect(delivered.map((got) => got.path).sort()).toEqual(["/main", "/topups-only"])
    for (const got of delivered) {
      expect(got.json.data.object).toMatchObject({
        kind: "TopUp",
        metadata: { name: "ten" },
        status: { phase: "Succeeded" }
      })
    }
    expect(receiver.verifies(secret, delivered.find((got) => got.path === "/main")!)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(receiver.received.filter((got) => got.path === "/jobs-only" && got.json.type !== "webhookendpoint.ping"))
      .toEqual([])
  })

  it("logs each delivery, pages the log, and replays one under a new webhook-id", async () => {
    const first = await request(server, "GET", `${endpoints}/main/deliveries?limit=1`)
    expect(first.status, first.text).toBe(200)
    expect(first.body.kind).toBe("WebhookDeliveryList")
    expect(first.body.items).toHaveLength(1)
    expect(first.body.items[0]).toMatchObject({
      type: "webhookendpoint.ping",
      phase: "Succeeded",
      attempts: 1,
      responseCode: 200
    })
    const rest = await request(
      server,
      "GET",
      `${endpoints}/main/deliveries?limit=10&after=${encodeURIComponent(first.body.metadata.continue)}`
    )
    expect(rest.body.items.map((entry: any) => entry.type)).toContain("topup.succeeded")
    const entry = rest.body.items.find((item: any) => item.type === "topup.succeeded")
    const replay = await request(server, "POST", `${endpoints}/main/deliveries/${entry.id}/replays`)
    expect(replay.status, replay.text).toBe(201)
    expect(replay.body.webhookId).not.toBe(entry.webhookId)
    const replayed = await eventually(
      "the replay",
      () => receiver.received.find((got) => got.headers["webhook-id"] === replay.body.webhookId)
    )
    const original = receiver.received.find((got) => got.headers["webhook-id"] === entry.webhookId)!
    expect(replayed.body).toBe(original.body)
    expect(receiver.verifies(secret, replayed)).toBe(true)
  })

  it("fails a delivery at once, without sending, when the URL's name resolves to an address that is not public", async () => {
    const reply = await request(server, "POST", endpoints, {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "WebhookEndpoint",
        metadata: { name: "sneaky" },
        spec: { url: "https://sneaky.example.com/latest/meta-data" }
      }
    })
    expect(reply.status, reply.text).toBe(201)
    const entry = await eventually("the ping Failed", async () => {
      const items = (await request(server, "GET", `${endpoints}/sneaky/deliveries`)).body.items
      return items?.[0]?.phase === "Failed" ? items[0] : undefined
    })
    expect(entry).toMatchObject({
      type: "webhookendpoint.ping",
      attempts: 1,
      error: expect.stringContaining("169.254.169.254, which is not a public address")
    })
    expect(entry.responseCode).toBeUndefined()
  })

  it("takes a plain-http receiver on localhost under the development switch; a server without it refuses the URL", async () => {
    const plain = await startReceiver({ http: true })
    try {
      const url = `http://localhost:${plain.port}/dev`
      const created = await request(server, "POST", endpoints, {
        body: { apiVersion: "nodus.dev/v1", kind: "WebhookEndpoint", metadata: { name: "dev" }, spec: { url } }
      })
      expect(created.status, created.text).toBe(201)
      const ping = await eventually(
        "the ping over http",
        () => plain.received.find((got) => got.json.type === "webhookendpoint.ping")
      )
      expect(plain.verifies(created.body.status.signingSecret, ping)).toBe(true)
      const production = await startTestServer()
      try {
        const refused = await request(production, "POST", endpoints, {
          body: { apiVersion: "nodus.dev/v1", kind: "WebhookEndpoint", metadata: { name: "dev" }, spec: { url } }
        })
        expect(refused.status).toBe(422)
        expect(refused.body).toMatchObject({
          reason: "Invalid",
          details: { causes: [{ field: "spec.url", message: expect.stringContaining("--webhook-allow-loopback") }] }
        })
      } finally {
        await production.stop()
      }
    } finally {
      await plain.close()
    }
  })
})

describe("under the simulator", () => {
  it("signs with the wall clock at high speed, so a Standard Webhooks receiver (5 minutes' tolerance) takes it", async () => {
    // An hour of simulated time per second: within a second the service's clock is hours ahead of the wall clock.
    const simulated = await startTestServer({
      sim: { speed: 3_600 },
      webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 }
    })
    try {
      const simulatedNow = async () =>
        Date.parse((await request(simulated, "GET", "/apis/nodus.dev/v1/simulation/clock")).body.now)
      // Far past the receiver's tolerance before anything is sent.
      await eventually(
        "the simulated clock 10 minutes ahead",
        async () => (await simulatedNow()) - Date.now() > 600_000
      )
      const created = await request(simulated, "POST", endpoints, {
        body: {
          apiVersion: "nodus.dev/v1",
          kind: "WebhookEndpoint",
          metadata: { name: "fast" },
          spec: { url: `https://receiver.example.com:${receiver.port}/fast` }
        }
      })
      expect(created.status, created.text).toBe(201)
      const ping = await eventually(
        "the ping from the simulator",
        () => receiver.received.find((got) => got.path === "/fast")
      )
      // Checked against the receiver's own clock, as a real receiver checks it.
      expect(receiver.verifies(created.body.status.signingSecret, ping)).toBe(true)
      // The payload's own time stays the simulated one.
      expect(Date.parse(ping.json.timestamp) - Number(ping.headers["webhook-timestamp"]) * 1_000).toBeGreaterThan(
        600_000
      )
    } finally {
      await simulated.stop()
    }
  })
})

describe("the delivery log under a project-bound key", () => {
  it("shows the key only its own project's deliveries, none of an endpoint that covers only another project", async () => {
    const simulated = await startTestServer({
      sim: { speed: 3_600 },
      webhooks: { allowLoopback: true, resolve, timeoutMs: 2_000 }
    })
    try {
      for (const project of ["alpha", "beta"]) await createProject(simulated, project)
      const endpoint = (name: string, projects: ReadonlyArray<string>) =>
        request(simulated, "POST", endpoints, {
          body: {
            apiVersion: "nodus.dev/v1",
            kind: "WebhookEndpoint",
            metadata: { name },
            spec: { url: `https://receiver.example.com:${receiver.port}/${name}`, eventTypes: ["job.*"], projects }
          }
        })
      expect((await endpoint("beta-only", ["beta"])).status).toBe(201)
      expect((await endpoint("both", ["alpha", "beta"])).status).toBe(201)
      const account = await request(simulated, "POST", "/apis/nodus.dev/v1/namespaces/alpha/serviceaccounts", {
        body: {
          apiVersion: "nodus.dev/v1",
          kind: "ServiceAccount",
          metadata: { name: "reader" },
          spec: { scopes: ["webhookendpoints:read"] }
        }
      })
      expect(account.status, account.text).toBe(201)
      const token =
        (await request(simulated, "POST", "/apis/nodus.dev/v1/namespaces/alpha/serviceaccounts/reader/tokens", {
          body: {}
        })).body.status.token as string
      await createJob(simulated, "alpha", "mine")
      await createJob(simulated, "beta", "theirs")
      const log = (name: string, as?: string) =>
        request(simulated, "GET", `${endpoints}/${name}/deliveries`, as === undefined ? {} : { token: as })
      const jobsIn = (reply: { readonly body: any }) =>
        (reply.body.items as ReadonlyArray<any>).filter((item) => item.type.startsWith("job."))
      // Both Jobs' final events are in the admin's view of the log that covers both projects.
      await eventually(
        "both Jobs' deliveries",
        async () => jobsIn(await log("both")).length >= 2 && jobsIn(await log("beta-only")).length >= 1
      )
      const beta = await log("beta-only", token)
      expect(beta.status, beta.text).toBe(200)
      expect(beta.body.items).toEqual([])
      const both = await log("both", token)
      expect(both.status, both.text).toBe(200)
      expect(both.body.items.length).toBeGreaterThan(0)
      const admin = await log("both")
      const alphaIds = new Set(
        (admin.body.items as ReadonlyArray<any>).filter((item) =>
          receiver.received.some((got) =>
            got.headers["webhook-id"] === item.webhookId && got.json.data.object.metadata.namespace === "alpha"
          )
        ).map((item) => item.id)
      )
      expect(new Set(both.body.items.map((item: any) => item.id))).toEqual(alphaIds)
      // Paged one at a time, the key still sees exactly those.
      const paged: Array<string> = []
      for (let after = "";;) {
        const page = await request(simulated, "GET", `${endpoints}/both/deliveries?limit=1&after=${after}`, { token })
        expect(page.status, page.text).toBe(200)
        paged.push(...page.body.items.map((item: any) => item.id))
        if (page.body.metadata.continue === undefined) break
        after = page.body.metadata.continue
      }
      expect(new Set(paged)).toEqual(alphaIds)
    } finally {
      await simulated.stop()
    }
  })
})
