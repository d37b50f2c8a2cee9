/**
 * Shared helpers of the HTTP integration suite in this folder: object builders, the Status-body check every error
 * answer must pass (spec: Errors, Status body), polling with a deadline, and a watch client that reads the
 * newline-delimited stream incrementally (kubectl-compat §6).
 */
import { assert } from "@effect/vitest"
import * as http from "node:http"
import { eventually } from "../../support/Eventually.ts"
import { type Reply, request, type TestServer } from "../../support/TestServer.ts"

export const v1 = "/apis/nodus.dev/v1"

export const jobsPath = (project: string): string => `${v1}/namespaces/${project}/jobs`
export const jobPath = (project: string, name: string): string => `${jobsPath(project)}/${name}`
export const sandboxesPath = (project: string): string => `${v1}/namespaces/${project}/sandboxes`

/**
 * The spec's list of registered error codes (spec: Errors, Registered codes), copied here so the check is independent
 * of the server's registry.
 */
export const registeredCodes: ReadonlySet<string> = new Set(
  ("AdmissionsPaused, AgentGroupClosed, AgentGroupFull, AgentRunFinished, AgentStopped, AlreadyExists, ArrearsOutstanding, BadRequest, " +
    "BudgetExceeded, CapacityUnavailable, CloudAccountCredentialsRejected, CloudAccountInUse, CloudAccountNotVerified, CloudConnectUnavailable, " +
    "CloudExecuteNotEnabled, CloudUnreachable, ComputeSuspended, Conflict, ConnectionNotReady, EncryptionFailed, EnrollmentTokenInvalid, " +
    "EnvironmentTasksFailed, Expired, FieldImmutable, FileTooLarge, Forbidden, FunctionCallBatchTooLarge, FunctionNotFound, IdempotencyKeyReused, " +
    "ImageBuildUnavailable, ImageNotFound, ImageNotReady, ImagePullFailed, InsufficientCredits, InternalError, Invalid, MethodNotAllowed, NoSSHKey, " +
    "NotFound, OutputIndexRequired, OutputNotFound, PaymentDisputed, PaymentMethodRequired, PaymentVerificationUnavailable, PaymentsNotConfigured, " +
    "PoolActPaused, PoolActionNotPending, PoolActionNotReversible, PoolInUse, PreconditionFailed, PriceConsentRequired, PromoCodeExpired, " +
    "PromoCodeUsed, QuotaExceeded, RequestEntityTooLarge, RequestInProgress, SandboxFailed, SandboxNotRunning, SandboxStarting, SecretValueInEnv, " +
    "SHA256Mismatch, StdinBackpressure, TooManyRequests, TopUpLimitReached, TrialLimitExceeded, Unauthorized, Unavailable, Unsupported, " +
    "UnsupportedMediaType, VolumeBusy, WorkerNotAllowed, WorkspaceStarting, WorkspaceToolUnavailable").split(", ")
)

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** A Job body; `metadata` and `spec` are merged over the defaults. */
export const jobBody = (name: string, metadata: Record<string, unknown> = {}, spec: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: { name, ...metadata },
  spec: { image: "python:3.12", ...spec }
})

export const sandboxBody = (name: string, metadata: Record<string, unknown> = {}) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Sandbox",
  metadata: { name, ...metadata },
  spec: { image: "ubuntu:24.04" }
})

/** Creates a project (Namespace) and asserts it was created. */
export const createProject = async (server: TestServer, name: string): Promise<any> => {
  const reply = await request(server, "POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name } }
  })
  assert.strictEqual(reply.status, 201, `creating project ${name}: ${reply.text}`)
  return reply.body
}

/** Creates a Job and asserts it was created; returns the stored object. */
export const createJob = async (
  server: TestServer,
  project: string,
  name: string,
  metadata: Record<string, unknown> = {},
  spec: Record<string, unknown> = {}
): Promise<any> => {
  const reply = await request(server, "POST", jobsPath(project), { body: jobBody(name, metadata, spec) })
  assert.strictEqual(reply.status, 201, `creating job ${project}/${name}: ${reply.text}`)
  return reply.body
}

export const mergePatch = (
  server: TestServer,
  path: string,
  body: unknown,
  options: { readonly headers?: Record<string, string>; readonly token?: string } = {}
): Promise<Reply> => request(server, "PATCH", path, { body, contentType: "application/merge-patch+json", ...options })

/** The names of a list reply's items, in the order served. */
export const namesOf = (reply: Reply): ReadonlyArray<string> => {
  assert.strictEqual(reply.status, 200, reply.text)
  assert.isArray(reply.body.items, reply.text)
  return (reply.body.items as ReadonlyArray<any>).map((item) => item.metadata.name as string)
}

/** A resourceVersion as a number (they are decimal strings here). */
export const rv = (object: any): number => {
  const value = object?.metadata?.resourceVersion
  assert.isString(value, `resourceVersion of ${JSON.stringify(object)}`)
  assert.match(value, /^[0-9]+$/u)
  return Number(value)
}

/** No stack trace in a body: no "at <path>" frame and no "<file>.ts:<line>". */
export const assertNoStackTrace = (text: string): void => {
  assert.notMatch(text, /\bat\s+(?:file:\/\/)?\S*[/\\]\S*\.(?:ts|js|mjs|cjs)\b/u, `stack frame in body: ${text}`)
  assert.notMatch(text, /\bat\s+\S+\s+\((?:file:\/\/)?[^)]*:\d+:\d+\)/u, `stack frame in body: ${text}`)
  assert.notInclude(text, ".ts:", `source location in body: ${text}`)
}

/**
 * Asserts an error answer: the HTTP status, and a Status body with the spec's fields and extensions (docs link on this
 * server, fix, request id equal to the x-request-id header).
 */
export const assertStatus = (server: TestServer, reply: Reply, status: number, reason: string): any => {
  assert.strictEqual(reply.status, status, reply.text)
  assertNoStackTrace(reply.text)
  const body = reply.body
  assert.isObject(body, `not a JSON object: ${reply.text}`)
  assert.strictEqual(body.apiVersion, "v1")
  assert.strictEqual(body.kind, "Status")
  assert.strictEqual(body.status, "Failure")
  assert.strictEqual(body.code, status)
  assert.strictEqual(body.reason, reason, reply.text)
  assert.isTrue(registeredCodes.has(body.reason), `${body.reason} is not a registered code`)
  assert.isString(body.message)
  assert.isAbove(body.message.length, 0)
  assert.strictEqual(body.docs, `${server.url}/docs/errors/${reason}`)
  assert.isString(body.fix)
  assert.isAbove(body.fix.trim().length, 0)
  const requestId = reply.headers.get("x-request-id")
  assert.isString(requestId)
  assert.isAbove(requestId!.length, 0)
  assert.strictEqual(body.requestId, requestId)
  return body
}

/** The `details.causes[].field` values of a Status body. */
export const causeFields = (body: any): ReadonlyArray<string> => {
  const causes = body?.details?.causes
  assert.isArray(causes, `no details.causes in ${JSON.stringify(body)}`)
  return (causes as ReadonlyArray<any>).map((cause) => cause.field as string)
}

/** GETs `path` until it answers 404; returns the last status seen. */
export const waitGone = (server: TestServer, path: string, timeoutMs = 5_000): Promise<number> =>
  eventually(
    `${path} gone`,
    async () => (await request(server, "GET", path)).status,
    { until: (status) => status === 404, timeoutMs }
  )

export interface WatchEvent {
  readonly type: string
  readonly object: any
}

export interface Watcher {
  readonly response: Response
  /** The next `count` events, failing when they do not all arrive within `timeoutMs`. */
  readonly next: (count: number, timeoutMs?: number) => Promise<ReadonlyArray<WatchEvent>>
  /** Events up to and including the first one `predicate` accepts. */
  readonly until: (predicate: (event: WatchEvent) => boolean, timeoutMs?: number) => Promise<ReadonlyArray<WatchEvent>>
  /** Whether the server ends the stream within `timeoutMs` (events still queued are dropped). */
  readonly ended: (timeoutMs: number) => Promise<boolean>
  readonly close: () => Promise<void>
}

/** `TYPE name` of each event, for compact assertions. */
export const summary = (events: ReadonlyArray<WatchEvent>): ReadonlyArray<string> =>
  events.map((event) => `${event.type} ${event.object?.metadata?.name ?? ""}`.trim())

/** Starts a watch request; resolves when the response headers arrive. */
export const startWatch = (
  server: TestServer,
  path: string,
  options: { readonly token?: string; readonly headers?: Record<string, string>; readonly signal?: AbortSignal } = {}
): Promise<Response> =>
  fetch(`${server.url}${path}`, {
    headers: { authorization: `Bearer ${options.token ?? server.token}`, ...options.headers },
    ...(options.signal === undefined ? {} : { signal: options.signal })
  })

/** Opens a watch and reads its stream line by line as events arrive. */
export const openWatch = async (
  server: TestServer,
  path: string,
  options: { readonly token?: string; readonly headers?: Record<string, string> } = {}
): Promise<Watcher> => {
  const controller = new AbortController()
  const response = await startWatch(server, path, { ...options, signal: controller.signal })
  assert.strictEqual(response.status, 200, `watch ${path} answered ${response.status}`)
  assert.isNotNull(response.body)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const queue: Array<WatchEvent> = []
  let buffer = ""
  let finished = false
  let pending: ReturnType<typeof reader.read> | undefined

  const readOnce = async (deadline: number): Promise<"data" | "end" | "timeout"> => {
    if (finished) return "end"
    if (pending === undefined) {
      pending = reader.read()
      pending.catch(() => {})
    }
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), Math.max(0, deadline - Date.now()))
    })
    const result = await Promise.race([pending, timeout])
    clearTimeout(timer)
    if (result === "timeout") return "timeout"
    pending = undefined
    if (result.done) {
      finished = true
      return "end"
    }
    buffer += decoder.decode(result.value, { stream: true })
    for (let newline = buffer.indexOf("\n"); newline >= 0; newline = buffer.indexOf("\n")) {
      const line = buffer.slice(0, newline)
      buffer = buffer.slice(newline + 1)
      if (line.trim() !== "") queue.push(JSON.parse(line) as WatchEvent)
    }
    return "data"
  }

  const describeQueue = () => JSON.stringify(summary(queue))

  return {
    response,
    next: async (count, timeoutMs = 5_000) => {
      const deadline = Date.now() + timeoutMs
      while (queue.length < count) {
        const outcome = await readOnce(deadline)
        if (outcome !== "data") {
          assert.fail(
            `expected ${count} watch events on ${path}, got ${queue.length} before ${outcome}: ${describeQueue()}`
          )
        }
      }
      return queue.splice(0, count)
    },
    until: async (predicate, timeoutMs = 5_000) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const index = queue.findIndex(predicate)
        if (index >= 0) return queue.splice(0, index + 1)
        const outcome = await readOnce(deadline)
        if (outcome !== "data") assert.fail(`no matching watch event on ${path} before ${outcome}: ${describeQueue()}`)
      }
    },
    ended: async (timeoutMs) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const outcome = await readOnce(deadline)
        if (outcome === "end") return true
        if (outcome === "timeout") return false
      }
    },
    close: async () => {
      controller.abort()
      await reader.cancel().catch(() => {})
    }
  }
}

/**
 * One GET over node:http with headers exactly as given, repeated names and Host included (fetch merges or forbids
 * them).
 */
export const rawRequest = (
  server: TestServer,
  path: string,
  headers: ReadonlyArray<readonly [string, string]>
): Promise<{ readonly status: number; readonly text: string }> =>
  new Promise((resolve, reject) => {
    const url = new URL(path, server.url)
    // Given as a raw list, headers go out exactly as listed: HTTP/1.1 needs a Host, so one is added when absent.
    const withHost = headers.some(([name]) => name.toLowerCase() === "host")
      ? headers
      : [["Host", url.host] as const, ...headers]
    const sent = http.request({
      host: url.hostname,
      port: url.port,
      path: `${url.pathname}${url.search}`,
      method: "GET",
      headers: withHost.flat() as Array<string>
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text }))
    })
    sent.on("error", reject)
    sent.end()
  })
