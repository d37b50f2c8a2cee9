/**
 * The SOCKS5 handshake (RFC 1928) that the egress proxy (EgressProxy.ts) speaks besides HTTP, so that a program can
 * tunnel raw TCP through it with `ALL_PROXY=socks5h://127.0.0.1:3128`: no authentication, CONNECT only, to an IPv4,
 * IPv6 or domain-name target (a name the proxy resolves and checks, as it does an HTTP CONNECT's). Pure: bytes in, what
 * they ask and what to answer out.
 */

export type Parsed<T> =
  /** Not all of the message is in yet. */
  | { readonly _tag: "More" }
  | { readonly _tag: "Done"; readonly value: T; readonly rest: Buffer }
  /** The request cannot be served: answer `reply`, then close. */
  | { readonly _tag: "Bad"; readonly reply: Buffer; readonly why: string }

/** The first byte of every SOCKS5 message from a client (an HTTP request starts with a letter). */
export const version = 5

/** A reply's codes (RFC 1928, section 6). */
export const replyCodes = {
  succeeded: 0,
  notAllowed: 2,
  hostUnreachable: 4,
  commandNotSupported: 7,
  addressNotSupported: 8
} as const

/** A reply to a request: the bound address is not told (zeros), as clients ignore it for CONNECT. */
export const reply = (code: number): Buffer => Buffer.from([version, code, 0, 1, 0, 0, 0, 0, 0, 0])

const noAuthentication = 0
const noAcceptableMethod = 0xff

/** The greeting: version, the count of methods, the methods; the answer chooses "no authentication". */
export const parseGreeting = (bytes: Buffer): Parsed<Buffer> => {
  if (bytes.length < 2) return { _tag: "More" }
  const end = 2 + bytes[1]!
  if (bytes.length < end) return { _tag: "More" }
  if (!bytes.subarray(2, end).includes(noAuthentication)) {
    return {
      _tag: "Bad",
      reply: Buffer.from([version, noAcceptableMethod]),
      why: "a SOCKS5 client that offers no method without authentication"
    }
  }
  return { _tag: "Done", value: Buffer.from([version, noAuthentication]), rest: bytes.subarray(end) }
}

const connectCommand = 1
const addressTypes = { ipv4: 1, domain: 3, ipv6: 4 } as const

/** A request: version, command, reserved, the address type, the address, the port. */
export const parseRequest = (bytes: Buffer): Parsed<{ readonly host: string; readonly port: number }> => {
  if (bytes.length < 5) return { _tag: "More" }
  const type = bytes[3]!
  const addressEnd = type === addressTypes.ipv4
    ? 8
    : type === addressTypes.ipv6
    ? 20
    : type === addressTypes.domain
    ? 5 + bytes[4]!
    : undefined
  if (addressEnd === undefined) {
    return { _tag: "Bad", reply: reply(replyCodes.addressNotSupported), why: `a SOCKS5 address of type ${type}` }
  }
  if (bytes.length < addressEnd + 2) return { _tag: "More" }
  if (bytes[1] !== connectCommand) {
    return {
      _tag: "Bad",
      reply: reply(replyCodes.commandNotSupported),
      why: "a SOCKS5 command other than CONNECT (no BIND, no UDP)"
    }
  }
  const address = bytes.subarray(type === addressTypes.domain ? 5 : 4, addressEnd)
  const host = type === addressTypes.ipv4
    ? [...address].join(".")
    : type === addressTypes.ipv6
    ? Array.from({ length: 8 }, (_, group) => address.readUInt16BE(group * 2).toString(16)).join(":")
    : address.toString("latin1")
  return { _tag: "Done", value: { host, port: bytes.readUInt16BE(addressEnd) }, rest: bytes.subarray(addressEnd + 2) }
}
