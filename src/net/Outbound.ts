/**
 * Outbound connections made on someone's behalf (webhook deliveries, the node agent's `url` inputs, a box's egress
 * proxy): a name is resolved once, every address it resolves to must pass core/PublicAddress.ts `mayConnectTo`, and
 * the connection goes to an address that was checked — never to a second resolution of the name, so a name that
 * resolves elsewhere a moment later (DNS rebinding) reaches nothing new.
 *
 * Its own layer (docs/architecture.md) because both the runtime and the live backend make such connections, and
 * neither may import the other; it does I/O (DNS, the host's interfaces), so it cannot live in the pure core.
 */
import { lookup } from "node:dns/promises"
import type { LookupFunction } from "node:net"
import { networkInterfaces } from "node:os"
import { type ConnectRules, mayConnectTo, parseAddress } from "../core/PublicAddress.ts"

export interface ResolvedAddress {
  readonly address: string
  readonly family: number
}

export type Resolver = (host: string) => Promise<ReadonlyArray<ResolvedAddress>>

/** The system's resolver, every address in the order it gives them. */
export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true })

export type Resolution =
  /** Every address the name resolved to may be reached: connect to these. */
  | { readonly _tag: "Allowed"; readonly addresses: ReadonlyArray<ResolvedAddress> }
  /** The name (or literal) leads to an address that may not be reached. */
  | { readonly _tag: "Barred"; readonly host: string; readonly address: string }
  /** No address now (a DNS failure may pass). */
  | { readonly _tag: "Unresolved"; readonly host: string; readonly message: string }

/** A URL's or a request's host, without the brackets of an IPv6 literal. */
export const bareHost = (host: string): string => host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host

/** Resolves `host` (an IP literal is its own answer) and checks every address against `rules`. */
export const resolveChecked = async (
  host: string,
  rules: ConnectRules,
  resolve: Resolver = systemResolver
): Promise<Resolution> => {
  const name = bareHost(host)
  const literal = parseAddress(name)
  let found: ReadonlyArray<ResolvedAddress>
  try {
    found = literal === undefined ? await resolve(name) : [{ address: name, family: literal.family }]
  } catch (error) {
    return {
      _tag: "Unresolved",
      host: name,
      message: `${name} does not resolve (${error instanceof Error ? error.message : String(error)})`
    }
  }
  if (found.length === 0) return { _tag: "Unresolved", host: name, message: `${name} resolves to no address` }
  const barred = found.find((entry) => !mayConnectTo(entry.address, rules))
  return barred === undefined
    ? { _tag: "Allowed", addresses: found }
    : { _tag: "Barred", host: name, address: barred.address }
}

/** A `lookup` for http(s).request and net.connect that answers the checked address, whatever name it is asked. */
export const pinnedLookup = (pinned: ResolvedAddress): LookupFunction => (_host, options, callback) => {
  if (options.all === true) {
    ;(callback as (error: null, addresses: ReadonlyArray<ResolvedAddress>) => void)(null, [pinned])
  } else callback(null, pinned.address, pinned.family)
}

/** This host's own interface addresses: never reached on someone's behalf unless an operator says so. */
export const hostAddresses = (): ReadonlyArray<string> =>
  Object.values(networkInterfaces()).flatMap((entries) =>
    (entries ?? []).map((entry) => entry.address.replace(/%.*$/u, ""))
  )
