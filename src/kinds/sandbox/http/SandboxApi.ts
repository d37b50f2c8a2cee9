/**
 * A Sandbox's commands and files over HTTP (nodus's design where the spec says "not shown"; docs/sandboxes.md):
 *
 *   POST   …/namespaces/{ns}/sandboxes/{name}/commands               run one (SandboxCommandRequest)
 *   GET    …/sandboxes/{name}/commands                                those running, and the most recent that exited
 *   GET    …/sandboxes/{name}/commands/{id}                           its state
 *   GET    …/sandboxes/{name}/commands/{id}/log?follow=true           its output (stdout and stderr as they came)
 *   POST   …/sandboxes/{name}/commands/{id}/stdin?close=true          the body's bytes to its stdin
 *   POST   …/sandboxes/{name}/commands/{id}/kill?signal=SIGTERM       a signal to it and what it started
 *                                                                     (default SIGKILL)
 *   GET    …/sandboxes/{name}/files?path=P                            a file's bytes, or a directory's entries (JSON)
 *   PUT    …/sandboxes/{name}/files?path=P                            the body as the file (parents made)
 *   DELETE …/sandboxes/{name}/files?path=P                            a file or a directory with what it holds
 *
 * Every request goes to the box of the Sandbox's current attempt (SandboxBoxes.ts), only while it is Running: a
 * Sandbox starting answers SandboxStarting, a stopped one SandboxNotRunning, a failed one SandboxFailed.
 */
import { Effect, Option, Result, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { Socket } from "effect/socket"
import { Ids } from "../../../apiserver/Ids.ts"
import { Resources } from "../../../apiserver/Resources.ts"
import { isObject } from "../../../core/Json.ts"
import * as Limits from "../../../core/Limits.ts"
import { admit } from "../../../core/meta/Admission.ts"
import {
  ApiError,
  badRequest,
  fieldInvalid,
  methodNotAllowed,
  resourceNotFound,
  subjectOf
} from "../../../core/meta/ApiError.ts"
import type { ResourceRef } from "../../../core/meta/Kinds.ts"
import type { BoxCommand, BoxReply, BoxRequest } from "../../../core/SandboxBox.ts"
import { durationMs } from "../../../core/StatusText.ts"
import { readBytes, readObject } from "../../../http/Body.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { json } from "../../../http/Respond.ts"
import { SandboxBoxes } from "../../../runtime/SandboxBoxes.ts"
import { SandboxCommandRequest, type SandboxCommandRequestType } from "../SandboxCommandSchema.ts"
import { sandboxPaths, sandboxSchemas } from "./SandboxOperations.ts"

type Request = HttpServerRequest.HttpServerRequest
type Response = HttpServerResponse.HttpServerResponse

/** The subresources of a Sandbox this module answers. */
export const sandboxSubresources = ["commands", "files", "terminal"] as const

/** The header of a command's log that says how many bytes of its output were dropped before its first byte. */
const droppedBytesHeader = "nodus-output-dropped-bytes"

/** How long one wait for more output may hold a log request's next chunk. */
const followWaitMs = 10_000

const signals = new Set(["SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"])

export interface SandboxTarget {
  readonly ref: ResourceRef
  readonly namespace: string | undefined
  readonly name: string
  readonly subresource: string
  readonly item: string | undefined
  readonly action: string | undefined
}

export const makeSandboxApi = (services: {
  readonly resources: Resources["Service"]
  readonly boxes: SandboxBoxes["Service"]
  readonly ids: Ids["Service"]
}) => {
  const { resources, boxes, ids } = services

  /** The Sandbox, when it can take requests now, and the attempt whose box takes them. */
  const running = (target: SandboxTarget) =>
    Effect.gen(function*() {
      // The backend's copy when it says Running (a box that stopped since refuses by itself); otherwise the store's.
      const followed = boxes.current(target.namespace ?? "", target.name)
      const object = followed !== undefined && isObject(followed.status) && followed.status["phase"] === "Running"
        ? followed
        : yield* resources.get(target.ref, target.namespace, target.name)
      const status = isObject(object.status) ? object.status : {}
      const phase = typeof status["phase"] === "string" ? status["phase"] : undefined
      const attempt = isObject(status["attempt"]) && typeof status["attempt"]["name"] === "string"
        ? status["attempt"]["name"]
        : undefined
      const about = `Sandbox "${target.name}"`
      if (phase === "Failed") {
        return yield* new ApiError({
          code: "SandboxFailed",
          message: `${about} is Failed (${String(status["reason"] ?? "")}): ${String(status["message"] ?? "")}`,
          subject: subjectOf(target.ref, target.name)
        })
      }
      if (
        object.metadata.deletionTimestamp === undefined &&
        (phase === undefined || phase === "Pending" || phase === "Starting" || phase === "Recovering")
      ) {
        return yield* new ApiError({
          code: "SandboxStarting",
          message: `${about} is ${phase ?? "Pending"}; its box takes requests once it is Running`,
          retryAfterSeconds: 1,
          subject: subjectOf(target.ref, target.name)
        })
      }
      if (phase !== "Running" || attempt === undefined || object.metadata.deletionTimestamp !== undefined) {
        return yield* new ApiError({
          code: "SandboxNotRunning",
          message: `${about} is ${phase ?? "being deleted"}`,
          subject: subjectOf(target.ref, target.name)
        })
      }
      return { object, attempt }
    })

  /** One request to the box; a refusal becomes the spec's error for it. */
  const call = (target: SandboxTarget, request: BoxRequest) =>
    Effect.gen(function*() {
      const { object, attempt } = yield* running(target)
      const reply = yield* boxes.call(object, attempt, request)
      if (reply._tag !== "Refused") return reply
      return yield* refusalError(target, reply)
    })

  const runCommand = (request: Request, target: SandboxTarget) =>
    Effect.gen(function*() {
      // JSON (or YAML) only, as every other JSON body (a Function's map): any other media type is 415.
      const body = yield* readObject(request, "SandboxCommand")
      const admitted = admit(
        SandboxCommandRequest,
        body,
        "Strict",
        subjectOf(target.ref, target.name),
        "SandboxCommand"
      )
      if (Result.isFailure(admitted)) return yield* admitted.failure
      const spec = admitted.success.object as unknown as SandboxCommandRequestType
      const background = spec.background === true
      const id = `cmd-${ids.nameSuffix()}${ids.nameSuffix()}`
      const timeout = spec.timeout ?? (background ? undefined : Limits.sandboxCommandTimeoutDefault)
      const exec = call(target, {
        _tag: "Exec",
        command: id,
        argv: spec.command,
        env: spec.env ?? {},
        workingDir: spec.workingDir,
        stdin: spec.stdin === undefined ? undefined : Buffer.from(spec.stdin).toString("base64"),
        keepStdin: background,
        timeoutMs: timeout === undefined ? undefined : durationMs(timeout, 0),
        background
      })
      // A foreground command is its caller's: when the caller goes (the connection closes), the command goes too.
      const reply = yield* (background ? exec : killedWithItsClient(request, target, id, exec))
      const state = yield* commandState(reply)
      if (background) return json(201, { id, phase: state.phase })
      return json(200, {
        id,
        exitCode: state.exitCode ?? null,
        ...(state.signal === undefined ? {} : { signal: state.signal }),
        ...(state.timedOut ? { timedOut: true } : {}),
        stdout: text(state.stdout),
        stderr: text(state.stderr),
        ...(state.truncated === true ? { truncated: true } : {}),
        ...(state.droppedBytes === undefined ? {} : { droppedBytes: state.droppedBytes }),
        durationMs: state.durationMs ?? 0
      })
    })

  /**
   * A foreground command is its caller's: when the caller goes (its connection closes, or the request is interrupted)
   * before the command exits, the command is killed; nothing would read its answer.
   */
  const killedWithItsClient = (
    request: Request,
    target: SandboxTarget,
    id: string,
    exec: Effect.Effect<BoxReply, ApiError>
  ) => {
    const kill = Effect.ignore(call(target, { _tag: "Kill", command: id, signal: "SIGKILL" }))
    // (The answer reaches nobody; a 4xx keeps it out of the server's error log.)
    const gone = Effect.andThen(
      disconnected(request),
      Effect.andThen(
        kill,
        Effect.fail(
          new ApiError({
            code: "Conflict",
            message: `the client went away before command ${id} exited; it was killed`,
            fix:
              "Run a command that outlives its request with background: true, and follow its log (GET …/commands/{id}/log?follow=true)."
          })
        )
      )
    )
    return Effect.onInterrupt(Effect.raceFirst(exec, gone), () => kill)
  }

  const readCommand = (target: SandboxTarget, id: string) =>
    Effect.map(
      Effect.flatMap(call(target, { _tag: "Command", command: id }), commandState),
      (state) => json(200, commandView(state))
    )

  /** The commands the box remembers: every one running, and the most recent that exited, oldest first. */
  const listCommands = (target: SandboxTarget) =>
    Effect.flatMap(
      call(target, { _tag: "Commands" }),
      (reply) =>
        reply._tag === "Commands"
          ? Effect.succeed(json(200, { items: reply.commands.map(commandView) }))
          : unexpected(reply)
    )

  /**
   * The command's output from the start, as text; with follow, until it exits. What the output bounds dropped before
   * the first byte sent is counted in the `Nodus-Output-Dropped-Bytes` header (docs/sandboxes.md, "Output").
   */
  const commandLog = (target: SandboxTarget, id: string, follow: boolean) =>
    Effect.gen(function*() {
      const first = yield* call(target, { _tag: "Output", command: id, offset: 0, waitMs: 0 })
      if (first._tag !== "Output") return yield* unexpected(first)
      const next = (reply: Extract<BoxReply, { _tag: "Output" }>) =>
        reply.offset + Buffer.from(reply.data, "base64").length
      // Without follow, the output there is now (one answer carries at most 1 MiB of it); with follow, to the exit.
      const ended = (reply: Extract<BoxReply, { _tag: "Output" }>, chunk: Buffer) =>
        chunk.length === 0 && (reply.exited || !follow)
      const rest = first.exited && Buffer.from(first.data, "base64").length === 0
        ? Stream.empty
        : Stream.paginate(next(first), (offset: number) =>
          Effect.map(
            Effect.orElseSucceed(
              call(target, { _tag: "Output", command: id, offset, waitMs: follow ? followWaitMs : 0 }),
              () => undefined
            ),
            (reply) => {
              if (reply === undefined || reply._tag !== "Output") return [[], Option.none()] as const
              const chunk = Buffer.from(reply.data, "base64")
              return [
                chunk.length === 0 ? [] : [new Uint8Array(chunk)],
                ended(reply, chunk) ? Option.none() : Option.some(next(reply))
              ] as const
            }
          ))
      const head = Buffer.from(first.data, "base64")
      return HttpServerResponse.stream(Stream.concat(Stream.make(new Uint8Array(head)), rest), {
        status: 200,
        contentType: "text/plain; charset=utf-8",
        headers: { [droppedBytesHeader]: String(first.offset) }
      })
    })

  const writeStdin = (request: Request, query: URLSearchParams, target: SandboxTarget, id: string) =>
    Effect.gen(function*() {
      const close = yield* boolQuery(query, "close")
      const bytes = yield* readBytes(request)
      yield* call(target, { _tag: "Stdin", command: id, data: Buffer.from(bytes).toString("base64"), close })
      return json(200, { id, written: bytes.length, closed: close })
    })

  const kill = (query: URLSearchParams, target: SandboxTarget, id: string) =>
    Effect.gen(function*() {
      const signal = query.get("signal") ?? "SIGKILL"
      if (!signals.has(signal)) {
        return yield* badRequest(`invalid value for signal: "${signal}"`, [
          fieldInvalid("signal", `Unsupported value: must be one of ${[...signals].join(", ")}`)
        ])
      }
      yield* call(target, { _tag: "Kill", command: id, signal })
      return json(200, { id, signal })
    })

  const files = (request: Request, query: URLSearchParams, target: SandboxTarget) =>
    Effect.gen(function*() {
      const path = query.get("path")
      if (path === null || path === "") {
        return yield* badRequest("the path of the file is required", [
          fieldInvalid("path", "Required value: ?path=/workspace/…", "FieldValueRequired")
        ])
      }
      switch (request.method) {
        case "GET": {
          const reply = yield* call(target, { _tag: "ReadFile", path, maxBytes: Limits.sandboxFileBytesMax })
          if (reply._tag === "Directory") return json(200, { path, entries: reply.entries })
          if (reply._tag !== "File") return yield* unexpected(reply)
          return HttpServerResponse.uint8Array(new Uint8Array(Buffer.from(reply.data, "base64")), {
            status: 200,
            contentType: "application/octet-stream"
          })
        }
        case "PUT": {
          const bytes = yield* readBytes(request, {
            maxBytes: Limits.sandboxFileBytesMax,
            tooLarge: () => fileTooLarge(path)
          })
          yield* call(target, { _tag: "WriteFile", path, data: Buffer.from(bytes).toString("base64") })
          return json(200, { path, size: bytes.length })
        }
        case "DELETE":
          yield* call(target, { _tag: "DeleteFile", path })
          return json(200, { path })
        default:
          return yield* methodNotAllowed(request.method)
      }
    })

  /**
   * An interactive terminal over a WebSocket: a shell on a pseudo-terminal in the box (util-linux `script`, which the
   * host's userland has), its output as binary frames; binary frames from the client are its input, a text frame
   * `{"resize": {"cols": C, "rows": R}}` resizes it. When the shell exits, a text frame `{"exit": code}` and a close;
   * when the client goes, the shell is killed. Only input is activity: a silent open terminal is idle.
   */
  const terminal = (request: Request, query: URLSearchParams, target: SandboxTarget) =>
    Effect.gen(function*() {
      const cols = yield* sizeQuery(query, "cols", 80)
      const rows = yield* sizeQuery(query, "rows", 24)
      const shell = query.get("shell")
      if (shell !== null && !/^\/[A-Za-z0-9._/-]+$/u.test(shell)) {
        return yield* badRequest(`invalid value for shell: "${shell}"`, [
          fieldInvalid("shell", "Invalid value: an absolute path such as /bin/bash")
        ])
      }
      yield* running(target)
      const id = `term-${ids.nameSuffix()}${ids.nameSuffix()}`
      const socket = yield* Effect.mapError(request.upgrade, () =>
        badRequest("the terminal is a WebSocket: send the request with Upgrade: websocket"))
      const ttyFile = `/tmp/.nodus-tty-${id}`
      const start = `stty rows ${rows} cols ${cols}; tty > ${ttyFile}; exec ${
        shell ?? "\"$(command -v bash || echo /bin/sh)\""
      } -i`
      yield* call(target, {
        _tag: "Exec",
        command: id,
        argv: ["script", "-qfec", start, "/dev/null"],
        env: { TERM: "xterm-256color" },
        workingDir: undefined,
        stdin: undefined,
        keepStdin: true,
        timeoutMs: undefined,
        background: true,
        terminal: true
      })
      const session = Effect.scoped(Effect.gen(function*() {
        const writer = yield* socket.writer
        const reader = yield* socket.reader
        const output = Effect.gen(function*() {
          let offset = 0
          for (;;) {
            const reply = yield* call(target, { _tag: "Output", command: id, offset, waitMs: followWaitMs })
            if (reply._tag !== "Output") {
              return
            }
            const chunk = Buffer.from(reply.data, "base64")
            offset = reply.offset + chunk.length
            if (chunk.length > 0) {
              yield* writer.write(new Uint8Array(chunk))
            }
            if (reply.exited && chunk.length === 0) {
              break
            }
          }
          const state = yield* Effect.flatMap(call(target, { _tag: "Command", command: id }), commandState)
          yield* writer.write(JSON.stringify({ exit: state.exitCode ?? null }))
          yield* writer.write(new Socket.CloseEvent(1000, "the shell exited"))
        })
        const input = Effect.gen(function*() {
          for (;;) {
            for (const frame of yield* reader.pull) {
              if (typeof frame !== "string") {
                yield* stdin(target, id, frame)
              } else {
                const size = resizeOf(frame)
                if (size !== undefined) {
                  yield* Effect.ignore(call(target, { _tag: "Resize", command: id, ...size }))
                }
              }
            }
          }
        })
        // The client going away (the reader fails on close) ends the shell; the shell ending closes the socket.
        yield* Effect.raceFirst(Effect.ignore(output), Effect.ignore(input))
      }))
      // However the session ends (the shell exits, the client goes, the request is interrupted), the shell goes.
      yield* session.pipe(
        Effect.ignore,
        Effect.ensuring(Effect.ignore(call(target, { _tag: "Kill", command: id, signal: "SIGKILL" })))
      )
      return HttpServerResponse.empty()
    })

  /** Terminal input: written as it comes, waiting while the shell has not read what came before. */
  const stdin = (target: SandboxTarget, id: string, bytes: Uint8Array): Effect.Effect<void, ApiError> =>
    Effect.flatMap(
      call(target, { _tag: "Stdin", command: id, data: Buffer.from(bytes).toString("base64"), close: false }).pipe(
        Effect.map(() => true),
        Effect.catchIf((error) => error.code === "StdinBackpressure", () => Effect.succeed(false))
      ),
      (written) => (written ? Effect.void : Effect.andThen(Effect.sleep("50 millis"), stdin(target, id, bytes)))
    )

  /** Answers a request to a Sandbox's `commands`, `files` or `terminal`. */
  const handle = (
    request: Request,
    query: URLSearchParams,
    target: SandboxTarget
  ): Effect.Effect<Response, ApiError> => {
    if (target.subresource === "terminal") {
      return request.method === "GET" && target.item === undefined
        ? terminal(request, query, target)
        : Effect.fail(methodNotAllowed(request.method))
    }
    if (target.subresource === "files") {
      return target.item === undefined
        ? files(request, query, target)
        : Effect.fail(resourceNotFound())
    }
    const id = target.item
    if (id === undefined) {
      if (request.method === "GET") return listCommands(target)
      return request.method === "POST" ? runCommand(request, target) : Effect.fail(methodNotAllowed(request.method))
    }
    switch (target.action) {
      case undefined:
        return request.method === "GET" ? readCommand(target, id) : Effect.fail(methodNotAllowed(request.method))
      case "log":
        return request.method === "GET"
          ? Effect.flatMap(boolQuery(query, "follow"), (follow) => commandLog(target, id, follow))
          : Effect.fail(methodNotAllowed(request.method))
      case "stdin":
        return request.method === "POST"
          ? writeStdin(request, query, target, id)
          : Effect.fail(methodNotAllowed(request.method))
      case "kill":
        return request.method === "POST" ? kill(query, target, id) : Effect.fail(methodNotAllowed(request.method))
      default:
        return Effect.fail(resourceNotFound())
    }
  }

  return { handle }
}

/** The access a request to a Sandbox's box needs: every one runs code or reads what code may have written (secrets). */
export const sandboxAccess = "write" as const

/** `{"resize": {"cols": C, "rows": R}}`, within what a terminal can be. */
const resizeOf = (frame: string): { readonly cols: number; readonly rows: number } | undefined => {
  try {
    const size = (JSON.parse(frame) as { resize?: { cols?: unknown; rows?: unknown } }).resize
    const fits = (value: unknown): value is number =>
      Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 1000
    return fits(size?.cols) && fits(size?.rows) ? { cols: size.cols, rows: size.rows } : undefined
  } catch {
    return undefined
  }
}

const sizeQuery = (query: URLSearchParams, name: string, fallback: number): Effect.Effect<number, ApiError> => {
  const raw = query.get(name)
  if (raw === null || raw === "") return Effect.succeed(fallback)
  return /^[0-9]{1,4}$/u.test(raw) && Number(raw) >= 1 && Number(raw) <= 1000
    ? Effect.succeed(Number(raw))
    : Effect.fail(
      badRequest(`invalid value for ${name}: "${raw}"`, [
        fieldInvalid(name, "Invalid value: an integer from 1 to 1000")
      ])
    )
}

/**
 * Completes when the request's client disconnects: its connection closes before the answer is sent. (The HTTP server
 * does not interrupt a request whose client went away while it waits, so the connection is watched here.)
 */
const disconnected = (request: Request): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const socket = (request.source as {
      readonly socket?: {
        readonly destroyed: boolean
        once(event: "close", f: () => void): unknown
        off(event: "close", f: () => void): unknown
      }
    }).socket
    if (socket === undefined) return
    const closed = () => resume(Effect.void)
    if (socket.destroyed) return closed()
    socket.once("close", closed)
    return Effect.sync(() => void socket.off("close", closed))
  })

const commandState = (reply: BoxReply): Effect.Effect<BoxCommand, ApiError> =>
  reply._tag === "Command" ? Effect.succeed(reply.state) : unexpected(reply)

const commandView = (state: BoxCommand) => ({
  id: state.command,
  command: state.argv,
  phase: state.phase,
  ...(state.exitCode === undefined ? {} : { exitCode: state.exitCode }),
  ...(state.signal === undefined ? {} : { signal: state.signal }),
  ...(state.timedOut ? { timedOut: true } : {}),
  startTime: new Date(state.startTime).toISOString(),
  ...(state.durationMs === undefined ? {} : { durationMs: state.durationMs }),
  ...(state.droppedBytes === undefined ? {} : { droppedBytes: state.droppedBytes })
})

const text = (base64: string | undefined) => Buffer.from(base64 ?? "", "base64").toString("utf8")

const unexpected = (reply: BoxReply) =>
  Effect.fail(new ApiError({ code: "InternalError", message: `the box answered ${reply._tag} where it should not` }))

const fileTooLarge = (path: string) =>
  new ApiError({
    code: "FileTooLarge",
    message: `the file for ${path} is larger than the ${Limits.sandboxFileBytesMax} bytes a file request carries`
  })

const boolQuery = (query: URLSearchParams, name: string): Effect.Effect<boolean, ApiError> => {
  const raw = query.get(name)
  if (raw === null || raw === "" || raw === "false" || raw === "0") return Effect.succeed(false)
  if (raw === "true" || raw === "1") return Effect.succeed(true)
  return Effect.fail(
    badRequest(`invalid value for ${name}: "${raw}"`, [fieldInvalid(name, "Invalid value: must be true or false")])
  )
}

/** What a box refused, as the spec's error (the box's message says which command or path). */
const refusalError = (target: SandboxTarget, refusal: Extract<BoxReply, { _tag: "Refused" }>): ApiError => {
  const subject = subjectOf(target.ref, target.name)
  switch (refusal.code) {
    case "FileTooLarge":
      return new ApiError({ code: "FileTooLarge", message: refusal.message, subject })
    case "StdinBackpressure":
      return new ApiError({ code: "StdinBackpressure", message: refusal.message, retryAfterSeconds: 1, subject })
    case "SandboxStarting":
      return new ApiError({ code: "SandboxStarting", message: refusal.message, retryAfterSeconds: 1, subject })
    case "Invalid":
      return new ApiError({
        code: "Invalid",
        message: refusal.message,
        causes: [fieldInvalid("path", `Invalid value: ${refusal.message}`)],
        fix:
          "Name a regular file or a directory; read what is neither (a device, a /proc or /sys file) with a command such as `cat`.",
        subject
      })
    case "Forbidden":
      return new ApiError({
        code: "Forbidden",
        message: `the Sandbox's user may not do this: ${refusal.message}`,
        fix: "Use a path the Sandbox's user may write, such as /workspace or /tmp.",
        subject
      })
    default:
      return new ApiError({ code: refusal.code, message: refusal.message, subject })
  }
}

/** The Sandbox's registration: its box's subresources and their operations. */
export const sandboxRegistration: KindRegistration<Resources | SandboxBoxes | Ids> = {
  kind: "Sandbox",
  items: { commands: "actions" },
  operations: { version: "v1", paths: sandboxPaths, schemas: sandboxSchemas },
  make: Effect.gen(function*() {
    const api = makeSandboxApi({ resources: yield* Resources, boxes: yield* SandboxBoxes, ids: yield* Ids })
    return {
      subresources: [{
        names: sandboxSubresources,
        access: (_method, route) => (route.name === undefined ? undefined : sandboxAccess),
        handle: (call) => api.handle(call.request, call.query, call)
      }]
    }
  })
}
