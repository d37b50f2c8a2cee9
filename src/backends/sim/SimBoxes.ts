/**
 * Sandbox boxes under the simulator (docs/simulator.md, "Sandboxes"): the port's `box` requests answered by a model,
 * so agent workloads can be driven, replayed and priced in virtual time. A simulated box keeps its files in memory
 * (written, read, listed, deleted; saved with its snapshot and restored into the next box of the Sandbox), and a
 * command "runs" at once: it exits with the owner's `sim.nodus.dev/exec-exit-code` (default 0) after a reported
 * `sim.nodus.dev/exec-duration` (default 0s), with no output. Every request is the box's activity at the engine's now.
 */
import { posix } from "node:path"
import type { BoxCommand, BoxReply, BoxRequest } from "../../core/SandboxBox.ts"
import { durationMs } from "../../core/StatusText.ts"
import { simAnnotationPrefix } from "./Workloads.ts"

interface Box {
  readonly files: Map<string, Buffer>
  readonly commands: Map<string, BoxCommand>
  readonly exitCode: number
  readonly durationMs: number
  readonly workingDir: string
  /** The files as the last snapshot asked of this box saved them. */
  saved: Map<string, Buffer> | undefined
}

export class SimBoxes {
  private readonly boxes = new Map<string, Box>()

  /** A box starts: empty, or with the files of the box whose snapshot it restores. */
  open(key: string, annotations: Readonly<Record<string, string>>, workingDir: string | undefined, restored: string | undefined) {
    const code = annotations[`${simAnnotationPrefix}exec-exit-code`]
    this.boxes.set(key, {
      files: new Map(restored === undefined ? [] : this.boxes.get(restored)?.saved ?? []),
      commands: new Map(),
      exitCode: code !== undefined && /^[0-9]{1,3}$/u.test(code) ? Number(code) : 0,
      durationMs: durationMs(annotations[`${simAnnotationPrefix}exec-duration`], 0),
      workingDir: workingDir ?? "/workspace",
      saved: undefined
    })
  }

  /** A snapshot of the box was asked: what it holds now is what it saves. */
  snapshot(key: string) {
    const box = this.boxes.get(key)
    if (box !== undefined) box.saved = new Map(box.files)
  }

  forget(keyPrefix: string) {
    for (const key of this.boxes.keys()) if (key.startsWith(keyPrefix)) this.boxes.delete(key)
  }

  handle(key: string, request: BoxRequest, now: number): BoxReply {
    const box = this.boxes.get(key)
    if (box === undefined) return { _tag: "Refused", code: "SandboxNotRunning", message: "the box is not running" }
    // A path as the box sees it: relative ones are the working directory's; `.` and `..` folded.
    const path = "path" in request ? posix.resolve(box.workingDir, request.path) : ""
    switch (request._tag) {
      case "Exec": {
        if (box.commands.has(request.command)) return { _tag: "Refused", code: "Conflict", message: `a command ${request.command} exists already` }
        const state: BoxCommand = {
          command: request.command, argv: request.argv, phase: "Exited", exitCode: box.exitCode, signal: undefined, timedOut: false, startTime: now, durationMs: box.durationMs
        }
        box.commands.set(request.command, state)
        return { _tag: "Command", state: request.background ? state : { ...state, stdout: "", stderr: "", truncated: false } }
      }
      case "Command": {
        const state = box.commands.get(request.command)
        return state === undefined ? noCommand(request.command) : { _tag: "Command", state }
      }
      case "Output":
        return box.commands.has(request.command) ? { _tag: "Output", offset: 0, data: "", exited: true } : noCommand(request.command)
      case "Resize":
        return box.commands.has(request.command) ? { _tag: "Done" } : noCommand(request.command)
      case "Stdin":
      case "Kill":
        return box.commands.has(request.command) ? { _tag: "Refused", code: "NotFound", message: "the command has exited" } : noCommand(request.command)
      case "ReadFile": {
        const file = box.files.get(path)
        if (file !== undefined) {
          if (file.length > request.maxBytes) return { _tag: "Refused", code: "FileTooLarge", message: `${request.path} is ${file.length} bytes` }
          return { _tag: "File", data: file.toString("base64"), size: file.length }
        }
        const entries = [...box.files.entries()].filter(([name]) => name.startsWith(`${path}/`) && !name.slice(path.length + 1).includes("/"))
        if (entries.length === 0) return { _tag: "Refused", code: "NotFound", message: `${request.path} does not exist` }
        return { _tag: "Directory", entries: entries.map(([name, bytes]) => ({ name: name.slice(path.length + 1), size: bytes.length, mode: "0644", modTime: new Date(now).toISOString(), type: "file" as const })) }
      }
      case "WriteFile":
        box.files.set(path, Buffer.from(request.data, "base64"))
        return { _tag: "Done" }
      case "DeleteFile": {
        const gone = [...box.files.keys()].filter((name) => name === path || name.startsWith(`${path}/`))
        if (gone.length === 0) return { _tag: "Refused", code: "NotFound", message: `${request.path} does not exist` }
        for (const name of gone) box.files.delete(name)
        return { _tag: "Done" }
      }
    }
  }
}

const noCommand = (id: string): BoxReply => ({ _tag: "Refused", code: "NotFound", message: `no command ${id} ran in this box` })
