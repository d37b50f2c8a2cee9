// Self-signed TLS material for the nodus API server: a local certificate authority and a
// server certificate for the hosts it listens on.
//
// The server serves HTTPS by default, so on first start it needs a CA that clients such as
// kubectl (Go's crypto/x509) and Python requests (OpenSSL) can be handed as
// certificate-authority-data, plus a leaf certificate that CA issued. Node can verify
// certificates but not create them, so the X.509 structures of RFC 5280 are written here
// with the small DER encoder in Der.ts and signed with node:crypto; no npm dependency.
//
// Go is the strictest consumer, which shapes several choices below: the leaf's issuer
// Name reuses the CA subject's exact bytes, every host goes into subjectAltName (Go
// ignores the common name), and the CA's basicConstraints is critical with cA TRUE.

import * as crypto from "node:crypto"
import * as net from "node:net"
import * as url from "node:url"
import * as Der from "./Der.ts"

/** PEM-encoded certificates and PKCS#8 private keys for the CA and the server. */
export interface TlsMaterial {
  readonly caCertPem: string
  readonly caKeyPem: string
  readonly certPem: string
  readonly keyPem: string
}

/**
 * What to issue: the hosts (DNS names or IPv4/IPv6 literals) the server certificate is
 * valid for, the clock reading to date the certificates from, and optionally the server
 * certificate's lifetime in days and subject common name.
 */
export interface CertificateOptions {
  readonly hosts: ReadonlyArray<string>
  readonly now: Date
  readonly validityDays?: number
  readonly commonName?: string
}

/** Object identifiers used below, named after their ASN.1 definitions. */
const oid = {
  commonName: "2.5.4.3",
  organizationName: "2.5.4.10",
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  extendedKeyUsage: "2.5.29.37",
  subjectAltName: "2.5.29.17",
  subjectKeyIdentifier: "2.5.29.14",
  authorityKeyIdentifier: "2.5.29.35",
  serverAuth: "1.3.6.1.5.5.7.3.1"
} as const

/** KeyUsage bit positions (RFC 5280 section 4.2.1.3). */
const keyUsageBit = {
  digitalSignature: 0,
  keyCertSign: 5,
  cRLSign: 6
} as const

/** GeneralName choice tags used in subjectAltName (RFC 5280 section 4.2.1.6). */
const generalNameTag = { dNSName: 2, iPAddress: 7 } as const

const caCommonName = "nodus local CA"
const organization = "nodus"
const caValidityDays = 3650

/**
 * Default server certificate lifetime: 825 days is the longest that Apple platforms accept
 * for TLS server certificates, and the CA can reissue on demand anyway.
 */
const serverValidityDays = 825

/** Backdating notBefore tolerates clients whose clocks run a little behind ours. */
const clockSkewMilliseconds = 60 * 60 * 1000
const dayMilliseconds = 24 * 60 * 60 * 1000

/** A generated key pair plus the values derived from its public key. */
interface Identity {
  readonly privateKey: crypto.KeyObject
  readonly subjectPublicKeyInfo: Buffer
  readonly keyIdentifier: Buffer
}

/**
 * Returns the subjectPublicKey bit string contents of a P-256 key: the uncompressed point
 * 0x04 || x || y (SEC 1 section 2.3.3). The JWK export gives x and y padded to the field
 * size (RFC 7518 section 6.2.1.2), which avoids parsing the SPKI DER.
 */
const uncompressedPoint = (publicKey: crypto.KeyObject): Buffer => {
  const jwk = publicKey.export({ format: "jwk" })
  if (jwk.x === undefined || jwk.y === undefined) {
    throw new Error("Expected an elliptic-curve public key")
  }
  return Buffer.concat([Buffer.from([0x04]), Buffer.from(jwk.x, "base64url"), Buffer.from(jwk.y, "base64url")])
}

/**
 * Generates an ECDSA P-256 key pair. Its key identifier is the SHA-1 of the subjectPublicKey
 * bit string, the first method of RFC 5280 section 4.2.1.2.
 */
const generateIdentity = (): Identity => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" })
  return {
    privateKey,
    subjectPublicKeyInfo: publicKey.export({ type: "spki", format: "der" }),
    keyIdentifier: crypto.createHash("sha1").update(uncompressedPoint(publicKey)).digest()
  }
}

/**
 * Returns a random 16-octet positive serial number. RFC 5280 section 4.1.2.2 asks for a
 * positive integer of at most 20 octets that is unique per CA; clearing the top bit keeps
 * it positive without a padding octet, and an all-zero draw is retried.
 */
const randomSerialNumber = (): Buffer => {
  const serial = crypto.randomBytes(16)
  serial[0] = (serial[0] ?? 0) & 0x7f
  return serial.some((octet) => octet !== 0) ? serial : randomSerialNumber()
}

/** Encodes one RelativeDistinguishedName holding a single attribute. */
const relativeDistinguishedName = (attributeType: string, value: string): Buffer =>
  Der.set([Der.sequence([Der.objectIdentifier(attributeType), Der.utf8String(value)])])

/**
 * Encodes a distinguished Name of organization and common name, as UTF8String per RFC 5280
 * section 4.1.2.4.
 */
const distinguishedName = (commonName: string): Buffer =>
  Der.sequence([
    relativeDistinguishedName(oid.organizationName, organization),
    relativeDistinguishedName(oid.commonName, commonName)
  ])

/** The AlgorithmIdentifier for ecdsa-with-SHA256, whose parameters must be absent (RFC 5758 section 3.2). */
const signatureAlgorithm = (): Buffer => Der.sequence([Der.objectIdentifier(oid.ecdsaWithSha256)])

/**
 * Encodes one Extension. The extension value is wrapped in an OCTET STRING, and the
 * critical flag is omitted when false because DER leaves out DEFAULT values (RFC 5280
 * section 4.1).
 */
const extension = (extensionId: string, critical: boolean, value: Buffer): Buffer =>
  Der.sequence([
    Der.objectIdentifier(extensionId),
    ...(critical ? [Der.boolean(true)] : []),
    Der.octetString(value)
  ])

/**
 * BasicConstraints (RFC 5280 section 4.2.1.9), always critical. A CA gets cA TRUE and a
 * path length of 0 because it signs only leaf certificates; a leaf gets the empty
 * sequence, since cA FALSE is the DEFAULT and DER omits it.
 */
const basicConstraints = (isCertificateAuthority: boolean): Buffer =>
  extension(
    oid.basicConstraints,
    true,
    Der.sequence(isCertificateAuthority ? [Der.boolean(true), Der.integer(0n)] : [])
  )

/** KeyUsage (RFC 5280 section 4.2.1.3), marked critical as that section recommends. */
const keyUsage = (bits: ReadonlyArray<number>): Buffer => extension(oid.keyUsage, true, Der.namedBitString(bits))

/** ExtendedKeyUsage restricted to TLS server authentication (RFC 5280 section 4.2.1.12). */
const serverAuthUsage = (): Buffer =>
  extension(oid.extendedKeyUsage, false, Der.sequence([Der.objectIdentifier(oid.serverAuth)]))

/** SubjectKeyIdentifier (RFC 5280 section 4.2.1.2). */
const subjectKeyIdentifier = (keyIdentifier: Buffer): Buffer =>
  extension(oid.subjectKeyIdentifier, false, Der.octetString(keyIdentifier))

/**
 * AuthorityKeyIdentifier (RFC 5280 section 4.2.1.1) carrying only the keyIdentifier, an
 * IMPLICIT [0] OCTET STRING, which lets clients pick the issuing key without names.
 */
const authorityKeyIdentifier = (keyIdentifier: Buffer): Buffer =>
  extension(oid.authorityKeyIdentifier, false, Der.sequence([Der.implicit(0, keyIdentifier)]))

/**
 * Converts an IPv4 or IPv6 literal to its network-order octets: 4 for IPv4 and 16 for
 * IPv6, as the iPAddress GeneralName requires (RFC 5280 section 4.2.1.6). Node's URL
 * parser canonicalises IPv6, expanding "::" and embedded IPv4 into hexadecimal groups.
 */
const ipAddressOctets = (address: string): Buffer => {
  const withoutZone = address.split("%")[0] ?? address
  if (net.isIPv4(withoutZone)) {
    return Buffer.from(withoutZone.split(".").map(Number))
  }
  const canonical = new URL(`http://[${withoutZone}]/`).hostname.slice(1, -1)
  const [head = "", tail] = canonical.split("::")
  const headGroups = head === "" ? [] : head.split(":")
  const tailGroups = tail === undefined || tail === "" ? [] : tail.split(":")
  const zeroGroups = tail === undefined ? [] : new Array<string>(8 - headGroups.length - tailGroups.length).fill("0")
  return Buffer.from(
    [...headGroups, ...zeroGroups, ...tailGroups].map((group) => group.padStart(4, "0")).join(""),
    "hex"
  )
}

/**
 * Encodes one GeneralName for a host: an IP literal becomes an iPAddress [7] and anything
 * else a dNSName [2]. A dNSName is an IA5String in preferred name syntax (RFC 5280 section
 * 4.2.1.6), so names are lowercased and internationalised ones converted to their punycode
 * A-label form; something that is no host name at all is refused.
 */
const generalName = (host: string): Buffer => {
  if (net.isIP(host) !== 0) {
    return Der.implicit(generalNameTag.iPAddress, ipAddressOctets(host))
  }
  const asciiName = url.domainToASCII(host)
  if (asciiName === "") {
    throw new RangeError(`"${host}" is neither an IP address nor a DNS name`)
  }
  return Der.implicit(generalNameTag.dNSName, Buffer.from(asciiName, "ascii"))
}

/**
 * SubjectAltName (RFC 5280 section 4.2.1.6) listing every host once. Go's crypto/x509 only
 * matches hosts against this extension, never the subject common name.
 */
const subjectAltName = (hosts: ReadonlyArray<string>): Buffer =>
  extension(oid.subjectAltName, false, Der.sequence([...new Set(hosts)].map(generalName)))

/** The fields that differ between the CA and the server certificate. */
interface CertificateFields {
  readonly issuer: Buffer
  readonly subject: Buffer
  readonly notBefore: Date
  readonly notAfter: Date
  readonly subjectPublicKeyInfo: Buffer
  readonly extensions: ReadonlyArray<Buffer>
  readonly signingKey: crypto.KeyObject
}

/**
 * Encodes and signs a version 3 certificate (RFC 5280 section 4.1). The TBSCertificate DER
 * is signed with ECDSA over SHA-256; Node returns the signature as the DER Ecdsa-Sig-Value
 * that the signatureValue BIT STRING carries (RFC 5758 section 3.2).
 */
const signCertificate = (fields: CertificateFields): Buffer => {
  const version3 = Der.explicit(0, Der.integer(2n))
  const toBeSigned = Der.sequence([
    version3,
    Der.integer(randomSerialNumber()),
    signatureAlgorithm(),
    fields.issuer,
    Der.sequence([Der.time(fields.notBefore), Der.time(fields.notAfter)]),
    fields.subject,
    fields.subjectPublicKeyInfo,
    Der.explicit(3, Der.sequence(fields.extensions))
  ])
  const signature = crypto.sign("sha256", toBeSigned, fields.signingKey)
  return Der.sequence([toBeSigned, signatureAlgorithm(), Der.bitString(signature)])
}

/** Wraps DER bytes in a PEM block with 64-character base64 lines (RFC 7468 section 2). */
const pem = (label: string, der: Uint8Array): string => {
  const lines = Buffer.from(der).toString("base64").match(/.{1,64}/g) ?? []
  return [`-----BEGIN ${label}-----`, ...lines, `-----END ${label}-----`, ""].join("\n")
}

/** Exports a private key as a PKCS#8 PEM string. */
const privateKeyPem = (privateKey: crypto.KeyObject): string =>
  privateKey.export({ type: "pkcs8", format: "pem" }).toString()

/** Returns the date a number of days after another. */
const addDays = (date: Date, days: number): Date => new Date(date.getTime() + days * dayMilliseconds)

/**
 * Generates a fresh local CA and a server certificate it issued for `options.hosts`, both
 * ECDSA P-256 with ecdsa-with-SHA256 signatures, returned as PEM. Both start one hour
 * before `options.now` to absorb clock skew. The server certificate lives
 * `options.validityDays` (825 by default) and the CA ten years or at least as long as the
 * server certificate, so the chain never expires before its leaf. The server certificate
 * names every host in subjectAltName (IP literals as iPAddress, the rest as dNSName); with
 * no hosts it names its common name, which defaults to the first host or "localhost".
 */
export const generateTlsMaterial = (options: CertificateOptions): TlsMaterial => {
  const serverDays = options.validityDays ?? serverValidityDays
  if (!(serverDays > 0)) {
    throw new RangeError(`validityDays must be positive, got ${serverDays}`)
  }
  const notBefore = new Date(options.now.getTime() - clockSkewMilliseconds)
  const authority = generateIdentity()
  const server = generateIdentity()
  const authorityName = distinguishedName(caCommonName)
  const serverCommonName = options.commonName ?? options.hosts[0] ?? "localhost"

  const caCertificate = signCertificate({
    issuer: authorityName,
    subject: authorityName,
    notBefore,
    notAfter: addDays(options.now, Math.max(caValidityDays, serverDays)),
    subjectPublicKeyInfo: authority.subjectPublicKeyInfo,
    extensions: [
      basicConstraints(true),
      keyUsage([keyUsageBit.keyCertSign, keyUsageBit.cRLSign]),
      subjectKeyIdentifier(authority.keyIdentifier),
      authorityKeyIdentifier(authority.keyIdentifier)
    ],
    signingKey: authority.privateKey
  })

  const serverCertificate = signCertificate({
    // The issuer is the very same encoded Name as the CA subject: Go compares names byte for byte.
    issuer: authorityName,
    subject: distinguishedName(serverCommonName),
    notBefore,
    notAfter: addDays(options.now, serverDays),
    subjectPublicKeyInfo: server.subjectPublicKeyInfo,
    extensions: [
      basicConstraints(false),
      // RFC 8813 section 3 forbids keyEncipherment for EC keys, so digitalSignature stands alone.
      keyUsage([keyUsageBit.digitalSignature]),
      serverAuthUsage(),
      subjectAltName(options.hosts.length > 0 ? options.hosts : [serverCommonName]),
      subjectKeyIdentifier(server.keyIdentifier),
      authorityKeyIdentifier(authority.keyIdentifier)
    ],
    signingKey: authority.privateKey
  })

  return {
    caCertPem: pem("CERTIFICATE", caCertificate),
    caKeyPem: privateKeyPem(authority.privateKey),
    certPem: pem("CERTIFICATE", serverCertificate),
    keyPem: privateKeyPem(server.privateKey)
  }
}

/**
 * Returns the SHA-256 fingerprint of a PEM certificate as colon-separated uppercase hex,
 * the form `openssl x509 -fingerprint -sha256` prints, for logs and pinning.
 */
export const certificateFingerprint = (certPem: string): string => new crypto.X509Certificate(certPem).fingerprint256
