/**
 * Two `nodus serve --backend local` processes on one PostgreSQL database (docs/scale-out.md, "Local hosts"), with real
 * boxes and programs on this machine:
 * - each server's in-process host is a Node of its own, under a name that stays the same when it restarts;
 * - any server serves a Sandbox's commands and files: through B, they reach the box on A's host (before: 409
 *   SandboxNotRunning);
 * - a rebalance (the other server came back) stops no healthy box: the new owner takes the run over where it runs, and
 *   its /workspace, commands through either server and its attempt stay (before: stopped NodeLost, replaced empty);
 * - deleted through the new owner, those runs stop on their host and give its slots back, so the Jobs each server owns
 *   afterwards run (before the slot fix, the old owner's slots stayed taken by runs it had forgotten, and its Jobs
 *   stayed Unschedulable with nothing running).
 * Runs when DATABASE_URL is set; bounded, loopback only.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { cpus, hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { sharedLocalNode } from "../../src/server/LocalNodeName.ts"
import { eventually } from "../support/Eventually.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"
import { removeTree } from "../support/RemoveTree.ts"
import { callAs, type ClusterServer, killNow, spawnClusterServer } from "../support/ServerProcess.ts"

const token = "nds_local-hosts-token-0123456789abcdefghijklmnopqrstu"
const call = callAs(token)
const api = "/apis/nodus.dev/v1"
/** A host runs one program per vCPU: A's host is filled with this many Sandboxes (two on this project's machine). */
const slots = Math.min(cpus().length, 2)

describe.skipIf(databaseUrl === undefined)("local-backend servers on one database", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  const dirs = [mkdtempSync(join(tmpdir(), "nodus-hosts-a-")), mkdtempSync(join(tmpdir(), "nodus-hosts-b-"))] as const
  const children: Array<ChildProcess> = []

  const serve = async (dataDir: string) => {
    const server = await spawnClusterServer({ databaseUrl: database.url, dataDir, speed: 1, token, backend: "local" })
    children.push(server.child)
    return server
  }
  const split = (a: ClusterServer, b: ClusterServer) =>
    eventually("both servers hold shards", () => a.holds > 0 && b.holds > 0 && a.holds + b.holds === a.shards, {
      timeoutMs: 60_000
    })
  const offerings = async (url: string) =>
    ((await call(url, "GET", `${api}/offerings`)).body?.items ?? []).map((item: any) => item.metadata.name as string)
      .sort()
  /** The Node the Sandbox's current attempt was placed on (its Scheduled condition names it). */
  const hostOf = async (url: string, name: string) => {
    const status = (await call(url, "GET", `${api}/namespaces/hosts/sandboxes/${name}`)).body?.status
    const scheduled = (status?.conditions ?? []).find((condition: any) =>
      condition.type === "Scheduled" && condition.status === "True"
    )
    return /Placed on (\S+) at/u.exec(scheduled?.message ?? "")?.[1]
  }
  const phaseOf = async (url: string, kind: string, name: string) =>
    (await call(url, "GET", `${api}/namespaces/hosts/${kind}/${name}`)).body?.status?.phase as string | undefined

  beforeAll(async () => {
    database = await createDatabase(databaseUrl!)
  })
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL")
    await database?.drop()
    for (const dir of dirs) await removeTree(dir)
  })

  it(
    "runs each server's host as a Node of its own, serves a box through either server; a rebalance leaves healthy boxes running",
    async () => {
      let a = await serve(dirs[0])
      const b = await serve(dirs[1])
      await split(a, b)
      assert.strictEqual(
        (await call(a.url, "POST", "/api/v1/namespaces", {
          apiVersion: "v1",
          kind: "Namespace",
          metadata: { name: "hosts" }
        })).status,
        201
      )
      const grant = {
        apiVersion: "nodus.dev/v1",
        kind: "CreditGrant",
        metadata: { name: "gift" },
        spec: { amountUSD: "50" }
      }
      assert.strictEqual((await call(a.url, "POST", `${api}/operator/creditgrants`, grant)).status, 201)

      // Two hosts, two Nodes: each server's offering is its own Node's, and a restart keeps its name.
      await eventually("two offerings", async () => (await offerings(b.url)).length === 2, { timeoutMs: 30_000 })
      const names = await offerings(b.url)
      for (const name of names) assert.match(name, /^local-[a-z0-9-]+-[0-9a-f]{8}$/u)

      // Sandboxes owned by A run on A's host: as many as its slots (one per vCPU), chosen by where they land.
      const hostA = sharedLocalNode(hostname(), dirs[0])
      const hostB = sharedLocalNode(hostname(), dirs[1])
      assert.deepStrictEqual(names, [hostA, hostB].sort())
      const onA: Array<string> = []
      for (let tried = 0; onA.length < slots && tried < 24; tried++) {
        const name = `s${tried}`
        const sandbox = {
          apiVersion: "nodus.dev/v1",
          kind: "Sandbox",
          metadata: { name },
          spec: { image: "debian:12" }
        }
        assert.strictEqual((await call(b.url, "POST", `${api}/namespaces/hosts/sandboxes`, sandbox)).status, 201)
        await eventually(`${name} placed`, async () => (await hostOf(b.url, name)) !== undefined, { timeoutMs: 60_000 })
        if ((await hostOf(b.url, name)) === hostA) onA.push(name)
        else await call(b.url, "DELETE", `${api}/namespaces/hosts/sandboxes/${name}`)
      }
      assert.strictEqual(onA.length, slots)

      // Any server serves the box: a command and a file through B reach the box on A's host, and A reads the file back.
      const box = `${api}/namespaces/hosts/sandboxes/${onA[0]}`
      const ran = await call(b.url, "POST", `${box}/commands`, {
        command: ["sh", "-c", "echo through-b > /workspace/note; cat /workspace/note"]
      })
      assert.strictEqual(ran.status, 200, ran.text)
      assert.strictEqual(ran.body.stdout, "through-b\n")
      const put = await fetch(`${b.url}${box}/files?path=/workspace/put.txt`, {
        method: "PUT",
        headers: { authorization: `Bearer ${token}` },
        body: "put through b"
      })
      assert.strictEqual(put.status < 300, true, await put.text())
      const read = await fetch(`${a.url}${box}/files?path=/workspace/put.txt`, {
        headers: { authorization: `Bearer ${token}` }
      })
      assert.strictEqual(await read.text(), "put through b")
      // The servers' own calls need this process's peer key: an API key, or none, reaches nothing there.
      for (const path of ["/agent/v1/box", "/agent/v1/run"]) {
        const body = JSON.stringify({
          op: "facts",
          owner: "x",
          attempt: "y",
          request: { _tag: "ReadFile", path: "/etc/passwd", maxBytes: 10 }
        })
        for (const headers of [{ authorization: `Bearer ${token}` }, {}]) {
          const refused = await fetch(`${a.url}${path}`, {
            method: "POST",
            headers: { ...headers, "content-type": "application/json" },
            body
          })
          assert.strictEqual(refused.status, 401, await refused.text())
        }
      }
      const listed = await call(b.url, "GET", `${box}/files?path=/workspace`)
      assert.deepStrictEqual(listed.body.entries.map((entry: any) => entry.name).sort(), ["note", "put.txt"])

      // A is killed: B takes its shards, and the Sandboxes recover on B's host.
      await killNow(a.child)
      for (const name of onA) {
        await eventually(
          `${name} on B`,
          async () => (await hostOf(b.url, name)) === hostB && (await phaseOf(b.url, "sandboxes", name)) === "Running",
          { timeoutMs: 90_000 }
        )
      }

      // Each keeps a file in /workspace.
      const attempts = new Map<string, string>()
      for (const name of onA) {
        const wrote = await call(b.url, "POST", `${api}/namespaces/hosts/sandboxes/${name}/commands`, {
          command: ["sh", "-c", `echo kept-${name} > /workspace/keep.txt`]
        })
        assert.strictEqual(wrote.status, 200, wrote.text)
        attempts.set(
          name,
          (await call(b.url, "GET", `${api}/namespaces/hosts/sandboxes/${name}`)).body.status.attempt.name
        )
      }

      // A comes back: the rebalance hands some shards back to A (the ring depends on the runners' random addresses;
      // until one of these Sandboxes' is among them, A is killed and comes back again). Their boxes go on running on
      // B's host: A takes them over there.
      let tookOver = false
      for (let round = 0; round < 4 && !tookOver; round++) {
        if (round > 0) {
          await killNow(a.child)
          await eventually("B holds every shard", () => b.holds === b.shards, { timeoutMs: 60_000 })
        }
        a = await serve(dirs[0])
        await split(a, b)
        // A took one over, or (what a rebalance did before) one was stopped and replaced.
        const printed = a.printed
        tookOver = await eventually("a Sandbox's shard moved to A", async () => {
          if (/took over run/u.test(printed())) return true
          for (const name of onA) {
            if (
              (await call(b.url, "GET", `${api}/namespaces/hosts/sandboxes/${name}`)).body?.status?.attempt?.name !==
                attempts.get(name)
            ) return true
          }
          return false
        }, { timeoutMs: 20_000 }).then(() => true, () => false)
      }
      assert.isTrue(tookOver, "no rebalance moved a Sandbox's shard to A")
      await new Promise((resolve) => setTimeout(resolve, 5_000))
      for (const name of onA) {
        const sandbox = (await call(a.url, "GET", `${api}/namespaces/hosts/sandboxes/${name}`)).body
        assert.strictEqual(sandbox.status.phase, "Running")
        assert.strictEqual(sandbox.status.attempt.name, attempts.get(name), `${name} was not stopped by the rebalance`)
        assert.strictEqual(await hostOf(a.url, name), hostB)
        for (const server of [a, b]) {
          const read = await call(server.url, "POST", `${api}/namespaces/hosts/sandboxes/${name}/commands`, {
            command: ["cat", "/workspace/keep.txt"]
          })
          assert.strictEqual(read.status, 200, read.text)
          assert.strictEqual(read.body.stdout, `kept-${name}\n`)
        }
      }
      assert.deepStrictEqual(await offerings(b.url), names)

      // Deleted through A: their boxes on B's host stop, and B's slots come back.
      for (const name of onA) {
        assert.strictEqual(
          (await call(a.url, "DELETE", `${api}/namespaces/hosts/sandboxes/${name}`)).status < 300,
          true
        )
      }
      for (const name of onA) {
        await eventually(
          `${name} gone`,
          async () => (await call(b.url, "GET", `${api}/namespaces/hosts/sandboxes/${name}`)).status === 404,
          { timeoutMs: 90_000 }
        )
      }

      // Jobs through B, owned by either server: each runs (on the host of the server that owns it) and succeeds.
      const jobs = ["j0", "j1", "j2", "j3", "j4", "j5"]
      for (const name of jobs) {
        const job = {
          apiVersion: "nodus.dev/v1",
          kind: "Job",
          metadata: { name },
          spec: { image: "debian:12", command: ["sh", "-c", "sleep 1"] }
        }
        assert.strictEqual((await call(b.url, "POST", `${api}/namespaces/hosts/jobs`, job)).status, 201)
      }
      for (const name of jobs) {
        await eventually(`${name} Succeeded`, async () => (await phaseOf(b.url, "jobs", name)) === "Succeeded", {
          timeoutMs: 90_000
        })
      }
    },
    420_000
  )
})
