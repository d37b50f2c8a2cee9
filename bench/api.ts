/**
 * API throughput and latency: creates, gets and lists of Jobs against a real `nodus serve` process (plain HTTP, so
 * the numbers are the API machinery's and the store's, not TLS's), on embedded PGlite and on PostgreSQL, with N
 * concurrent keep-alive clients. Beside it, in the same run, pgbench's single-row INSERT rate on the same PostgreSQL
 * server with the same number of clients: the anchor the goal is stated against (creates ≥ 50 % of it,
 * p99 < 50 ms at 16 clients).
 *
 *   npm run bench:api -- [--clients 16] [--seconds 10] [--database-url postgres://…]
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"

const argument = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : process.argv[index + 1] ?? fallback
}

const clients = Number(argument("clients", "16"))
const seconds = Number(argument("seconds", "10"))
const adminUrl = argument("database-url", process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
const token = "nds_bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
const root = join(import.meta.dirname, "..")

interface Server {
  readonly url: string
  readonly process: ChildProcess
}

const startServer = (env: Record<string, string>): Promise<Server> =>
  new Promise((resolve, reject) => {
    const dataDir = mkdtempSync(join(tmpdir(), "nodus-bench-"))
    const child = spawn(process.execPath, [join(root, "bin", "nodus.js"), "serve"], {
      env: { ...process.env, NODUS_DATA_DIR: dataDir, NODUS_ADDR: "127.0.0.1:0", NODUS_TLS: "off", NODUS_BOOTSTRAP_TOKEN: token, NODUS_BACKEND: "none", ...env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /nodus serving (http:\/\/\S+)/u.exec(output)
      if (match !== null) resolve({ url: match[1]!, process: child })
    })
    child.on("exit", (code) => reject(new Error(`server exited with ${code}: ${output}`)))
  })

/** Stops a server and waits until it is gone, so that its shutdown does not share the CPU with the next phase. */
const stopServer = (server: Server): Promise<void> =>
  new Promise((resolve) => {
    server.process.once("exit", () => resolve())
    server.process.kill("SIGTERM")
  })

const agent = new Agent({ keepAlive: true, maxSockets: clients })

const call = (url: string, method: string, path: string, body?: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const target = new URL(path, url)
    const outgoing = request({
      agent,
      host: target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) }) }
    }, (response) => {
      response.resume()
      response.on("end", () => resolve(response.statusCode ?? 0))
    })
    outgoing.on("error", reject)
    if (body !== undefined) outgoing.write(body)
    outgoing.end()
  })

interface Result {
  readonly operations: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly errors: number
}

const percentile = (sorted: ReadonlyArray<number>, fraction: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!

/** Runs `operation` from `clients` concurrent loops for `seconds`. */
const load = async (operation: (client: number, iteration: number) => Promise<number>, expected: number): Promise<Result> => {
  const latencies: Array<number> = []
  let errors = 0
  const end = performance.now() + seconds * 1_000
  const loop = async (client: number) => {
    for (let iteration = 0; performance.now() < end; iteration++) {
      const started = performance.now()
      const status = await operation(client, iteration)
      latencies.push(performance.now() - started)
      if (status !== expected) errors++
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: clients }, (_, client) => loop(client)))
  const elapsed = (performance.now() - started) / 1_000
  latencies.sort((a, b) => a - b)
  return { operations: latencies.length, perSecond: latencies.length / elapsed, p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99), errors }
}

const jobBody = (name: string) => JSON.stringify({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: { name, labels: { bench: "api", team: `t${name.length % 4}` } },
  spec: { image: "python:3.12", command: ["python", "-c", "print(42)"], completions: 4, parallelism: 2 }
})

const benchServer = async (label: string, server: Server) => {
  await call(server.url, "POST", "/api/v1/namespaces", JSON.stringify({ metadata: { name: "bench" } }))
  const created = Array.from({ length: clients }, () => 0)
  const create = await load((client, iteration) => {
    created[client] = iteration + 1
    return call(server.url, "POST", "/apis/nodus.dev/v1/namespaces/bench/jobs", jobBody(`job-${client}-${iteration}`))
  }, 201)
  // Gets read only objects that exist: each client cycles through the ones it created.
  const get = await load((client, iteration) => call(server.url, "GET", `/apis/nodus.dev/v1/namespaces/bench/jobs/job-${client}-${iteration % Math.max(1, created[client]!)}`), 200)
  const list = await load(() => call(server.url, "GET", "/apis/nodus.dev/v1/namespaces/bench/jobs?limit=100"), 200)
  return { label, create, get, list }
}

const pgbench = (url: string): number | undefined => {
  try {
    const target = new URL(url)
    const script = join(mkdtempSync(join(tmpdir(), "nodus-pgbench-")), "insert.sql")
    writeFileSync(script, `INSERT INTO bench_rows (name, body) VALUES ('job-' || :client_id || '-' || random(), '${jobBody("pgbench-row").replace(/'/gu, "''")}');\n`)
    const connection = ["-h", target.hostname, "-p", target.port || "5432", "-U", decodeURIComponent(target.username || "postgres")]
    const database = target.pathname.slice(1) || "postgres"
    execFileSync("psql", [...connection, "-d", database, "-qc", "CREATE TABLE bench_rows (id bigserial PRIMARY KEY, name text NOT NULL, body text NOT NULL)"])
    const output = execFileSync("pgbench", [...connection, "-n", "-f", script, "-c", String(clients), "-j", "2", "-T", String(seconds), database], { encoding: "utf8" })
    execFileSync("psql", [...connection, "-d", database, "-qc", "DROP TABLE bench_rows"])
    const match = /tps = ([0-9.]+)/u.exec(output)
    return match === null ? undefined : Number(match[1])
  } catch (error) {
    console.error(`pgbench unavailable: ${(error as Error).message.split("\n")[0]}`)
    return undefined
  }
}

const psqlOn = (url: string, statement: string) => {
  const target = new URL(url)
  execFileSync("psql", ["-h", target.hostname, "-p", target.port || "5432", "-U", decodeURIComponent(target.username || "postgres"), "-d", target.pathname.slice(1) || "postgres", "-qc", statement])
}

/** A database of its own for the run, on the server of `url`; `drop` removes it. */
const freshDatabase = (url: string): { readonly url: string; readonly drop: () => void } | undefined => {
  try {
    const name = `nodus_bench_${Date.now()}`
    psqlOn(url, `CREATE DATABASE ${name}`)
    const target = new URL(url)
    target.pathname = `/${name}`
    return { url: target.toString(), drop: () => psqlOn(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
  } catch {
    return undefined
  }
}

const row = (name: string, result: Result) =>
  `| ${name.padEnd(26)} | ${result.perSecond.toFixed(0).padStart(8)} | ${result.p50Ms.toFixed(2).padStart(8)} | ${result.p99Ms.toFixed(2).padStart(8)} | ${String(result.errors).padStart(6)} |`

const main = async () => {
  console.log(`nodus API bench: ${clients} clients, ${seconds} s per phase, ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`)
  const runs: Array<Awaited<ReturnType<typeof benchServer>>> = []
  const pglite = await startServer({})
  runs.push(await benchServer("PGlite", pglite))
  await stopServer(pglite)
  const database = freshDatabase(adminUrl)
  let anchor: number | undefined
  if (database !== undefined) {
    const postgres = await startServer({ DATABASE_URL: database.url })
    runs.push(await benchServer("PostgreSQL", postgres))
    await stopServer(postgres)
    anchor = pgbench(database.url)
    database.drop()
  } else {
    console.log("no PostgreSQL server reachable: PostgreSQL and pgbench rows skipped")
  }
  console.log("\n| operation                  | ops/s    | p50 ms   | p99 ms   | errors |")
  console.log("|----------------------------|----------|----------|----------|--------|")
  for (const run of runs) {
    console.log(row(`${run.label} create`, run.create))
    console.log(row(`${run.label} get`, run.get))
    console.log(row(`${run.label} list (limit 100)`, run.list))
  }
  if (anchor !== undefined) {
    const postgres = runs.find((run) => run.label === "PostgreSQL")!
    console.log(`| ${"pgbench single-row INSERT".padEnd(26)} | ${anchor.toFixed(0).padStart(8)} |          |          |        |`)
    console.log(`\ncreates on PostgreSQL = ${(100 * postgres.create.perSecond / anchor).toFixed(1)} % of pgbench INSERT tps (goal ≥ 50 %); create p99 ${postgres.create.p99Ms.toFixed(1)} ms (goal < 50 ms)`)
  }
  agent.destroy()
}

await main()
