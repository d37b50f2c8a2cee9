/**
 * The agent's end of a box's supervisor (BoxSupervisor.ts): it turns the port's box requests (core/capacity/Capacity.ts
 * `BoxRequest`) into supervisor requests, keeps every command's state and output, and answers with `BoxReply`s.
 * Output is kept per command up to `outputKeptMax` (the oldest bytes go first; offsets go on counting), and a
 * foreground command's reply carries its stdout and stderr up to `replyOutputMax` each.
 */
import type { Readable, Writable } from "node:stream"
import type { BoxCommand, BoxReply, BoxRequest } from "../../core/capacity/Capacity.ts"
import { Option, Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { outputReplyBytesMax } from "../../core/SandboxBox.ts"
import { type SupervisorMessage, SupervisorMessageSchema, type SupervisorRequest } from "./BoxSupervisor.ts"

/** The output kept of one command for `Output` requests. */
export const outputKeptMax = 16 * 1024 * 1024
/** The stdout (and the stderr) a foreground command's reply carries. */
export const replyOutputMax = 4 * 1024 * 1024
/** The commands a box keeps (state and output), running ones besides; older exited ones are forgotten. */
export const commandsKeptMax = 64

interface Command {
  readonly command: string
  readonly argv: ReadonlyArray<string>
  readonly startTime: number
  /** A terminal's shell: never counted as a running command (a silent open terminal is idle). */
  readonly terminal: boolean
  /** Its caller waits for its exit, with its stdout and stderr (kept apart for that answer only). */
  readonly foreground: boolean
  exit: { readonly code: number | null; readonly signal: string | null; readonly timedOut: boolean; readonly at: number } | undefined
  /** Output as it came (both streams), from `base` on. */
  readonly chunks: Array<Buffer>
  kept: number
  base: number
  readonly stdout: Array<Buffer>
  readonly stderr: Array<Buffer>
  replyBytes: { out: number; err: number }
  truncated: boolean
  /** Whoever waits for more output or the exit. */
  readonly waiters: Set<() => void>
}

export class BoxChannel {
  private readonly input: Writable
  private readonly commands = new Map<string, Command>()
  private readonly answers = new Map<number, (message: Extract<SupervisorMessage, { rid: number }>) => void>()
  private nextRid = 1
  private closed = false
  private readonly now: () => number
  /** Told when a command starts or exits (the agent reports whether the box is busy). */
  onChange: () => void = () => undefined
  /** Resolves once the supervisor is up (its egress forwarder listening, its main process started). */
  readonly ready: Promise<void>

  constructor(control: { readonly input: Writable; readonly output: Readable }, now: () => number) {
    this.input = control.input
    this.now = now
    this.input.on("error", () => undefined)
    let ready = () => {}
    this.ready = new Promise((resolve) => (ready = resolve))
    let pending = ""
    control.output.setEncoding("utf8")
    control.output.on("data", (chunk: string) => {
      pending += chunk
      // The supervisor runs as the box's user, beside code nobody trusts: what comes is input, bounded and checked,
      // and one line never holds more than the largest answer the supervisor gives.
      if (pending.length > lineMax && !pending.includes("\n")) {
        pending = ""
        return
      }
      for (let at = pending.indexOf("\n"); at >= 0; at = pending.indexOf("\n")) {
        const line = pending.slice(0, at)
        pending = pending.slice(at + 1)
        const message = parse(line)
        if (message === undefined) continue
        if ("ev" in message && message.ev === "ready") {
          // The main process (spec.command), when there is one, is started by the supervisor itself as command "main".
          if (message.main.length > 0) this.track("main", message.main, this.now())
          ready()
        } else this.take(message)
      }
    })
    control.output.on("close", () => this.close())
  }

  /** Whether a command runs in the box now. */
  get busy(): boolean {
    for (const command of this.commands.values()) if (command.exit === undefined && !command.terminal) return true
    return false
  }

  /** The box ended: every waiter is answered, every running command is gone with it. */
  close() {
    if (this.closed) return
    this.closed = true
    for (const answer of this.answers.values()) answer({ rid: 0, ok: false, code: "SandboxNotRunning", message: "the box stopped" })
    this.answers.clear()
    for (const command of this.commands.values()) {
      if (command.exit === undefined) command.exit = { code: null, signal: "SIGKILL", timedOut: false, at: this.now() }
      wake(command)
    }
  }

  readonly handle = async (request: BoxRequest): Promise<BoxReply> => {
    if (this.closed) return refused("SandboxNotRunning", "the box has stopped")
    switch (request._tag) {
      case "Exec":
        return this.exec(request)
      case "Command": {
        const command = this.commands.get(request.command)
        return command === undefined ? unknownCommand(request.command) : { _tag: "Command", state: this.stateOf(command, false) }
      }
      case "Output":
        return this.output(request.command, request.offset, request.waitMs)
      case "Stdin":
        return this.ask({ op: "stdin", rid: 0, id: request.command, data: request.data, close: request.close })
      case "Kill":
        if (!this.commands.has(request.command)) return unknownCommand(request.command)
        return this.ask({ op: "kill", rid: 0, id: request.command, signal: request.signal })
      case "Resize":
        if (this.commands.get(request.command)?.terminal !== true) return unknownCommand(request.command)
        return this.ask({ op: "resize", rid: 0, id: request.command, cols: request.cols, rows: request.rows })
      case "ReadFile":
        return this.ask({ op: "read", rid: 0, path: request.path, max: request.maxBytes })
      case "WriteFile":
        return this.ask({ op: "write", rid: 0, path: request.path, data: request.data })
      case "Call":
        return { _tag: "Refused", code: "Invalid", message: "a Sandbox's box takes no Function calls" }
      case "DeleteFile":
        return this.ask({ op: "delete", rid: 0, path: request.path })
    }
  }

  /** Gives a warm box (BoxSupervisor.ts `configure`) to a Sandbox: its env, working directory and main process. */
  readonly configure = async (env: Readonly<Record<string, string>>, cwd: string | undefined, main: ReadonlyArray<string>): Promise<void> => {
    if (main.length > 0) this.track("main", main, this.now())
    const reply = await this.ask({ op: "configure", rid: 0, env, cwd, main })
    if (reply._tag === "Refused") throw new Error(`the warm box could not be configured: ${reply.message}`)
  }

  private async exec(request: Extract<BoxRequest, { _tag: "Exec" }>): Promise<BoxReply> {
    if (this.commands.has(request.command)) return refused("Conflict", `a command ${request.command} exists already`)
    const command = this.track(request.command, request.argv, this.now(), request.terminal === true, !request.background)
    this.send({
      op: "exec",
      id: request.command,
      argv: request.argv,
      env: request.env,
      cwd: request.workingDir,
      stdin: request.stdin,
      closeStdin: !request.keepStdin,
      timeoutMs: request.timeoutMs
    })
    this.onChange()
    if (request.background) return { _tag: "Command", state: this.stateOf(command, false) }
    while (command.exit === undefined) await new Promise<void>((resolve) => command.waiters.add(resolve))
    return { _tag: "Command", state: this.stateOf(command, true) }
  }

  private track(id: string, argv: ReadonlyArray<string>, startTime: number, terminal = false, foreground = false): Command {
    this.forgetOld()
    const command: Command = {
      command: id, argv, startTime, terminal, foreground, exit: undefined, chunks: [], kept: 0, base: 0, stdout: [], stderr: [], replyBytes: { out: 0, err: 0 }, truncated: false, waiters: new Set()
    }
    this.commands.set(id, command)
    return command
  }

  /** Exited commands past `commandsKeptMax` go, oldest first: a box that runs for weeks keeps what is recent. */
  private forgetOld() {
    if (this.commands.size < commandsKeptMax) return
    for (const [id, command] of this.commands) {
      if (this.commands.size < commandsKeptMax) return
      if (command.exit !== undefined && command.waiters.size === 0) this.commands.delete(id)
    }
  }

  private async output(id: string, offset: number, waitMs: number): Promise<BoxReply> {
    const command = this.commands.get(id)
    if (command === undefined) return unknownCommand(id)
    const end = () => command.base + command.kept
    if (offset >= end() && command.exit === undefined && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer)
          command.waiters.delete(done)
          resolve()
        }
        const timer = setTimeout(done, waitMs)
        command.waiters.add(done)
      })
    }
    const from = Math.max(offset, command.base)
    const all = Buffer.concat(command.chunks)
    const data = all.subarray(from - command.base, from - command.base + outputReplyBytesMax)
    // `exited` only once this answer reaches the end: a reader goes on from where it stopped until then.
    const atEnd = from + data.length === end()
    return { _tag: "Output", offset: from, data: data.toString("base64"), exited: command.exit !== undefined && atEnd }
  }

  private stateOf(command: Command, withOutput: boolean): BoxCommand {
    const exit = command.exit
    const state: BoxCommand = {
      command: command.command,
      argv: command.argv,
      phase: exit === undefined ? "Running" : "Exited",
      exitCode: exit?.code ?? undefined,
      signal: exit?.signal ?? undefined,
      timedOut: exit?.timedOut ?? false,
      startTime: command.startTime,
      durationMs: exit === undefined ? undefined : exit.at - command.startTime
    }
    if (!withOutput) return state
    return { ...state, stdout: Buffer.concat(command.stdout).toString("base64"), stderr: Buffer.concat(command.stderr).toString("base64"), truncated: command.truncated }
  }

  private ask(request: Exclude<SupervisorRequest, { readonly op: "exec" }>): Promise<BoxReply> {
    const rid = this.nextRid++
    return new Promise((resolve) => {
      // A supervisor that never answers (killed, stopped, flooded) leaves no caller waiting for ever.
      const timer = setTimeout(() => this.answers.get(rid)?.({ rid, ok: false, code: "Unavailable", message: "the box did not answer in time" }), askTimeoutMs)
      this.answers.set(rid, (message) => {
        clearTimeout(timer)
        this.answers.delete(rid)
        if (!message.ok) return resolve(refused(supervisorCodes.has(message.code) ? message.code as Extract<BoxReply, { _tag: "Refused" }>["code"] : "Invalid", message.message))
        if (message.file !== undefined) return resolve({ _tag: "File", data: message.file.data, size: message.file.size })
        if (message.entries !== undefined) return resolve({ _tag: "Directory", entries: message.entries })
        resolve({ _tag: "Done" })
      })
      this.send({ ...request, rid })
    })
  }

  private send(request: SupervisorRequest) {
    this.input.write(`${JSON.stringify(request)}\n`)
  }

  private take(message: SupervisorMessage) {
    if ("rid" in message) return this.answers.get(message.rid)?.(message)
    if (message.ev === "ready") return
    const command = this.commands.get(message.id)
    if (command === undefined) return
    if (message.ev === "out") {
      const data = Buffer.from(message.data, "base64")
      command.chunks.push(data)
      command.kept += data.length
      while (command.kept > outputKeptMax && command.chunks.length > 1) {
        const dropped = command.chunks.shift()!
        command.kept -= dropped.length
        command.base += dropped.length
      }
      if (!command.foreground) return wake(command)
      const out = message.fd === 1
      const used = out ? command.replyBytes.out : command.replyBytes.err
      const room = replyOutputMax - used
      if (room < data.length) command.truncated = true
      if (room > 0) {
        ;(out ? command.stdout : command.stderr).push(data.subarray(0, room))
        if (out) command.replyBytes.out += Math.min(room, data.length)
        else command.replyBytes.err += Math.min(room, data.length)
      }
    } else {
      command.exit = { code: message.code, signal: message.signal, timedOut: message.timedOut, at: this.now() }
      this.onChange()
    }
    wake(command)
  }
}

const wake = (command: Command) => {
  for (const waiter of [...command.waiters]) waiter()
  command.waiters.clear()
}

const refused = (code: Extract<BoxReply, { _tag: "Refused" }>["code"], message: string): BoxReply => ({ _tag: "Refused", code, message })

const unknownCommand = (id: string): BoxReply => refused("NotFound", `no command ${id} ran in this box`)

/** The refusals a supervisor gives (BoxSupervisor.ts), and the channel's own when the box ends; any other is Invalid. */
const supervisorCodes: ReadonlySet<string> = new Set(["NotFound", "Forbidden", "Conflict", "Invalid", "FileTooLarge", "StdinBackpressure", "SandboxNotRunning", "Unavailable"])

/** How long a request to a supervisor may go unanswered (a file of 16 MiB takes well under a second). */
const askTimeoutMs = 60_000

/** The longest line a supervisor sends: a file answer of `sandboxFileBytesMax`, in base64, with its envelope. */
const lineMax = Math.ceil((Limits.sandboxFileBytesMax * 4) / 3) + 64 * 1024

const decodeMessage = Schema.decodeUnknownOption(SupervisorMessageSchema)

/** A line as a supervisor message, or undefined: anything else is dropped, whoever wrote it. */
const parse = (line: string): SupervisorMessage | undefined => {
  try {
    return Option.getOrUndefined(decodeMessage(JSON.parse(line)))
  } catch {
    return undefined
  }
}
