/**
 * A Snapshotted Sandbox's /workspace across a restart of its `nodus serve` process (local backend, embedded store;
 * docs/sandboxes.md, "/workspace continuity"): what a stop saved comes back (the snapshot each Attempt recorded is read
 * back), and so does what was written after it, while the box ran, when the server stops with SIGTERM or is killed
 * (the box's /workspace stays on its host, and the replacement box there starts from it) — and when the box's own user
 * kills its supervisor (issue 29, item 3).
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { removeTree } from "../support/RemoveTree.ts"
import { callAs, printedBy } from "../support/ServerProcess.ts"

const root = join(import.meta.dirname, "..", "..")
const node = join(root, "node_modules", ".bin", "node")
const cli = join(root, "bin", "nodus.js")
const token = "nds_restart-test-token-0123456789abcdefghijklmnopqrs"
const directories: Array<string> = []
const children: Array<ChildProcess> = []

const serve = async (dataDir: string): Promise<{ url: string; child: ChildProcess }> => {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
  )
  const child = spawn(node, [cli, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0"], {
    env: { ...env, NODUS_TLS: "off", NODUS_BOOTSTRAP_TOKEN: token }
  })
  children.push(child)
  return { url: await printedBy(child).first(/nodus serving (http:\/\/\S+)/u, 60_000), child }
}

const stopped = (child: ChildProcess, signal: NodeJS.Signals) =>
  new Promise((resolve) => {
    child.once("exit", resolve)
    child.kill(signal)
  })

afterEach(async () => {
  await Promise.all(
    children.filter((child) => child.exitCode === null && child.signalCode === null).map((child) =>
      stopped(child, "SIGKILL")
    )
  )
})

afterAll(async () => {
  for (const directory of directories) await removeTree(directory)
})

const call = callAs(token)
const sandbox = "/apis/nodus.dev/v1/namespaces/keep/sandboxes/desk"

const patchState = (url: string, state: "Running" | "Stopped") =>
  fetch(`${url}${sandbox}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ spec: { state } })
  })

const phaseOf = async (url: string) => (await call(url, "GET", sandbox)).body?.status?.phase

const run = async (url: string, line: string) => {
  const reply = await call(url, "POST", `${sandbox}/commands`, { command: ["sh", "-c", line] })
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body as { exitCode: number; stdout: string }
}

/** A Sandbox with `saved.txt` in a saved snapshot and `after.txt` written since, in a running box. */
const prepare = async (url: string) => {
  assert.strictEqual(
    (await call(url, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "keep" } }))
      .status,
    201
  )
  const created = await call(url, "POST", "/apis/nodus.dev/v1/namespaces/keep/sandboxes", {
    apiVersion: "nodus.dev/v1",
    kind: "Sandbox",
    metadata: { name: "desk" },
    spec: { image: "debian:12" }
  })
  assert.strictEqual(created.status, 201, created.text)
  await eventually("desk runs", async () => (await phaseOf(url)) === "Running", { timeoutMs: 30_000 })
  assert.strictEqual((await run(url, "echo saved > /workspace/saved.txt")).exitCode, 0)
  assert.strictEqual((await patchState(url, "Stopped")).status, 200)
  await eventually("desk stopped, /workspace saved", async () => {
    const status = (await call(url, "GET", sandbox)).body?.status
    return status?.phase === "Stopped" &&
      status?.conditions?.some((condition: any) => condition.type === "StateSaved" && condition.status === "True")
  }, { timeoutMs: 30_000 })
  assert.strictEqual((await patchState(url, "Running")).status, 200)
  await eventually("desk runs again", async () => (await phaseOf(url)) === "Running", { timeoutMs: 30_000 })
  assert.strictEqual((await run(url, "cat /workspace/saved.txt")).stdout, "saved\n")
  assert.strictEqual((await run(url, "echo after > /workspace/after.txt")).exitCode, 0)
}

const dataDirectory = () => {
  const dataDir = mkdtempSync(join(tmpdir(), "nodus-restart-"))
  directories.push(dataDir)
  return dataDir
}

/**
 * Once a replacement of the prepared box runs (the stored status says Running until then, after a restart): what its
 * /workspace holds, and the Events.
 */
const replaced = async (url: string) => {
  await eventually("a replacement box runs", async () => {
    const status = (await call(url, "GET", sandbox)).body?.status
    return status?.phase === "Running" && status?.attempt?.epoch >= 3
  }, { timeoutMs: 60_000 })
  const listed = await run(url, "cat /workspace/saved.txt; cat /workspace/after.txt")
  return { listed, events: (await call(url, "GET", "/api/v1/namespaces/keep/events")).text }
}

const afterRestart = async (signal: NodeJS.Signals) => {
  const dataDir = dataDirectory()
  const first = await serve(dataDir)
  await prepare(first.url)
  await stopped(first.child, signal)
  const second = await serve(dataDir)
  const seen = await replaced(second.url)
  await stopped(second.child, "SIGTERM")
  return seen
}

describe("a Snapshotted Sandbox across a restart of its server", () => {
  it("SIGTERM: its replacement box has the saved snapshot and what was written since", async () => {
    const { listed, events } = await afterRestart("SIGTERM")
    assert.strictEqual(listed.stdout, "saved\nafter\n", events)
  }, 120_000)

  it("SIGKILL: the same, from the box's /workspace its host kept", async () => {
    const { listed, events } = await afterRestart("SIGKILL")
    assert.strictEqual(listed.stdout, "saved\nafter\n", events)
  }, 120_000)
})

describe("a Snapshotted Sandbox whose supervisor its user kills", () => {
  it("is replaced (BoxExited) by a box that starts from the /workspace the killed one left", async () => {
    const server = await serve(dataDirectory())
    await prepare(server.url)
    // The supervisor is pid 2 in the box; the command dies with it, so its answer is not awaited.
    void call(server.url, "POST", `${sandbox}/commands`, { command: ["sh", "-c", "kill -9 2"] })
    const { listed, events } = await replaced(server.url)
    assert.include(events, "BoxExited")
    assert.strictEqual(listed.stdout, "saved\nafter\n", events)
    await stopped(server.child, "SIGTERM")
  }, 120_000)
})
