/**
 * One attempt of a webhook delivery over the network (spec: Events — retry rules 1-3): a POST that waits at most 15 s
 * for the answer and follows no redirect, to an address checked after DNS resolution. Every address the name resolves
 * to must be public (core/PublicAddress.ts: no private, loopback, link-local or metadata address, nor an IPv6 form of
 * one), checked again on every attempt, and the connection goes to the address that was checked — so a name that
 * resolves elsewhere a moment later (DNS rebinding) reaches nothing new. A URL it may not connect to is refused before
 * anything is sent, and that is final: the delivery fails at once.
 *
 * The development switch (`--webhook-allow-loopback`) lets receivers on loopback take deliveries, over http or over
 * https with any certificate; nothing else changes (docs/webhooks.md, "Development").
 */
import { Agent as HttpAgent, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import * as Limits from "../core/Limits.ts"
import { isLoopbackAddress, loopbackRanges, publicOnly } from "../core/PublicAddress.ts"
import { pinnedLookup, resolveChecked, type Resolver } from "../net/Outbound.ts"

export interface AttemptRequest {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export type AttemptResult =
  /** The receiver answered (any status). */
  | { readonly _tag: "Answered"; readonly status: number; readonly durationMs: number }
  /** No answer: a timeout or a connection error (tried again later). */
  | { readonly _tag: "NoAnswer"; readonly message: string; readonly durationMs: number }
  /** The URL may not be connected to (tried never again). */
  | { readonly _tag: "Refused"; readonly message: string }

export type { Resolver }

export interface TransportOptions {
  /** Development only: receivers on loopback, with any certificate. */
  readonly allowLoopback: boolean
  /** Name resolution (tests stub it); the system's resolver otherwise. */
  readonly resolve?: Resolver | undefined
  readonly timeoutMs?: number | undefined
}

/** Connections are kept for the next delivery to the same receiver (a receiver of many events takes them fast). */
const agents = {
  https: new HttpsAgent({ keepAlive: true, maxSockets: 64 }),
  http: new HttpAgent({ keepAlive: true, maxSockets: 64 })
}

export const makeTransport = (options: TransportOptions) => {
  const timeoutMs = options.timeoutMs ?? Limits.webhookResponseWaitMs
  const rules = options.allowLoopback ? { exceptions: loopbackRanges } : publicOnly

  const send = async (attempt: AttemptRequest): Promise<AttemptResult> => {
    const url = new URL(attempt.url)
    const started = performance.now()
    const elapsed = () => Math.round(performance.now() - started)
    const resolution = await resolveChecked(url.hostname, rules, options.resolve)
    if (resolution._tag === "Barred") {
      return {
        _tag: "Refused",
        message:
          `the receiver ${resolution.host} resolves to ${resolution.address}, which is not a public address; webhooks are delivered to public addresses only`
      }
    }
    if (resolution._tag === "Unresolved") {
      return { _tag: "NoAnswer", message: `the receiver's name ${resolution.message}`, durationMs: elapsed() }
    }
    const { addresses } = resolution
    const loopback = addresses.every((entry) => isLoopbackAddress(entry.address))
    const https = url.protocol === "https:"
    if (!https && !(url.protocol === "http:" && loopback && options.allowLoopback)) {
      return {
        _tag: "Refused",
        message:
          `the receiver URL must be https (http is for receivers on loopback, in development), not ${url.protocol}`
      }
    }
    return new Promise<AttemptResult>((done) => {
      const post = (https ? httpsRequest : httpRequest)(url, {
        method: "POST",
        headers: {
          ...attempt.headers,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(attempt.body),
          "user-agent": "nodus-webhooks/1"
        },
        agent: https ? agents.https : agents.http,
        // The connection goes to the address checked above, never to a second resolution of the name.
        lookup: pinnedLookup(addresses[0]!),
        ...(https && loopback && options.allowLoopback ? { rejectUnauthorized: false } : {})
      }, (response) => {
        // The body is not read for anything; it is drained so that the connection can be used again.
        response.resume()
        response.on("end", () => done({ _tag: "Answered", status: response.statusCode ?? 0, durationMs: elapsed() }))
        response.on("error", (error) => done({ _tag: "NoAnswer", message: error.message, durationMs: elapsed() }))
      })
      const timer = setTimeout(() => post.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs)
      post.on("close", () => clearTimeout(timer))
      post.on("error", (error) => done({ _tag: "NoAnswer", message: error.message, durationMs: elapsed() }))
      post.end(attempt.body)
    })
  }

  return { send }
}

export type Transport = ReturnType<typeof makeTransport>
