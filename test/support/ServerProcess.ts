/**
 * A nodus server in a process of its own, as tests and the device check drive it: what it prints, the URL it
 * announces, JSON calls with its admin token, and waiting for a condition.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join } from "node:path"

/** Collects what `child` prints (stdout and stderr); `first` resolves with group 1 of `pattern` once it appears. */
export const printedBy = (child: ChildProcess) => {
  let output = ""
  const listeners = new Set<() => void>()
  const onData = (chunk: Buffer) => {
    output += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout?.on("data", onData)
  child.stderr?.on("data", onData)
  return {
    output: () => output,
    first: (pattern: RegExp, timeoutMs: number) =>
      new Promise<string>((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(output)
          if (match === null) return
          clearTimeout(timer)
          listeners.delete(check)
          resolve(match[1]!)
        }
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(new Error(`nothing matched ${pattern} within ${timeoutMs / 1000} s:\n${output}`))
        }, timeoutMs)
        listeners.add(check)
        check()
      })
  }
}

/** A JSON call to a server as its admin: the status, the text, and the body parsed (undefined when it is not JSON). */
export const callAs = (token: string) => async (url: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  let parsed: any
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return { status: response.status, text, body: parsed }
}

const root = join(import.meta.dirname, "..", "..")

/** A server of the cluster tests: its process, URL, and the shards its runner last said it holds (of how many). */
export interface ClusterServer {
  readonly child: ChildProcess
  readonly url: string
  readonly holds: number
  readonly shards: number
  readonly printed: () => string
  /** Group 1 of `pattern` once what it printed matches. */
  readonly first: (pattern: RegExp, timeoutMs: number) => Promise<string>
}

const holdsPattern = /cluster: runner \S+ took \d+ shards, gave up \d+; holds (\d+) of (\d+)/gu

export interface ClusterServerOptions {
  readonly databaseUrl: string
  readonly dataDir: string
  readonly speed: number
  readonly token: string
  /** `local`: real processes on this host through the server's in-process agent (docs/scale-out.md); default `sim`. */
  readonly backend?: "sim" | "local"
  /** More flags of `nodus serve` (e.g. `--role api`). */
  readonly args?: ReadonlyArray<string>
  /** More settings in its environment (e.g. NODUS_WEBHOOK_ALLOW_LOOPBACK). */
  readonly env?: Readonly<Record<string, string>>
  /** Hears everything it prints, from its start (a log file). */
  readonly onOutput?: (child: ChildProcess, chunk: Buffer) => void
}

/**
 * `nodus serve --backend sim` (or `local`) on loopback, on a PostgreSQL database it shares with others
 * (docs/scale-out.md), with `token` as its admin key and one sealing key for all; nothing of the shell's NODUS_* or
 * DATABASE_URL reaches it. Resolves once it serves.
 */
export const spawnClusterServer = async (options: ClusterServerOptions): Promise<ClusterServer> => {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
  )
  const backend = options.backend === "local"
    ? ["--backend", "local"]
    : ["--backend", "sim", "--sim-speed", String(options.speed)]
  const args = [
    join(root, "bin", "nodus.js"),
    "serve",
    ...backend,
    "--data-dir",
    options.dataDir,
    "--addr",
    "127.0.0.1:0",
    ...(options.args ?? [])
  ]
  const child = spawn(join(root, "node_modules", ".bin", "node"), args, {
    env: {
      ...env,
      NODUS_TLS: "off",
      NODUS_BOOTSTRAP_TOKEN: options.token,
      NODUS_SECRET_KEY: "00".repeat(32),
      DATABASE_URL: options.databaseUrl,
      ...options.env
    }
  })
  const { onOutput } = options
  if (onOutput !== undefined) {
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on("data", (chunk: Buffer) => onOutput(child, chunk))
    }
  }
  const printed = printedBy(child)
  let holds = 0
  let shards = 0
  child.stdout?.on("data", (chunk: Buffer) => {
    for (const match of chunk.toString().matchAll(holdsPattern)) {
      holds = Number(match[1])
      shards = Number(match[2])
    }
  })
  const url = await printed.first(/nodus serving (http:\/\/\S+)/u, 60_000)
  return {
    child,
    url,
    get holds() {
      return alive(child) ? holds : 0
    },
    get shards() {
      return shards
    },
    printed: printed.output,
    first: printed.first
  }
}

/** Whether the live servers' runners together hold every shard (a killed server holds none). */
export const everyShardHeld = (servers: ReadonlyArray<ClusterServer>) => {
  const total = Math.max(0, ...servers.map((server) => server.shards))
  return total > 0 && servers.reduce((sum, server) => sum + server.holds, 0) === total
}

/** Whether the process still runs. */
export const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null

/** Ends the process with SIGKILL (nothing of it runs on), once it has exited. */
export const killNow = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (!alive(child)) return resolve()
    child.once("exit", () => resolve())
    child.kill("SIGKILL")
  })
