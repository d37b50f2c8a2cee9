/**
 * Jobs as real processes on the local backend, against a real `nodus serve --backend local` process (plain HTTP,
 * embedded PGlite, or a fresh database of `--database-url` / DATABASE_URL):
 *
 * 1. `--jobs` Jobs (100) whose command is `true`, created one after another, each waited for before the next, so each
 *    latency is the pipeline's and not a queue's. A watch on the project stamps, client-side, when each Job is first
 *    seen Running (or past it: a `true` may finish between two steps, and a finished Job ran) and when it is seen
 *    Succeeded; both count from just before its POST.
 * 2. In the same run, the anchors: a bare fork/exec of `true`, and `true` in a box with nodus's own bubblewrap
 *    arguments (backends/live/Isolation.ts, egress Deny), each `--jobs` times.
 *
 * 3. Lease loss (unless `--lease-loss off`): a second host joins with `nodus agent` (a real process, default lease:
 *    10 s renew, 40 s expiry), runs a Job pinned to it first, and is killed with SIGKILL; the bench measures the time
 *    from the kill to the run's NodeLost, and to its replacement Running on the server's own Node.
 *
 * Prints p50/p99 of each, and of the create's own answer (the part of the latency the API and its store take). The
 * goals (the live-hosts issue): create → Running p50 ≤ 50 ms, p99 ≤ 200 ms; NodeLost within 40 s of the kill, the
 * Job restored within 60 s. A Job that does not succeed, or a request answered with an unexpected status, is a
 * failure: the bench exits 1.
 *
 *   npm run bench:live -- [--jobs 100] [--lease-loss on|off] [--database-url postgres://…]
 */
import { spawn } from "node:child_process"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"
import { benchProject, call, get, show, timeBox, until, watchPhases } from "./Measure.ts"
import { startServer, stopServer } from "./Server.ts"

const jobs = Number(argument("jobs", "100"))
const databaseUrl = argument("database-url", process.env["DATABASE_URL"] ?? "")
const project = "bench"
const jobsPath = `/apis/nodus.dev/v1/namespaces/${project}/jobs`
const jobTimeoutMs = 30_000
const leaseLoss = argument("lease-loss", "on") !== "off"

const timeSpawn = async (): Promise<number> => {
  const started = performance.now()
  await new Promise<void>((resolve, reject) =>
    spawn("true", [], { stdio: "ignore" }).on("exit", () => resolve()).on("error", reject)
  )
  return performance.now() - started
}

/** A second host joins, runs a Job, and is killed: how long until its run is lost, and until the Job runs again. */
const measureLeaseLoss = async (url: URL, root: string) => {
  const base = `/apis/nodus.dev/v1/namespaces/${project}`
  const token = await call(url, "POST", `${base}/enrollmenttokens`, {
    apiVersion: "nodus.dev/v1",
    kind: "EnrollmentToken",
    metadata: { name: "edge" },
    spec: { pool: "edge" }
  })
  if (token.status !== 201) throw new Error(`enrollment token: ${token.status} ${token.text}`)
  const agentDir = join(root, "edge")
  const agent = spawn(process.execPath, [
    join(import.meta.dirname, "..", "bin", "nodus.js"),
    "agent",
    "--server",
    url.origin,
    "--token",
    JSON.parse(token.text).status.token,
    "--data-dir",
    agentDir,
    "--name",
    "edge"
  ], { stdio: "ignore" })
  await until(
    "the Node is Ready",
    async () => (await get(url, `${base}/nodes/edge`))?.status?.phase === "Ready",
    30_000
  )
  const job = {
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: { name: "lease" },
    spec: {
      image: "debian:12",
      command: ["sleep", "600"],
      placement: { offerings: ["edge", "local"] },
      recovery: { continuity: "Restartable" }
    }
  }
  const created = await call(url, "POST", jobsPath, job)
  if (created.status !== 201) throw new Error(`lease Job: ${created.status} ${created.text}`)
  await until(
    "the Job runs on edge",
    async () =>
      (await get(url, `${base}/attempts/lease-0-1`))?.status?.offering === "edge" &&
      (await get(url, `${jobsPath}/lease`))?.status?.phase === "Running",
    30_000
  )
  const killed = performance.now()
  agent.kill("SIGKILL")
  const lost = await until(
    "NodeLost",
    async () => (await get(url, `${base}/attempts/lease-0-1`))?.status?.reason === "NodeLost",
    60_000
  )
  const restored = await until(
    "the replacement runs",
    async () => (await get(url, `${base}/attempts/lease-0-2`))?.status?.phase === "Running",
    60_000
  )
  console.log(`lease loss (a second host killed with SIGKILL; lease 10 s renew, 40 s expiry)`)
  console.log(`${"kill → NodeLost".padEnd(44)} ${((lost - killed) / 1000).toFixed(1)} s   (goal ≤ 40 s)`)
  console.log(
    `${"kill → replacement Running on another Node".padEnd(44)} ${
      ((restored - killed) / 1000).toFixed(1)
    } s   (goal ≤ 60 s)`
  )
  await call(url, "DELETE", `${jobsPath}/lease`)
}

const root = mkdtempSync(join(tmpdir(), "nodus-bench-live-"))
chmodSync(root, 0o711)
// A database of its own for the run: the store of an earlier run (its sealed secrets, its Nodes) is not this one's.
const database = databaseUrl === "" ? undefined : await createDatabase(databaseUrl)
const server = await startServer({
  NODUS_DATA_DIR: join(root, "data"),
  NODUS_BACKEND: "local",
  ...(database === undefined ? {} : { DATABASE_URL: database.url })
})
let failures = 0
try {
  await benchProject(server.url, project, "bench:live")
  const running = new Map<string, number>()
  const succeeded = new Map<string, number>()
  const waiters = new Map<string, () => void>()
  const stop = watchPhases(server.url, jobsPath, (name, phase, at) => {
    if (phase === "Running" || phase === "Succeeded" || phase === "Failed") {
      if (!running.has(name)) running.set(name, at)
    }
    if (phase === "Succeeded" || phase === "Failed") {
      if (phase === "Failed") failures++
      if (!succeeded.has(name)) succeeded.set(name, at)
      waiters.get(name)?.()
    }
  })
  await new Promise((resolve) => setTimeout(resolve, 200))
  const startedAt = new Map<string, number>()
  const answered = new Map<string, number>()
  for (let index = 0; index < jobs; index++) {
    const name = `true-${index}`
    const done = new Promise<void>((resolve) => waiters.set(name, resolve))
    startedAt.set(name, performance.now())
    const reply = await call(server.url, "POST", jobsPath, {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name },
      spec: { image: "debian:12", command: ["true"] }
    })
    if (reply.status !== 201) {
      failures++
      console.error(`create ${name}: ${reply.status} ${reply.text.slice(0, 200)}`)
      continue
    }
    answered.set(name, performance.now())
    const timedOut = await Promise.race([
      done.then(() => false),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(true), jobTimeoutMs))
    ])
    if (timedOut) {
      failures++
      console.error(`${name} did not finish within ${jobTimeoutMs} ms`)
    }
  }
  stop()
  const since = (seen: Map<string, number>) => [...seen].map(([name, at]) => at - startedAt.get(name)!)
  const spawned: Array<number> = []
  const boxed: Array<number> = []
  for (let index = 0; index < jobs; index++) spawned.push(await timeSpawn())
  for (let index = 0; index < jobs; index++) boxed.push(await timeBox(root, index))
  if (leaseLoss) await measureLeaseLoss(server.url, root)
  console.log(`local backend, ${databaseUrl === "" ? "PGlite" : "PostgreSQL"}, ${jobs} Jobs of \`true\`, one at a time`)
  show("create answered (201)", since(answered))
  show("create → Running (first seen Running or later)", since(running))
  show("create → Succeeded", since(succeeded))
  show("anchor: fork/exec true", spawned)
  show("anchor: bwrap true (nodus's box, egress Deny)", boxed)
} finally {
  await stopServer(server)
  await database?.drop()
  rmSync(root, { recursive: true, force: true })
}
if (failures > 0) {
  console.error(`${failures} failures`)
  process.exit(1)
}
