/**
 * Watches and lists of many objects against a real `nodus serve` process (plain HTTP, backend none), on embedded
 * PGlite or, with `--database-url` / DATABASE_URL, on a fresh database of that PostgreSQL server:
 *
 * 1. creates `--objects` Jobs (20,000) in one project with 16 concurrent clients;
 * 2. GETs one Job and `jobs?limit=1` from `--clients` loops (4) for `--seconds` (10): the idle latency;
 * 3. opens `--watchers` watches (50) without resourceVersion, whose clients never read a byte (raw sockets), waits
 *    `--settle` seconds (5) and measures the same GETs while they are open;
 * 4. the same with `--readers` watches (20) instead, whose clients read everything as fast as they can;
 * 5. reads the unpaged list of every Job `--lists` times (3), one after the other, each to its end.
 *
 * The server's resident memory (VmRSS) is sampled every 100 ms; each phase prints its peak. The goal from the issue:
 * with 50 such watchers on 20,000 Jobs, GET p99 < 100 ms and RSS < 1 GB. A request answered with another status
 * than expected, or not within `requestTimeoutMs`, is a failure: the bench prints the count and exits 1.
 *
 *   npm run bench:watch -- [--objects 20000] [--watchers 50] [--seconds 10] [--database-url postgres://…]
 *                          [--server <checkout>]   (another checkout's bin/nodus.js, e.g. for a before/after)
 */
import { readFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { connect, type Socket } from "node:net"
import { cpus } from "node:os"
import { join } from "node:path"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"
import { type BenchServer, benchToken, startServer, stopServer } from "./Server.ts"

const objects = Number(argument("objects", "20000"))
const watchers = Number(argument("watchers", "50"))
const clients = Number(argument("clients", "4"))
const seconds = Number(argument("seconds", "10"))
const settleSeconds = Number(argument("settle", "5"))
const readers = Number(argument("readers", "20"))
const lists = Number(argument("lists", "3"))
const databaseUrl = argument("database-url", process.env["DATABASE_URL"] ?? "")
const root = argument("server", join(import.meta.dirname, ".."))
const token = benchToken
const project = "bench"
const jobsPath = `/apis/nodus.dev/v1/namespaces/${project}/jobs`
/** A request not answered within this is a failure (the issue saw `?limit=1` take 20 s and more). */
const requestTimeoutMs = 30_000
const createClients = 16

/**
 * The server's resident memory in MB, sampled until `stop`; `peak()` is the largest sample since the last `reset()`.
 */
const memorySampler = (pid: number) => {
  const read = () => Number(/VmRSS:\s+(\d+) kB/u.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024
  let peak = read()
  const timer = setInterval(() => (peak = Math.max(peak, read())), 100)
  return { peak: () => peak, reset: () => (peak = read()), stop: () => clearInterval(timer) }
}

const agent = new Agent({ keepAlive: true, maxSockets: Math.max(clients, createClients) })

/**
 * Requests answered with another status than expected, or too late, by operation: the bench fails when there is any.
 */
const failures = new Map<string, number>()
const fail = (label: string) => failures.set(label, (failures.get(label) ?? 0) + 1)

/** A request that must answer `expected`; resolves with its latency in ms and the body's length in bytes. */
const call = (
  server: BenchServer,
  label: string,
  expected: number,
  method: string,
  path: string,
  body?: string
): Promise<{ ms: number; bytes: number }> =>
  new Promise((resolve) => {
    const started = performance.now()
    const done = (ok: boolean, bytes = 0) => {
      if (!ok) fail(label)
      resolve({ ms: performance.now() - started, bytes })
    }
    const outgoing = request({
      agent,
      host: server.url.hostname,
      port: server.url.port,
      path,
      method,
      timeout: requestTimeoutMs,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      }
    }, (response) => {
      let bytes = 0
      response.on("data", (chunk: Buffer) => (bytes += chunk.length))
      response.on("end", () => done(response.statusCode === expected, bytes))
      response.on("error", () => done(false))
    })
    outgoing.on("timeout", () => outgoing.destroy(new Error("timeout")))
    outgoing.on("error", () => done(false))
    if (body !== undefined) outgoing.write(body)
    outgoing.end()
  })

const jobBody = (name: string) =>
  JSON.stringify({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: { name, labels: { bench: "watch", team: `t${name.length % 4}` } },
    spec: { image: "python:3.12", command: ["python", "-c", "print(42)"], completions: 4, parallelism: 2 }
  })

const createJobs = async (server: BenchServer): Promise<number> => {
  const started = performance.now()
  let next = 0
  const loop = async () => {
    for (let index = next++; index < objects; index = next++) {
      await call(server, "Job create", 201, "POST", jobsPath, jobBody(`job-${index}`))
    }
  }
  await Promise.all(Array.from({ length: createClients }, loop))
  return objects / ((performance.now() - started) / 1_000)
}

const percentile = (sorted: ReadonlyArray<number>, fraction: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? Number.NaN

interface Latency {
  readonly requests: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
}

/** GETs of one Job and of `?limit=1`, in turn, from `clients` loops for `seconds`. */
const getLatency = async (server: BenchServer): Promise<Latency> => {
  const latencies: Array<number> = []
  const end = performance.now() + seconds * 1_000
  const loop = async (client: number) => {
    for (let iteration = 0; performance.now() < end; iteration++) {
      const path = iteration % 2 === 0
        ? `${jobsPath}/job-${(client * 7919 + iteration) % objects}`
        : `${jobsPath}?limit=1`
      latencies.push((await call(server, iteration % 2 === 0 ? "Job get" : "Job list limit=1", 200, "GET", path)).ms)
    }
  }
  await Promise.all(Array.from({ length: clients }, (_, client) => loop(client)))
  latencies.sort((a, b) => a - b)
  return {
    requests: latencies.length,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: latencies.at(-1) ?? Number.NaN
  }
}

/**
 * A watch whose client sends the request and then never reads: the server's writes pile up until the socket is full.
 */
const openSilentWatch = (server: BenchServer): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const socket = connect(Number(server.url.port), server.url.hostname, () => {
      socket.write(
        `GET ${jobsPath}?watch=true HTTP/1.1\r\nHost: ${server.url.host}\r\nAuthorization: Bearer ${token}\r\n\r\n`
      )
      socket.pause()
      resolve(socket)
    })
    socket.on("error", reject)
  })

/**
 * A watch whose client reads every byte as it comes; resolves with a function that ends it and tells the bytes read.
 */
const openReadingWatch = (server: BenchServer): Promise<() => number> =>
  new Promise((resolve) => {
    let bytes = 0
    const outgoing = request({
      host: server.url.hostname,
      port: server.url.port,
      path: `${jobsPath}?watch=true`,
      headers: { authorization: `Bearer ${token}` }
    }, (response) => {
      if (response.statusCode !== 200) fail("reading watch")
      response.on("data", (chunk: Buffer) => (bytes += chunk.length))
      response.on("error", () => {})
      resolve(() => {
        outgoing.destroy()
        return bytes
      })
    })
    outgoing.on("error", () => {})
    outgoing.end()
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const benchServer = async (server: BenchServer) => {
  const memory = memorySampler(server.process.pid!)
  await call(
    server,
    "create namespace",
    201,
    "POST",
    "/api/v1/namespaces",
    JSON.stringify({ metadata: { name: project } })
  )
  const grant = {
    apiVersion: "nodus.dev/v1",
    kind: "CreditGrant",
    metadata: { generateName: "bench-" },
    spec: { amountUSD: "1000000", source: "Admin", reason: "bench:watch" }
  }
  await call(
    server,
    "operator credit grant",
    201,
    "POST",
    "/apis/nodus.dev/v1/operator/creditgrants",
    JSON.stringify(grant)
  )
  const createRate = await createJobs(server)
  const afterCreates = memory.peak()
  memory.reset()
  const idle = await getLatency(server)
  const idleRss = memory.peak()
  memory.reset()
  const sockets = await Promise.all(Array.from({ length: watchers }, () => openSilentWatch(server)))
  await sleep(settleSeconds * 1_000)
  const watched = await getLatency(server)
  const watchedRss = memory.peak()
  for (const socket of sockets) socket.destroy()
  await sleep(1_000)
  memory.reset()
  const stops = await Promise.all(Array.from({ length: readers }, () => openReadingWatch(server)))
  const read = await getLatency(server)
  const readRss = memory.peak()
  const readBytes = stops.reduce((sum, stop) => sum + stop(), 0)
  await sleep(1_000)
  memory.reset()
  const listMs: Array<number> = []
  let listBytes = 0
  for (let round = 0; round < lists; round++) {
    const listed = await call(server, "unpaged Job list", 200, "GET", jobsPath)
    listMs.push(listed.ms)
    listBytes = listed.bytes
  }
  const listRss = memory.peak()
  memory.stop()
  return {
    createRate,
    afterCreates,
    idle,
    idleRss,
    watched,
    watchedRss,
    read,
    readRss,
    readBytes,
    listMs,
    listBytes,
    listRss
  }
}

const row = (name: string, latency: Latency, rssMb: number) =>
  `| ${name.padEnd(34)} | ${String(latency.requests).padStart(8)} | ${latency.p50Ms.toFixed(1).padStart(7)} | ${
    latency.p99Ms.toFixed(1).padStart(7)
  } | ${latency.maxMs.toFixed(1).padStart(8)} | ${rssMb.toFixed(0).padStart(12)} |`

const main = async () => {
  const database = databaseUrl === "" ? undefined : await createDatabase(databaseUrl)
  const store = database === undefined ? "PGlite" : "PostgreSQL"
  console.log(
    `nodus watch bench (${root}): ${store}, ${objects} Jobs, ${watchers} silent watchers, ${clients} GET clients × ${seconds} s, ${cpus().length} × ${
      cpus()[0]?.model ?? "cpu"
    }, Node ${process.version}`
  )
  const server = await startServer(database === undefined ? {} : { DATABASE_URL: database.url }, root)
  try {
    const result = await benchServer(server)
    console.log(
      `created ${objects} Jobs at ${result.createRate.toFixed(0)}/s; server RSS peak ${
        result.afterCreates.toFixed(0)
      } MB`
    )
    console.log(
      `\n| ${"GETs (one Job, ?limit=1)".padEnd(34)} | requests | p50 ms  | p99 ms  | max ms   | peak RSS MB  |`
    )
    console.log(`|${"-".repeat(36)}|----------|---------|---------|----------|--------------|`)
    console.log(row("idle", result.idle, result.idleRss))
    console.log(row(`with ${watchers} silent watchers`, result.watched, result.watchedRss))
    console.log(row(`with ${readers} reading watchers`, result.read, result.readRss))
    console.log(`(the reading watchers read ${(result.readBytes / 1e6).toFixed(0)} MB in ${seconds} s)`)
    console.log(
      `\nunpaged list of ${objects} Jobs (${(result.listBytes / 1e6).toFixed(1)} MB): ${
        result.listMs.map((ms) => ms.toFixed(0)).join(", ")
      } ms; server RSS peak ${result.listRss.toFixed(0)} MB`
    )
    console.log(
      `goal: GET p99 < 100 ms and RSS < 1024 MB with the watchers open: p99 ${
        result.watched.p99Ms.toFixed(1)
      } ms, RSS ${result.watchedRss.toFixed(0)} MB`
    )
  } finally {
    await stopServer(server)
    await database?.drop()
    agent.destroy()
  }
  if (failures.size > 0) {
    console.error(
      `\nFAILED: requests answered with an unexpected status or not within ${requestTimeoutMs / 1000} s: ${
        [...failures].map(([label, count]) => `${label} ${count}`).join(", ")
      }`
    )
    process.exit(1)
  }
}

await main()
