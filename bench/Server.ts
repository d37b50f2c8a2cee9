/**
 * The server a bench measures: a `nodus serve` process over plain HTTP on a free port (the numbers are the API's and
 * the store's, not TLS's), with the bench's admin token, on a fresh data directory and no backend unless `env` says
 * otherwise. One for every bench script, as `argument()` is (Arguments.ts).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The admin token every bench server is started with. */
export const benchToken = "nds_bench-token-0123456789abcdefghijklmnopqrstuvwxyz"

export interface BenchServer {
  readonly url: URL
  readonly process: ChildProcess
}

/** Starts `root`'s `nodus serve` (this checkout by default: a before/after names another) and waits for its URL. */
export const startServer = (
  env: Record<string, string>,
  root: string = join(import.meta.dirname, "..")
): Promise<BenchServer> =>
  new Promise((resolve, reject) => {
    const defaults = {
      NODUS_DATA_DIR: mkdtempSync(join(tmpdir(), "nodus-bench-")),
      NODUS_ADDR: "127.0.0.1:0",
      NODUS_TLS: "off",
      NODUS_BOOTSTRAP_TOKEN: benchToken,
      NODUS_BACKEND: "none"
    }
    // The store is the one the bench names: a DATABASE_URL or NODUS_* setting of the shell it runs in is not inherited.
    const inherited = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
    )
    const child = spawn(process.execPath, [join(root, "bin", "nodus.js"), "serve"], {
      env: { ...inherited, ...defaults, ...env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const match = /nodus serving (http:\/\/\S+)/u.exec(output)
      if (match !== null) resolve({ url: new URL(match[1]!), process: child })
    })
    child.on("exit", (code) => reject(new Error(`server exited with ${code}: ${output}`)))
  })

/**
 * Stops a server and waits until it is gone, so that its shutdown does not share the CPU with the next phase; one
 * whose event loop is held is killed after `graceMs`.
 */
export const stopServer = (server: BenchServer, graceMs = 10_000): Promise<void> =>
  new Promise((resolve) => {
    const kill = setTimeout(() => server.process.kill("SIGKILL"), graceMs)
    server.process.once("exit", () => {
      clearTimeout(kill)
      resolve()
    })
    server.process.kill("SIGTERM")
  })
