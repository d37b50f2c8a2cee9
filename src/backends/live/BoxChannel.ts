/**
 * The agent's end of a box's supervisor (BoxSupervisor.ts): it turns the port's box requests (core/capacity/Capacity.ts
 * `BoxRequest`) into supervisor requests, keeps every command's state and output, and answers with `BoxReply`s.
 * Output is kept per command, per box and per host within the bounds of CommandOutput.ts (the oldest bytes go first;
 * offsets go on counting), and a foreground command's reply carries the last `Limits.sandboxReplyOutputBytesMax` of
 * its stdout and of its stderr.
 */
import { Option, Schema } from "effect"
import type { Readable, Writable } from "node:stream"
import type { BoxCommand, BoxReply, BoxRequest } from "../../core/capacity/Capacity.ts"
import * as Limits from "../../core/Limits.ts"
import { type ExecRequest, outputReplyBytesMax } from "../../core/SandboxBox.ts"
import { type SupervisorMessage, SupervisorMessageSchema, type SupervisorRequest } from "./BoxSupervisor.ts"
import { CommandOutput, OutputBudget } from "./CommandOutput.ts"

/** The bounds a box's channel keeps its commands' output within (Limits.ts; tests make them smaller). */
export interface OutputBounds {
  /** Every box of the host: shared by their channels (the agent's). */
  readonly host: OutputBudget
  readonly boxMax: number
  readonly commandMax: number
}

/** A host's bounds as Limits.ts sets them: one for each agent, shared by all its boxes. */
export const hostOutputBounds = (): OutputBounds => ({
  host: new OutputBudget(Limits.sandboxHostOutputBytesMax),
  boxMax: Limits.sandboxBoxOutputBytesMax,
  commandMax: Limits.sandboxCommandOutputBytesMax
})

interface Command {
  readonly command: string
  readonly argv: ReadonlyArray<string>
  readonly startTime: number
  /** A terminal's shell: never counted as a running command (a silent open terminal is idle). */
  readonly terminal: boolean
  exit: {
    readonly code: number | null
    readonly signal: string | null
    readonly timedOut: boolean
    readonly at: number
  } | undefined
  /** Output as it came (both streams), within the output bounds. */
  readonly output: CommandOutput
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
  private readonly bounds: OutputBounds
  /** The bound over all this box's commands' output, within the host's. */
  private readonly budget: OutputBudget
  /** Told when a command starts or exits (the agent reports whether the box is busy). */
  onChange: () => void = () => undefined
  /** Resolves once the supervisor is up (its egress forwarder listening, its main process started). */
  readonly ready: Promise<void>

  constructor(
    control: { readonly input: Writable; readonly output: Readable },
    now: () => number,
    bounds: OutputBounds = hostOutputBounds()
  ) {
    this.input = control.input
    this.now = now
    this.bounds = bounds
    this.budget = new OutputBudget(bounds.boxMax, bounds.host)
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

  /** The box ended: every waiter is answered, every running command is gone with it, and so is their output. */
  close() {
    if (this.closed) return
    this.closed = true
    for (const answer of this.answers.values()) {
      answer({ rid: 0, ok: false, code: "SandboxNotRunning", message: "the box stopped" })
    }
    this.answers.clear()
    for (const command of this.commands.values()) {
      if (command.exit === undefined) command.exit = { code: null, signal: "SIGKILL", timedOut: false, at: this.now() }
      // A foreground caller is answered with its output (nothing else can read it once the box is closed).
      wake(command)
    }
    setImmediate(() => {
      for (const command of this.commands.values()) command.output.release()
    })
  }

  readonly handle = async (request: BoxRequest): Promise<BoxReply> => {
    if (this.closed) return refused("SandboxNotRunning", "the box has stopped")
    switch (request._tag) {
      case "Exec":
        return this.exec(request)
      case "Command": {
        const command = this.commands.get(request.command)
        return command === undefined
          ? unknownCommand(request.command)
          : { _tag: "Command", state: this.stateOf(command, false) }
      }
      case "Commands":
        return {
          _tag: "Commands",
          commands: [...this.commands.values()].map((command) => this.stateOf(command, false))
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
  readonly configure = async (
    env: Readonly<Record<string, string>>,
    cwd: string | undefined,
    main: ReadonlyArray<string>
  ): Promise<void> => {
    if (main.length > 0) this.track("main", main, this.now())
    const reply = await this.ask({ op: "configure", rid: 0, env, cwd, main })
    if (reply._tag === "Refused") throw new Error(`the warm box could not be configured: ${reply.message}`)
  }

  private async exec(request: ExecRequest): Promise<BoxReply> {
    if (this.commands.has(request.command)) return refused("Conflict", `a command ${request.command} exists already`)
    const command = this.track(request.command, request.argv, this.now(), request.terminal === true)
    this.send(request)
    this.onChange()
    if (request.background) return { _tag: "Command", state: this.stateOf(command, false) }
    while (command.exit === undefined) await new Promise<void>((resolve) => command.waiters.add(resolve))
    return { _tag: "Command", state: this.stateOf(command, true) }
  }

  private track(id: string, argv: ReadonlyArray<string>, startTime: number, terminal = false): Command {
    this.forgetOld()
    const command: Command = {
      command: id,
      argv,
      startTime,
      terminal,
      exit: undefined,
      output: new CommandOutput(this.budget, this.bounds.commandMax),
      waiters: new Set()
    }
    this.commands.set(id, command)
    return command
  }

  /**
   * Exited commands past `Limits.sandboxCommandsKeptMax` go, oldest first: a box that runs for weeks keeps what is
   * recent.
   */
  private forgetOld() {
    if (this.commands.size < Limits.sandboxCommandsKeptMax) return
    for (const [id, command] of this.commands) {
      if (this.commands.size < Limits.sandboxCommandsKeptMax) return
      if (command.exit !== undefined && command.waiters.size === 0) {
        command.output.release()
        this.commands.delete(id)
      }
    }
  }

  private async output(id: string, offset: number, waitMs: number): Promise<BoxReply> {
    const command = this.commands.get(id)
    if (command === undefined) return unknownCommand(id)
    const output = command.output
    if (offset >= output.end && command.exit === undefined && waitMs > 0) {
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
    const { from, data } = output.read(offset, outputReplyBytesMax)
    // `exited` only once this answer reaches the end: a reader goes on from where it stopped until then.
    const atEnd = from + data.length === output.end
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
      durationMs: exit === undefined ? undefined : exit.at - command.startTime,
      ...(command.output.base > 0 ? { droppedBytes: command.output.base } : {})
    }
    if (!withOutput) return state
    const stdout = command.output.tail(1, Limits.sandboxReplyOutputBytesMax)
    const stderr = command.output.tail(2, Limits.sandboxReplyOutputBytesMax)
    return {
      ...state,
      stdout: stdout.data.toString("base64"),
      stderr: stderr.data.toString("base64"),
      truncated: stdout.cut || stderr.cut || command.output.base > 0
    }
  }

  private ask(request: Exclude<SupervisorRequest, ExecRequest>): Promise<BoxReply> {
    const rid = this.nextRid++
    return new Promise((resolve) => {
      // A supervisor that never answers (killed, stopped, flooded) leaves no caller waiting for ever.
      const timer = setTimeout(
        () =>
          this.answers.get(rid)?.({ rid, ok: false, code: "Unavailable", message: "the box did not answer in time" }),
        askTimeoutMs
      )
      this.answers.set(rid, (message) => {
        clearTimeout(timer)
        this.answers.delete(rid)
        if (!message.ok) {
          return resolve(refused(
            supervisorCodes.has(message.code)
              ? message.code as Extract<BoxReply, { _tag: "Refused" }>["code"]
              : "Invalid",
            message.message
          ))
        }
        if (message.file !== undefined) {
          return resolve({ _tag: "File", data: message.file.data, size: message.file.size })
        }
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
      // An exited command's output is complete: what comes after its exit is not its own.
      if (command.exit === undefined) command.output.append(message.fd, Buffer.from(message.data, "base64"))
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

const refused = (code: Extract<BoxReply, { _tag: "Refused" }>["code"], message: string): BoxReply => ({
  _tag: "Refused",
  code,
  message
})

const unknownCommand = (id: string): BoxReply => refused("NotFound", `no command ${id} ran in this box`)

/**
 * The refusals a supervisor gives (BoxSupervisor.ts), and the channel's own when the box ends; any other is Invalid.
 */
const supervisorCodes: ReadonlySet<string> = new Set([
  "NotFound",
  "Forbidden",
  "Conflict",
  "Invalid",
  "FileTooLarge",
  "StdinBackpressure",
  "SandboxNotRunning",
  "Unavailable"
])

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
