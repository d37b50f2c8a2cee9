/**
 * Sandbox boxes under the simulator (docs/sandboxes.md, "Under the simulator"; docs/simulator.md, "Sandboxes"): the
 * port's `box` requests answered by a model, so agent workloads can be driven, replayed and priced in virtual time.
 *
 * A simulated box keeps its files in memory (written, read, listed, deleted; saved with its snapshot and restored
 * into the next box of the Sandbox). A command runs for its simulated duration on the engine's clock — the request's
 * own (`SIM_EXEC_DURATION` in its env, or `sleep N`), else the owner's `sim.nodus.dev/exec-duration` (default 0s) — and
 * exits then with the owner's `sim.nodus.dev/exec-exit-code` (default 0), with no output; a timeout shorter than that
 * kills it (SIGKILL, timedOut), and so does a kill. While a command other than a terminal's shell runs, the box is
 * busy, as the live agent reports it (docs/sandboxes.md, "Activity"): so a long background command or a main process
 * keeps the Sandbox Running (Busy), and its idle time is counted from the command's end. Nothing here draws a random
 * number: the same requests at the same virtual times give the same run.
 */
import { posix } from "node:path"
import type { AttemptFacts } from "../../core/capacity/Capacity.ts"
import { type BoxCommand, type BoxReply, type BoxRequest, isBoxActivity } from "../../core/SandboxBox.ts"
import { durationMs } from "../../core/StatusText.ts"
import { simAnnotationPrefix } from "./Workloads.ts"

/** The request env variable that sets a simulated command's duration (e.g. `10m`), over the Sandbox's annotation. */
export const execDurationEnv = "SIM_EXEC_DURATION"

/** The id of the main process's command (spec.command), as the live supervisor names it. */
export const mainCommand = "main"

/** What a box needs of the simulated capacity it runs on (SimCapacity): the clock, timers and the box's activity. */
export interface BoxHost {
  readonly now: number
  /** The run's facts: whether its box takes requests (Running), is starting, or is gone. */
  readonly facts: (owner: string, attempt: string) => AttemptFacts | undefined
  /** A request was made of the box now; `busy`, when given, is whether a command other than a terminal runs. */
  readonly noteActivity: (owner: string, attempt: string, busy?: boolean) => void
  /** Runs `then` at `at` if the attempt's program still runs then. */
  readonly atWhileRunning: (owner: string, attempt: string, at: number, then: () => void) => void
  /** Runs `then` once the attempt's program runs (its host booted). */
  readonly whenRunning: (owner: string, attempt: string, then: () => void) => void
}

type Command = { -readonly [K in keyof BoxCommand]: BoxCommand[K] } & {
  /** A terminal's shell: never makes the box busy. */
  readonly terminal: boolean
  stdinOpen: boolean
  /** Counted among the box's running commands (it runs for some time and is not a terminal's shell). */
  busy: boolean
}

interface Box {
  readonly owner: string
  readonly attempt: string
  readonly files: Map<string, Buffer>
  readonly commands: Map<string, Command>
  readonly exitCode: number
  readonly durationMs: number
  readonly workingDir: string
  /** Commands running that keep the box busy. */
  running: number
  /** The files as the last snapshot asked of this box saved them. */
  saved: Map<string, Buffer> | undefined
}

/**
 * A box's settings from its owner's annotations (docs/simulator.md, "Sandboxes"); malformed values keep the default.
 */
const annotation = (annotations: Readonly<Record<string, string>>, name: string) =>
  annotations[`${simAnnotationPrefix}${name}`]

/** `sleep N` (seconds, or a duration such as `10m`): the command's own duration, as the program says it. */
const sleepMs = (argv: ReadonlyArray<string>): number | undefined => {
  if (argv.length !== 2 || posix.basename(argv[0]!) !== "sleep") return undefined
  const arg = argv[1]!
  if (/^[0-9]+(\.[0-9]+)?$/u.test(arg)) return Math.round(Number(arg) * 1000)
  const ms = durationMs(arg, -1)
  return ms >= 0 ? ms : undefined
}

export class SimBoxes {
  private readonly host: BoxHost
  private readonly boxes = new Map<string, Box>()

  constructor(host: BoxHost) {
    this.host = host
  }

  private static key(owner: string, attempt: string) {
    return `${owner}\n${attempt}`
  }

  /**
   * A box starts: empty, or with the files of the box (of the same owner) whose snapshot it restores. Its main
   * process, when it has one, starts once the box runs, and runs for `sim.nodus.dev/main-duration` or, without it,
   * until the box stops.
   */
  open(
    owner: string,
    attempt: string,
    annotations: Readonly<Record<string, string>>,
    workingDir: string | undefined,
    restoredFrom: string | undefined,
    main: ReadonlyArray<string> = []
  ) {
    const code = annotation(annotations, "exec-exit-code")
    const box: Box = {
      owner,
      attempt,
      files: new Map(restoredFrom === undefined ? [] : this.boxes.get(SimBoxes.key(owner, restoredFrom))?.saved ?? []),
      commands: new Map(),
      exitCode: code !== undefined && /^[0-9]{1,3}$/u.test(code) ? Number(code) : 0,
      durationMs: durationMs(annotation(annotations, "exec-duration"), 0),
      workingDir: workingDir ?? "/workspace",
      running: 0,
      saved: undefined
    }
    this.boxes.set(SimBoxes.key(owner, attempt), box)
    if (main.length > 0) {
      const mainMs = durationMs(annotation(annotations, "main-duration"), Number.POSITIVE_INFINITY)
      this.host.whenRunning(owner, attempt, () => this.run(box, mainCommand, main, mainMs, undefined, false, false))
    }
  }

  /** A snapshot of the box was asked: what it holds now is what it saves. */
  snapshot(owner: string, attempt: string) {
    const box = this.boxes.get(SimBoxes.key(owner, attempt))
    if (box !== undefined) box.saved = new Map(box.files)
  }

  /** Forgets every box of an owner (it was deleted). */
  forget(owner: string) {
    const prefix = `${owner}\n`
    for (const key of this.boxes.keys()) if (key.startsWith(prefix)) this.boxes.delete(key)
  }

  /** Whether a command other than a terminal's shell runs in the box (for tests and summaries). */
  busy(owner: string, attempt: string): boolean {
    return (this.boxes.get(SimBoxes.key(owner, attempt))?.running ?? 0) > 0
  }

  /**
   * Starts a command now. It ends `ms` later (at once when 0) with the box's exit code, or is killed at its timeout
   * when that comes first; until then it keeps the box busy, unless it is a terminal's shell.
   */
  private run(
    box: Box,
    id: string,
    argv: ReadonlyArray<string>,
    ms: number,
    timeoutMs: number | undefined,
    terminal: boolean,
    keepStdin: boolean
  ): Command {
    const now = this.host.now
    const timedOut = timeoutMs !== undefined && timeoutMs > 0 && timeoutMs < ms
    const runMs = timedOut ? timeoutMs : ms
    const command: Command = {
      command: id,
      argv,
      phase: "Running",
      exitCode: undefined,
      signal: undefined,
      timedOut: false,
      startTime: now,
      durationMs: undefined,
      terminal,
      stdinOpen: keepStdin,
      busy: false
    }
    box.commands.set(id, command)
    const exit = () => (timedOut
      ? this.end(box, command, { signal: "SIGKILL", timedOut: true })
      : this.end(box, command, { exitCode: box.exitCode }))
    // A command of no duration (the default, and every terminal's shell) has exited by the time it is answered.
    if (runMs <= 0 || terminal) {
      exit()
      return command
    }
    command.busy = true
    box.running++
    this.host.noteActivity(box.owner, box.attempt, true)
    if (Number.isFinite(runMs)) this.host.atWhileRunning(box.owner, box.attempt, now + runMs, exit)
    return command
  }

  /** A command ends now: exited with its code, or by a signal; the box is idle once no busy command runs. */
  private end(
    box: Box,
    command: Command,
    how: { readonly exitCode?: number; readonly signal?: string; readonly timedOut?: boolean }
  ) {
    if (command.phase === "Exited") return
    command.phase = "Exited"
    command.exitCode = how.exitCode
    command.signal = how.signal
    command.timedOut = how.timedOut === true
    command.durationMs = this.host.now - command.startTime
    command.stdinOpen = false
    if (!command.busy) return
    command.busy = false
    box.running--
    this.host.noteActivity(box.owner, box.attempt, box.running > 0)
  }

  /**
   * A request to the box of a run (the port's `box`): refused while the run is not Running; anything but reading a
   * command's state or output, or resizing a terminal, is activity now (docs/sandboxes.md, "Activity").
   */
  call(owner: string, attempt: string, request: BoxRequest): BoxReply {
    const phase = this.host.facts(owner, attempt)?.phase
    if (phase === "Provisioning") return { _tag: "Refused", code: "SandboxStarting", message: "the box is starting" }
    if (phase !== "Running") return { _tag: "Refused", code: "SandboxNotRunning", message: "the box is not running" }
    if (isBoxActivity(request)) this.host.noteActivity(owner, attempt)
    return this.handle(owner, attempt, request)
  }

  private handle(owner: string, attempt: string, request: BoxRequest): BoxReply {
    const box = this.boxes.get(SimBoxes.key(owner, attempt))
    if (box === undefined) return { _tag: "Refused", code: "SandboxNotRunning", message: "the box is not running" }
    const now = this.host.now
    // A path as the box sees it: relative ones are the working directory's; `.` and `..` folded.
    const path = "path" in request ? posix.resolve(box.workingDir, request.path) : ""
    switch (request._tag) {
      case "Exec": {
        if (box.commands.has(request.command)) {
          return { _tag: "Refused", code: "Conflict", message: `a command ${request.command} exists already` }
        }
        const ms = durationMs(request.env[execDurationEnv], sleepMs(request.argv) ?? box.durationMs)
        const command = this.run(
          box,
          request.command,
          request.argv,
          ms,
          request.timeoutMs,
          request.terminal === true,
          request.keepStdin
        )
        if (request.background) return { _tag: "Command", state: stateOf(command) }
        // A foreground command is answered at once with the outcome it has at its virtual end (the model does not
        // make its caller wait on virtual time); the box is busy, and the command Running, until then.
        return {
          _tag: "Command",
          state: { ...outcomeOf(box, command, ms, request.timeoutMs), stdout: "", stderr: "", truncated: false }
        }
      }
      case "Command": {
        const command = box.commands.get(request.command)
        return command === undefined ? noCommand(request.command) : { _tag: "Command", state: stateOf(command) }
      }
      case "Commands":
        return { _tag: "Commands", commands: [...box.commands.values()].map(stateOf) }
      case "Output": {
        const command = box.commands.get(request.command)
        return command === undefined
          ? noCommand(request.command)
          : { _tag: "Output", offset: 0, data: "", exited: command.phase === "Exited" }
      }
      case "Resize":
        return box.commands.has(request.command) ? { _tag: "Done" } : noCommand(request.command)
      case "Stdin": {
        const command = box.commands.get(request.command)
        if (command === undefined) return noCommand(request.command)
        if (command.phase === "Exited") return exited
        if (!command.stdinOpen) return { _tag: "Refused", code: "Conflict", message: "the command's stdin was closed" }
        if (request.close) command.stdinOpen = false
        return { _tag: "Done" }
      }
      case "Kill": {
        const command = box.commands.get(request.command)
        if (command === undefined) return noCommand(request.command)
        if (command.phase === "Exited") return exited
        this.end(box, command, { signal: request.signal })
        return { _tag: "Done" }
      }
      case "ReadFile": {
        const file = box.files.get(path)
        if (file !== undefined) {
          if (file.length > request.maxBytes) {
            return { _tag: "Refused", code: "FileTooLarge", message: `${request.path} is ${file.length} bytes` }
          }
          return { _tag: "File", data: file.toString("base64"), size: file.length }
        }
        const entries = [...box.files.entries()].filter(([name]) =>
          name.startsWith(`${path}/`) && !name.slice(path.length + 1).includes("/")
        )
        if (entries.length === 0) {
          return { _tag: "Refused", code: "NotFound", message: `${request.path} does not exist` }
        }
        return {
          _tag: "Directory",
          entries: entries.map(([name, bytes]) => ({
            name: name.slice(path.length + 1),
            size: bytes.length,
            mode: "0644",
            modTime: new Date(now).toISOString(),
            type: "file" as const
          }))
        }
      }
      case "WriteFile":
        box.files.set(path, Buffer.from(request.data, "base64"))
        return { _tag: "Done" }
      case "Call":
        return { _tag: "Refused", code: "Invalid", message: "a Sandbox's box takes no Function calls" }
      case "DeleteFile": {
        const gone = [...box.files.keys()].filter((name) => name === path || name.startsWith(`${path}/`))
        if (gone.length === 0) return { _tag: "Refused", code: "NotFound", message: `${request.path} does not exist` }
        for (const name of gone) box.files.delete(name)
        return { _tag: "Done" }
      }
    }
  }
}

const stateOf = ({ terminal: _terminal, stdinOpen: _stdinOpen, busy: _busy, ...state }: Command): BoxCommand => state

/** What a foreground command ends with: its exit code after its duration, or SIGKILL at a shorter timeout. */
const outcomeOf = (box: Box, command: Command, ms: number, timeoutMs: number | undefined): BoxCommand => {
  if (command.phase === "Exited") return stateOf(command)
  const timedOut = timeoutMs !== undefined && timeoutMs > 0 && timeoutMs < ms
  return {
    ...stateOf(command),
    phase: "Exited",
    exitCode: timedOut ? undefined : box.exitCode,
    signal: timedOut ? "SIGKILL" : undefined,
    timedOut,
    durationMs: timedOut ? timeoutMs : ms
  }
}

const exited: BoxReply = { _tag: "Refused", code: "NotFound", message: "the command has exited" }

const noCommand = (id: string): BoxReply => ({
  _tag: "Refused",
  code: "NotFound",
  message: `no command ${id} ran in this box`
})
