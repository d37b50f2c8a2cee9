/**
 * Acceptance: a Sandbox's lifecycle on a live host, on the wall clock (the spec's shortest idleTimeout and maxLifetime
 * are a minute, so this file waits about two, beside the rest of the suite): idle with onIdle Stop stops it (its
 * /workspace saved) and a start request annotation starts it again, a running background command keeps one Running,
 * idle with onIdle Delete deletes one, and maxLifetime deletes one.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../support/Eventually.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api } from "./Clients.ts"

let server: TestServer
const namespace = "lifecycle"
const path = (name?: string) =>
  `/apis/nodus.dev/v1/namespaces/${namespace}/sandboxes${name === undefined ? "" : `/${name}`}`

beforeAll(async () => {
  server = await startTestServer({ tls: true, local: true })
  const reply = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
})

afterAll(async () => {
  await server?.stop()
})

const create = async (name: string, lifecycle: Record<string, string>) => {
  const created = await api(server, "POST", path(), {
    body: { apiVersion: "nodus.dev/v1", kind: "Sandbox", metadata: { name }, spec: { image: "debian:12", lifecycle } }
  })
  assert.strictEqual(created.status, 201, created.text)
}

const status = async (name: string) => (await api(server, "GET", path(name))).body?.status

describe("a Sandbox's lifecycle on the wall clock", () => {
  // This host's Node runs one box per vCPU (two here): the rows run two by two.
  it(
    "stops when idle and stays while a command runs; is deleted when idle with onIdle Delete, and at maxLifetime",
    async () => {
      await create("quiet", { idleTimeout: "1m" })
      await create("busy", { idleTimeout: "1m" })
      for (const name of ["quiet", "busy"]) {
        await eventually(`${name} runs`, async () => (await status(name))?.phase === "Running", { timeoutMs: 30_000 })
      }
      const started = await api(server, "POST", `${path("busy")}/commands`, {
        body: { command: ["sleep", "600"], background: true }
      })
      assert.strictEqual(started.status, 201, started.text)
      await eventually("busy is Busy", async () => (await status("busy"))?.activity === "Busy", { timeoutMs: 10_000 })
      await eventually("quiet stopped for idleness, its /workspace saved", async () => {
        const quiet = await status("quiet")
        return quiet?.phase === "Stopped" && quiet?.stopReason === "IdleTimeout" && quiet?.snapshot?.reason === "Stop"
      }, { timeoutMs: 90_000 })
      const busy = await status("busy")
      assert.strictEqual(busy?.phase, "Running")
      assert.strictEqual(busy?.activity, "Busy")
      const events = await api(server, "GET", `/api/v1/namespaces/${namespace}/events`)
      assert.include(events.text, "IdleTimeout")
      assert.include((await server.streamed()).map((event) => event.type), "sandbox.stopped")
      // Stopped for idleness, it stays stopped while spec.state says Running, until a start request.
      const request = "2026-11-26T00:00:00Z"
      const patched = await api(server, "PATCH", path("quiet"), {
        body: { metadata: { annotations: { "nodus.dev/start-requested-at": request } } },
        contentType: "application/merge-patch+json"
      })
      assert.strictEqual(patched.status, 200, patched.text)
      await eventually("quiet runs again", async () => (await status("quiet"))?.phase === "Running", {
        timeoutMs: 30_000
      })
      assert.strictEqual((await status("quiet"))?.handledRequests?.["start-requested-at"], request)
      assert.strictEqual((await status("quiet"))?.attempt?.epoch, 2)
      for (const name of ["quiet", "busy"]) assert.strictEqual((await api(server, "DELETE", path(name))).status, 200)

      await create("doomed", { idleTimeout: "1m", onIdle: "Delete" })
      await create("brief", { idleTimeout: "0s", maxLifetime: "1m" })
      await eventually("brief runs", async () => (await status("brief"))?.phase === "Running", { timeoutMs: 30_000 })
      assert.isDefined((await status("brief"))?.expirationTime)
      await eventually(
        "doomed was deleted for idleness",
        async () => (await api(server, "GET", path("doomed"))).status === 404,
        { timeoutMs: 90_000 }
      )
      await eventually(
        "brief was deleted at its maxLifetime",
        async () => (await api(server, "GET", path("brief"))).status === 404,
        { timeoutMs: 30_000 }
      )
    },
    240_000
  )
})
