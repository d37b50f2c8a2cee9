/**
 * A Sandbox's box through any server of a shared database (docs/scale-out.md, "Local hosts"): each local-backend
 * server runs its own host, and a box runs on one of them. A request for a box this server's host does not run goes,
 * over HTTP, to the server whose host does: `POST /agent/v1/box` with that server's peer key as the bearer credential.
 * Every server says where it answers in the store (record `nodus-local-hosts`, one per offering of its host: its URL,
 * its peer key, the certificate it serves, for TLS, and its host's Node and capacity), written on its beat, so the
 * others find it by the offering the box's Attempt names, and know that offering's rates when they take over an object
 * whose run was there.
 */
import { Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { request as httpRequest } from "node:http"
import { request as httpsRequest } from "node:https"
import type { HostCapacity } from "../backends/live/Protocol.ts"
import type { AttemptFacts } from "../core/capacity/Capacity.ts"
import type { Offering } from "../core/capacity/Offering.ts"
import { nodeOfferings } from "../core/capacity/PoolOffering.ts"
import { isObject, type Json } from "../core/Json.ts"
import type { BoxReply, BoxRequest } from "../core/SandboxBox.ts"
import type { Store } from "../store/Store.ts"

export const hostsTable = "nodus-local-hosts"

/** How long a request to the other server may take beyond the box's own wait (a command's timeout). */
const forwardSlackMs = 60_000

interface HostRecord {
  readonly url: string
  readonly key: string
  readonly ca: string | undefined
}

const recordOf = (value: Json | undefined): HostRecord | undefined =>
  isObject(value) && typeof value["url"] === "string" && typeof value["key"] === "string"
    ? { url: value["url"], key: value["key"], ca: typeof value["ca"] === "string" ? value["ca"] : undefined }
    : undefined

/** The body of a forwarded call, checked by the server that takes it. */
export interface ForwardedCall {
  readonly owner: string
  readonly attempt: string
  readonly request: BoxRequest
}

export const forwardedCallOf = (body: Json): ForwardedCall | undefined =>
  isObject(body) && typeof body["owner"] === "string" && typeof body["attempt"] === "string" &&
    isObject(body["request"]) && typeof body["request"]["_tag"] === "string"
    ? body as unknown as ForwardedCall
    : undefined

/** What a server that took an object asks of its run left on this server's host (docs/scale-out.md, "Local hosts"). */
export interface PeerRunCall {
  readonly op: "facts" | "release" | "checkpoint"
  readonly owner: string
  readonly attempt: string
  readonly episode?: number | undefined
}

export const peerRunCallOf = (body: Json): PeerRunCall | undefined =>
  isObject(body) && (body["op"] === "facts" || body["op"] === "release" || body["op"] === "checkpoint") &&
    typeof body["owner"] === "string" && typeof body["attempt"] === "string"
    ? body as unknown as PeerRunCall
    : undefined

/** A run's facts as they cross between servers: without the variant (each server has its own copy of the offering). */
export type PeerFacts = Omit<AttemptFacts, "variant">

export const factsJson = (facts: AttemptFacts | undefined): Json => {
  if (facts === undefined) return {}
  const { variant: _variant, ...rest } = facts
  return { facts: JSON.parse(JSON.stringify(rest)) as Json }
}

/** What the box's wait is, for the forward's own timeout. */
const waitOf = (request: BoxRequest): number =>
  request._tag === "Exec"
    ? (request.timeoutMs ?? 0)
    : request._tag === "Output"
    ? request.waitMs
    : request._tag === "Call"
    ? request.timeoutMs
    : 0

const post = (record: HostRecord, body: string, timeoutMs: number, path = "/agent/v1/box") =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const url = new URL(path, record.url)
    const send = url.protocol === "https:" ? httpsRequest : httpRequest
    const outgoing = send(url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${record.key}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body)
      },
      timeout: timeoutMs,
      ...(url.protocol === "https:" && record.ca !== undefined ? { ca: record.ca } : {})
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on(
        "end",
        () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") })
      )
      response.on("error", reject)
    })
    outgoing.on("timeout", () => outgoing.destroy(new Error("no answer in time")))
    outgoing.on("error", reject)
    outgoing.end(body)
  })

export interface ForwardingParts {
  readonly store: Store["Service"]
  /** This server's URL now (known once it listens). */
  readonly url: () => string
  /** The CA of the certificate this server serves (PEM), when it serves TLS: the others trust it for their calls. */
  readonly ca: string | undefined
  /** The offerings of this server's own host. */
  readonly offerings: () => ReadonlyArray<string>
  /** This server's host: its Node's name and measured capacity, for the others' records of its runs. */
  readonly host: () => { readonly node: string; readonly capacity: HostCapacity } | undefined
}

export const makeForwarding = (parts: ForwardingParts) => {
  /** The key another server must show to reach this one's boxes: this process's own, never stored elsewhere. */
  const key = randomBytes(32).toString("base64url")
  let written = ""
  /** The other servers' hosts' offerings, as last read from the store. */
  let peers: ReadonlyArray<Offering> = []

  /** The others' records: the offerings of their hosts, so Attempts that ran there are read with their rates. */
  const readPeers = Effect.suspend(() => parts.store.records(hostsTable, "", 1_000, Date.now())).pipe(
    Effect.map((entries) => {
      const own = new Set(parts.offerings())
      const hosts = new Map<string, HostCapacity>()
      for (const entry of entries) {
        const value = entry.value
        if (
          own.has(entry.id) || !isObject(value) || typeof value["node"] !== "string" || !isObject(value["capacity"])
        ) continue
        hosts.set(value["node"], value["capacity"] as unknown as HostCapacity)
      }
      // Every server's own host is in the Pool `local` (LiveBackend.ts).
      peers = [...hosts].flatMap(([node, capacity]) => nodeOfferings({ pool: "local", node, ...capacity }))
    }),
    Effect.catch((error) => Effect.logWarning(`local backend: reading the other servers' hosts: ${error.message}`))
  )

  /** Says in the store where this server answers, when that changed (on the backend's beat). */
  const announce = Effect.suspend(() => {
    const host = parts.host()
    const value = {
      url: parts.url(),
      key,
      ...(parts.ca === undefined ? {} : { ca: parts.ca }),
      ...(host === undefined ? {} : { node: host.node, capacity: host.capacity as unknown as Json })
    }
    const text = JSON.stringify([value, parts.offerings()])
    if (text === written) return readPeers
    return parts.store.commit(
      parts.offerings().map((id) => ({ _tag: "PutRecord" as const, table: hostsTable, id, value }))
    ).pipe(
      Effect.tap(() => Effect.sync(() => (written = text))),
      Effect.catch((error) => Effect.logWarning(`local backend: saying where this server answers: ${error.message}`)),
      Effect.andThen(readPeers)
    )
  })

  /** The offering the box's Attempt ran on (its host's), from the store. */
  const offeringOf = (owner: string, attempt: string) =>
    parts.store.dependentsOf(owner).pipe(
      Effect.map((dependents) => {
        const found = dependents.find((object) => object.kind === "Attempt" && object.metadata.name === attempt)
        const offering = isObject(found?.status) ? found.status["offering"] : undefined
        return typeof offering === "string" ? offering : undefined
      }),
      Effect.orElseSucceed(() => undefined)
    )

  /** The server whose host sells `offering`, when it is another's. */
  const hostOf = (offering: string) =>
    Effect.gen(function*() {
      if (parts.offerings().includes(offering)) return undefined
      const found = yield* parts.store.getRecord(hostsTable, offering, Date.now()).pipe(
        Effect.orElseSucceed(() => Option.none())
      )
      return recordOf(Option.getOrUndefined(found))
    })

  /**
   * The call sent to the server whose host runs the box; undefined when the box is not on another server's host (this
   * server's answer stands).
   */
  const forward = (owner: string, attempt: string, request: BoxRequest): Effect.Effect<BoxReply | undefined> =>
    Effect.gen(function*() {
      const offering = yield* offeringOf(owner, attempt)
      const record = offering === undefined ? undefined : yield* hostOf(offering)
      if (offering === undefined || record === undefined) return undefined
      const body = JSON.stringify({ owner, attempt, request } satisfies ForwardedCall)
      const answer = yield* Effect.tryPromise(() => post(record, body, waitOf(request) + forwardSlackMs)).pipe(
        Effect.orElseSucceed(() => undefined)
      )
      const unavailable: BoxReply = {
        _tag: "Refused",
        code: "Unavailable",
        message: `the server whose host (${offering}) runs the box did not answer`
      }
      if (answer === undefined || answer.status !== 200) return unavailable
      return yield* Effect.try(() => JSON.parse(answer.text) as BoxReply).pipe(Effect.orElseSucceed(() => unavailable))
    })

  /**
   * Asks the server whose host sells `offering` about a run there: its facts (undefined: it does not know the run), or
   * "Unreachable" when no server answers for that host.
   */
  const peerRun = (offering: string, call: PeerRunCall): Effect.Effect<PeerFacts | undefined | "Unreachable"> =>
    Effect.gen(function*() {
      const record = yield* hostOf(offering)
      if (record === undefined) return "Unreachable" as const
      const answer = yield* Effect.tryPromise(() => post(record, JSON.stringify(call), 10_000, "/agent/v1/run")).pipe(
        Effect.orElseSucceed(() => undefined)
      )
      if (answer === undefined || answer.status !== 200) return "Unreachable" as const
      const parsed = yield* Effect.try(() => JSON.parse(answer.text) as { readonly facts?: PeerFacts }).pipe(
        Effect.orElseSucceed(() => undefined)
      )
      return parsed === undefined ? "Unreachable" as const : parsed.facts
    })

  return {
    key,
    announce,
    forward,
    peers: () => peers,
    peerRun,
    isPeer: (offering: string) => !parts.offerings().includes(offering)
  }
}
