/**
 * What a workload cannot reach on the local backend, on a server whose operator named no exception
 * (--egress-allow-cidr): an Open Job finds no route to the host's loopback, its own addresses or the API port, and
 * its proxy refuses each of them by address and by name; a `url` input on loopback fails before any connection, with
 * the same words for an open port and a closed one (docs/live.md, "Network" and "Inputs"). Loopback only: every other
 * address is refused before a packet is sent.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { once } from "node:events"
import { type AddressInfo, createServer, type Server } from "node:net"
import { networkInterfaces } from "node:os"
import { eventually } from "../support/Eventually.ts"
import { request, startTestServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
let listener: Server
let listenerPort = 0
let closedPort = 0
const namespace = "egress"
const jobs = `/apis/nodus.dev/v1/namespaces/${namespace}/jobs`
/** The host's first non-loopback address, if it has one. */
const ownAddress = Object.values(networkInterfaces()).flat().find((entry) =>
  entry !== undefined && !entry.internal && entry.family === "IPv4"
)?.address

beforeAll(async () => {
  // A loopback service of the host (the store's database, say), on every interface.
  listener = createServer((socket) => socket.end("hello from the host\n"))
  listener.listen(0, "0.0.0.0")
  await once(listener, "listening")
  listenerPort = (listener.address() as AddressInfo).port
  const probe = createServer().listen(0, "127.0.0.1")
  await once(probe, "listening")
  closedPort = (probe.address() as AddressInfo).port
  await new Promise((done) => probe.close(done))
  server = await startTestServer({ local: true })
  const reply = await request(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
})

afterAll(async () => {
  listener?.close()
  await server?.stop()
})

const run = async (name: string, spec: Record<string, unknown>, phase: string): Promise<any> => {
  const created = await request(server, "POST", jobs, {
    body: {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name },
      spec: { image: "debian:12", backoffLimit: 0, ...spec }
    }
  })
  assert.strictEqual(created.status, 201, created.text)
  let job: any
  await eventually(`${name} ${phase}`, async () => {
    job = (await request(server, "GET", `${jobs}/${name}`)).body
    return job?.status?.phase === phase || job?.status?.phase === "Failed" || job?.status?.phase === "Succeeded"
  }, { timeoutMs: 60_000 })
  assert.strictEqual(job.status.phase, phase, JSON.stringify(job.status))
  return job
}

const logOf = async (name: string) => (await request(server, "GET", `${jobs}/${name}/log`)).text

describe("an Open Job", () => {
  it("finds no route to the host's loopback services, its own address or the API port, and its proxy refuses each", async () => {
    const apiPort = new URL(server.url).port
    const targets = [
      `127.0.0.1:${listenerPort}`,
      `127.0.0.1:${apiPort}`,
      `localhost:${apiPort}`,
      ...(ownAddress === undefined ? [] : [`${ownAddress}:${listenerPort}`])
    ]
    const direct = (target: string) =>
      `if exec 3<>/dev/tcp/${
        target.replace(":", "/")
      }; then echo "direct ${target}: reached"; else echo "direct ${target}: no route"; fi 2>/dev/null`
    const proxied = (target: string) =>
      `exec 4<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT ${target} HTTP/1.1\\r\\n\\r\\n' >&4; echo "proxy ${target}: $(head -n 1 <&4 | tr -d '\\r')"`
    const script = targets.filter((target) => !target.startsWith("localhost")).map(direct).concat(targets.map(proxied))
      .join("\n")
    await run("open", { command: ["bash", "-c", script], network: { egress: { policy: "Open" } } }, "Succeeded")
    const log = await logOf("open")
    assert.notInclude(log, "reached", log)
    assert.notInclude(log, "hello from the host", log)
    for (const target of targets) {
      if (!target.startsWith("localhost")) assert.include(log, `direct ${target}: no route`, log)
      assert.include(log, `proxy ${target}: HTTP/1.1 403 Forbidden`, log)
    }
  })
})

describe("a url input", () => {
  it("on the host's loopback fails before any connection, in the same words for an open port and a closed one", async () => {
    const input = (
      port: number
    ) => [{ name: "data", url: { url: `https://127.0.0.1:${port}/data`, sha256: "0".repeat(64) } }]
    const open = await run("input-open", { command: ["true"], inputs: input(listenerPort) }, "Failed")
    const closed = await run("input-closed", { command: ["true"], inputs: input(closedPort) }, "Failed")
    assert.include(
      open.status.message,
      `input data: could not fetch https://127.0.0.1:${listenerPort}/data: address not allowed`
    )
    assert.strictEqual(
      open.status.message.replaceAll(String(listenerPort), "PORT"),
      closed.status.message.replaceAll(String(closedPort), "PORT")
    )
  })
})
