/**
 * A Job's `url` input, read by the node agent on its host (spec: JobInput; docs/live.md, "Inputs"). The host is not
 * the box: what it may reach is what a box's egress proxy may (net/Outbound.ts over core/PublicAddress.ts) — public
 * addresses that are not the host's own, and an operator's `--egress-allow-cidr` ranges — checked after DNS on the
 * URL and on every redirect, the connection pinned to the address checked. A failure says only its class ("address
 * not allowed", "connection failed", "TLS error", "HTTP 404", "timed out"), never what the socket said, so that an
 * input cannot tell an open port from a closed one.
 */
import type { IncomingMessage } from "node:http"
import { get as httpsGet } from "node:https"
import { rootCertificates } from "node:tls"
import type { ConnectRules } from "../../core/PublicAddress.ts"
import { pinnedLookup, resolveChecked } from "../../net/Outbound.ts"

/** How many redirects a URL may take before its body (each checked as the URL itself). */
const redirectsMax = 5
/** The longest the host waits for a byte of the answer. */
const idleTimeoutMs = 60_000

/** A fetch that failed, by class: its message is the whole of what the Job is told. */
export class FetchFailed extends Error {}

export interface FetchOptions {
  readonly rules: ConnectRules
  /** CA certificates (PEM) trusted besides the system's (a host behind a TLS-inspecting proxy; tests). */
  readonly extraCa?: string | undefined
}

/** The body of an https URL, after its redirects; rejects with FetchFailed. */
export const fetchInput = async (url: string, options: FetchOptions): Promise<AsyncIterable<Uint8Array>> => {
  let current = url
  for (let redirects = 0;; redirects++) {
    const response = await getOnce(current, options)
    const status = response.statusCode ?? 0
    if (status === 200) return guarded(response)
    response.resume()
    const location = response.headers.location
    if (status < 300 || status > 399 || location === undefined) throw new FetchFailed(`HTTP ${status}`)
    if (redirects === redirectsMax) throw new FetchFailed(`more than ${redirectsMax} redirects`)
    current = new URL(location, current).toString()
  }
}

/** `could not fetch <url>: <class>`, whatever went wrong (a write error on the host's side included). */
export const fetchProblem = (url: string, error: unknown): string =>
  `could not fetch ${url}: ${error instanceof FetchFailed ? error.message : classOf(error)}`

const getOnce = async (url: string, options: FetchOptions): Promise<IncomingMessage> => {
  if (!url.startsWith("https://") || !URL.canParse(url)) throw new FetchFailed("not an https URL (only https is read)")
  const resolution = await resolveChecked(new URL(url).hostname, options.rules)
  if (resolution._tag === "Barred") throw new FetchFailed("address not allowed")
  if (resolution._tag === "Unresolved") throw new FetchFailed("name does not resolve")
  const ca = options.extraCa === undefined ? undefined : [...rootCertificates, options.extraCa]
  return new Promise((resolve, reject) => {
    const call = httpsGet(url, {
      timeout: idleTimeoutMs,
      lookup: pinnedLookup(resolution.addresses[0]!),
      ...(ca === undefined ? {} : { ca })
    }, resolve)
    call.on("timeout", () => call.destroy(new FetchFailed("timed out")))
    call.on("error", (error) => reject(error instanceof FetchFailed ? error : new FetchFailed(classOf(error))))
  })
}

/** The body, its errors told by class too. */
async function* guarded(response: IncomingMessage): AsyncIterable<Uint8Array> {
  response.setTimeout(idleTimeoutMs, () => response.destroy(new FetchFailed("timed out")))
  try {
    for await (const chunk of response) yield chunk as Uint8Array
  } catch (error) {
    throw error instanceof FetchFailed ? error : new FetchFailed(classOf(error))
  }
}

/** Certificate problems: the peer spoke TLS, and was not trusted. */
const tlsCodes = /^(CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|ERR_TLS_CERT_|HOSTNAME_MISMATCH)/u

/**
 * The class of a socket error. Everything that happens before a TLS session — a refused or reset connection, a peer
 * that closes or does not speak TLS — is one class, so that an open port and a closed one read the same.
 */
const classOf = (error: unknown): string => {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (tlsCodes.test(code)) return "TLS error"
  if (code === "ETIMEDOUT") return "timed out"
  return "connection failed"
}
