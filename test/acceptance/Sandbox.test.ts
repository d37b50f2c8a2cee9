/**
 * Acceptance: Sandboxes on live hosts, through kubectl and the HTTP API (docs/sandboxes.md). A server with its own
 * Node and a second host joined with `nodus agent` (a real process over HTTPS): a Sandbox runs commands (foreground,
 * background with a followed log, stdin, kill) and takes files; stopped, it saves /workspace; started again on the
 * other Node, the file reads back; an Ephemeral one loses it; a stopped one refuses commands with the spec's error;
 * untrusted code in it sees no host process and no control-plane file and does not run as root; a secret reaches the
 * box and never its status or events.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { chmodSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import WebSocket from "ws"
import { eventually } from "../support/Eventually.ts"
import { removeTree } from "../support/RemoveTree.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { api, type Background, createFromYaml, kubectl, requireKubectl, start, startKubectl } from "./Clients.ts"

let server: TestServer
const namespace = "boxes"
const agentDir = mkdtempSync(join(tmpdir(), "nodus-sandbox-agent-"))
chmodSync(agentDir, 0o711)
const nodusBin = join(import.meta.dirname, "../../bin/nodus.js")
const node = join(import.meta.dirname, "../../node_modules/.bin/node")
let agent: Background | undefined

const path = (plural: string, name?: string) =>
  `/apis/nodus.dev/v1/namespaces/${namespace}/${plural}${name === undefined ? "" : `/${name}`}`

const apply = (name: string, yaml: string) => createFromYaml(server, name, yaml)

const sandbox = async (name: string) => (await api(server, "GET", path("sandboxes", name))).body

const sandboxYaml = (name: string, extra: ReadonlyArray<string> = []) =>
  [
    "apiVersion: nodus.dev/v1",
    "kind: Sandbox",
    `metadata: {name: ${name}, namespace: ${namespace}}`,
    "spec:",
    "  image: debian:12",
    ...extra
  ].join("\n")

const running = (name: string) =>
  eventually(`${name} is Running`, async () => (await sandbox(name))?.status?.phase === "Running", {
    timeoutMs: 30_000
  })

const exec = (name: string, command: ReadonlyArray<string>, extra: Record<string, unknown> = {}) =>
  api(server, "POST", `${path("sandboxes", name)}/commands`, { body: { command, ...extra } })

const setState = (name: string, state: string) =>
  kubectl(server, [
    "patch",
    "sandboxes.nodus.dev",
    name,
    "-n",
    namespace,
    "--type",
    "merge",
    "-p",
    JSON.stringify({ spec: { state } })
  ])

const offeringOf = async (name: string) => {
  const status = (await sandbox(name)).status
  return (await api(server, "GET", path("attempts", status.attempt.name))).body.status.offering as string
}

beforeAll(async () => {
  requireKubectl()
  server = await startTestServer({ tls: true, local: { lease: { renewMs: 500, expiryMs: 3_000 } } })
  const reply = await api(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }
  })
  assert.strictEqual(reply.status, 201, reply.text)
  await apply(
    "pool",
    ["apiVersion: nodus.dev/v1", "kind: Pool", `metadata: {name: edge, namespace: ${namespace}}`, "spec: {}"].join("\n")
  )
  const token = (await apply(
    "token",
    [
      "apiVersion: nodus.dev/v1",
      "kind: EnrollmentToken",
      `metadata: {name: edge, namespace: ${namespace}}`,
      "spec: {pool: edge}"
    ].join("\n")
  )).status.token
  agent = start(node, [
    nodusBin,
    "agent",
    "--server",
    server.url,
    "--token",
    token,
    "--ca",
    server.caPath!,
    "--data-dir",
    join(agentDir, "edge-1"),
    "--name",
    "edge-1"
  ], { timeoutMs: 300_000 })
  await eventually(
    "Node edge-1 is Ready",
    async () => (await api(server, "GET", path("nodes", "edge-1"))).body?.status?.phase === "Ready",
    { timeoutMs: 30_000 }
  )
})

afterAll(async () => {
  await agent?.stop()
  await server?.stop()
  await removeTree(agentDir)
})

describe("a Sandbox on live hosts", () => {
  it("runs foreground and background commands, and takes files", async () => {
    const created = await apply("work", sandboxYaml("work", ["  env: [{name: GREETING, value: hi}]"]))
    assert.isDefined(created.status.estimate?.rateUSDPerHour)
    await running("work")
    const status = (await sandbox("work")).status
    assert.deepStrictEqual(status.attempt.epoch, 1)
    assert.strictEqual(status.activity, "Idle")

    const fg = await exec("work", ["sh", "-c", "echo $GREETING; echo err >&2; exit 4"])
    assert.strictEqual(fg.status, 200, fg.text)
    assert.deepInclude(fg.body, { exitCode: 4, stdout: "hi\n", stderr: "err\n" })

    const bg = await exec("work", [
      "sh",
      "-c",
      "while read line; do echo \"[$line]\"; [ \"$line\" = end ] && exit 0; done"
    ], { background: true })
    assert.strictEqual(bg.status, 201, bg.text)
    const id = bg.body.id as string
    const command = `${path("sandboxes", "work")}/commands/${id}`
    assert.strictEqual(
      (await api(server, "POST", `${command}/stdin`, { body: "a\nend\n", contentType: "application/octet-stream" }))
        .status,
      200
    )
    const log = await kubectl(server, ["get", "--raw", `${command}/log?follow=true`])
    assert.strictEqual(log.stdout, "[a]\n[end]\n")
    assert.deepInclude((await api(server, "GET", command)).body, { id, phase: "Exited", exitCode: 0 })

    const sleeper = await exec("work", ["sleep", "600"], { background: true })
    const killed = await api(server, "POST", `${path("sandboxes", "work")}/commands/${sleeper.body.id}/kill`)
    assert.strictEqual(killed.status, 200, killed.text)
    await eventually(
      "the sleeper was killed",
      async () =>
        (await api(server, "GET", `${path("sandboxes", "work")}/commands/${sleeper.body.id}`)).body?.signal ===
          "SIGKILL",
      { timeoutMs: 10_000 }
    )

    const put = await api(server, "PUT", `${path("sandboxes", "work")}/files?path=/workspace/src/main.py`, {
      body: "print('kept')\n",
      contentType: "application/octet-stream"
    })
    assert.strictEqual(put.status, 200, put.text)
    assert.strictEqual(
      (await api(server, "GET", `${path("sandboxes", "work")}/files?path=/workspace/src/main.py`)).text,
      "print('kept')\n"
    )
    const listing = await api(server, "GET", `${path("sandboxes", "work")}/files?path=/workspace/src`)
    assert.deepInclude(listing.body.entries[0], { name: "main.py", size: 14, type: "file" })
    const missing = await api(server, "GET", `${path("sandboxes", "work")}/files?path=/workspace/nothing`)
    assert.strictEqual(missing.status, 404)
    const invalid = await exec("work", [])
    assert.strictEqual(invalid.status, 422, invalid.text)
    assert.strictEqual(invalid.body.details.causes[0].field, "command")
  })

  it("saves /workspace on stop, and restores it when started on another Node", async () => {
    const before = await offeringOf("work")
    assert.strictEqual((await setState("work", "Stopped")).code, 0)
    await eventually("work is Stopped with a snapshot", async () => {
      const status = (await sandbox("work"))?.status
      return status?.phase === "Stopped" && status?.snapshot?.reason === "Stop"
    }, { timeoutMs: 30_000 })
    const stopped = await exec("work", ["true"])
    assert.strictEqual(stopped.status, 409)
    assert.strictEqual(stopped.body.reason, "SandboxNotRunning")
    // Its Node (edge-1, which placement prefers while it has room) takes no new work: the next start goes to the other
    // one. (This server's own Node has no object to cordon.)
    assert.strictEqual(before, "edge-1")
    const target = ["nodes.nodus.dev", before, "-n", namespace]
    assert.strictEqual(
      (await kubectl(server, [
        "patch",
        ...target,
        "--type",
        "merge",
        "-p",
        JSON.stringify({ spec: { cordoned: true } })
      ])).code,
      0
    )
    assert.strictEqual((await setState("work", "Running")).code, 0)
    await running("work")
    assert.notStrictEqual(await offeringOf("work"), before)
    assert.strictEqual((await sandbox("work")).status.attempt.epoch, 2)
    const read = await exec("work", ["cat", "/workspace/src/main.py"])
    assert.strictEqual(read.body.stdout, "print('kept')\n")
    assert.strictEqual(
      (await kubectl(server, [
        "patch",
        ...target,
        "--type",
        "merge",
        "-p",
        JSON.stringify({ spec: { cordoned: false } })
      ])).code,
      0
    )
  })

  it("starts an Ephemeral Sandbox from the image every time", async () => {
    await apply("scratch", sandboxYaml("scratch", ["  continuity: {mode: Ephemeral}"]))
    await running("scratch")
    await exec("scratch", ["sh", "-c", "echo temp > /workspace/t"])
    assert.strictEqual((await setState("scratch", "Stopped")).code, 0)
    await eventually("scratch is Stopped", async () => (await sandbox("scratch"))?.status?.phase === "Stopped", {
      timeoutMs: 30_000
    })
    assert.isUndefined((await sandbox("scratch")).status.snapshot)
    assert.strictEqual((await setState("scratch", "Running")).code, 0)
    await running("scratch")
    const read = await exec("scratch", ["sh", "-c", "cat /workspace/t 2>/dev/null || echo gone"])
    assert.strictEqual(read.body.stdout, "gone\n")
  })

  it("opens a terminal over a WebSocket: output, input, resize, the shell's exit; a silent open terminal is Idle", async () => {
    const url = `${server.url.replace(/^https/u, "wss")}${path("sandboxes", "work")}/terminal?cols=100&rows=30`
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${server.token}` }, ca: server.ca })
    let output = ""
    let exit: unknown
    socket.on("message", (data: Buffer, binary: boolean) => {
      if (binary) output += data.toString("utf8")
      else exit = JSON.parse(data.toString("utf8")).exit
    })
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
    await new Promise<void>((resolve, reject) => socket.on("open", () => resolve()).on("error", reject))
    socket.send(Buffer.from("stty size\n"), { binary: true })
    await eventually("the first size", () => output.includes("30 100"), { timeoutMs: 10_000 })
    // The shell runs, yet the Sandbox is not Busy: only input is activity.
    await eventually(
      "work is Idle with its terminal open",
      async () => (await sandbox("work"))?.status?.activity === "Idle",
      { timeoutMs: 10_000 }
    )
    socket.send(JSON.stringify({ resize: { cols: 120, rows: 40 } }))
    await new Promise((resolve) => setTimeout(resolve, 300))
    socket.send(Buffer.from("stty size; exit 3\n"), { binary: true })
    await closed
    assert.include(output, "40 120")
    assert.strictEqual(exit, 3)
  })

  it("keeps untrusted code in its box, and a secret out of status and events", async () => {
    const value = "box-s3cr3t-42"
    const secret = await api(server, "POST", path("secrets"), {
      body: {
        apiVersion: "nodus.dev/v1",
        kind: "Secret",
        metadata: { name: "token" },
        spec: { data: { token: value } }
      }
    })
    assert.strictEqual(secret.status, 201, secret.text)
    await apply("probe", sandboxYaml("probe", ["  secrets: [token]"]))
    await running("probe")
    const probe = await exec("probe", [
      "sh",
      "-c",
      [
        "echo uid=$(id -u)",
        "echo pids=$(ls /proc | grep -c '^[0-9]')",
        `ls ${server.directory} >/dev/null 2>&1 && echo SAW-SERVER-FILES`,
        "echo secret=$(cat /run/secrets/token/token) mode=$(stat -c %a /run/secrets/token/token)"
      ].join("; ")
    ])
    assert.strictEqual(probe.status, 200, probe.text)
    assert.match(probe.body.stdout, /^uid=1000$/mu)
    assert.isBelow(Number(/^pids=(\d+)$/mu.exec(probe.body.stdout)?.[1]), 10)
    assert.notInclude(probe.body.stdout, "SAW-SERVER-FILES")
    assert.include(probe.body.stdout, `secret=${value} mode=400`)
    assert.notInclude(JSON.stringify(await sandbox("probe")), value)
    assert.notInclude((await api(server, "GET", `/api/v1/namespaces/${namespace}/events`)).text, value)
    const events = await api(server, "GET", `/api/v1/namespaces/${namespace}/events`)
    assert.include(events.text, "Started")
  })

  it(
    "recovers a Sandbox whose host is lost (Recovering, NodeLost) from its last snapshot, losing what came after",
    async () => {
      // The earlier Sandboxes go, so that edge-1 (which placement prefers while it has room) takes this one once their
      // boxes are gone (a Sandbox is not placed by name: one that lands on this server's Node is made again).
      for (const name of ["work", "scratch", "probe"]) {
        assert.strictEqual(
          (await api(server, "DELETE", path("sandboxes", name))).status,
          200
        )
      }
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      for (let tries = 0;; tries++) {
        await apply(`fragile-${tries}`, sandboxYaml("fragile", ["  lifecycle: {idleTimeout: 0s}"]))
        await running("fragile")
        if (await offeringOf("fragile") === "edge-1") break
        assert.isBelow(tries, 20, "fragile never landed on edge-1")
        assert.strictEqual((await api(server, "DELETE", path("sandboxes", "fragile"))).status, 200)
        await eventually(
          "fragile is gone",
          async () => (await api(server, "GET", path("sandboxes", "fragile"))).status === 404,
          { timeoutMs: 10_000 }
        )
        await new Promise((resolve) => setTimeout(resolve, 500))
      }
      await exec("fragile", ["sh", "-c", "echo saved > /workspace/saved"])
      assert.strictEqual((await setState("fragile", "Stopped")).code, 0)
      await eventually(
        "fragile is Stopped",
        async () => (await sandbox("fragile"))?.status?.phase === "Stopped",
        { timeoutMs: 30_000 }
      )
      assert.strictEqual((await setState("fragile", "Running")).code, 0)
      await running("fragile")
      assert.strictEqual(await offeringOf("fragile"), "edge-1")
      await exec("fragile", ["sh", "-c", "echo unsaved > /workspace/unsaved"])
      // Every phase it goes through, as a watch sees it (Recovering may last only as long as a warm box takes).
      const watch = startKubectl(server, [
        "get",
        "sandboxes.nodus.dev",
        "fragile",
        "-n",
        namespace,
        "--watch",
        "-o",
        "jsonpath={.status.phase}/{.status.reason}{\"\\n\"}"
      ], { timeoutMs: 60_000 })
      await eventually("the watch sees fragile", () => watch.stdout().includes("Running/"), { timeoutMs: 10_000 })
      process.kill(agent!.pid!, "SIGKILL")
      await agent!.done
      await eventually(
        "fragile was Recovering for NodeLost, then Running on this server's Node",
        async () =>
          watch.stdout().includes("Recovering/NodeLost") && (await offeringOf("fragile")) === "local" &&
          (await sandbox("fragile"))?.status?.phase === "Running",
        { timeoutMs: 30_000 }
      )
      await watch.stop()
      assert.strictEqual(await offeringOf("fragile"), "local")
      const status = (await sandbox("fragile")).status
      assert.strictEqual(status.attempt.epoch, 3)
      const files = await exec("fragile", [
        "sh",
        "-c",
        "cat /workspace/saved; cat /workspace/unsaved 2>/dev/null || echo unsaved-lost"
      ])
      assert.strictEqual(files.body.stdout, "saved\nunsaved-lost\n")
      const events = await api(server, "GET", `/api/v1/namespaces/${namespace}/events`)
      assert.include(events.text, "what neither holds is lost")
    },
    120_000
  )
})
