/**
 * Which IP addresses are public: the one answer every outbound connection a workload or the platform makes on someone's
 * behalf must agree on (egress proxies, webhook senders, the agent's `url` inputs), so that no name — whatever it
 * resolves to, DNS rebinding included — leads to the host, its network or a cloud's metadata service.
 *
 * Not public: unspecified, loopback, private (RFC 1918, unique local), shared (CGNAT), link-local (metadata
 * included), benchmarking, documentation, IETF protocol assignments, multicast, reserved and broadcast addresses;
 * and IPv6 forms that carry an IPv4 address — mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64
 * (64:ff9b::a.b.c.d), 6to4 (2002:AABB:CCDD::) — are judged by the IPv4 address they carry, while Teredo and local-use
 * NAT64, whose targets cannot be read safely, are never public. Pure: text in, a boolean out.
 */

type Parsed = { readonly family: 4; readonly value: number } | { readonly family: 6; readonly value: bigint }

const ipv4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/u

const parseIpv4 = (text: string): number | undefined =>
  ipv4.test(text) ? text.split(".").reduce((value, part) => value * 256 + Number(part), 0) : undefined

/** An IPv6 address as a 128-bit number: `::` compression and an IPv4 tail understood; a zone (`%eth0`) refused. */
const parseIpv6 = (text: string): bigint | undefined => {
  if (!/^[0-9a-fA-F:.]+$/u.test(text) || text.split("::").length > 2) return undefined
  const groupsOf = (part: string): Array<number> | undefined => {
    if (part === "") return []
    const groups: Array<number> = []
    const pieces = part.split(":")
    for (const [index, piece] of pieces.entries()) {
      if (index === pieces.length - 1 && piece.includes(".")) {
        const tail = parseIpv4(piece)
        if (tail === undefined) return undefined
        groups.push(Math.floor(tail / 65_536), tail % 65_536)
      } else if (/^[0-9a-fA-F]{1,4}$/u.test(piece)) groups.push(Number.parseInt(piece, 16))
      else return undefined
    }
    return groups
  }
  const [head, tail] = text.split("::") as [string, string | undefined]
  const left = groupsOf(head)
  const right = tail === undefined ? [] : groupsOf(tail)
  if (left === undefined || right === undefined) return undefined
  const missing = 8 - left.length - right.length
  if ((tail === undefined && missing !== 0) || (tail !== undefined && missing < 1)) return undefined
  const groups = [...left, ...new Array<number>(tail === undefined ? 0 : missing).fill(0), ...right]
  return groups.reduce((value, group) => (value << 16n) | BigInt(group), 0n)
}

export const parseAddress = (text: string): Parsed | undefined => {
  const v4 = parseIpv4(text)
  if (v4 !== undefined) return { family: 4, value: v4 }
  const v6 = parseIpv6(text)
  return v6 === undefined ? undefined : { family: 6, value: v6 }
}

const v4Range = (base: string, prefix: number) => ({ base: parseIpv4(base)!, size: 2 ** (32 - prefix) })

/** IPv4 ranges that are not public (IANA special-purpose registry). */
const v4NotPublic = [
  v4Range("0.0.0.0", 8),
  v4Range("10.0.0.0", 8),
  v4Range("100.64.0.0", 10),
  v4Range("127.0.0.0", 8),
  v4Range("169.254.0.0", 16),
  v4Range("172.16.0.0", 12),
  v4Range("192.0.0.0", 24),
  v4Range("192.0.2.0", 24),
  v4Range("192.88.99.0", 24),
  v4Range("192.168.0.0", 16),
  v4Range("198.18.0.0", 15),
  v4Range("198.51.100.0", 24),
  v4Range("203.0.113.0", 24),
  v4Range("224.0.0.0", 4),
  v4Range("240.0.0.0", 4)
]

const isPublicV4 = (value: number): boolean =>
  !v4NotPublic.some((range) => value >= range.base && value < range.base + range.size)

const v6Prefix = (text: string, prefix: number) => ({ base: parseIpv6(text)!, shift: BigInt(128 - prefix) })
const inPrefix = (value: bigint, range: { readonly base: bigint; readonly shift: bigint }) =>
  value >> range.shift === range.base >> range.shift

/** IPv6 ranges that are never public, whatever they carry. */
const v6NotPublic = [
  v6Prefix("::", 96), // unspecified, loopback, and the deprecated IPv4-compatible addresses
  v6Prefix("64:ff9b:1::", 48), // local-use NAT64
  v6Prefix("100::", 64), // discard
  v6Prefix("2001::", 32), // Teredo
  v6Prefix("2001:db8::", 32), // documentation
  v6Prefix("fc00::", 7), // unique local
  v6Prefix("fe80::", 10), // link-local
  v6Prefix("fec0::", 10), // site-local (deprecated)
  v6Prefix("ff00::", 8) // multicast
]
const mapped = v6Prefix("::ffff:0:0", 96)
const nat64 = v6Prefix("64:ff9b::", 96)
const sixToFour = v6Prefix("2002::", 16)

const isPublicV6 = (value: bigint): boolean => {
  if (inPrefix(value, mapped) || inPrefix(value, nat64)) return isPublicV4(Number(value & 0xffff_ffffn))
  if (inPrefix(value, sixToFour)) return isPublicV4(Number((value >> 80n) & 0xffff_ffffn))
  return !v6NotPublic.some((range) => inPrefix(value, range))
}

/** Whether `address` (an IP literal) is public; text that is no IP address is not. */
export const isPublicAddress = (address: string): boolean => {
  const parsed = parseAddress(address)
  if (parsed === undefined) return false
  return parsed.family === 4 ? isPublicV4(parsed.value) : isPublicV6(parsed.value)
}

/** Whether `address` is a loopback address (127.0.0.0/8, ::1, or either carried in IPv6). */
export const isLoopbackAddress = (address: string): boolean => {
  const parsed = parseAddress(address)
  if (parsed === undefined) return false
  const v4 = parsed.family === 4
    ? parsed.value
    : inPrefix(parsed.value, mapped)
    ? Number(parsed.value & 0xffff_ffffn)
    : undefined
  if (v4 !== undefined) return v4 >= parseIpv4("127.0.0.0")! && v4 < parseIpv4("128.0.0.0")!
  return parsed.value === 1n
}

/** A range of addresses in CIDR notation (`127.0.0.1/32`, `fd00::/8`): an operator's exception to the rule. */
export interface AddressRange {
  readonly family: 4 | 6
  readonly base: bigint
  readonly prefix: number
}

/** `address/prefix`, or a bare address (a range of one); undefined for anything else. */
export const parseRange = (text: string): AddressRange | undefined => {
  const [address, prefixText, ...rest] = text.trim().split("/")
  if (address === undefined || rest.length > 0) return undefined
  const parsed = parseAddress(address)
  if (parsed === undefined) return undefined
  const bits = parsed.family === 4 ? 32 : 128
  if (prefixText !== undefined && !/^\d{1,3}$/u.test(prefixText)) return undefined
  const prefix = prefixText === undefined ? bits : Number(prefixText)
  if (prefix > bits) return undefined
  return { family: parsed.family, base: BigInt(parsed.value), prefix }
}

/** Loopback in both families: what the development switches (`--webhook-allow-loopback`) let through. */
export const loopbackRanges: ReadonlyArray<AddressRange> = [parseRange("127.0.0.0/8")!, parseRange("::1/128")!]

/** An address as compared with ranges and with the host's own: an IPv6-mapped IPv4 address is its IPv4 address. */
const canonical = (address: string): { readonly family: 4 | 6; readonly value: bigint } | undefined => {
  const parsed = parseAddress(address)
  if (parsed === undefined) return undefined
  if (parsed.family === 6 && inPrefix(parsed.value, mapped)) return { family: 4, value: parsed.value & 0xffff_ffffn }
  return { family: parsed.family, value: BigInt(parsed.value) }
}

/** Whether `address` lies in `range`. */
export const inRange = (address: string, range: AddressRange): boolean => {
  const value = canonical(address)
  if (value === undefined || value.family !== range.family) return false
  const shift = BigInt((range.family === 4 ? 32 : 128) - range.prefix)
  return value.value >> shift === range.base >> shift
}

/**
 * What a connection made on someone's behalf may reach besides the public rule: the ranges an operator named
 * (`--egress-allow-cidr`, or loopback under a development switch), which win over every other rule; and the host's
 * own addresses, which are never reached otherwise even when public (a host service listening on all interfaces).
 */
export interface ConnectRules {
  readonly exceptions: ReadonlyArray<AddressRange>
  readonly own?: ReadonlyArray<string> | undefined
}

/** No exception: public addresses only. */
export const publicOnly: ConnectRules = { exceptions: [] }

/** Whether a connection made on someone's behalf may go to `address` (an IP literal). */
export const mayConnectTo = (address: string, rules: ConnectRules): boolean => {
  if (rules.exceptions.some((range) => inRange(address, range))) return true
  if (!isPublicAddress(address)) return false
  const value = canonical(address)!
  return !(rules.own ?? []).some((own) => {
    const ownValue = canonical(own)
    return ownValue !== undefined && ownValue.family === value.family && ownValue.value === value.value
  })
}
