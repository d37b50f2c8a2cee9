// A minimal ASN.1 DER encoder (ITU-T X.690), just enough to build X.509 certificates.
//
// Node can parse and verify certificates but cannot create them, and nodus takes no npm
// dependency for that, so this module writes the bytes itself. Every function is a pure
// leaf that returns one complete TLV element (tag, length, contents) as a Buffer; composite
// values are built by passing those elements to `sequence`, `set` or `explicit`.
//
// Go's crypto/x509 (kubectl) rejects BER that is not DER, so the distinguished-encoding
// rules matter here: lengths use the shortest form, integers carry no redundant leading
// octets, BOOLEAN TRUE is 0xff, SET OF components are sorted and named bit strings drop
// their trailing zero bits.

/** Tag class bits of the identifier octet (X.690 section 8.1.2.2). */
const universalClass = 0x00
const contextSpecificClass = 0x80

/** The "constructed" bit of the identifier octet (X.690 section 8.1.2.5). */
const constructedBit = 0x20

/** Universal tag numbers used by X.509 (X.680 section 8.4). */
const universalTag = {
  boolean: 1,
  integer: 2,
  bitString: 3,
  octetString: 4,
  null: 5,
  objectIdentifier: 6,
  utf8String: 12,
  sequence: 16,
  set: 17,
  printableString: 19,
  utcTime: 23,
  generalizedTime: 24
} as const

/**
 * Encodes a non-negative integer as base-128 digits, most significant first, with the high
 * bit set on every digit except the last. Object identifier arcs and high tag numbers share
 * this form (X.690 sections 8.1.2.4.2 and 8.19.2).
 */
const base128 = (value: bigint): Array<number> => {
  const digits = [Number(value & 0x7fn)]
  for (let rest = value >> 7n; rest > 0n; rest >>= 7n) {
    digits.unshift(Number(rest & 0x7fn) | 0x80)
  }
  return digits
}

/**
 * Encodes the identifier octets for a tag. Tag numbers up to 30 fit in the low five bits;
 * larger ones use the high-tag-number form (X.690 section 8.1.2.4).
 */
const identifier = (tagClass: number, constructed: boolean, tagNumber: number): Array<number> => {
  if (!Number.isSafeInteger(tagNumber) || tagNumber < 0) {
    throw new RangeError(`DER tag number must be a non-negative integer, got ${tagNumber}`)
  }
  const leading = tagClass | (constructed ? constructedBit : 0)
  if (tagNumber <= 30) {
    return [leading | tagNumber]
  }
  return [leading | 0x1f, ...base128(BigInt(tagNumber))]
}

/**
 * Encodes a content length in the definite form DER requires (X.690 section 10.1): one
 * octet below 128, otherwise 0x80 plus the count of length octets followed by the length
 * in the fewest big-endian octets.
 */
export const encodeLength = (length: number): Buffer => {
  if (!Number.isSafeInteger(length) || length < 0) {
    throw new RangeError(`DER length must be a non-negative integer, got ${length}`)
  }
  if (length < 0x80) {
    return Buffer.from([length])
  }
  const octets: Array<number> = []
  for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) {
    octets.unshift(rest % 256)
  }
  return Buffer.from([0x80 | octets.length, ...octets])
}

/** Assembles one TLV element from its identifier octets and contents. */
const element = (identifierOctets: ReadonlyArray<number>, contents: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(identifierOctets), encodeLength(contents.length), contents])

/** Assembles a universal-class element with the given tag number. */
const universal = (tagNumber: number, constructed: boolean, contents: Uint8Array): Buffer =>
  element(identifier(universalClass, constructed, tagNumber), contents)

/**
 * Encodes a SEQUENCE (or SEQUENCE OF) whose contents are the given already-encoded
 * elements, in the order given.
 */
export const sequence = (elements: ReadonlyArray<Uint8Array>): Buffer =>
  universal(universalTag.sequence, true, Buffer.concat(elements))

/**
 * Encodes a SET OF whose contents are the given already-encoded elements. DER requires the
 * components in ascending order of their encodings (X.690 section 11.6), so they are sorted
 * here; `Buffer.compare` orders a proper prefix first, which matches the rule of padding
 * the shorter encoding with trailing zero octets.
 */
export const set = (elements: ReadonlyArray<Uint8Array>): Buffer => {
  const sorted = [...elements].sort((left, right) => Buffer.compare(left, right))
  return universal(universalTag.set, true, Buffer.concat(sorted))
}

/**
 * Returns the minimal two's-complement big-endian octets of an integer (X.690 section
 * 8.3.2): positive values get a leading zero octet only when their top bit is set, and
 * negative values keep just enough octets for the sign bit.
 */
const twosComplement = (value: bigint): Buffer => {
  let octetCount = 1
  while (value < -(1n << BigInt(octetCount * 8 - 1)) || value >= 1n << BigInt(octetCount * 8 - 1)) {
    octetCount += 1
  }
  const unsigned = value < 0n ? (1n << BigInt(octetCount * 8)) + value : value
  return Buffer.from(unsigned.toString(16).padStart(octetCount * 2, "0"), "hex")
}

/**
 * Strips redundant leading zero octets from an unsigned big-endian magnitude and prepends
 * a single zero octet when the top bit is set, so the value reads as positive.
 */
const unsignedMagnitude = (magnitude: Uint8Array): Buffer => {
  let start = 0
  while (start < magnitude.length - 1 && magnitude[start] === 0) {
    start += 1
  }
  const trimmed = Buffer.from(magnitude.subarray(start))
  if (trimmed.length === 0) {
    return Buffer.from([0])
  }
  return (trimmed[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed
}

/**
 * Encodes an INTEGER. A bigint may be negative; a byte array is read as an unsigned
 * big-endian magnitude (the form of certificate serial numbers and key material). Either
 * way the contents use the fewest octets, which Go's parser insists on.
 */
export const integer = (value: bigint | Uint8Array): Buffer =>
  universal(universalTag.integer, false, typeof value === "bigint" ? twosComplement(value) : unsignedMagnitude(value))

/** Parses one dotted object identifier arc, rejecting anything but decimal digits. */
const parseArc = (arc: string, dotted: string): bigint => {
  if (!/^(0|[1-9][0-9]*)$/.test(arc)) {
    throw new RangeError(`Malformed object identifier "${dotted}"`)
  }
  return BigInt(arc)
}

/**
 * Encodes an OBJECT IDENTIFIER from dotted-decimal notation such as "1.2.840.10045.4.3.2".
 * The first two arcs share one subidentifier, 40 × first + second (X.690 section 8.19.4),
 * and every subidentifier is written in base 128.
 */
export const objectIdentifier = (dotted: string): Buffer => {
  const arcs = dotted.split(".").map((arc) => parseArc(arc, dotted))
  const [first, second, ...rest] = arcs
  if (first === undefined || second === undefined || first > 2n || (first < 2n && second > 39n)) {
    throw new RangeError(`Malformed object identifier "${dotted}"`)
  }
  const subidentifiers = [first * 40n + second, ...rest]
  return universal(universalTag.objectIdentifier, false, Buffer.from(subidentifiers.flatMap(base128)))
}

/** Encodes a UTF8String, the string type RFC 5280 section 4.1.2.4 prescribes for names. */
export const utf8String = (value: string): Buffer =>
  universal(universalTag.utf8String, false, Buffer.from(value, "utf8"))

/** The PrintableString alphabet (X.680 section 41.4). */
const printableAlphabet = /^[A-Za-z0-9 '()+,\-./:=?]*$/

/**
 * Encodes a PrintableString, rejecting characters outside its restricted alphabet because
 * strict parsers refuse such a certificate outright.
 */
export const printableString = (value: string): Buffer => {
  if (!printableAlphabet.test(value)) {
    throw new RangeError(`"${value}" contains characters a PrintableString cannot hold`)
  }
  return universal(universalTag.printableString, false, Buffer.from(value, "latin1"))
}

/** Formats a number as a fixed-width decimal with leading zeros. */
const digits = (value: number, width: number): string => String(value).padStart(width, "0")

/**
 * Formats month, day, hour, minute and second of a date in UTC followed by "Z". RFC 5280
 * sections 4.1.2.5.1 and 4.1.2.5.2 require seconds, Zulu time and no fractional seconds, so
 * milliseconds are dropped.
 */
const timeOfYear = (date: Date): string =>
  digits(date.getUTCMonth() + 1, 2) +
  digits(date.getUTCDate(), 2) +
  digits(date.getUTCHours(), 2) +
  digits(date.getUTCMinutes(), 2) +
  digits(date.getUTCSeconds(), 2) +
  "Z"

/** Rejects an invalid Date before it turns into "NaN" digits. */
const requireValidDate = (date: Date): void => {
  if (Number.isNaN(date.getTime())) {
    throw new RangeError("Cannot encode an invalid Date")
  }
}

/**
 * Encodes a UTCTime, YYMMDDHHMMSSZ. Two-digit years cover only 1950 to 2049 (RFC 5280
 * section 4.1.2.5.1), so other years are refused rather than silently wrapped.
 */
export const utcTime = (date: Date): Buffer => {
  requireValidDate(date)
  const year = date.getUTCFullYear()
  if (year < 1950 || year > 2049) {
    throw new RangeError(`UTCTime cannot represent the year ${year}`)
  }
  return universal(universalTag.utcTime, false, Buffer.from(digits(year % 100, 2) + timeOfYear(date), "latin1"))
}

/** Encodes a GeneralizedTime, YYYYMMDDHHMMSSZ (RFC 5280 section 4.1.2.5.2). */
export const generalizedTime = (date: Date): Buffer => {
  requireValidDate(date)
  const year = date.getUTCFullYear()
  if (year < 0 || year > 9999) {
    throw new RangeError(`GeneralizedTime cannot represent the year ${year}`)
  }
  return universal(universalTag.generalizedTime, false, Buffer.from(digits(year, 4) + timeOfYear(date), "latin1"))
}

/**
 * Encodes an X.509 Time: RFC 5280 section 4.1.2.5 requires UTCTime for dates in 1950
 * through 2049 and GeneralizedTime for everything else, and Go enforces the choice.
 */
export const time = (date: Date): Buffer => {
  const year = date.getUTCFullYear()
  return year >= 1950 && year <= 2049 ? utcTime(date) : generalizedTime(date)
}

/**
 * Encodes a BIT STRING from whole octets plus the count of unused bits in the last octet
 * (X.690 section 8.6.2). Signatures and public keys are whole octets, hence the default 0.
 */
export const bitString = (bytes: Uint8Array, unusedBits = 0): Buffer => {
  if (!Number.isInteger(unusedBits) || unusedBits < 0 || unusedBits > 7 || (bytes.length === 0 && unusedBits !== 0)) {
    throw new RangeError(`Invalid unused bit count ${unusedBits} for a ${bytes.length}-octet BIT STRING`)
  }
  return universal(universalTag.bitString, false, Buffer.concat([Buffer.from([unusedBits]), bytes]))
}

/**
 * Encodes a BIT STRING for an ASN.1 named bit list such as KeyUsage, where bit 0 is the
 * most significant bit of the first octet. DER drops trailing zero bits from such values
 * (X.690 section 11.2.2), so the result is as short as the highest set bit allows.
 */
export const namedBitString = (setBits: ReadonlyArray<number>): Buffer => {
  if (setBits.length === 0) {
    return bitString(new Uint8Array(0))
  }
  const highest = Math.max(...setBits)
  const octets = new Uint8Array(Math.floor(highest / 8) + 1)
  for (const bit of setBits) {
    if (!Number.isInteger(bit) || bit < 0) {
      throw new RangeError(`Named bit positions must be non-negative integers, got ${bit}`)
    }
    const index = Math.floor(bit / 8)
    octets[index] = (octets[index] ?? 0) | (0x80 >> bit % 8)
  }
  return bitString(octets, 7 - (highest % 8))
}

/** Encodes an OCTET STRING holding the given bytes. */
export const octetString = (bytes: Uint8Array): Buffer => universal(universalTag.octetString, false, bytes)

/** Encodes a BOOLEAN; DER writes TRUE as 0xff and FALSE as 0x00 (X.690 section 11.1). */
export const boolean = (value: boolean): Buffer =>
  universal(universalTag.boolean, false, Buffer.from([value ? 0xff : 0x00]))

/** Encodes NULL, which has empty contents (X.690 section 8.8). */
export const nullValue = (): Buffer => universal(universalTag.null, false, new Uint8Array(0))

/**
 * Encodes a context-specific EXPLICIT tag [tagNumber]: a constructed element that wraps
 * the complete encoding of the inner element, as in a certificate's `[0] version` and
 * `[3] extensions` (X.690 section 8.14.3).
 */
export const explicit = (tagNumber: number, inner: Uint8Array): Buffer =>
  element(identifier(contextSpecificClass, true, tagNumber), inner)

/**
 * Encodes a context-specific IMPLICIT tag [tagNumber]: the tag replaces the underlying
 * type's own, so the caller passes just the contents octets, e.g. the ASCII of a dNSName
 * or the address octets of an iPAddress in a GeneralName (X.690 section 8.14.2). Pass
 * `constructed: true` when the underlying type is a SEQUENCE or SET and `contents` is the
 * concatenation of its component encodings.
 */
export const implicit = (tagNumber: number, contents: Uint8Array, constructed = false): Buffer =>
  element(identifier(contextSpecificClass, constructed, tagNumber), contents)
