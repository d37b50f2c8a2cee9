/**
 * What is asked of a Sandbox's running box and what it answers (docs/sandboxes.md): commands (foreground and
 * background, their output, stdin, kill) and files. The vocabulary the API server and the capacity port share: the
 * HTTP layer turns requests into these, a driver carries them to the box (core/capacity/Capacity.ts `box`). Bytes
 * travel as base64 text, so a request and a reply are plain JSON end to end.
 */

/** The most one answer of a box's `Output` carries (a log read goes on from where it stopped). */
export const outputReplyBytesMax = 1024 * 1024

/**
 * The most box replies one agent sync carries, and the body an agent's request may have: the largest reply (a file of
 * `Limits.sandboxFileBytesMax`, in base64) fits, with the sync's own reports beside it.
 */
export const syncRepliesBytesMax = 24 * 1024 * 1024
export const agentBodyBytesMax = 48 * 1024 * 1024

/**
 * A command to start in a running box: what a caller asks of the box, and what the host's agent passes on to the box's
 * supervisor as it is (backends/live/BoxSupervisor.ts), so that the two ends read one request. `command` is the
 * command's id, chosen by the caller (unique per box).
 */
export interface ExecRequest {
  readonly _tag: "Exec"
  readonly command: string
  readonly argv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly workingDir: string | undefined
  /** base64 */
  readonly stdin: string | undefined
  /** Leave stdin open for `Stdin` requests (a background command); otherwise it is closed after `stdin`. */
  readonly keepStdin: boolean
  readonly timeoutMs: number | undefined
  /** Answer at once (the command's state); otherwise when it exits, with its output. */
  readonly background: boolean
  /** A terminal's shell: it does not keep the Sandbox Busy (spec: "a silent open terminal is idle"). */
  readonly terminal?: boolean | undefined
}

/** What a caller asks of a running box. `command` is the command's id, chosen by the caller (unique per box). */
export type BoxRequest =
  | ExecRequest
  | { readonly _tag: "Command"; readonly command: string }
  /** Every command the box remembers: those running, and the most recent that exited. */
  | { readonly _tag: "Commands" }
  /** Output (stdout and stderr as they came) from `offset`; waits up to `waitMs` for more while the command runs. */
  | { readonly _tag: "Output"; readonly command: string; readonly offset: number; readonly waitMs: number }
  | { readonly _tag: "Stdin"; readonly command: string; readonly data: string; readonly close: boolean }
  | { readonly _tag: "Kill"; readonly command: string; readonly signal: string }
  /** A terminal's new size (its command is a terminal's shell). */
  | { readonly _tag: "Resize"; readonly command: string; readonly cols: number; readonly rows: number }
  | { readonly _tag: "ReadFile"; readonly path: string; readonly maxBytes: number }
  | { readonly _tag: "WriteFile"; readonly path: string; readonly data: string }
  | { readonly _tag: "DeleteFile"; readonly path: string }
  /**
   * A call to a Function's warm worker (WorkloadProgram.worker; docs/functions.md): `call` is its id on the worker,
   * `<FunctionCall uid>.<dispatch epoch>`, `input` the Payload's bytes in base64, `method` the class method a call
   * names, `annotations` the FunctionCall's (the simulator's model reads `sim.nodus.dev/*`; a live worker none).
   * Answered with a `Result` when the function returns or raises; any other answer means the call did not finish on
   * that worker (it never took it, or the worker was lost under it), and the runtime dispatches it again.
   */
  | {
    readonly _tag: "Call"
    readonly call: string
    readonly encoding: "JSON" | "Pickle"
    readonly input: string
    readonly method?: string | undefined
    readonly timeoutMs: number
    readonly annotations?: Readonly<Record<string, string>> | undefined
  }

/**
 * Whether a request is the box's activity (docs/sandboxes.md, "Activity"): reading commands, their state or output,
 * or resizing a terminal is not; a silent open terminal is idle.
 */
export const isBoxActivity = (request: BoxRequest): boolean =>
  request._tag !== "Output" && request._tag !== "Command" && request._tag !== "Commands" && request._tag !== "Resize"

export interface BoxCommand {
  readonly command: string
  readonly argv: ReadonlyArray<string>
  readonly phase: "Running" | "Exited"
  readonly exitCode: number | undefined
  readonly signal: string | undefined
  readonly timedOut: boolean
  /** Epoch ms by the clock of the host that ran it. */
  readonly startTime: number
  readonly durationMs: number | undefined
  /** A foreground Exec's output (base64): the last of each stream, and whether either was cut. */
  readonly stdout?: string | undefined
  readonly stderr?: string | undefined
  readonly truncated?: boolean | undefined
  /**
   * The bytes of its output (both streams) no longer kept: dropped at an output bound (Limits.sandbox*OutputBytesMax).
   */
  readonly droppedBytes?: number | undefined
}

export interface BoxFileEntry {
  readonly name: string
  readonly size: number
  readonly mode: string
  readonly modTime: string
  readonly type: "file" | "directory" | "symlink" | "other"
}

/** Why a box refused or could not answer: the codes map to the spec's errors (docs/sandboxes.md). */
export type BoxRefusal =
  | "NotFound"
  | "Forbidden"
  | "Conflict"
  | "Invalid"
  | "FileTooLarge"
  | "StdinBackpressure"
  | "SandboxNotRunning"
  | "SandboxStarting"
  | "Unavailable"

export type BoxReply =
  | { readonly _tag: "Command"; readonly state: BoxCommand }
  | { readonly _tag: "Commands"; readonly commands: ReadonlyArray<BoxCommand> }
  | { readonly _tag: "Output"; readonly offset: number; readonly data: string; readonly exited: boolean }
  | { readonly _tag: "File"; readonly data: string; readonly size: number }
  | { readonly _tag: "Directory"; readonly entries: ReadonlyArray<BoxFileEntry> }
  | { readonly _tag: "Done" }
  | { readonly _tag: "Refused"; readonly code: BoxRefusal; readonly message: string }
  | { readonly _tag: "Result"; readonly outcome: CallOutcome }

/** What a Function's worker answered a call: its return value (base64, in the call's encoding), or what it raised. */
export type CallOutcome =
  | { readonly ok: true; readonly encoding: "JSON" | "Pickle"; readonly result: string }
  | { readonly ok: false; readonly error: CallError }

/** An exception a function raised (spec: FunctionCall.error), its text scrubbed of the worker's secret values. */
export interface CallError {
  readonly type: string
  readonly message: string
  readonly traceback: string
}
