/**
 * API throughput and latency against a real `nodus serve` process (plain HTTP, so the numbers are the API machinery's
 * and the store's, not TLS's), on embedded PGlite and on PostgreSQL, with N concurrent keep-alive clients:
 *
 * - creates of Jobs and of Volumes side by side on the same server (a Job create carries its estimate; the issue's
 *   goal is Job creates at ≥ 80 % of Volume creates), Jobs of one spec as a benchmark or a sweep sends them, and Jobs
 *   of distinct specs, each estimated afresh; then gets and lists of the Jobs;
 * - `/version`'s latency, idle and while eight worst-case dry runs (100,000 hours, 10,000 indexes, each a spec of its
 *   own) are in flight (goal: answered within 100 ms);
 * - beside it, pgbench's single-row INSERT rate on the same PostgreSQL server with the same clients: the anchor of
 *   the API goal (creates ≥ 50 % of it, p99 < 50 ms at 16 clients).
 *
 * The server is granted credits as the operator first (`nodus grant` does the same), so that Job creates are
 * admitted. Any request answered with another status than expected (a 402 included) is a failure: the bench prints
 * the count and exits 1.
 *
 * Beside each create phase it prints the CPU each part spent per create (Linux: from /proc): the server process, every
 * PostgreSQL process, and this load generator; and `/version` at the same clients, the ceiling of the HTTP path with
 * nothing behind it. Together they say what bounds the creates.
 *
 *   npm run bench:api -- [--clients 16] [--seconds 10] [--database-url postgres://…] [--stores pglite,postgres]
 *                        [--root <checkout>]  (that checkout's server, for a before/after with the same load)
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"
import { type BenchServer, benchToken, startServer, stopServer } from "./Server.ts"

const clients = Number(argument("clients", "16"))
const seconds = Number(argument("seconds", "10"))
const warmUpSeconds = Math.min(2, seconds)
const stopGraceMs = 10_000
/**
 * A `/version` slower than this ends the phase as a timeout (a failure): a server that computes estimates on its
 * event loop held it for the whole of a worst-case dry run, minutes or more.
 */
const versionTimeoutMs = 30_000
const adminUrl = argument("database-url", process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
const token = benchToken
const stores = argument("stores", "pglite,postgres").split(",")
const root = argument("root", join(import.meta.dirname, ".."))

const agent = new Agent({ keepAlive: true, maxSockets: clients })

/** Requests answered with another status than expected, by operation: the bench fails when there is any. */
const failures = new Map<string, number>()

const call = (
  url: URL,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {}
): Promise<number> =>
  new Promise((resolve, reject) => {
    const target = new URL(path, url)
    const outgoing = request({
      agent,
      host: target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...headers,
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      }
    }, (response) => {
      response.resume()
      response.on("end", () => resolve(response.statusCode ?? 0))
    })
    outgoing.on("error", reject)
    if (body !== undefined) outgoing.write(body)
    outgoing.end()
  })

/** A request that must answer `expected`; anything else is counted as a failure of `label`. */
const expect = async (label: string, expected: number, sent: Promise<number>): Promise<number> => {
  const status = await sent
  if (status !== expected) failures.set(label, (failures.get(label) ?? 0) + 1)
  return status
}

/**
 * CPU spent per operation of a phase, µs: by the server process, by every PostgreSQL process, by this load generator.
 */
interface CpuPerOperation {
  readonly server: number
  readonly postgres: number
  readonly bench: number
}

interface Result {
  readonly cpu?: CpuPerOperation
  readonly operations: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  readonly errors: number
}

const percentile = (sorted: ReadonlyArray<number>, fraction: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!

/** A process's CPU time so far in clock ticks (user + system, /proc/<pid>/stat), 0 where it cannot be read. */
const processTicks = (pid: string): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return 0
  }
}

/** Linux's USER_HZ: /proc counts CPU time in hundredths of a second. */
const tickMicroseconds = 10_000

/** The CPU ticks of every PostgreSQL process on this machine (the server the bench uses runs here). */
const postgresTicks = (): number => {
  let sum = 0
  for (const pid of readdirSync("/proc")) {
    if (!/^[0-9]+$/u.test(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").startsWith("postgres")) sum += processTicks(pid)
    } catch {
      // The process ended while the directory was read.
    }
  }
  return sum
}

/** Measures the CPU of the server `pid`, of PostgreSQL and of this process around `phase`, per operation it made. */
const withCpu = async (pid: number | undefined, phase: () => Promise<Result>): Promise<Result> => {
  if (pid === undefined || process.platform !== "linux") return phase()
  const [server, postgres, bench] = [processTicks(String(pid)), postgresTicks(), process.cpuUsage()]
  const result = await phase()
  const used = process.cpuUsage(bench)
  const per = (microseconds: number) => microseconds / Math.max(1, result.operations)
  return {
    ...result,
    cpu: {
      server: per((processTicks(String(pid)) - server) * tickMicroseconds),
      postgres: per((postgresTicks() - postgres) * tickMicroseconds),
      bench: per(used.user + used.system)
    }
  }
}

/**
 * Runs `operation` from `clients` concurrent loops for `duration` seconds; a status other than `expected` fails
 * `label`.
 */
const load = async (
  label: string,
  operation: (client: number, iteration: number) => Promise<number>,
  expected: number,
  duration = seconds
): Promise<Result> => {
  const latencies: Array<number> = []
  let errors = 0
  const end = performance.now() + duration * 1_000
  const loop = async (client: number) => {
    for (let iteration = 0; performance.now() < end; iteration++) {
      const started = performance.now()
      const status = await expect(label, expected, operation(client, iteration))
      latencies.push(performance.now() - started)
      if (status !== expected) errors++
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: clients }, (_, client) => loop(client)))
  return summarize(latencies, errors, (performance.now() - started) / 1_000)
}

/** Operations per second over `elapsedSeconds` (the sum of the latencies when not given), p50 and p99. */
const summarize = (latencies: Array<number>, errors: number, elapsedSeconds?: number): Result => {
  latencies.sort((a, b) => a - b)
  const elapsed = elapsedSeconds ?? latencies.reduce((sum, latency) => sum + latency, 0) / 1_000
  return {
    operations: latencies.length,
    perSecond: latencies.length / elapsed,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: latencies[latencies.length - 1] ?? Number.NaN,
    errors
  }
}

/** A Job of the benchmark's one spec, or with `variant`, of a spec of its own (estimated afresh: nothing cached). */
const jobBody = (name: string, variant?: string) =>
  JSON.stringify({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: { name, labels: { bench: "api", team: `t${name.length % 4}` } },
    spec: {
      image: "python:3.12",
      command: ["python", "-c", variant === undefined ? "print(42)" : `print(${JSON.stringify(variant)})`],
      completions: 4,
      parallelism: 2
    }
  })

const volumeBody = (name: string) =>
  JSON.stringify({
    apiVersion: "nodus.dev/v1",
    kind: "Volume",
    metadata: { name, labels: { bench: "api", team: `t${name.length % 4}` } },
    spec: { size: "100Gi" }
  })

/** The worst case of an estimate (issue): 100,000 hours, 10,000 indexes, interruptible; `variant` makes it uncached. */
const worstCaseBody = (name: string, variant: string) =>
  JSON.stringify({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: { name },
    spec: {
      image: "python:3.12",
      command: ["train", variant],
      expectedDuration: "100000h",
      completions: 10000,
      parallelism: 256,
      resources: { gpu: { type: ["H100"], count: 8 } },
      placement: { interruptible: "Prefer" }
    }
  })

const jobsPath = "/apis/nodus.dev/v1/namespaces/bench/jobs"

/** Credits for the bench's Jobs, granted as the operator (what `nodus grant` sends). */
const grantCredits = (server: BenchServer) => {
  const grant = {
    apiVersion: "nodus.dev/v1",
    kind: "CreditGrant",
    metadata: { generateName: "bench-" },
    spec: { amountUSD: "1000000", source: "Admin", reason: "bench:api" }
  }
  return expect(
    "operator credit grant",
    201,
    call(server.url, "POST", "/apis/nodus.dev/v1/operator/creditgrants", JSON.stringify(grant), {
      "idempotency-key": `bench-${Date.now()}`
    })
  )
}

interface VersionUnderLoad {
  readonly idle: Result
  readonly loaded: Result
  readonly dryRunP50Ms: number
  /** /version did not answer within `versionTimeoutMs`. */
  readonly timedOut: boolean
}

/** The status of `sent`, or 0 once `ms` have passed without one. */
const within = (ms: number, sent: Promise<number>): Promise<number> => {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), ms)))
  return Promise.race([sent, late]).finally(() => clearTimeout(timer))
}

/** `/version`'s latency alone, then while eight worst-case dry runs are in flight, round after round. */
const versionUnderLoad = async (server: BenchServer): Promise<VersionUnderLoad> => {
  const version = () => expect("GET /version", 200, within(versionTimeoutMs, call(server.url, "GET", "/version")))
  const idle: Array<number> = []
  for (let round = 0; round < 200; round++) idle.push(await timedMs(version))
  const loaded: Array<number> = []
  const dryRuns: Array<number> = []
  const end = performance.now() + seconds * 1_000
  for (let round = 0; performance.now() < end; round++) {
    let inFlight = 8
    const started = performance.now()
    const batch = Array.from({ length: 8 }, (_, index) =>
      // A dry run cut off with its server (after a /version timeout) answers 0, a failure.
      expect(
        "worst-case dry run",
        201,
        call(
          server.url,
          "POST",
          `${jobsPath}?dryRun=All`,
          worstCaseBody(`worst-${round}-${index}`, `${round}-${index}`)
        ).catch(() => 0)
      ).then(() => {
        dryRuns.push(performance.now() - started)
        inFlight--
      }))
    while (inFlight > 0) {
      const latency = await timedMs(version)
      loaded.push(latency)
      if (latency >= versionTimeoutMs) {
        return { idle: summarize(idle, 0), loaded: summarize(loaded, 1), dryRunP50Ms: Number.NaN, timedOut: true }
      }
    }
    await Promise.all(batch)
  }
  return {
    idle: summarize(idle, 0),
    loaded: summarize(loaded, 0),
    dryRunP50Ms: summarize(dryRuns, 0).p50Ms,
    timedOut: false
  }
}

const timedMs = async (operation: () => Promise<unknown>): Promise<number> => {
  const started = performance.now()
  await operation()
  return performance.now() - started
}

const benchServer = async (label: string, server: BenchServer) => {
  await expect(
    "create namespace",
    201,
    call(server.url, "POST", "/api/v1/namespaces", JSON.stringify({ metadata: { name: "bench" } }))
  )
  await grantCredits(server)
  // Neither measured phase pays the server's JIT warm-up or the estimate worker's start.
  await load(
    "Job create",
    (client, iteration) => call(server.url, "POST", jobsPath, jobBody(`warm-job-${client}-${iteration}`)),
    201,
    warmUpSeconds
  )
  await load(
    "Volume create",
    (client, iteration) =>
      call(
        server.url,
        "POST",
        "/apis/nodus.dev/v1/namespaces/bench/volumes",
        volumeBody(`warm-volume-${client}-${iteration}`)
      ),
    201,
    warmUpSeconds
  )
  const created = Array.from({ length: clients }, () => 0)
  const pid = server.process.pid
  const create = await withCpu(pid, () =>
    load("Job create", (client, iteration) => {
      created[client] = iteration + 1
      return call(server.url, "POST", jobsPath, jobBody(`job-${client}-${iteration}`))
    }, 201))
  const volumes = await withCpu(
    pid,
    () =>
      load("Volume create", (client, iteration) =>
        call(
          server.url,
          "POST",
          "/apis/nodus.dev/v1/namespaces/bench/volumes",
          volumeBody(`volume-${client}-${iteration}`)
        ), 201)
  )
  const distinct = await load(
    "Job create (distinct specs)",
    (client, iteration) =>
      call(server.url, "POST", jobsPath, jobBody(`distinct-${client}-${iteration}`, `${client}-${iteration}`)),
    201
  )
  // Gets read only objects that exist: each client cycles through the ones it created.
  const get = await load(
    "Job get",
    (client, iteration) =>
      call(server.url, "GET", `${jobsPath}/job-${client}-${iteration % Math.max(1, created[client]!)}`),
    200
  )
  const list = await load("Job list", () => call(server.url, "GET", `${jobsPath}?limit=100`), 200)
  // The HTTP path's ceiling on this machine: the same clients and server, and a request with nothing behind it.
  const ceiling = await withCpu(pid, () => load("GET /version", () => call(server.url, "GET", "/version"), 200))
  const version = await versionUnderLoad(server)
  return { label, create, volumes, distinct, get, list, ceiling, version }
}

const pgbench = (url: string): number | undefined => {
  try {
    const target = new URL(url)
    const script = join(mkdtempSync(join(tmpdir(), "nodus-pgbench-")), "insert.sql")
    writeFileSync(
      script,
      `INSERT INTO bench_rows (name, body) VALUES ('job-' || :client_id || '-' || random(), '${
        jobBody("pgbench-row").replace(/'/gu, "''")
      }');\n`
    )
    const connection = [
      "-h",
      target.hostname,
      "-p",
      target.port || "5432",
      "-U",
      decodeURIComponent(target.username || "postgres")
    ]
    const database = target.pathname.slice(1) || "postgres"
    execFileSync("psql", [
      ...connection,
      "-d",
      database,
      "-qc",
      "CREATE TABLE bench_rows (id bigserial PRIMARY KEY, name text NOT NULL, body text NOT NULL)"
    ])
    const output = execFileSync("pgbench", [
      ...connection,
      "-n",
      "-f",
      script,
      "-c",
      String(clients),
      "-j",
      "2",
      "-T",
      String(seconds),
      database
    ], { encoding: "utf8" })
    execFileSync("psql", [...connection, "-d", database, "-qc", "DROP TABLE bench_rows"])
    const match = /tps = ([0-9.]+)/u.exec(output)
    return match === null ? undefined : Number(match[1])
  } catch (error) {
    console.error(`pgbench unavailable: ${(error as Error).message.split("\n")[0]}`)
    return undefined
  }
}

const row = (name: string, result: Result) =>
  `| ${name.padEnd(42)} | ${result.perSecond.toFixed(0).padStart(8)} | ${result.p50Ms.toFixed(2).padStart(8)} | ${
    result.p99Ms.toFixed(2).padStart(8)
  } | ${result.maxMs.toFixed(2).padStart(8)} | ${String(result.errors).padStart(6)} |`

const main = async () => {
  console.log(
    `nodus API bench: ${clients} clients, ${seconds} s per phase, ${cpus().length} × ${
      cpus()[0]?.model ?? "cpu"
    }, Node ${process.version}`
  )
  const runs: Array<Awaited<ReturnType<typeof benchServer>>> = []
  if (stores.includes("pglite")) {
    const pglite = await startServer({}, root)
    runs.push(await benchServer("PGlite", pglite))
    await stopServer(pglite, stopGraceMs)
  }
  // A database of its own for the run (none when no PostgreSQL server answers: the PGlite figures alone).
  const database = stores.includes("postgres") ? await createDatabase(adminUrl).catch(() => undefined) : undefined
  let anchor: number | undefined
  if (database !== undefined) {
    const postgres = await startServer({ DATABASE_URL: database.url }, root)
    runs.push(await benchServer("PostgreSQL", postgres))
    await stopServer(postgres, stopGraceMs)
    anchor = pgbench(database.url)
    await database.drop()
  } else if (stores.includes("postgres")) {
    console.log("no PostgreSQL server reachable: PostgreSQL and pgbench rows skipped")
  }
  console.log(`\n| ${"operation".padEnd(42)} | ops/s    | p50 ms   | p99 ms   | max ms   | errors |`)
  console.log(`|${"-".repeat(44)}|----------|----------|----------|----------|--------|`)
  for (const run of runs) {
    console.log(row(`${run.label} Job create`, run.create))
    console.log(row(`${run.label} Volume create`, run.volumes))
    console.log(row(`${run.label} Job create (distinct specs)`, run.distinct))
    console.log(row(`${run.label} Job get`, run.get))
    console.log(row(`${run.label} Job list (limit 100)`, run.list))
    console.log(row(`${run.label} /version, ${clients} clients`, run.ceiling))
    console.log(row(`${run.label} /version, idle`, run.version.idle))
    console.log(row(`${run.label} /version, 8 worst-case dry runs`, run.version.loaded))
  }
  if (anchor !== undefined) {
    console.log(
      `| ${"pgbench single-row INSERT".padEnd(42)} | ${
        anchor.toFixed(0).padStart(8)
      } |          |          |          |        |`
    )
  }
  const cpuRows = runs.flatMap((run) =>
    [[`${run.label} Job create`, run.create], [`${run.label} Volume create`, run.volumes], [
      `${run.label} /version, ${clients} clients`,
      run.ceiling
    ]] as const
  )
    .flatMap((
      [name, result]
    ) => (result.cpu === undefined
      ? []
      : [
        `| ${name.padEnd(42)} | ${
          [
            result.cpu.server,
            result.cpu.postgres,
            result.cpu.bench,
            result.cpu.server + result.cpu.postgres + result.cpu.bench
          ].map((value) => value.toFixed(0).padStart(10)).join(" | ")
        } |`
      ])
    )
  if (cpuRows.length > 0) {
    console.log(`\n| ${"CPU per operation, µs".padEnd(42)} | server     | PostgreSQL | bench      | sum        |`)
    console.log(`|${"-".repeat(44)}|------------|------------|------------|------------|`)
    for (const line of cpuRows) console.log(line)
  }
  console.log("")
  for (const run of runs) {
    const ratio = (100 * run.create.perSecond) / run.volumes.perSecond
    const loaded = run.version.loaded
    const dryRuns = run.version.timedOut
      ? `it timed out after ${versionTimeoutMs / 1000} s`
      : `those dry runs took ${run.version.dryRunP50Ms.toFixed(0)} ms p50`
    console.log(
      `${run.label}: Job creates = ${
        ratio.toFixed(1)
      } % of Volume creates (goal ≥ 80 %); /version under 8 worst-case dry runs p99 ${
        loaded.p99Ms.toFixed(1)
      } ms, max ${loaded.maxMs.toFixed(1)} ms of ${loaded.operations} (goal ≤ 100 ms); ${dryRuns}`
    )
  }
  if (anchor !== undefined) {
    const postgres = runs.find((run) => run.label === "PostgreSQL")!
    console.log(
      `Job creates on PostgreSQL = ${
        (100 * postgres.create.perSecond / anchor).toFixed(1)
      } % of pgbench INSERT tps (goal ≥ 50 %); Job create p99 ${
        postgres.create.p99Ms.toFixed(1)
      } ms (goal < 50 ms); /version at ${clients} clients (nothing behind it) = ${
        (100 * postgres.ceiling.perSecond / anchor).toFixed(1)
      } %`
    )
  }
  agent.destroy()
  if (failures.size > 0) {
    console.error(
      `\nFAILED: requests answered with an unexpected status: ${
        [...failures].map(([label, count]) => `${label} ${count}`).join(", ")
      }`
    )
    process.exit(1)
  }
}

await main()
