/**
 * Acceptance: a second host joins through `nodus agent` (a real process, over HTTPS with the server's CA), as a Node of
 * a project's Pool. Its EnrollmentToken is shown once; a used-up token is EnrollmentTokenInvalid; the Node is Ready and
 * runs indexes of a Job placed on it (their outputs uploaded over HTTPS); killed with SIGKILL, its lease lapses
 * (shortened to 3 s here; 40 s by default), the Node goes NotReady, its run ends NodeLost and the Job recovers on this
 * server's own Node — and nothing the killed agent ran survives it.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { chmodSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { removeTree } from "../support/RemoveTree.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api, type Background, createFromYaml, kubectl, requireKubectl, run, start } from "./Clients.ts"

let server: TestServer
const namespace = "fleet"
const agentDir = mkdtempSync(join(tmpdir(), "nodus-agent-"))
// Programs run as an unprivileged user, who must reach their areas under the agents' data directories.
chmodSync(agentDir, 0o711)
const nodusBin = join(import.meta.dirname, "../../bin/nodus.js")
const node = join(import.meta.dirname, "../../node_modules/.bin/node")
let agent: Background | undefined
let token = ""

beforeAll(async () => {
  requireKubectl()
  server = await startTestServer({ tls: true, local: { lease: { renewMs: 500, expiryMs: 3_000 } } })
  const reply = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
})
afterAll(async () => {
  await agent?.stop()
  await server?.stop()
  await removeTree(agentDir)
})

const path = (plural: string, name?: string) =>
  `/apis/nodus.dev/v1/namespaces/${namespace}/${plural}${name === undefined ? "" : `/${name}`}`

const startAgent = (dataDir: string, name: string, withToken: string) =>
  start(node, [
    nodusBin,
    "agent",
    "--server",
    server.url,
    "--token",
    withToken,
    "--ca",
    server.caPath!,
    "--data-dir",
    dataDir,
    "--name",
    name
  ], { timeoutMs: 120_000 })

const apply = (name: string, yaml: string) => createFromYaml(server, name, yaml)

const job = async (name: string) => (await api(server, "GET", path("jobs", name))).body

describe("a host joined with nodus agent", () => {
  it("enrolls with a token shown once, and its Node is Ready", async () => {
    await apply(
      "pool",
      ["apiVersion: nodus.dev/v1", "kind: Pool", "metadata: {name: edge, namespace: fleet}", "spec: {}"].join("\n")
    )
    const created = await apply(
      "token",
      [
        "apiVersion: nodus.dev/v1",
        "kind: EnrollmentToken",
        "metadata: {name: edge, namespace: fleet}",
        "spec: {pool: edge}"
      ].join("\n")
    )
    token = created.status.token
    assert.match(token, /^nde_/u)
    assert.strictEqual(created.status.phase, "Active")
    const read = await kubectl(server, ["get", "enrollmenttokens.nodus.dev", "edge", "-n", namespace, "-o", "json"])
    assert.notInclude(read.stdout, token)
    agent = startAgent(join(agentDir, "edge-1"), "edge-1", token)
    await eventually("the agent says it is connected", () => agent!.stdout().includes("connected"), {
      timeoutMs: 30_000
    })
    await eventually(
      "Node edge-1 is Ready",
      async () => (await api(server, "GET", path("nodes", "edge-1"))).body?.status?.phase === "Ready",
      { timeoutMs: 15_000 }
    )
    const nodeObject = (await api(server, "GET", path("nodes", "edge-1"))).body
    assert.strictEqual(nodeObject.spec.pool, "edge")
    assert.isAbove(Number(nodeObject.status.capacity.cpu), 0)
    await eventually("Pool edge counts its Node", async () => {
      const capacity = (await api(server, "GET", path("pools", "edge"))).body?.status?.capacity
      return capacity?.nodes === 1 && capacity?.readyNodes === 1
    }, { timeoutMs: 15_000 })
    const used = (await api(server, "GET", path("enrollmenttokens", "edge"))).body
    assert.deepStrictEqual([used.status.phase, used.status.uses, used.status.nodes], ["Exhausted", 1, ["edge-1"]])
  })

  it("refuses a used-up token (EnrollmentTokenInvalid), and nothing is enrolled", async () => {
    const second = await run(node, [
      nodusBin,
      "agent",
      "--server",
      server.url,
      "--token",
      token,
      "--ca",
      server.caPath!,
      "--data-dir",
      join(agentDir, "edge-2"),
      "--name",
      "edge-2"
    ])
    assert.strictEqual(second.code, 1)
    assert.include(second.stderr, "not valid")
    assert.strictEqual((await api(server, "GET", path("nodes", "edge-2"))).status, 404)
    const forged = await run(node, [
      nodusBin,
      "agent",
      "--server",
      server.url,
      "--token",
      "nde_forged",
      "--ca",
      server.caPath!,
      "--data-dir",
      join(agentDir, "edge-3")
    ])
    assert.strictEqual(forged.code, 1)
    assert.include(forged.stderr, "HTTP 401")
  })

  it("runs the indexes of a Job placed on it", async () => {
    await apply(
      "spread",
      [
        "apiVersion: nodus.dev/v1",
        "kind: Job",
        "metadata: {name: spread, namespace: fleet}",
        "spec:",
        "  image: debian:12",
        "  command: [sh, -c, 'echo index $PLATFORM_INDEX | tee /platform/outputs/index.txt']",
        "  completions: 2",
        "  parallelism: 2",
        "  placement: {offerings: [edge-1]}"
      ].join("\n")
    )
    await eventually("spread succeeds", async () => (await job("spread"))?.status?.phase === "Succeeded", {
      timeoutMs: 30_000
    })
    const attempts = (await api(server, "GET", path("attempts"))).body.items.filter((item: any) =>
      item.metadata.name.startsWith("spread-")
    )
    assert.strictEqual(attempts.length, 2)
    for (const attempt of attempts) assert.strictEqual(attempt.status.offering, "edge-1")
    const log = await kubectl(server, ["get", "--raw", `${path("jobs", "spread")}/log?index=1`])
    assert.strictEqual(log.stdout, "index 1\n")
    const outputs = (await job("spread")).status.outputs as ReadonlyArray<{ name: string; index: number; size: number }>
    assert.deepStrictEqual(outputs.map((output) => `${output.name}/${output.index}`).sort(), ["outputs/0", "outputs/1"])
    const archive = await kubectl(server, ["get", "--raw", `${path("jobs", "spread")}/outputs/outputs?index=1`])
    assert.strictEqual(archive.code, 0, archive.stderr)
    assert.isAbove(archive.stdout.length, 0)
  })

  it("takes no new work while cordoned, and runs it once uncordoned", async () => {
    const listed = await kubectl(server, ["get", "nodes.nodus.dev", "-n", namespace])
    assert.include(listed.stdout, "edge-1")
    const cordon = (value: boolean) =>
      kubectl(server, [
        "patch",
        "nodes.nodus.dev",
        "edge-1",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        JSON.stringify({ spec: { cordoned: value } })
      ])
    assert.strictEqual((await cordon(true)).code, 0)
    await apply(
      "waiter",
      [
        "apiVersion: nodus.dev/v1",
        "kind: Job",
        "metadata: {name: waiter, namespace: fleet}",
        "spec:",
        "  image: debian:12",
        "  command: [\"true\"]",
        "  placement: {offerings: [edge-1]}"
      ].join("\n")
    )
    await eventually("waiter is unschedulable", async () => {
      const conditions = (await job("waiter"))?.status?.conditions ?? []
      return conditions.some((condition: any) => condition.type === "Scheduled" && condition.reason === "Unschedulable")
    }, { timeoutMs: 15_000 })
    assert.strictEqual((await cordon(false)).code, 0)
    await eventually(
      "waiter succeeds on edge-1",
      async () => (await job("waiter"))?.status?.phase === "Succeeded",
      { timeoutMs: 15_000 }
    )
  })

  it("suspends with a checkpoint uploaded from the host, and resumes from it on another Node", async () => {
    const program =
      "if [ -f /platform/state/progress ]; then echo restored $(cat /platform/state/progress); else echo 7 > /platform/state/progress; echo fresh; fi; sleep 600"
    await apply(
      "keeper",
      [
        "apiVersion: nodus.dev/v1",
        "kind: Job",
        "metadata: {name: keeper, namespace: fleet}",
        "spec:",
        "  image: debian:12",
        `  command: [sh, -c, '${program}']`,
        "  placement: {offerings: [edge-1, local]}"
      ].join("\n")
    )
    await eventually("keeper runs fresh on edge-1", async () => {
      const attempt = (await api(server, "GET", path("attempts", "keeper-0-1"))).body
      const log = await kubectl(server, ["get", "--raw", `${path("jobs", "keeper")}/log`])
      return attempt?.status?.offering === "edge-1" && log.stdout.includes("fresh")
    }, { timeoutMs: 30_000 })
    const patch = (body: unknown, target = ["jobs.nodus.dev", "keeper"]) =>
      kubectl(server, ["patch", ...target, "-n", namespace, "--type", "merge", "-p", JSON.stringify(body)])
    assert.strictEqual((await patch({ spec: { cordoned: true } }, ["nodes.nodus.dev", "edge-1"])).code, 0)
    assert.strictEqual((await patch({ spec: { state: "Suspended" } })).code, 0)
    await eventually("keeper is suspended with a checkpoint", async () => {
      const status = (await job("keeper"))?.status
      return status?.phase === "Suspended" && status?.checkpoint?.seq >= 1
    }, { timeoutMs: 30_000 })
    assert.strictEqual((await patch({ spec: { state: "Running" } })).code, 0)
    await eventually("keeper resumes from its checkpoint on this server's Node", async () => {
      const attempt = (await api(server, "GET", path("attempts", "keeper-0-2"))).body
      const log = await kubectl(server, ["get", "--raw", `${path("jobs", "keeper")}/log?attempt=2`])
      return attempt?.status?.offering === "local" && log.stdout.includes("restored 7")
    }, { timeoutMs: 30_000 })
    assert.strictEqual((await patch({ spec: { cordoned: false } }, ["nodes.nodus.dev", "edge-1"])).code, 0)
    assert.strictEqual((await api(server, "DELETE", path("jobs", "keeper"))).status, 200)
  })

  it("loses its runs when killed: NodeLost once its lease lapses, recovered on another Node, nothing left running", async () => {
    const marker = `survivor-${process.pid}`
    await apply(
      "survivor",
      [
        "apiVersion: nodus.dev/v1",
        "kind: Job",
        "metadata: {name: survivor, namespace: fleet}",
        "spec:",
        "  image: debian:12",
        `  command: [sh, -c, 'echo ${marker}; exec sleep 600']`,
        "  network: {egress: {policy: Deny}}",
        "  placement: {offerings: [edge-1, local]}",
        "  recovery: {continuity: Restartable}"
      ].join("\n")
    )
    await eventually("survivor runs on edge-1", async () => {
      const attempt = (await api(server, "GET", path("attempts", "survivor-0-1"))).body
      return attempt?.status?.offering === "edge-1" && (await job("survivor"))?.status?.phase === "Running"
    }, { timeoutMs: 30_000 })
    execFileSync("kill", ["-9", String(agent!.pid)])
    await agent!.done
    // bwrap dies with its parent (--die-with-parent): the killed agent's program is gone.
    await eventually("the killed agent's program is gone", () => {
      try {
        execFileSync("pgrep", ["-f", "sleep 600"])
        return false
      } catch {
        return true
      }
    }, { timeoutMs: 10_000 })
    await eventually(
      "Node edge-1 is NotReady",
      async () => (await api(server, "GET", path("nodes", "edge-1"))).body?.status?.phase === "NotReady",
      { timeoutMs: 15_000 }
    )
    // Its Pool's webhook event, recorded with that status (spec: Event types, pool.node_offline).
    const offline = (await server.streamed()).filter((event) => event.type === "pool.node_offline")
    assert.deepStrictEqual(
      offline.map((
        event
      ) => [event.data.object.kind, event.data.object.metadata.name, event.data.object.status["phase"]]),
      [["Node", "edge-1", "NotReady"]]
    )
    await eventually(
      "Pool edge has no Ready Node",
      async () => (await api(server, "GET", path("pools", "edge"))).body?.status?.capacity?.readyNodes === 0,
      { timeoutMs: 15_000 }
    )
    await eventually(
      "the first run ended NodeLost",
      async () => (await api(server, "GET", path("attempts", "survivor-0-1"))).body?.status?.reason === "NodeLost",
      { timeoutMs: 15_000 }
    )
    await eventually("a replacement runs on this server's own Node", async () => {
      const replacement = (await api(server, "GET", path("attempts", "survivor-0-2"))).body
      return replacement?.status?.offering === "local" && replacement?.status?.phase === "Running"
    }, { timeoutMs: 15_000 })
    const events = await api(server, "GET", `/api/v1/namespaces/${namespace}/events`)
    assert.include(events.text, "NodeLost")
    const cancelled = await api(server, "DELETE", path("jobs", "survivor"))
    assert.strictEqual(cancelled.status, 200, cancelled.text)
  })
})
