/**
 * Functions, end to end and the parts beneath, in one run (the floor first):
 *
 * 1. the floor: a bare Node ↔ Python pipe round trip (a line out, the same line back), `--calls` (1,000) times;
 * 2. a warm worker's call round trip (JSON in, the return value out), as a plain child process;
 * 3. the same worker in nodus's bubblewrap box (egress Deny, its code read-only under /platform/inputs);
 * 4. cold start: spawn → the worker's `ready` (its module imported), `--starts` (20) times, plain and boxed;
 *
 * then through the API, against a real `nodus serve --backend local` process (plain HTTP, embedded PGlite, or a fresh
 * database on the PostgreSQL server of `--database-url`), a Function whose one worker is warm (minWorkers 1,
 * maxWorkers 1, targetConcurrency 32, so that a map is bound by the path and not by the worker's threads):
 *
 * 5. warm `.remote()` round trip through the TypeScript client (src/client), `--calls` sequential calls;
 * 6. the same through the Python client (clients/python) in a real python3 that times its own calls
 *    (time.perf_counter), so that the client's own overhead is in the figure;
 * 7. `.map` of `--map` (1,000) inputs through each client: calls/s, from the first call sent to the last result read;
 * 8. cold start of a new worker through the API: a Function with minWorkers 0 and scaledownWindow 0s, from just before
 *    the call's create to its result, `--cold` (5) times, its worker gone before each.
 *
 * Goals (the Functions issue): warm round trip p50 ≤ 15 ms, p99 ≤ 50 ms; `.map` ≥ 1,000 calls/s. A call that fails,
 * or answers a wrong value, makes the bench exit 1: a failed call counted as throughput measures nothing.
 *
 *   npm run bench:functions -- [--calls 1000] [--starts 20] [--map 1000] [--cold 5] [--database-url postgres://…]
 */
import { execFileSync, spawn } from "node:child_process"
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { detectIsolation, runIsolated } from "../src/backends/live/Isolation.ts"
import { workerArgv, WorkerConnection, workerEnv, type WorkerTarget } from "../src/backends/live/PythonWorker.ts"
import { NodusClient } from "../src/client/index.ts"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"
import { benchProject, call, get, percentile, until } from "./Measure.ts"
import { benchToken, startServer, stopServer } from "./Server.ts"

const calls = Number(argument("calls", "1000"))
const starts = Number(argument("starts", "20"))
const mapInputs = Number(argument("map", "1000"))
const colds = Number(argument("cold", "5"))
const databaseUrl = argument("database-url", "")
let failures = 0
const fail = (what: string) => {
  failures++
  console.error(what)
}

const root = mkdtempSync(join(tmpdir(), "nodus-bench-functions-"))
chmodSync(root, 0o711)
mkdirSync(join(root, "code", "app"), { recursive: true })
writeFileSync(join(root, "code", "app", "__init__.py"), "")
writeFileSync(join(root, "code", "app", "handlers.py"), "def embed(text):\n    return [len(text), text.count(' ')]\n")
const support = detectIsolation()
// One interpreter for every measure: the userland's own, as a box finds it (a PATH shim such as pyenv's costs more).
const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3"
const target = (codeDir: string): WorkerTarget => ({
  codeDir,
  module: "app.handlers",
  qualname: "embed",
  concurrency: 1
})
const input = Buffer.from(JSON.stringify({ args: ["the quick brown fox jumps over the lazy dog"] })).toString("base64")

/** The floor: python echoes each line back. */
const floor = async () => {
  const child = spawn(python, [
    "-u",
    "-c",
    "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()"
  ], { stdio: ["pipe", "pipe", "inherit"] })
  const lines = createInterface({ input: child.stdout })
  const waiting: Array<() => void> = []
  lines.on("line", () => waiting.shift()?.())
  const times: Array<number> = []
  for (let index = 0; index < calls; index++) {
    const started = performance.now()
    await new Promise<void>((resolve) => {
      waiting.push(resolve)
      child.stdin.write(`{"id":"call-${index}","input":"${input}"}\n`)
    })
    times.push(performance.now() - started)
  }
  child.stdin.end()
  return times
}

/** A worker's round trips once it is ready. */
const roundTrips = async (connection: WorkerConnection) => {
  await connection.ready
  const times: Array<number> = []
  for (let index = 0; index < calls; index++) {
    const started = performance.now()
    const outcome = await connection.call({ id: `call-${index}`, encoding: "JSON", input })
    times.push(performance.now() - started)
    if (!outcome.ok) fail(`call ${index} failed: ${outcome.error.type}: ${outcome.error.message}`)
  }
  return times
}

const plainWorker = () => {
  const [command, ...args] = workerArgv(python)
  const child = spawn(command!, args, {
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...workerEnv(target(join(root, "code"))) },
    stdio: ["pipe", "pipe", "inherit"]
  })
  return new WorkerConnection(child.stdin, child.stdout, [])
}

let boxes = 0
const boxedWorker = () => {
  const area = join(root, `box-${++boxes}`)
  mkdirSync(join(area, "inputs"), { recursive: true })
  cpSync(join(root, "code"), join(area, "inputs", "code"), { recursive: true })
  const running = runIsolated({
    argv: workerArgv(python),
    env: workerEnv(target("/platform/inputs/code")),
    workingDir: undefined,
    secretFiles: [],
    egress: "Deny",
    memoryBytes: undefined,
    area,
    logPath: join(area, "worker.log"),
    pipes: true
  }, { support, hidden: [] })
  return new WorkerConnection(running.control!.input, running.control!.output, [])
}

const coldStarts = async (make: () => WorkerConnection) => {
  const times: Array<number> = []
  for (let index = 0; index < starts; index++) {
    const started = performance.now()
    const connection = make()
    await connection.ready.catch((error: Error) => fail(`a worker did not start: ${error.message}`))
    times.push(performance.now() - started)
    connection.close()
  }
  return times
}

// ---------------------------------------------------------------------------------------------------------------------
// Through the API

const project = "bench-fn"
const functions = `/apis/nodus.dev/v1/namespaces/${project}/functions`

/** A tar.gz of app.py (`double`), made with the host's tar. */
const codeArchive = () => {
  mkdirSync(join(root, "archive"))
  writeFileSync(join(root, "archive", "app.py"), "def double(x):\n    return 2 * x\n")
  execFileSync("tar", ["-czf", join(root, "code.tar.gz"), "-C", join(root, "archive"), "app.py"])
  return readFileSync(join(root, "code.tar.gz"))
}

const createFunction = async (url: URL, name: string, blob: string, scaling: Record<string, unknown>) => {
  const body = {
    apiVersion: "nodus.dev/v1",
    kind: "Function",
    metadata: { name },
    spec: { image: "debian:12", code: { module: "app", qualname: "double", blob }, scaling }
  }
  const reply = await call(url, "POST", functions, body)
  if (reply.status !== 201) throw new Error(`Function ${name}: ${reply.status} ${reply.text.slice(0, 300)}`)
}

interface WorkerCounts {
  starting?: number
  ready?: number
  draining?: number
}
const workersOf = async (url: URL, name: string): Promise<WorkerCounts> =>
  (await get(url, `${functions}/${name}`))?.status?.workers ?? {}

const message = (error: unknown) => error instanceof Error ? `${error.name}: ${error.message}` : String(error)

/** `count` sequential `.remote()` calls through the TypeScript client; each answer is checked. */
const tsRemote = async (client: NodusClient, name: string, count: number) => {
  const fn = client.function(project, name)
  const times: Array<number> = []
  for (let index = 0; index < count; index++) {
    const started = performance.now()
    try {
      const value = await fn.remote([index])
      const took = performance.now() - started
      if (value === 2 * index) times.push(took)
      else fail(`${name}.remote(${index}) answered ${JSON.stringify(value)}`)
    } catch (error) {
      fail(`${name}.remote(${index}): ${message(error)}`)
    }
  }
  return times
}

/** `.map` of `mapInputs` inputs through the TypeScript client: calls/s from the first call sent to the last result. */
const tsMap = async (client: NodusClient) => {
  const started = performance.now()
  let index = 0
  try {
    for await (const value of client.function(project, "warm").map(Array.from({ length: mapInputs }, (_, at) => at))) {
      if (value !== 2 * index) fail(`map result ${index} is ${JSON.stringify(value)}`)
      index++
    }
  } catch (error) {
    fail(`TypeScript map, after ${index} results: ${message(error)}`)
  }
  if (index !== mapInputs) fail(`TypeScript map gave ${index} of ${mapInputs} results`)
  return { perSecond: mapInputs / ((performance.now() - started) / 1000), results: index }
}

/** The Python client times itself: its remote() samples (ms) and its map's wall time, as one JSON line. */
const pythonScript = `
import json, sys, time
import nodus

calls, inputs, project = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
f = nodus.Client().function(project, "warm")
errors = []
times = []
for index in range(-10, calls):
    started = time.perf_counter()
    try:
        value = f.remote(index)
    except Exception as error:
        errors.append("remote(%d): %r" % (index, error))
        continue
    took = (time.perf_counter() - started) * 1000
    if value != 2 * index:
        errors.append("remote(%d) answered %r" % (index, value))
    elif index >= 0:
        times.append(took)
results = 0
started = time.perf_counter()
try:
    for index, value in enumerate(f.map(range(inputs))):
        if value != 2 * index:
            errors.append("map result %d is %r" % (index, value))
        results += 1
except Exception as error:
    errors.append("map, after %d results: %r" % (results, error))
seconds = time.perf_counter() - started
print(json.dumps({"remote": times, "mapResults": results, "mapSeconds": seconds, "errors": errors}))
`

const pythonClient = (url: URL) => {
  const script = join(root, "bench_client.py")
  writeFileSync(script, pythonScript)
  const output = execFileSync(python, [script, String(calls), String(mapInputs), project], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      PYTHONPATH: join(import.meta.dirname, "..", "clients", "python"),
      PYTHONDONTWRITEBYTECODE: "1",
      NODUS_URL: url.origin,
      NODUS_TOKEN: benchToken,
      KUBECONFIG: "/nonexistent/kubeconfig"
    }
  })
  const report = JSON.parse(output.trim().split("\n").at(-1) ?? "{}") as {
    remote: Array<number>
    mapResults: number
    mapSeconds: number
    errors: Array<string>
  }
  for (const error of report.errors) fail(`Python client: ${error}`)
  if (report.mapResults !== mapInputs) fail(`Python map gave ${report.mapResults} of ${mapInputs} results`)
  return { remote: report.remote, mapPerSecond: mapInputs / report.mapSeconds }
}

/** Create → result of a call that starts a worker: each time after the last one's worker went (scaledownWindow 0s). */
const coldCalls = async (url: URL, client: NodusClient) => {
  const times: Array<number> = []
  for (let index = 0; index < colds; index++) {
    await until(
      "cold's worker goes",
      async () => {
        const workers = await workersOf(url, "cold")
        return (workers.starting ?? 0) + (workers.ready ?? 0) + (workers.draining ?? 0) === 0
      },
      120_000,
      100
    )
    times.push(...await tsRemote(client, "cold", 1))
  }
  return times
}

/** What each phase measured, for one table. */
type Row =
  | {
    readonly label: string
    readonly times: ReadonlyArray<number>
    readonly goal?: { readonly p50: number; readonly p99: number }
  }
  | { readonly label: string; readonly perSecond: number; readonly goal: number }
const rows: Array<Row> = []

const throughApi = async () => {
  // A database of its own for the run (no Functions left from another run).
  const database = databaseUrl === "" ? undefined : await createDatabase(databaseUrl)
  const server = await startServer({
    NODUS_DATA_DIR: join(root, "data"),
    NODUS_BACKEND: "local",
    ...(database === undefined ? {} : { DATABASE_URL: database.url })
  })
  const client = new NodusClient({ baseUrl: server.url.origin, token: benchToken, env: {} })
  try {
    await benchProject(server.url, project, "bench:functions")
    const blob = await client.uploadBlob(codeArchive(), project)
    // One worker running up to 32 calls at once: a map is bound by the path to it, not by its threads.
    await createFunction(server.url, "warm", blob, { minWorkers: 1, maxWorkers: 1, targetConcurrency: 32 })
    // A worker per call, gone as soon as it is idle (this host has a slot per core: the warm one holds the other).
    await createFunction(server.url, "cold", blob, { minWorkers: 0, maxWorkers: 1, scaledownWindow: "0s" })
    await until(
      "warm has a ready worker",
      async () => ((await workersOf(server.url, "warm")).ready ?? 0) >= 1,
      120_000,
      100
    )
    const store = database === undefined ? "PGlite" : "PostgreSQL"
    await tsRemote(client, "warm", 10)
    const goal = { p50: 15, p99: 50 }
    rows.push({
      label: `warm .remote(), TypeScript client (${store})`,
      times: await tsRemote(client, "warm", calls),
      goal
    })
    const py = pythonClient(server.url)
    rows.push({ label: `warm .remote(), Python client (${store})`, times: py.remote, goal })
    rows.push({
      label: `.map of ${mapInputs}, TypeScript client (${store})`,
      perSecond: (await tsMap(client)).perSecond,
      goal: 1000
    })
    rows.push({ label: `.map of ${mapInputs}, Python client (${store})`, perSecond: py.mapPerSecond, goal: 1000 })
    rows.push({
      label: `cold start through the API, create → result (${store})`,
      times: await coldCalls(server.url, client)
    })
  } finally {
    client.close()
    await stopServer(server)
    await database?.drop()
  }
}

const milliseconds = (ms: number) => `${ms < 1 ? ms.toFixed(2) : ms.toFixed(1)} ms`

const table = () => {
  console.log("\n| | p50 | p99 | calls/s | n | goal |\n|-|-|-|-|-|-|")
  for (const row of rows) {
    if ("times" in row) {
      if (row.times.length === 0) {
        console.log(`| ${row.label} | none | | | 0 | |`)
        continue
      }
      const p50 = percentile(row.times, 50)
      const p99 = percentile(row.times, 99)
      const goal = row.goal === undefined
        ? ""
        : `p50 ≤ ${row.goal.p50} ms, p99 ≤ ${row.goal.p99} ms ${
          p50 <= row.goal.p50 && p99 <= row.goal.p99 ? "(met)" : "(missed)"
        }`
      console.log(`| ${row.label} | ${milliseconds(p50)} | ${milliseconds(p99)} | | ${row.times.length} | ${goal} |`)
    } else {
      console.log(
        `| ${row.label} | | | ${row.perSecond.toFixed(0)} | ${mapInputs} | ≥ ${row.goal} calls/s ${
          row.perSecond >= row.goal ? "(met)" : "(missed)"
        } |`
      )
    }
  }
}

try {
  console.log(
    `Functions on this host (${python}, ${calls} calls, ${starts} worker starts, .map of ${mapInputs}, ${colds} cold starts through the API)`
  )
  rows.push({ label: "floor: bare Node ↔ Python pipe round trip", times: await floor() })
  const plain = plainWorker()
  rows.push({ label: "warm worker call round trip, plain process", times: await roundTrips(plain) })
  plain.close()
  const boxed = boxedWorker()
  rows.push({ label: "warm worker call round trip, bubblewrap box", times: await roundTrips(boxed) })
  boxed.close()
  rows.push({ label: "cold start → ready, plain process", times: await coldStarts(plainWorker) })
  rows.push({ label: "cold start → ready, bubblewrap box", times: await coldStarts(boxedWorker) })
  await throughApi()
} catch (error) {
  fail(message(error))
} finally {
  rmSync(root, { recursive: true, force: true })
}
table()
if (failures > 0) {
  console.error(`${failures} failures`)
  process.exit(1)
}
