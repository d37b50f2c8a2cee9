/**
 * The supervisor of a Sandbox's box (docs/sandboxes.md): a small script the host's node runs as the box's first
 * process, inside the box, as the box's user. It takes requests from the agent on its stdin and answers on its stdout,
 * one JSON object per line: commands it spawns (each in a process group of its own, so a kill reaches what it started),
 * their output and exits, stdin, kills, and file requests — resolved in the box's own view of the filesystem, so no
 * path can name a host file the box was not given.
 *
 * It grants nothing: it runs with exactly the rights of the code in the box, which could do all of this itself.
 */
import { Schema } from "effect"
import type { ExecRequest } from "../../core/SandboxBox.ts"
import { proxyPort, proxySocketInBox } from "./EgressProxy.ts"

/**
 * Requests the agent sends (`rid` answers a request; `id` names a command). A command to start is the box request
 * itself (core/SandboxBox.ts ExecRequest), passed on as the caller made it.
 */
export type SupervisorRequest =
  | ExecRequest
  | { readonly op: "stdin"; readonly rid: number; readonly id: string; readonly data: string; readonly close: boolean }
  | { readonly op: "kill"; readonly rid: number; readonly id: string; readonly signal: string }
  | { readonly op: "read"; readonly rid: number; readonly path: string; readonly max: number }
  | { readonly op: "write"; readonly rid: number; readonly path: string; readonly data: string }
  | { readonly op: "delete"; readonly rid: number; readonly path: string }
  /** A terminal's new size: stty on the tty its shell wrote to /tmp/.nodus-tty-<id> (SandboxApi.ts). */
  | { readonly op: "resize"; readonly rid: number; readonly id: string; readonly cols: number; readonly rows: number }
  /** A warm box (started before any Sandbox wanted it) given to one: its env, working directory and main process. */
  | {
    readonly op: "configure"
    readonly rid: number
    readonly env: Readonly<Record<string, string>>
    readonly cwd: string | undefined
    readonly main: ReadonlyArray<string>
  }

/** What the supervisor says: a command's output or exit, or the answer to a request. */
export type SupervisorMessage =
  | { readonly ev: "ready"; readonly main: ReadonlyArray<string> }
  | { readonly ev: "out"; readonly id: string; readonly fd: 1 | 2; readonly data: string }
  | {
    readonly ev: "exit"
    readonly id: string
    readonly code: number | null
    readonly signal: string | null
    readonly timedOut: boolean
  }
  | { readonly rid: number; readonly ok: true; readonly file?: FileBody; readonly entries?: ReadonlyArray<FileEntry> }
  | { readonly rid: number; readonly ok: false; readonly code: string; readonly message: string }

const Str = Schema.String
const base64 = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9+/]*={0,2}$/u))

const FileEntrySchema = Schema.Struct({
  name: Str,
  size: Schema.Finite,
  mode: Str,
  modTime: Str,
  type: Schema.Literals(["file", "directory", "symlink", "other"])
})

/** What the agent takes from a supervisor's stdout: checked, since code in the box can write there too. */
export const SupervisorMessageSchema = Schema.Union([
  Schema.Struct({ ev: Schema.Literal("ready"), main: Schema.Array(Str) }),
  Schema.Struct({ ev: Schema.Literal("out"), id: Str, fd: Schema.Literals([1, 2]), data: base64 }),
  Schema.Struct({
    ev: Schema.Literal("exit"),
    id: Str,
    code: Schema.NullOr(Schema.Finite),
    signal: Schema.NullOr(Str),
    timedOut: Schema.Boolean
  }),
  Schema.Struct({
    rid: Schema.Finite,
    ok: Schema.Literal(true),
    file: Schema.optionalKey(Schema.Struct({ data: base64, size: Schema.Finite })),
    entries: Schema.optionalKey(Schema.Array(FileEntrySchema))
  }),
  Schema.Struct({ rid: Schema.Finite, ok: Schema.Literal(false), code: Str, message: Str })
])

export interface FileEntry {
  readonly name: string
  readonly size: number
  /** Permission bits as octal text, e.g. "0644". */
  readonly mode: string
  readonly modTime: string
  readonly type: "file" | "directory" | "symlink" | "other"
}

export interface FileBody {
  /** base64 */
  readonly data: string
  readonly size: number
}

/** How much a command's stdin may hold unread before a write is refused (StdinBackpressure). */
export const stdinBufferMax = 1024 * 1024

/**
 * The script: plain CommonJS for the host's node, run with `node -e`; its argv after `--` is the Sandbox's main
 * process (run as command `main`), if any. With `forward`, it also listens on 127.0.0.1:3128 and forwards to the
 * run's egress proxy socket (AllowList; EgressProxy.ts), the job the egress forwarder does for a Job.
 */
export const supervisorScript = (forward: boolean): string => `
"use strict"
const { spawn } = require("child_process"), fs = require("fs"), path = require("path"), net = require("net")
// Backpressure: while the agent has not read what was written (stdout's buffer is full), commands' output streams are
// paused, so their writes wait in their pipes instead of the supervisor's memory (a flood of output once grew it until
// a write failed with ENOBUFS and killed it, and the box with it).
const paused = new Set()
let full = false
const out = (message) => { if (!process.stdout.write(JSON.stringify(message) + "\\n")) full = true }
process.stdout.on("drain", () => {
  full = false
  for (const stream of paused) stream.resume()
  paused.clear()
})
// The agent's end is gone (EPIPE) or the channel failed: nothing can be said any more, so the box ends, cleanly.
process.stdout.on("error", () => process.exit(0))
const relay = (stream, id, fd) => {
  stream.on("data", (d) => {
    out({ ev: "out", id, fd, data: d.toString("base64") })
    if (full) {
      stream.pause()
      paused.add(stream)
    }
  })
  stream.on("close", () => paused.delete(stream))
}
const commands = new Map()
// The Sandbox's main process, as a box request that starts it.
const mainCommand = (argv) => ({ _tag: "Exec", command: "main", argv, env: {}, workingDir: undefined, stdin: undefined, keepStdin: false, timeoutMs: undefined, background: true })
const fail = (rid, code, message) => out({ rid, ok: false, code, message })
const b64 = (text) => Buffer.from(text).toString("base64")
const resolvePath = (p) => path.resolve(process.cwd(), p)
const typeOf = (s) => s.isFile() ? "file" : s.isDirectory() ? "directory" : s.isSymbolicLink() ? "symlink" : "other"
const entryOf = (dir, name) => {
  const s = fs.lstatSync(path.join(dir, name))
  return { name, size: s.size, mode: "0" + (s.mode & 0o7777).toString(8), modTime: s.mtime.toISOString(), type: typeOf(s) }
}
const fsCode = (e) => e.code === "ENOENT" || e.code === "ENOTDIR" ? "NotFound" : e.code === "EACCES" || e.code === "EPERM" || e.code === "EROFS" ? "Forbidden" : e.code === "EISDIR" || e.code === "ENOTEMPTY" ? "Conflict" : e.code === "ENOSPC" || e.code === "EDQUOT" || e.code === "EIO" ? "Unavailable" : "Invalid"
const ops = {
  // A box request (core/SandboxBox.ts ExecRequest): command, argv, env, workingDir, stdin, keepStdin, timeoutMs.
  exec(m) {
    let child, timedOut = false, timer, ended = false
    const id = m.command
    const cwd = m.workingDir ? resolvePath(m.workingDir) : undefined
    if (cwd !== undefined && !fs.existsSync(cwd)) {
      out({ ev: "out", id, fd: 2, data: b64(m.workingDir + ": no such working directory\\n") })
      return out({ ev: "exit", id, code: 126, signal: null, timedOut: false })
    }
    try {
      child = spawn(m.argv[0], m.argv.slice(1), { cwd, env: { ...process.env, ...m.env }, stdio: ["pipe", "pipe", "pipe"], detached: true })
    } catch (e) {
      out({ ev: "out", id, fd: 2, data: b64(m.argv[0] + ": " + e.message + "\\n") })
      return out({ ev: "exit", id, code: 126, signal: null, timedOut: false })
    }
    commands.set(id, child)
    let spawnError
    child.on("error", (e) => { spawnError = e })
    child.stdin.on("error", () => undefined)
    relay(child.stdout, id, 1)
    relay(child.stderr, id, 2)
    // The exit is the command's end, even if something it started keeps its output open: its output is read for a
    // moment more, then the exit is said (and the streams let go).
    const end = (code, signal) => {
      if (ended) return
      ended = true
      clearTimeout(timer)
      commands.delete(id)
      for (const stream of [child.stdout, child.stderr]) {
        paused.delete(stream)
        stream.destroy()
      }
      if (spawnError !== undefined) {
        out({ ev: "out", id, fd: 2, data: b64(m.argv[0] + ": " + (spawnError.code === "ENOENT" ? "command not found" : spawnError.message) + "\\n") })
        return out({ ev: "exit", id, code: spawnError.code === "ENOENT" ? 127 : 126, signal: null, timedOut: false })
      }
      out({ ev: "exit", id, code, signal, timedOut })
    }
    child.on("close", end)
    // Output held back by backpressure is still read before the exit is said.
    const heldBack = () => paused.has(child.stdout) || paused.has(child.stderr)
    const after = (code, signal) => (heldBack() ? setTimeout(() => after(code, signal), 200) : end(code, signal))
    child.on("exit", (code, signal) => setTimeout(() => after(code, signal), 200))
    if (m.stdin) child.stdin.write(Buffer.from(m.stdin, "base64"))
    if (!m.keepStdin) child.stdin.end()
    if (m.timeoutMs) timer = setTimeout(() => { timedOut = true; try { process.kill(-child.pid, "SIGKILL") } catch {} }, m.timeoutMs)
  },
  stdin(m) {
    const child = commands.get(m.id)
    if (child === undefined) return fail(m.rid, "NotFound", "the command has exited")
    if (child.stdin.writableEnded) return fail(m.rid, "Conflict", "the command's stdin was closed")
    if (child.stdin.writableLength > ${stdinBufferMax}) return fail(m.rid, "StdinBackpressure", "the command has not read the stdin written before")
    if (m.data) child.stdin.write(Buffer.from(m.data, "base64"))
    if (m.close) child.stdin.end()
    out({ rid: m.rid, ok: true })
  },
  kill(m) {
    const child = commands.get(m.id)
    if (child === undefined) return fail(m.rid, "NotFound", "the command has exited")
    try { process.kill(-child.pid, m.signal) } catch (e) { try { child.kill(m.signal) } catch {} }
    out({ rid: m.rid, ok: true })
  },
  read(m) {
    const p = resolvePath(m.path)
    const s = fs.statSync(p)
    if (s.isDirectory()) return out({ rid: m.rid, ok: true, entries: fs.readdirSync(p).sort().map((name) => entryOf(p, name)) })
    if (!s.isFile()) return fail(m.rid, "Invalid", m.path + " is neither a file nor a directory")
    if (s.size > m.max) return fail(m.rid, "FileTooLarge", m.path + " is " + s.size + " bytes, above the " + m.max + " a file request carries")
    // Read to at most max + 1 bytes: a file whose size says 0 (/proc, /sys) may hold far more, or refuse to be read.
    const fd = fs.openSync(p, "r"), chunks = []
    let total = 0
    try {
      for (let n = -1; n !== 0 && total <= m.max;) {
        const chunk = Buffer.alloc(Math.min(65536, m.max + 1 - total))
        try { n = fs.readSync(fd, chunk, 0, chunk.length, null) } catch (e) { return fail(m.rid, e.code === "EACCES" || e.code === "EPERM" ? "Forbidden" : "Invalid", m.path + " cannot be read as a file (" + (e.code || e.message) + ")") }
        chunks.push(chunk.subarray(0, n))
        total += n
      }
    } finally { fs.closeSync(fd) }
    if (total > m.max) return fail(m.rid, "FileTooLarge", m.path + " holds more than the " + m.max + " bytes a file request carries")
    const data = Buffer.concat(chunks)
    out({ rid: m.rid, ok: true, file: { data: data.toString("base64"), size: data.length } })
  },
  write(m) {
    const p = resolvePath(m.path)
    fs.mkdirSync(path.dirname(p), { recursive: true })
    fs.writeFileSync(p, Buffer.from(m.data, "base64"))
    out({ rid: m.rid, ok: true })
  },
  delete(m) {
    fs.rmSync(resolvePath(m.path), { recursive: true })
    out({ rid: m.rid, ok: true })
  },
  resize(m) {
    const tty = fs.readFileSync("/tmp/.nodus-tty-" + m.id, "utf8").trim()
    spawn("stty", ["-F", tty, "rows", String(m.rows), "cols", String(m.cols)], { stdio: "ignore" }).on("error", () => undefined)
    out({ rid: m.rid, ok: true })
  },
  configure(m) {
    Object.assign(process.env, m.env)
    if (m.cwd) {
      fs.mkdirSync(m.cwd, { recursive: true })
      process.chdir(m.cwd)
    }
    if (m.main.length > 0) ops.exec(mainCommand(m.main))
    out({ rid: m.rid, ok: true })
  }
}
let pending = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  pending += chunk
  for (let at = pending.indexOf("\\n"); at >= 0; at = pending.indexOf("\\n")) {
    const line = pending.slice(0, at)
    pending = pending.slice(at + 1)
    if (line.length === 0) continue
    let m
    try { m = JSON.parse(line) } catch { continue }
    try { (m._tag === "Exec" ? ops.exec : ops[m.op])(m) } catch (e) { if (m.rid !== undefined) fail(m.rid, fsCode(e), e.message) }
  }
})
// The agent went away: the box ends with it.
process.stdin.on("end", () => process.exit(0))
const main = process.argv.slice(1)
const start = () => { if (main.length > 0) ops.exec(mainCommand(main)) }
${
  forward
    ? `net.createServer((c) => { const u = net.connect(${
      JSON.stringify(proxySocketInBox)
    }); c.pipe(u); u.pipe(c); c.on("error", () => u.destroy()); u.on("error", () => c.destroy()) }).listen(${proxyPort}, "127.0.0.1", () => { out({ ev: "ready", main }); start() })`
    : `out({ ev: "ready", main }); start()`
}
`
