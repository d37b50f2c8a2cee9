/**
 * Start-up and idle memory of `nodus serve` as a user runs it (issue 16, item 3): `nodus serve --data-dir <dir>`,
 * HTTPS with the generated certificate, the default backend (`local`: an in-process node agent and its warm box),
 * the embedded PGlite store or a fresh database of a PostgreSQL server. For each run:
 *
 * - **fresh**: a new data directory (and, on PostgreSQL, a new database): TLS material, admin key, secret key and the
 *   store's schema are all made by this start. It runs with a new, empty TMPDIR too, so that nothing an earlier start
 *   left in the temporary directory helps it (Node's compile cache lives there): the first start after an install;
 * - **warm**: the same directory, database and TMPDIR, started again once the fresh server has stopped;
 * - **new dir**: another new data directory (and database) with that TMPDIR: a new server on a machine that has run
 *   one before.
 *
 * Each start is timed from the spawn to the first answer of `GET /version`, with the CPU seconds the server process
 * used by then (user + system, its threads included: the number that noise on a shared machine moves least). Then the
 * server idles for `--settle` seconds and its resident memory is read: the server process alone (the goal's figure),
 * and its whole process tree (the local backend's warm box is a bubblewrap box and a node process of its own), as the
 * sum of their RSS and as their PSS (pages they share, the node binary's, counted once).
 *
 * The goals (issue 16): start ≤ 3 s and idle RSS ≤ 250 MB on the embedded default, fresh and warm; PostgreSQL beside
 * it for comparison. `--backends local,none,sim` adds the other backends for context. A server that does not answer
 * within 60 s, or exits, fails the bench (exit 1). `--baseline <checkout>` runs another checkout's server in the same
 * conditions, alternating with this one run by run, for a before and after.
 *
 *   npm run bench:startup -- [--runs 3] [--settle 10] [--stores pglite,postgres] [--backends local]
 *                            [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--baseline <checkout>]
 */
import { execFileSync, spawn } from "node:child_process"
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { get as httpsGet } from "node:https"
import { createServer } from "node:net"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"

const runs = Number(argument("runs", "3"))
const settleMs = Number(argument("settle", "10")) * 1000
const stores = argument("stores", "pglite,postgres").split(",") as ReadonlyArray<Store>
const backends = argument("backends", "local").split(",")
const adminUrl = argument("database-url", process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
const baseline = argument("baseline", "")
const here = join(import.meta.dirname, "..")

type Store = "pglite" | "postgres"
type Phase = "fresh" | "warm" | "new dir"

/** The goals of issue 16, item 3 (held on the embedded default, fresh and warm). */
const startGoalS = 3
const rssGoalMb = 250
const readyTimeoutMs = 60_000
const stopGraceMs = 15_000
/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ, 100 on Linux). */
const ticksPerSecond = 100

interface Sample {
  readonly startS: number
  readonly cpuS: number
  readonly serverMb: number
  readonly treeMb: number
  /** The tree's proportional set size: pages its processes share (the node binary's) counted once. */
  readonly treePssMb: number
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(
        () => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
      )
    })
  })

/** Whether `GET /version` answers 200 (the certificate is the server's own, self-signed: not checked here). */
const versionAnswers = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const request = httpsGet(
      { host: "127.0.0.1", port, path: "/version", rejectUnauthorized: false, timeout: 1_000 },
      (response) => {
        response.resume()
        resolve(response.statusCode === 200)
      }
    )
    request.on("error", () => resolve(false))
    request.on("timeout", () => request.destroy())
  })

const procStat = (pid: number): ReadonlyArray<string> | undefined => {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name may hold spaces and parentheses: the fields start after its last ")".
    return text.slice(text.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/** User + system CPU seconds of a process (all its threads). */
const cpuSeconds = (pid: number): number => {
  const fields = procStat(pid)
  return fields === undefined ? Number.NaN : (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}

/** A `<field>: <n> kB` line of a /proc file, in MB (0 for a process gone meanwhile). */
const procMb = (file: string, field: string): number => {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "mu").exec(readFileSync(file, "utf8"))
    return match === null ? 0 : Number(match[1]) / 1024
  } catch {
    return 0
  }
}

const rssMb = (pid: number): number => procMb(`/proc/${pid}/status`, "VmRSS")
const pssMb = (pid: number): number => procMb(`/proc/${pid}/smaps_rollup`, "Pss")

/** `pid` and every process below it. */
const processTree = (pid: number): ReadonlyArray<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/u.test(entry)) continue
    const parent = Number(procStat(Number(entry))?.[1])
    if (Number.isInteger(parent)) children.set(parent, [...(children.get(parent) ?? []), Number(entry)])
  }
  const tree = [pid]
  for (let index = 0; index < tree.length; index++) tree.push(...(children.get(tree[index]!) ?? []))
  return tree
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** One start of `root`'s server on `dataDir`: timed to /version, then idle for the settle time, then stopped. */
const startOnce = async (
  root: string,
  dataDir: string,
  temporary: string,
  backend: string,
  databaseUrl: string | undefined
): Promise<Sample> => {
  const port = await freePort()
  const args = [
    join(root, "bin", "nodus.js"),
    "serve",
    "--data-dir",
    dataDir,
    "--addr",
    `127.0.0.1:${port}`,
    "--backend",
    backend,
    ...(databaseUrl === undefined ? [] : ["--database-url", databaseUrl])
  ]
  // As a user runs it: no setting from this shell's environment leaks in.
  const env = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([name]) =>
        !name.startsWith("NODUS_") && name !== "DATABASE_URL" && name !== "NODE_COMPILE_CACHE"
      )
    ),
    TMPDIR: temporary
  }
  const started = performance.now()
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
  let exited: number | null | undefined
  const gone = new Promise<void>((resolve) =>
    child.on("exit", (code) => {
      exited = code
      resolve()
    })
  )
  try {
    while (!(await versionAnswers(port))) {
      if (exited !== undefined) throw new Error(`the server exited with ${exited} before answering: ${output.trim()}`)
      if (performance.now() - started > readyTimeoutMs) {
        throw new Error(`the server did not answer /version within ${readyTimeoutMs / 1000} s: ${output.trim()}`)
      }
      await sleep(20)
    }
    const startS = (performance.now() - started) / 1000
    const cpuS = cpuSeconds(child.pid!)
    await sleep(settleMs)
    if (exited !== undefined) throw new Error(`the server exited with ${exited} while idle: ${output.trim()}`)
    const tree = processTree(child.pid!)
    const sum = (of: (pid: number) => number) => tree.reduce((total, pid) => total + of(pid), 0)
    return { startS, cpuS, serverMb: rssMb(child.pid!), treeMb: sum(rssMb), treePssMb: sum(pssMb) }
  } finally {
    const kill = setTimeout(() => child.kill("SIGKILL"), stopGraceMs)
    child.kill("SIGTERM")
    await gone
    clearTimeout(kill)
  }
}

interface Row {
  readonly checkout: string
  readonly store: Store
  readonly backend: string
  readonly phase: Phase
  readonly samples: Array<Sample>
}

const rows: Array<Row> = []
const rowOf = (checkout: string, store: Store, backend: string, phase: Phase): Row => {
  const found = rows.find((row) =>
    row.checkout === checkout && row.store === store && row.backend === backend && row.phase === phase
  )
  if (found !== undefined) return found
  const row: Row = { checkout, store, backend, phase, samples: [] }
  rows.push(row)
  return row
}

/**
 * The three starts of `root`'s server: fresh (a new data directory, database and TMPDIR), warm (the same again), and
 * "new dir" (another new data directory and database, the TMPDIR of the two before: a second server on a machine that
 * has run one).
 */
const startsOf = async (checkout: string, root: string, store: Store, backend: string) => {
  const scratch = mkdtempSync(join(tmpdir(), "nodus-startup-"))
  // Searchable by the user boxes run as: the runs' areas live under the TMPDIR below (docs/live.md, "Isolation").
  chmodSync(scratch, 0o711)
  const temporary = join(scratch, "tmp")
  mkdirSync(temporary)
  // A database of its own for each fresh-and-warm pair.
  const databases: Array<{ readonly url: string; readonly drop: () => Promise<void> }> = []
  const newDatabase = async () => {
    if (store !== "postgres") return undefined
    databases.push(await createDatabase(adminUrl))
    return databases.at(-1)!.url
  }
  try {
    const first = await newDatabase()
    const starts: ReadonlyArray<readonly [Phase, string, string | undefined]> = [["fresh", "data", first], [
      "warm",
      "data",
      first
    ], ["new dir", "other", await newDatabase()]]
    for (const [phase, directory, databaseUrl] of starts) {
      const sample = await startOnce(root, join(scratch, directory), temporary, backend, databaseUrl)
      rowOf(checkout, store, backend, phase).samples.push(sample)
      console.log(
        `  ${checkout.padEnd(8)} ${store.padEnd(8)} ${backend.padEnd(5)} ${phase.padEnd(7)} start ${
          sample.startS.toFixed(2)
        } s (cpu ${sample.cpuS.toFixed(2)} s)  rss ${sample.serverMb.toFixed(0)} MB (tree ${
          sample.treeMb.toFixed(0)
        } MB, pss ${sample.treePssMb.toFixed(0)} MB)`
      )
    }
  } finally {
    for (const database of databases) await database.drop()
    rmSync(scratch, { recursive: true, force: true })
  }
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Median, and the range when there is more than one run. */
const figure = (values: ReadonlyArray<number>, digits: number) => {
  const shown = (value: number) => value.toFixed(digits)
  return values.length === 1
    ? shown(values[0]!)
    : `${shown(median(values))} (${shown(Math.min(...values))}–${shown(Math.max(...values))})`
}

const goalMark = (row: Row) => {
  if (row.store !== "pglite" || row.backend !== "local") return ""
  const start = median(row.samples.map((sample) => sample.startS)) <= startGoalS ? "met" : "NOT met"
  const rss = median(row.samples.map((sample) => sample.serverMb)) <= rssGoalMb ? "met" : "NOT met"
  return `start ${start}, RSS ${rss}`
}

const main = async () => {
  const checkouts: ReadonlyArray<readonly [string, string]> = baseline === ""
    ? [["this", here]]
    : [["baseline", baseline], ["this", here]]
  console.log(
    `nodus start-up bench: ${runs} run(s) of fresh, warm and new-dir starts per row, settle ${
      settleMs / 1000
    } s, ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`
  )
  if (baseline !== "") {
    console.log(
      `baseline: ${baseline} (${
        execFileSync("git", ["-C", baseline, "rev-parse", "--short", "HEAD"]).toString().trim()
      }); this: ${
        execFileSync("git", ["-C", here, "rev-parse", "--short", "HEAD"]).toString().trim()
      } and its working tree`
    )
  }
  for (let run = 0; run < runs; run++) {
    for (const store of stores) {
      for (const backend of backends) {
        // Alternated run by run, so that the machine's load falls on both alike.
        for (const [checkout, root] of run % 2 === 0 ? checkouts : [...checkouts].reverse()) {
          await startsOf(checkout, root, store, backend)
        }
      }
    }
  }
  console.log(
    `\nmedian (min–max) of ${runs} run(s); goals (issue 16) on the embedded default (PGlite, backend local): start ≤ ${startGoalS} s, idle RSS ≤ ${rssGoalMb} MB`
  )
  console.log(
    `| checkout | store | backend | start | start to /version, s | CPU by then, s | idle RSS server, MB | idle RSS tree, MB | idle PSS tree, MB | goals |`
  )
  console.log(`|-|-|-|-|-|-|-|-|-|-|`)
  for (const row of rows) {
    const of = (pick: (sample: Sample) => number, digits: number) => figure(row.samples.map(pick), digits)
    console.log(
      `| ${row.checkout} | ${row.store === "pglite" ? "PGlite" : "PostgreSQL"} | ${row.backend} | ${row.phase} | ${
        of((s) => s.startS, 2)
      } | ${of((s) => s.cpuS, 2)} | ${of((s) => s.serverMb, 0)} | ${of((s) => s.treeMb, 0)} | ${
        of((s) => s.treePssMb, 0)
      } | ${goalMark(row)} |`
    )
  }
}

await main().catch((error: unknown) => {
  console.error(`bench:startup failed: ${error instanceof Error ? error.message : String(error)}`)
  process.exitCode = 1
})
