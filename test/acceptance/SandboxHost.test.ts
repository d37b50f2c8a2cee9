/**
 * Acceptance: two rows of a Sandbox's table on a live host (real bubblewrap boxes, the in-process agent), on the wall
 * clock: maxLifetime counts stopped time too — a stopped Sandbox is deleted at its maxLifetime, a watcher seeing it
 * Terminating (reason MaxLifetimeReached) before DELETED, the Event recorded; and an egress AllowList lets the box
 * reach a listed name end to end through its proxy, while an unlisted name and a bare IP address are refused.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { once } from "node:events"
import { type AddressInfo, createServer, type Server } from "node:net"
import { loopbackRanges } from "../../src/core/PublicAddress.ts"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
/** A TCP service on this host's loopback that a box may reach only through its AllowList proxy. */
let listener: Server
let port = 0
const namespace = "host"
const sandboxes = `/apis/nodus.dev/v1/namespaces/${namespace}/sandboxes`
const at = (name: string) => `${sandboxes}/${name}`

/** Starts the loopback service: it greets and hangs up. */
const greeter = async (): Promise<number> => {
  listener = createServer((socket) => socket.end("hello from the host\n")).listen(0, "127.0.0.1")
  await once(listener, "listening")
  return (listener.address() as AddressInfo).port
}

beforeAll(async () => {
  port = await greeter()
  // egressAllow: the operator exception (--egress-allow-cidr) that lets proxies reach loopback names (docs/live.md).
  server = await startTestServer({ local: { egressAllow: loopbackRanges } })
  const reply = await request(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
})

afterAll(async () => {
  listener?.close()
  await server?.stop()
})

const create = async (name: string, spec: Record<string, unknown>) => {
  const created = await request(server, "POST", sandboxes, {
    body: { apiVersion: "nodus.dev/v1", kind: "Sandbox", metadata: { name }, spec: { image: "debian:12", ...spec } }
  })
  assert.strictEqual(created.status, 201, created.text)
}

const statusOf = async (name: string) => (await request(server, "GET", at(name))).body?.status

/** A watch of `path` (a list): every event as it came, until `done` says so or the deadline passes. */
const watch = async (path: string, done: (event: any) => boolean, deadlineMs: number) => {
  const response = await fetch(`${server.url}${path}${path.includes("?") ? "&" : "?"}watch=true`, {
    headers: { authorization: `Bearer ${server.token}` }
  })
  assert.strictEqual(response.status, 200)
  const reader = response.body!.getReader()
  const seen: Array<any> = []
  const decoder = new TextDecoder()
  let buffered = ""
  const timer = setTimeout(() => void reader.cancel(), deadlineMs)
  for (;;) {
    const chunk = await reader.read().catch(() => ({ done: true as const, value: undefined }))
    if (chunk.done) break
    buffered += decoder.decode(chunk.value, { stream: true })
    const lines = buffered.split("\n")
    buffered = lines.pop()!
    seen.push(...lines.filter((text) => text.trim() !== "").map((line) => JSON.parse(line)))
    if (seen.some(done)) break
  }
  clearTimeout(timer)
  await reader.cancel().catch(() => undefined)
  return seen
}

describe("a Sandbox on a live host, on the wall clock", () => {
  it(
    "is deleted at its maxLifetime while stopped: Terminating (MaxLifetimeReached), the Event, then gone",
    async () => {
      // The spec's shortest maxLifetime is a minute; idle never stops it, so only spec.state does.
      await create("brief", { lifecycle: { idleTimeout: "0s", maxLifetime: "1m" } })
      const selector = (field: string) => `?fieldSelector=${encodeURIComponent(`${field}=brief`)}`
      // Events are owned by their object and collected with it: only a watcher sees the last one.
      const watchingEvents = watch(
        `/api/v1/namespaces/${namespace}/events${selector("involvedObject.name")}`,
        (event) => event.object?.reason === "MaxLifetimeReached",
        90_000
      )
      const watching = watch(`${sandboxes}${selector("metadata.name")}`, (event) => event.type === "DELETED", 90_000)
      await eventually("brief runs", async () => (await statusOf("brief"))?.phase === "Running", { timeoutMs: 30_000 })
      const patched = await request(server, "PATCH", at("brief"), {
        body: { spec: { state: "Stopped" } },
        contentType: "application/merge-patch+json"
      })
      assert.strictEqual(patched.status, 200, patched.text)
      await eventually("brief stopped", async () => (await statusOf("brief"))?.phase === "Stopped", {
        timeoutMs: 30_000
      })
      const stopped = await statusOf("brief")
      assert.strictEqual(stopped.stopReason, "Requested")
      const created = Date.parse((await request(server, "GET", at("brief"))).body.metadata.creationTimestamp)
      assert.strictEqual(Date.parse(stopped.expirationTime), created + 60_000)
      // Stopped well before its minute is up: what deletes it counts the stopped time.
      assert.isBelow(Date.now(), created + 60_000)

      const seen = (await watching).map((event) =>
        `${event.type} ${event.object?.status?.phase ?? "-"} ${event.object?.status?.reason ?? "-"}`
      )
      assert.strictEqual(seen.at(-1)?.split(" ")[0], "DELETED", seen.join("\n"))
      const terminating = seen.indexOf("MODIFIED Terminating MaxLifetimeReached")
      const stoppedSeen = seen.findIndex((entry) => entry.startsWith("MODIFIED Stopped"))
      assert.isAtLeast(stoppedSeen, 0, seen.join("\n"))
      assert.isAbove(terminating, stoppedSeen, seen.join("\n"))
      assert.isAtLeast(Date.now(), created + 60_000)
      assert.strictEqual((await request(server, "GET", at("brief"))).status, 404)
      const lifetime = (await watchingEvents).find((event) => event.object?.reason === "MaxLifetimeReached")
      assert.isDefined(lifetime, "no MaxLifetimeReached Event was seen")
      assert.strictEqual(lifetime.type, "ADDED")
      assert.include(lifetime.object.message, "maxLifetime 1m has passed since creation")
    },
    120_000
  )

  it("reaches a listed name through its AllowList proxy; an unlisted name and an IP address are refused", async () => {
    await create("listed", {
      lifecycle: { idleTimeout: "0s" },
      network: { egress: { policy: "AllowList", allow: ["localhost"] } }
    })
    await eventually("listed runs", async () => (await statusOf("listed"))?.phase === "Running", { timeoutMs: 30_000 })
    const connect = (fd: number, target: string) =>
      `exec ${fd}<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\n\\r\\n' >&${fd}; head -n 8 <&${fd} | tr -d '\\r'; echo "-- $HTTPS_PROXY"`
    const script = [
      connect(3, `localhost:${port}`),
      connect(4, "unlisted.example:443"),
      connect(5, `127.0.0.1:${port}`)
    ].join("; ")
    const reply = await request(server, "POST", `${at("listed")}/commands`, {
      body: { command: ["bash", "-c", script] }
    })
    assert.strictEqual(reply.status, 200, reply.text)
    const [listed, unlisted, address] = (reply.body.stdout as string).split(/^-- .*$/mu)
    assert.include(listed, "HTTP/1.1 200 Connection established", reply.body.stdout)
    assert.include(listed, "hello from the host", reply.body.stdout)
    assert.match(unlisted!, /HTTP\/1\.1 403/u, reply.body.stdout)
    assert.include(unlisted, "unlisted.example is not in the egress allow list", reply.body.stdout)
    assert.notInclude(unlisted, "hello from the host")
    assert.match(address!, /HTTP\/1\.1 403/u, reply.body.stdout)
    assert.include(address, "127.0.0.1 is an IP address", reply.body.stdout)
    assert.include(reply.body.stdout, "-- http://127.0.0.1:3128")
    // Without the proxy the box has no route out at all: the host's port is not reachable directly.
    const direct = await request(server, "POST", `${at("listed")}/commands`, {
      body: { command: ["bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/${port} && head -n 1 <&3`] }
    })
    assert.strictEqual(direct.status, 200, direct.text)
    assert.notStrictEqual(direct.body.exitCode, 0, direct.text)
    assert.notInclude(direct.body.stdout, "hello from the host")
  }, 60_000)
})
