/**
 * The nodus client as an Effect service (docs/clients.md, "TypeScript"): generic resource calls, a Sandbox's commands
 * and files, a Job's logs, blobs and Functions, every call through one transport with the spec's retries and errors
 * (Transport.ts, Errors.ts). `Client.layer(options)` builds it from the options, NODUS_* or the kubeconfig
 * (Config.ts); `NodusClient` (Promise.ts) is the same surface with async methods.
 */
import { Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import * as Limits from "../core/Limits.ts"
import { parseDurationMs } from "../core/Units.ts"
import { type ClientConfig, type ClientOptions, resolveConfig } from "./Config.ts"
import type { ClientError, ConfigurationError } from "./Errors.ts"
import { functionCall, type FunctionCallHandle, type FunctionHandle, functionHandle } from "./Functions.ts"
import type { ListOptions, NodusObject, ResourceCalls } from "./ResourceCalls.ts"
import { makeTransport, type Query, type RequestOptions, responseJson, responseText } from "./Transport.ts"

export interface ExecOptions {
  /** Text (or bytes, sent as UTF-8 text) on the command's stdin. */
  readonly stdin?: string | Uint8Array
  /** Seconds, or a duration string ("1m"): past it the command is killed. */
  readonly timeout?: number | string
  readonly env?: Readonly<Record<string, string>>
  readonly workingDir?: string
}

/** A foreground command's end (docs/sandboxes.md, "Commands and files"). */
export interface ExecResult {
  readonly id: string | undefined
  readonly exitCode: number | undefined
  readonly stdout: string
  readonly stderr: string
  readonly durationMs: number | undefined
  readonly signal: string | undefined
  readonly timedOut: boolean
  readonly truncated: boolean
  /** The server's whole answer. */
  readonly raw: NodusObject
}

/** A Sandbox's commands and files. */
export interface SandboxHandle {
  readonly project: string
  readonly name: string
  /**
   * Runs argv (no shell unless asked: ["sh", "-c", line]) in the foreground. Not sent again when no answer came (the
   * command may have run); a refusal the server marks retryable (SandboxStarting) is.
   */
  readonly exec: (argv: ReadonlyArray<string>, options?: ExecOptions) => Effect.Effect<ExecResult, ClientError>
  /** A file's bytes (a directory answers its JSON listing). */
  readonly readFile: (path: string) => Effect.Effect<Uint8Array, ClientError>
  /** Writes the file (text as UTF-8), its parents made. */
  readonly writeFile: (path: string, data: string | Uint8Array) => Effect.Effect<void, ClientError>
  readonly deleteFile: (path: string) => Effect.Effect<void, ClientError>
}

export interface LogOptions {
  readonly index?: number
  readonly attempt?: number
  readonly tailLines?: number
}

/** A Job's logs (docs/live.md, "Logs"). */
export interface JobHandle {
  readonly project: string
  readonly name: string
  /** The log text of one index's run; its latest attempt unless one is named. */
  readonly logs: (options?: LogOptions) => Effect.Effect<string, ClientError>
}

/** The generic calls (ResourceCalls.ts), a Sandbox's commands and files, a Job's logs, a Function's calls. */
export interface ClientShape extends ResourceCalls {
  readonly sandbox: (project: string, name: string) => SandboxHandle
  readonly job: (project: string, name: string) => JobHandle
  readonly function: (project: string, name: string) => FunctionHandle
  /** A handle on a FunctionCall by name (one `spawn` made earlier, perhaps in another process). */
  readonly functionCall: (project: string, name: string) => FunctionCallHandle
  /** Closes the kept-alive connections (the layer does it when released). */
  readonly close: () => void
}

/** How long the server lets a foreground command run when the request names no timeout. */
const commandTimeoutDefaultMs = parseDurationMs(Limits.sandboxCommandTimeoutDefault) ?? 10 * 60_000

const durationOf = (seconds: number | string) =>
  typeof seconds === "string" ? seconds : Number.isInteger(seconds) ? `${seconds}s` : `${Math.round(seconds * 1000)}ms`

/** A client over a resolved configuration. */
export const fromConfig = (config: ClientConfig): ClientShape => {
  const transport = makeTransport(config)
  const request = transport.request
  const json = (method: string, path: string, options?: RequestOptions) =>
    Effect.map(request(method, path, options), (reply) => responseJson(reply) as NodusObject)
  const path = (plural: string, project?: string, name?: string) =>
    [
      "/apis",
      config.group,
      "v1",
      ...(project === undefined ? [] : ["namespaces", encodeURIComponent(project)]),
      plural,
      ...(name === undefined ? [] : [encodeURIComponent(name)])
    ].join("/")

  const list = (plural: string, project?: string, options: ListOptions = {}) =>
    Effect.gen(function*() {
      const items: Array<NodusObject> = []
      let token: string | undefined
      do {
        const query: Query = {
          labelSelector: options.labelSelector,
          fieldSelector: options.fieldSelector,
          limit: options.limit ?? 500,
          continue: token
        }
        const page = yield* json("GET", path(plural, project), { query })
        items.push(...(page["items"] ?? []))
        token = page["metadata"]?.continue || undefined
      } while (token !== undefined)
      return items
    })

  const sandbox = (project: string, name: string): SandboxHandle => {
    const base = path("sandboxes", project, name)
    const files = (file: string) => ({ query: { path: file } })
    return {
      project,
      name,
      exec: (argv, options = {}) => {
        const command: Record<string, unknown> = { command: [...argv] }
        if (options.stdin !== undefined) {
          command["stdin"] = typeof options.stdin === "string"
            ? options.stdin
            : Buffer.from(options.stdin).toString("utf8")
        }
        if (options.env !== undefined && Object.keys(options.env).length > 0) command["env"] = { ...options.env }
        if (options.workingDir !== undefined) command["workingDir"] = options.workingDir
        // The answer comes when the command ends, and a client that stops waiting kills it (docs/sandboxes.md): wait
        // for the command's own timeout (the server's default, 10 minutes, when none is given), and then some.
        if (options.timeout !== undefined) command["timeout"] = durationOf(options.timeout)
        const commandMs = options.timeout === undefined
          ? commandTimeoutDefaultMs
          : typeof options.timeout === "number"
          ? options.timeout * 1000
          : parseDurationMs(options.timeout) ?? commandTimeoutDefaultMs
        const timeoutMs = Math.max(config.timeoutMs, commandMs + 30_000)
        return Effect.map(
          json("POST", `${base}/commands`, { json: command, timeoutMs, replayable: false }),
          (answer) => ({
            id: answer["id"],
            exitCode: answer["exitCode"],
            stdout: answer["stdout"] ?? "",
            stderr: answer["stderr"] ?? "",
            durationMs: answer["durationMs"],
            signal: answer["signal"] ?? undefined,
            timedOut: answer["timedOut"] === true,
            truncated: answer["truncated"] === true,
            raw: answer
          })
        )
      },
      readFile: (file) => Effect.map(request("GET", `${base}/files`, files(file)), (reply) => reply.body),
      writeFile: (file, data) =>
        Effect.asVoid(
          request("PUT", `${base}/files`, { ...files(file), body: data, contentType: "application/octet-stream" })
        ),
      deleteFile: (file) => Effect.asVoid(request("DELETE", `${base}/files`, files(file)))
    }
  }

  const job = (project: string, name: string): JobHandle => ({
    project,
    name,
    logs: (options = {}) =>
      Effect.map(
        request("GET", `${path("jobs", project, name)}/log`, {
          query: { index: options.index ?? 0, attempt: options.attempt, tailLines: options.tailLines }
        }),
        responseText
      )
  })

  const uploadBlob = (data: string | Uint8Array, project?: string) => {
    const bytes = typeof data === "string" ? Buffer.from(data) : data
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`
    return Effect.as(
      request("PUT", `/blobs/v1/${digest}`, {
        body: bytes,
        contentType: "application/octet-stream",
        query: { project }
      }),
      digest
    )
  }

  const client: ClientShape = {
    config,
    defaultProject: config.defaultProject,
    request,
    stream: transport.stream,
    path,
    create: (plural, project, body, options = {}) => {
      // One key per create, made now and kept across every retry of this request (spec: Create semantics 4).
      const idempotencyKey = options.idempotencyKey ?? crypto.randomUUID()
      const sent = { apiVersion: `${config.group}/v1`, ...body }
      return json("POST", path(plural, project), {
        json: sent,
        idempotencyKey,
        query: { dryRun: options.dryRun === true ? "All" : undefined }
      })
    },
    get: (plural, project, name) => json("GET", path(plural, project, name)),
    list,
    delete: (plural, project, name) => json("DELETE", path(plural, project, name)),
    patch: (plural, project, name, patch) =>
      json("PATCH", path(plural, project, name), { json: patch, contentType: "application/merge-patch+json" }),
    sandbox,
    job,
    function: (project, name) => functionHandle(client, project, name),
    functionCall: (project, name) => functionCall(client, project, name),
    uploadBlob,
    readBlob: (digest) => Effect.map(request("GET", `/blobs/v1/${digest}`), (reply) => reply.body),
    close: transport.close
  }
  return client
}

/** A client from options, NODUS_* or the kubeconfig; ConfigurationError when none names a server and key. */
export const make = (options: ClientOptions = {}): Effect.Effect<ClientShape, ConfigurationError> =>
  Effect.map(resolveConfig(options), fromConfig)

/** The nodus client service: `const client = yield* Client`, provided by `Client.layer(options)`. */
export class Client extends Context.Service<Client, ClientShape>()("nodus/client/Client") {
  /** The client, its connections closed when the layer is released. */
  static readonly layer = (options: ClientOptions = {}): Layer.Layer<Client, ConfigurationError> =>
    Layer.effect(Client, Effect.acquireRelease(make(options), (client) => Effect.sync(client.close)))
}
