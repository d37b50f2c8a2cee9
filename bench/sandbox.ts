/**
 * Sandboxes on the local backend, against a real `nodus serve --backend local` process (plain HTTP, embedded PGlite,
 * or a fresh database of `--database-url` / DATABASE_URL), one request at a time so that each latency is the
 * pipeline's and not a queue's:
 *
 * 1. `--sandboxes` (100) Sandboxes, each created, watched until Running (a watch stamps it client-side), given one
 *    command (`true`), then stopped and deleted before the next: create → Running and create → first command result,
 *    both from just before the POST.
 * 2. `--commands` (100) commands (`true`) on one running Sandbox: the command round trip.
 * 3. `--cycles` (10) stop → start of one Snapshotted Sandbox whose /workspace holds `--workspace-mib` (100) MiB of
 *    random bytes: stop (spec.state Stopped → phase Stopped, /workspace saved) and start (→ Running, restored), each
 *    measured from the PATCH to the watch seeing the phase.
 * 4. In the same run, the anchor: `true` in a bare box with nodus's own bubblewrap arguments, `--sandboxes` times.
 *
 * Goals (the Sandboxes issue): create → first command result p50 ≤ 50 ms, p99 ≤ 200 ms; command round trip p50 ≤ 5 ms.
 * A request answered with an unexpected status, a command that does not exit 0, or a Sandbox that does not reach its
 * phase is a failure: the bench exits 1.
 *
 *   npm run bench:sandbox -- [--sandboxes 100] [--commands 100] [--cycles 10] [--workspace-mib 100] [--database-url …]
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"
import { benchProject, call, show, timeBox, watchPhases } from "./Measure.ts"
import { startServer, stopServer } from "./Server.ts"

const sandboxes = Number(argument("sandboxes", "100"))
const commands = Number(argument("commands", "100"))
const cycles = Number(argument("cycles", "10"))
const workspaceMiB = Number(argument("workspace-mib", "100"))
const databaseUrl = argument("database-url", process.env["DATABASE_URL"] ?? "")
const project = "bench"
const collection = `/apis/nodus.dev/v1/namespaces/${project}/sandboxes`
const phaseTimeoutMs = 120_000

let failures = 0
const fail = (what: string) => {
  failures++
  console.error(what)
}

/** Phases as the watch sees them, and waiters for the next time a Sandbox is seen in a phase. */
const seenAt = new Map<string, number>()
const waiting = new Map<string, () => void>()
const onPhase = (name: string, phase: string | undefined, at: number) => {
  const key = `${name}/${phase}`
  if (!seenAt.has(key)) seenAt.set(key, at)
  waiting.get(key)?.()
}

/** Resolves when `name` is next seen in `phase` (or was already, since `forget`): when the watch saw it. */
const phaseOf = (name: string, phase: string): Promise<number> => {
  const key = `${name}/${phase}`
  const known = seenAt.get(key)
  if (known !== undefined) return Promise.resolve(known)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} was not ${phase} within ${phaseTimeoutMs / 1000} s`)),
      phaseTimeoutMs
    )
    waiting.set(key, () => {
      clearTimeout(timer)
      waiting.delete(key)
      resolve(seenAt.get(key)!)
    })
  })
}
const forget = (name: string, phase: string) => seenAt.delete(`${name}/${phase}`)

const create = async (base: URL, name: string, spec: Record<string, unknown>) => {
  const reply = await call(base, "POST", collection, {
    apiVersion: "nodus.dev/v1",
    kind: "Sandbox",
    metadata: { name },
    spec: { image: "debian:12", ...spec }
  })
  if (reply.status !== 201) throw new Error(`create ${name}: ${reply.status} ${reply.text.slice(0, 300)}`)
}

const exec = async (base: URL, name: string, command: ReadonlyArray<string>) => {
  const reply = await call(base, "POST", `${collection}/${name}/commands`, { command })
  if (reply.status !== 200) throw new Error(`command in ${name}: ${reply.status} ${reply.text.slice(0, 300)}`)
  const result = JSON.parse(reply.text) as { exitCode: number | null; stderr: string }
  if (result.exitCode !== 0) {
    throw new Error(`command in ${name} exited ${result.exitCode}: ${result.stderr.slice(0, 300)}`)
  }
}

const setState = async (base: URL, name: string, state: string) => {
  const reply = await call(base, "PATCH", `${collection}/${name}`, { spec: { state } }, "application/merge-patch+json")
  if (reply.status !== 200) throw new Error(`${state} ${name}: ${reply.status} ${reply.text.slice(0, 300)}`)
}

/** Create → Running → first command result, for Sandboxes one after another (each stopped and deleted after). */
const measureStarts = async (base: URL) => {
  const running: Array<number> = []
  const firstResult: Array<number> = []
  for (let index = 0; index < sandboxes; index++) {
    const name = `box-${index}`
    try {
      const started = performance.now()
      await create(base, name, { continuity: { mode: "Ephemeral" } })
      running.push((await phaseOf(name, "Running")) - started)
      await exec(base, name, ["true"])
      firstResult.push(performance.now() - started)
      // Stopped first, so that its slot is free before the next create (this host has one per vCPU).
      await setState(base, name, "Stopped")
      await phaseOf(name, "Stopped")
      await call(base, "DELETE", `${collection}/${name}`)
    } catch (error) {
      fail(error instanceof Error ? error.message : String(error))
    }
  }
  return { running, firstResult }
}

const measureCommands = async (base: URL) => {
  const times: Array<number> = []
  await create(base, "commands", { continuity: { mode: "Ephemeral" }, lifecycle: { idleTimeout: "0s" } })
  await phaseOf("commands", "Running")
  for (let index = 0; index < commands; index++) {
    const started = performance.now()
    try {
      await exec(base, "commands", ["true"])
      times.push(performance.now() - started)
    } catch (error) {
      fail(error instanceof Error ? error.message : String(error))
    }
  }
  await setState(base, "commands", "Stopped")
  await phaseOf("commands", "Stopped")
  return times
}

const measureStopStart = async (base: URL) => {
  const stops: Array<number> = []
  const starts: Array<number> = []
  await create(base, "keeper", { lifecycle: { idleTimeout: "0s" } })
  await phaseOf("keeper", "Running")
  await exec(base, "keeper", ["sh", "-c", `head -c ${workspaceMiB}M /dev/urandom > /workspace/data`])
  for (let cycle = 0; cycle < cycles; cycle++) {
    try {
      forget("keeper", "Stopped")
      let at = performance.now()
      await setState(base, "keeper", "Stopped")
      stops.push((await phaseOf("keeper", "Stopped")) - at)
      forget("keeper", "Running")
      at = performance.now()
      await setState(base, "keeper", "Running")
      starts.push((await phaseOf("keeper", "Running")) - at)
      // What was saved is what comes back.
      await exec(base, "keeper", ["sh", "-c", `test "$(stat -c %s /workspace/data)" = ${workspaceMiB * 1024 * 1024}`])
    } catch (error) {
      fail(error instanceof Error ? error.message : String(error))
    }
  }
  return { stops, starts }
}

const root = mkdtempSync(join(tmpdir(), "nodus-bench-sandbox-"))
chmodSync(root, 0o711)
// A database of its own for the run: the store of an earlier run (its sealed secrets, its Nodes) is not this one's.
const database = databaseUrl === "" ? undefined : await createDatabase(databaseUrl)
const server = await startServer({
  NODUS_DATA_DIR: join(root, "data"),
  NODUS_BACKEND: "local",
  ...(database === undefined ? {} : { DATABASE_URL: database.url })
})
try {
  const base = server.url
  await benchProject(base, project, "bench:sandbox")
  const stop = watchPhases(base, collection, onPhase)
  await new Promise((resolve) => setTimeout(resolve, 200))
  const starts = await measureStarts(base)
  const roundTrips = await measureCommands(base)
  const continuity = await measureStopStart(base)
  stop()
  const boxed: Array<number> = []
  for (let index = 0; index < sandboxes; index++) boxed.push(await timeBox(root, index))
  console.log(`local backend, ${databaseUrl === "" ? "PGlite" : "PostgreSQL"}, one request at a time`)
  show("create → Running", starts.running)
  show("create → first command result (goal p50 ≤ 50)", starts.firstResult)
  show("command round trip, `true` (goal p50 ≤ 5)", roundTrips)
  show(`stop → Stopped, ${workspaceMiB} MiB /workspace saved`, continuity.stops)
  show(`start → Running, ${workspaceMiB} MiB /workspace restored`, continuity.starts)
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
