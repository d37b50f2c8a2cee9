/**
 * One API request with the spec's retry rules (spec: Errors, "Client retries are finite"; docs/clients.md, "Retries"),
 * the same rules as the Python client's:
 *
 * - a request is sent at most `1 + maxRetries` times;
 * - it is retried when the answer's registered code says a later retry can succeed (the registry's `retryable`), on
 *   429 and 503 without one, and when no answer came for a request that is safe to send again (GET, HEAD, PUT, DELETE,
 *   PATCH, and a create, which carries an Idempotency-Key kept across its retries);
 * - the wait is the server's Retry-After (seconds or an HTTP date), else `details.retryAfterSeconds`; a wait longer
 *   than `maxRetryWait` is not slept through: the error is raised at once, its `retryAfter` saying what the server
 *   asked. Without a hint the wait doubles from 0.5 s, with jitter.
 */
import { Cause, Clock, Effect, Queue, Random, Result, Stream } from "effect"
import { Agent as HttpAgent, type IncomingHttpHeaders, type IncomingMessage, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import type { ClientConfig } from "./Config.ts"
import { APIConnectionError, APITimeoutError, type ClientError, fromResponse, isRetryable, noAnswer } from "./Errors.ts"

const userAgent = "nodus-typescript/0.1"

/** Methods that are safe to send again when the outcome of the first try is unknown. */
const replayableMethods = new Set(["GET", "HEAD", "PUT", "DELETE", "PATCH"])

export type Query = Readonly<Record<string, string | number | boolean | undefined>>

export interface RequestOptions {
  readonly query?: Query
  /** Raw bytes or text, sent with `contentType` (default application/octet-stream). */
  readonly body?: Uint8Array | string
  /** A value sent as JSON (application/json unless `contentType` says another JSON type). */
  readonly json?: unknown
  readonly contentType?: string
  readonly headers?: Readonly<Record<string, string>>
  /** This request's timeout in milliseconds (default: the client's). */
  readonly timeoutMs?: number
  readonly idempotencyKey?: string
  /** Whether a request whose outcome is unknown may be sent again (default: the method's, or any keyed request). */
  readonly replayable?: boolean
}

/** A 2xx answer whose body is read as it arrives (a watch): `body` is read at most once. */
export interface StreamedResponse {
  readonly status: number
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>
  /** The body's bytes as they come; it fails with APIConnectionError when the connection breaks or stays silent. */
  readonly body: Stream.Stream<Uint8Array, APIConnectionError>
}

/** A 2xx answer. */
export interface Response {
  readonly status: number
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

const isRead = (reply: Response | StreamedResponse): reply is Response => reply.body instanceof Uint8Array

export const responseText = (response: Response) => Buffer.from(response.body).toString("utf8")

export const responseJson = (response: Response): any =>
  response.body.length === 0 ? undefined : JSON.parse(responseText(response))

const flatHeaders = (headers: IncomingHttpHeaders): Record<string, string> =>
  Object.fromEntries(
    Object.entries(headers).flatMap(([name, value]) =>
      value === undefined ? [] : [[name, Array.isArray(value) ? value.join(", ") : value]]
    )
  )

/** The wait the server asked for, in ms: Retry-After (seconds or an HTTP date), else details.retryAfterSeconds. */
const retryAfterMs = (headers: Readonly<Record<string, string>>, payload: unknown, now: number): number | undefined => {
  const header = headers["retry-after"]?.trim()
  if (header !== undefined && header !== "") {
    if (/^\d+$/u.test(header)) return Number(header) * 1000
    const when = Date.parse(header)
    if (!Number.isNaN(when)) return Math.max(0, when - now)
  }
  const details = (payload as { details?: { retryAfterSeconds?: unknown } } | undefined)?.details
  const seconds = typeof details === "object" && details !== null ? details.retryAfterSeconds : undefined
  return typeof seconds === "number" && seconds >= 0 ? seconds * 1000 : undefined
}

export interface Transport {
  readonly request: (method: string, path: string, options?: RequestOptions) => Effect.Effect<Response, ClientError>
  /**
   * The same request with the same retries, but a 2xx answer is handed over once its headers came, its body read as
   * it arrives; `options.timeoutMs` bounds the wait for the headers and then each silence of the body.
   */
  readonly stream: (
    method: string,
    path: string,
    options?: RequestOptions
  ) => Effect.Effect<StreamedResponse, ClientError>
  /** Closes the kept-alive connections. */
  readonly close: () => void
}

export const makeTransport = (config: ClientConfig): Transport => {
  const base = new URL(config.baseUrl)
  const https = base.protocol === "https:"
  const prefix = base.pathname.replace(/\/+$/u, "")
  // Connections are kept alive between requests: a warm call is one round trip, not a TLS handshake each.
  const agent = https
    ? new HttpsAgent({ keepAlive: true, ...(config.ca === undefined ? {} : { ca: config.ca }) })
    : new HttpAgent({ keepAlive: true })

  /** The body of a streamed answer, as it arrives; the connection is closed when the stream ends or is dropped. */
  const bodyOf = (
    reply: IncomingMessage,
    method: string,
    path: string,
    idleMs: number
  ): Stream.Stream<Uint8Array, APIConnectionError> =>
    Stream.callback<Uint8Array, APIConnectionError>((queue) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const broke = (why: string) =>
            Queue.failCauseUnsafe(
              queue,
              Cause.fail(noAnswer(APIConnectionError, `${method} ${path}: the answer broke off: ${why}`))
            )
          // A silent connection is taken for lost (a watch's server sends bookmarks well within this).
          reply.setTimeout(idleMs, () => reply.destroy(new Error(`nothing came for ${idleMs / 1000}s`)))
          reply.on("data", (chunk: Buffer) => Queue.offerUnsafe(queue, chunk))
          reply.on("error", (error) => broke(error.message))
          reply.on("end", () => Queue.endUnsafe(queue))
          reply.on("close", () => {
            if (!reply.complete) broke("the connection closed")
          })
        }),
        () => Effect.sync(() => reply.destroy())
      )
    )

  /** One try: the answer read whole, or (`streamed`) a 2xx answer handed over as its headers come. */
  const sendOnce = (
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Uint8Array | undefined,
    timeoutMs: number,
    streamed: boolean
  ) =>
    Effect.callback<Response | StreamedResponse, APIConnectionError>((resume) => {
      const url = new URL(prefix + path, base)
      const call = (https ? httpsRequest : httpRequest)(url, { method, headers, agent }, (reply) => {
        const status = reply.statusCode ?? 0
        if (streamed && status >= 200 && status < 300) {
          resume(
            Effect.succeed({
              status,
              headers: flatHeaders(reply.headers),
              body: bodyOf(reply, method, path, timeoutMs)
            })
          )
          return
        }
        const chunks: Array<Buffer> = []
        reply.on("data", (chunk: Buffer) => chunks.push(chunk))
        reply.on(
          "error",
          (error) =>
            resume(
              Effect.fail(noAnswer(APIConnectionError, `${method} ${path}: the answer broke off: ${error.message}`))
            )
        )
        reply.on(
          "end",
          () => resume(Effect.succeed({ status, headers: flatHeaders(reply.headers), body: Buffer.concat(chunks) }))
        )
      })
      call.on(
        "error",
        (error) =>
          resume(
            Effect.fail(
              noAnswer(APIConnectionError, `${method} ${path}: cannot reach ${config.baseUrl}: ${error.message}`)
            )
          )
      )
      call.end(body)
      return Effect.sync(() => call.destroy())
    }).pipe(Effect.timeoutOrElse({
      duration: timeoutMs,
      orElse: () => Effect.fail(noAnswer(APITimeoutError, `${method} ${path}: no answer within ${timeoutMs / 1000}s`))
    }))

  /** A request with the retries; with `streamed`, a 2xx answer is a StreamedResponse (any other is read whole). */
  const send = (
    method: string,
    path: string,
    options: RequestOptions,
    streamed: boolean
  ): Effect.Effect<Response | StreamedResponse, ClientError> => {
    const pairs = Object.entries(options.query ?? {}).flatMap(([name, value]) =>
      value === undefined ? [] : [[name, String(value)] as [string, string]]
    )
    const target = pairs.length === 0 ? path : `${path}?${new URLSearchParams(pairs).toString()}`
    const headers: Record<string, string> = {
      authorization: `Bearer ${config.token}`,
      accept: "application/json",
      "user-agent": userAgent
    }
    const body = options.json !== undefined
      ? Buffer.from(JSON.stringify(options.json))
      : typeof options.body === "string"
      ? Buffer.from(options.body)
      : options.body
    if (body !== undefined) {
      headers["content-type"] = options.contentType ??
        (options.json !== undefined ? "application/json" : "application/octet-stream")
    }
    if (options.idempotencyKey !== undefined) headers["idempotency-key"] = options.idempotencyKey
    Object.assign(headers, options.headers)
    const replayable = options.replayable ?? (replayableMethods.has(method) || options.idempotencyKey !== undefined)
    const timeoutMs = options.timeoutMs ?? config.timeoutMs

    const attempt = (tries: number): Effect.Effect<Response | StreamedResponse, ClientError> =>
      Effect.gen(function*() {
        const sent = yield* Effect.result(sendOnce(method, target, headers, body, timeoutMs, streamed))
        let failure: ClientError
        let waitMs: number | undefined
        if (Result.isFailure(sent)) {
          // No answer: the request may have been acted on; only a request safe to send twice goes again.
          failure = sent.failure
          if (!replayable) return yield* Effect.fail(failure)
        } else {
          const reply = sent.success
          if (reply.status >= 200 && reply.status < 300) return reply
          // Not 2xx: sendOnce read the body whole.
          if (!isRead(reply)) return yield* Effect.die(new Error("a refusal's body was not read"))
          let payload: unknown
          try {
            payload = responseJson(reply)
          } catch {
            payload = undefined
          }
          failure = fromResponse(reply.status, payload, reply.headers["x-request-id"])
          if (!isRetryable(failure.code, reply.status)) return yield* Effect.fail(failure)
          waitMs = retryAfterMs(reply.headers, payload, yield* Clock.currentTimeMillis)
        }
        if (tries >= config.maxRetries) return yield* Effect.fail(failure)
        if (waitMs === undefined) {
          // No hint: exponential backoff with jitter, within the same bound.
          waitMs = Math.min(config.maxRetryWaitMs, 500 * 2 ** tries) * (0.5 + (yield* Random.next) / 2)
        } else if (waitMs > config.maxRetryWaitMs) {
          // The server asked for longer than this client waits: say so now rather than sleep for it.
          return yield* Effect.fail(failure)
        }
        yield* Effect.sleep(waitMs)
        return yield* attempt(tries + 1)
      })
    return attempt(0)
  }

  return {
    // Unstreamed, every answer is read whole; streamed, every 2xx answer is a StreamedResponse.
    request: (method, path, options = {}) => send(method, path, options, false) as Effect.Effect<Response, ClientError>,
    stream: (method, path, options = {}) =>
      send(method, path, options, true) as Effect.Effect<StreamedResponse, ClientError>,
    close: () => agent.destroy()
  }
}
