/**
 * How `nodus serve` starts (issue 16, start-up and idle memory; the figures are bench:startup's): on the embedded
 * store it replaces itself, keeping its process id, with a node given the memory flags, and a fresh data directory's
 * database comes from the prebuilt snapshot; on PostgreSQL (DATABASE_URL) it keeps V8's defaults.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as PgliteSnapshot from "../../src/store/PgliteSnapshot.ts"
import { createDatabase, databaseUrl } from "../support/Postgres.ts"

const root = join(import.meta.dirname, "..", "..")
const cli = join(root, "bin", "nodus.js")
const memoryFlags = ["--max-semi-space-size=8", "--liftoff-only"]

const children: Array<ChildProcess> = []
const scratch: Array<string> = []

/** Starts `nodus serve` with `args` and resolves with its process once it announces its URL. */
const serve = (args: ReadonlyArray<string>) =>
  new Promise<ChildProcess>((resolve, reject) => {
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !name.startsWith("NODUS_") && name !== "DATABASE_URL")
    )
    const child = spawn(process.execPath, [
      cli,
      "serve",
      "--addr",
      "127.0.0.1:0",
      "--tls",
      "off",
      "--backend",
      "none",
      ...args
    ], { env })
    children.push(child)
    let output = ""
    const timer = setTimeout(() => reject(new Error(`no announcement within 60 s:\n${output}`)), 60_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      if (/^nodus serving /mu.test(output)) {
        clearTimeout(timer)
        resolve(child)
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}`)))
  })

/** The command line the process runs now (after any execve), as its arguments. */
const commandLine = (pid: number): ReadonlyArray<string> =>
  readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((arg) => arg !== "")

const directory = () => {
  const made = mkdtempSync(join(tmpdir(), "nodus-serve-startup-"))
  scratch.push(made)
  return made
}

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGTERM")
  for (const made of scratch) rmSync(made, { recursive: true, force: true })
})

describe("nodus serve's start", () => {
  it("on the embedded store: the same process runs with the memory flags, on a database unpacked from the snapshot", {
    timeout: 90_000
  }, async () => {
    const dataDir = directory()
    const child = await serve(["--data-dir", dataDir])
    const args = commandLine(child.pid!)
    for (const flag of memoryFlags) assert.include(args, flag)
    assert.include(args, "serve")
    // The database system identifier (pg_control's first 8 bytes) is the snapshot's: initdb would have made another.
    const snapshot = directory()
    await PgliteSnapshot.unpack((await PgliteSnapshot.read())!, snapshot)
    const systemIdentifier = (dir: string) =>
      readFileSync(join(dir, "global", "pg_control")).subarray(0, 8).toString("hex")
    assert.strictEqual(systemIdentifier(join(dataDir, "pglite")), systemIdentifier(snapshot))
    // Nothing of the unpacking is left beside the database.
    assert.deepStrictEqual(readdirSync(dataDir).filter((name) => name.startsWith("pglite.")), [])
  })

  it.skipIf(databaseUrl === undefined)("on PostgreSQL: V8's defaults", { timeout: 90_000 }, async () => {
    const database = await createDatabase(databaseUrl!)
    try {
      const child = await serve(["--data-dir", directory(), "--database-url", database.url])
      const args = commandLine(child.pid!)
      for (const flag of memoryFlags) assert.notInclude(args, flag)
      const stopped = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      await stopped
    } finally {
      await database.drop()
    }
  })
})
