// Checks the generated TLS material with verifiers nodus did not write: Node's
// X509Certificate, the openssl command line, real TLS handshakes through node:https and,
// where installed, Go's crypto/x509 by way of kubectl and Python's ssl module. A
// self-consistent encoder and parser could agree on a wrong certificate; these cannot.

import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFile, execFileSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import type { RequestListener } from "node:http"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { certificateFingerprint, generateTlsMaterial } from "../../../src/apiserver/tls/Certificates.ts"

const openssl = "/usr/bin/openssl"
const kubectl = "/usr/bin/kubectl"
const python = "/usr/bin/python3"

const hourMilliseconds = 60 * 60 * 1000
const dayMilliseconds = 24 * hourMilliseconds

/** Drops the milliseconds a certificate time cannot hold. */
const wholeSeconds = (milliseconds: number): number => Math.floor(milliseconds / 1000) * 1000

const now = new Date()
const hosts = ["127.0.0.1", "localhost", "::1"]
const material = generateTlsMaterial({ hosts, now })
const caCert = new crypto.X509Certificate(material.caCertPem)
const leafCert = new crypto.X509Certificate(material.certPem)

let directory = ""

/** Writes a file into the test's temporary directory and returns its path. */
const writeTemporary = (name: string, contents: string): string => {
  const filePath = path.join(directory, name)
  fs.writeFileSync(filePath, contents)
  return filePath
}

/** Runs openssl in the temporary directory and returns what it printed. */
const runOpenssl = (args: ReadonlyArray<string>): string =>
  execFileSync(openssl, args, { cwd: directory, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/**
 * Returns the DER of each TBSCertificate field (version, serial, signature, issuer,
 * validity, subject, key, extensions) as openssl's own parser delimits them, so that
 * encoding properties are checked without trusting our encoder's view of the structure.
 */
const tbsFields = (pemFile: string): ReadonlyArray<Buffer> => {
  const der = new crypto.X509Certificate(fs.readFileSync(path.join(directory, pemFile))).raw
  const fields: Array<Buffer> = []
  for (const line of runOpenssl(["asn1parse", "-in", pemFile]).split("\n")) {
    const match = /^\s*(\d+):d=2\s+hl=\s*(\d+)\s+l=\s*(\d+)/.exec(line)
    if (match !== null && fields.length < 8) {
      const offset = Number(match[1])
      fields.push(der.subarray(offset, offset + Number(match[2]) + Number(match[3])))
    }
  }
  return fields
}

/** What a finished HTTPS request produced. */
interface Reply {
  readonly status: number
  readonly body: string
}

/** Performs one GET without connection reuse, so every call is a fresh handshake. */
const httpsGet = (options: https.RequestOptions): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const request = https.request({ method: "GET", agent: false, ...options }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () =>
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
      response.on("error", reject)
    })
    request.on("error", reject)
    request.end()
  })

/** Performs a GET that is expected to fail and returns the error code it failed with. */
const httpsFailure = async (options: https.RequestOptions): Promise<string> => {
  try {
    await httpsGet(options)
    return "no error"
  } catch (error) {
    return String((error as NodeJS.ErrnoException).code)
  }
}

/** The exit status and output of a child process. */
interface Completed {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs a program asynchronously; the HTTPS server under test shares this process, so a
 * synchronous child call would stall its event loop and deadlock the handshake.
 */
const runAsync = (
  file: string,
  args: ReadonlyArray<string>,
  options: { readonly env?: NodeJS.ProcessEnv } = {}
): Promise<Completed> =>
  new Promise((resolve) => {
    execFile(file, args, { timeout: 20_000, encoding: "utf8", ...options }, (error, stdout, stderr) => {
      const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resolve({ exitCode, stdout, stderr })
    })
  })

const versionBody = JSON.stringify({ major: "1", minor: "32", gitVersion: "v1.32.0" })

/** Answers /version like a Kubernetes API server and everything else with a greeting. */
const handler: RequestListener = (request, response) => {
  if (request.url?.startsWith("/version") === true) {
    response.writeHead(200, { "Content-Type": "application/json" })
    response.end(versionBody)
  } else {
    response.writeHead(200, { "Content-Type": "text/plain" })
    response.end("hello from nodus")
  }
}

const server = https.createServer({ key: material.keyPem, cert: material.certPem }, handler)
let port = 0

beforeAll(async () => {
  directory = fs.mkdtempSync(path.join(os.tmpdir(), "nodus-tls-"))
  writeTemporary("ca.pem", material.caCertPem)
  writeTemporary("server.pem", material.certPem)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  port = (server.address() as AddressInfo).port
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  fs.rmSync(directory, { recursive: true, force: true })
})

describe("generateTlsMaterial, seen by node:crypto", () => {
  it("the CA signed and issued the server certificate", () => {
    assert.isTrue(leafCert.verify(caCert.publicKey))
    assert.isTrue(leafCert.checkIssued(caCert))
    assert.isTrue(caCert.verify(caCert.publicKey))
    assert.isTrue(caCert.checkIssued(caCert))
  })

  it("only the CA is a CA", () => {
    assert.isTrue(caCert.ca)
    assert.isFalse(leafCert.ca)
  })

  it("the server certificate matches exactly its hosts", () => {
    assert.strictEqual(leafCert.checkIP("127.0.0.1"), "127.0.0.1")
    assert.strictEqual(leafCert.checkHost("localhost"), "localhost")
    assert.isDefined(leafCert.checkIP("::1"))
    assert.isUndefined(leafCert.checkHost("example.com"))
    assert.isUndefined(leafCert.checkIP("10.0.0.1"))
  })

  it("names the CA and the server in the subjects", () => {
    assert.strictEqual(caCert.subject, "O=nodus\nCN=nodus local CA")
    assert.strictEqual(caCert.issuer, caCert.subject)
    assert.strictEqual(leafCert.subject, "O=nodus\nCN=127.0.0.1")
    assert.strictEqual(leafCert.issuer, caCert.subject)
  })

  it("dates both certificates from an hour before now", () => {
    const notBefore = wholeSeconds(now.getTime() - hourMilliseconds)
    assert.strictEqual(caCert.validFromDate.getTime(), notBefore)
    assert.strictEqual(leafCert.validFromDate.getTime(), notBefore)
    assert.strictEqual(caCert.validToDate.getTime(), wholeSeconds(now.getTime() + 3650 * dayMilliseconds))
    assert.strictEqual(leafCert.validToDate.getTime(), wholeSeconds(now.getTime() + 825 * dayMilliseconds))
  })

  it("uses P-256 keys whose PKCS#8 PEMs match the certificates", () => {
    const caKey = crypto.createPrivateKey(material.caKeyPem)
    const leafKey = crypto.createPrivateKey(material.keyPem)
    assert.isTrue(caCert.checkPrivateKey(caKey))
    assert.isTrue(leafCert.checkPrivateKey(leafKey))
    assert.isFalse(leafCert.checkPrivateKey(caKey))
    assert.strictEqual(leafKey.asymmetricKeyDetails?.namedCurve, "prime256v1")
    assert.isTrue(material.keyPem.startsWith("-----BEGIN PRIVATE KEY-----\n"))
  })

  it("writes PEM with 64-character lines", () => {
    const lines = material.certPem.trimEnd().split("\n")
    assert.strictEqual(lines[0], "-----BEGIN CERTIFICATE-----")
    assert.strictEqual(lines.at(-1), "-----END CERTIFICATE-----")
    const body = lines.slice(1, -1)
    assert.isTrue(body.slice(0, -1).every((line) => line.length === 64))
    assert.isTrue((body.at(-1) ?? "").length <= 64)
  })

  it("draws a new positive serial number for every certificate", () => {
    const again = new crypto.X509Certificate(generateTlsMaterial({ hosts, now }).certPem)
    assert.notStrictEqual(again.serialNumber, leafCert.serialNumber)
    assert.notStrictEqual(caCert.serialNumber, leafCert.serialNumber)
  })

  it("honours commonName and validityDays, and names the common name when given no hosts", () => {
    const custom = generateTlsMaterial({ hosts: [], now, validityDays: 30, commonName: "nodus.internal" })
    const certificate = new crypto.X509Certificate(custom.certPem)
    assert.strictEqual(certificate.subject, "O=nodus\nCN=nodus.internal")
    assert.strictEqual(certificate.subjectAltName, "DNS:nodus.internal")
    assert.strictEqual(certificate.validToDate.getTime(), wholeSeconds(now.getTime() + 30 * dayMilliseconds))
  })

  it("keeps the CA valid at least as long as a long-lived server certificate", () => {
    const custom = generateTlsMaterial({ hosts: ["localhost"], now, validityDays: 5000 })
    const authority = new crypto.X509Certificate(custom.caCertPem)
    const certificate = new crypto.X509Certificate(custom.certPem)
    assert.isTrue(authority.validToDate.getTime() >= certificate.validToDate.getTime())
  })

  it("computes the SHA-256 fingerprint openssl prints", () => {
    const printed = runOpenssl(["x509", "-in", "server.pem", "-noout", "-fingerprint", "-sha256"]).trim()
    assert.strictEqual(printed, `sha256 Fingerprint=${certificateFingerprint(material.certPem)}`)
  })
})

describe("generateTlsMaterial, seen by openssl", () => {
  it("verifies the chain, strictly", () => {
    assert.strictEqual(runOpenssl(["verify", "-CAfile", "ca.pem", "server.pem"]).trim(), "server.pem: OK")
    assert.strictEqual(
      runOpenssl(["verify", "-x509_strict", "-CAfile", "ca.pem", "server.pem"]).trim(),
      "server.pem: OK"
    )
  })

  it("lists every host in subjectAltName", () => {
    const names = runOpenssl(["x509", "-in", "server.pem", "-noout", "-ext", "subjectAltName"])
    assert.include(names, "IP Address:127.0.0.1")
    assert.include(names, "DNS:localhost")
    assert.include(names, "IP Address:0:0:0:0:0:0:0:1")
  })

  it("marks the CA's basicConstraints and keyUsage critical", () => {
    const extensions = runOpenssl(["x509", "-in", "ca.pem", "-noout", "-ext", "basicConstraints,keyUsage"])
    assert.include(extensions, "X509v3 Basic Constraints: critical\n    CA:TRUE, pathlen:0")
    assert.include(extensions, "X509v3 Key Usage: critical\n    Certificate Sign, CRL Sign")
  })

  it("marks the server certificate as a critical non-CA for TLS server authentication", () => {
    const extensions = runOpenssl([
      "x509",
      "-in",
      "server.pem",
      "-noout",
      "-ext",
      "basicConstraints,keyUsage,extendedKeyUsage"
    ])
    assert.include(extensions, "X509v3 Basic Constraints: critical\n    CA:FALSE")
    assert.include(extensions, "X509v3 Key Usage: critical\n    Digital Signature")
    assert.include(extensions, "TLS Web Server Authentication")
  })

  it("links the server's authority key identifier to the CA's subject key identifier", () => {
    const caIdentifier = runOpenssl(["x509", "-in", "ca.pem", "-noout", "-ext", "subjectKeyIdentifier"]).split("\n")[1]
      ?.trim()
    const leafAuthority = runOpenssl(["x509", "-in", "server.pem", "-noout", "-ext", "authorityKeyIdentifier"])
    assert.isDefined(caIdentifier)
    assert.include(leafAuthority, caIdentifier ?? "missing")
  })

  it("encodes the server's issuer with the very bytes of the CA's subject", () => {
    const caSubject = tbsFields("ca.pem")[5]
    const leafIssuer = tbsFields("server.pem")[3]
    assert.isDefined(caSubject)
    assert.isTrue(Buffer.from(leafIssuer ?? []).equals(Buffer.from(caSubject ?? [0])))
  })

  it("encodes the serial number as a minimal positive INTEGER of at most 20 octets", () => {
    for (const file of ["ca.pem", "server.pem"]) {
      const serial = tbsFields(file)[1] ?? Buffer.alloc(0)
      const contents = serial.subarray(2)
      assert.strictEqual(serial[0], 0x02)
      assert.strictEqual(serial[1], contents.length)
      assert.isTrue(contents.length >= 1 && contents.length <= 20)
      assert.isTrue(((contents[0] ?? 0x80) & 0x80) === 0, "serial must be positive")
      assert.isFalse(
        contents.length > 1 && contents[0] === 0 && ((contents[1] ?? 0) & 0x80) === 0,
        "serial must be minimal"
      )
    }
  })

  it("declares ecdsa-with-SHA256 without parameters", () => {
    assert.strictEqual(tbsFields("server.pem")[2]?.toString("hex"), "300a06082a8648ce3d040302")
  })

  it("switches to GeneralizedTime for dates from 2050 on", () => {
    const late = new Date(Date.UTC(2049, 6, 1))
    const custom = generateTlsMaterial({ hosts: ["localhost"], now: late, validityDays: 365 })
    writeTemporary("late-ca.pem", custom.caCertPem)
    writeTemporary("late-server.pem", custom.certPem)
    const validity = tbsFields("late-server.pem")[4]?.toString("hex") ?? ""
    assert.include(validity, "170d" + Buffer.from("490630230000Z").toString("hex"))
    assert.include(validity, "180f" + Buffer.from("20500701000000Z").toString("hex"))
    const atTime = String(Math.floor(Date.UTC(2050, 0, 1) / 1000))
    assert.strictEqual(
      runOpenssl(["verify", "-attime", atTime, "-CAfile", "late-ca.pem", "late-server.pem"]).trim(),
      "late-server.pem: OK"
    )
  })
})

describe("generateTlsMaterial in a TLS handshake", () => {
  it("is trusted by IP address when the CA is given", async () => {
    const reply = await httpsGet({ host: "127.0.0.1", port, path: "/", ca: material.caCertPem })
    assert.deepStrictEqual(reply, { status: 200, body: "hello from nodus" })
  })

  it("is trusted by the name localhost when the CA is given", async () => {
    const reply = await httpsGet({ host: "localhost", family: 4, port, path: "/", ca: material.caCertPem })
    assert.deepStrictEqual(reply, { status: 200, body: "hello from nodus" })
  })

  it("is rejected without the CA", async () => {
    const code = await httpsFailure({ host: "127.0.0.1", port, path: "/" })
    assert.include(
      ["UNABLE_TO_VERIFY_LEAF_SIGNATURE", "SELF_SIGNED_CERT_IN_CHAIN", "DEPTH_ZERO_SELF_SIGNED_CERT"],
      code
    )
  })

  it("is rejected for a host name it does not list", async () => {
    const code = await httpsFailure({
      host: "127.0.0.1",
      servername: "example.com",
      port,
      path: "/",
      ca: material.caCertPem
    })
    assert.strictEqual(code, "ERR_TLS_CERT_ALTNAME_INVALID")
  })
})

describe("generateTlsMaterial, seen by Go and Python", () => {
  /** Runs `kubectl version` against the test server with the given CA file and a private home. */
  const kubectlVersion = (caFile: string): Promise<Completed> =>
    runAsync(
      kubectl,
      [
        "version",
        "--server",
        `https://127.0.0.1:${port}`,
        "--certificate-authority",
        caFile,
        "--token",
        "x",
        "--cache-dir",
        path.join(directory, "kube-cache"),
        "-o",
        "json"
      ],
      { env: { ...process.env, HOME: directory, KUBECONFIG: writeTemporary("kubeconfig", "") } }
    )

  it.skipIf(!fs.existsSync(kubectl))("kubectl (Go crypto/x509) accepts the server with the CA", async () => {
    const completed = await kubectlVersion(path.join(directory, "ca.pem"))
    assert.strictEqual(completed.exitCode, 0, completed.stderr)
    assert.include(completed.stdout, "serverVersion")
    assert.include(completed.stdout, "v1.32.0")
  })

  it.skipIf(!fs.existsSync(kubectl))("kubectl (Go crypto/x509) rejects the server with another CA", async () => {
    const stranger = writeTemporary("stranger-ca.pem", generateTlsMaterial({ hosts, now }).caCertPem)
    const completed = await kubectlVersion(stranger)
    assert.notStrictEqual(completed.exitCode, 0)
    assert.include(completed.stderr, "certificate")
  })

  // Python 3.13 turns on VERIFY_X509_STRICT by default, so it is set here explicitly.
  const pythonClient = [
    "import ssl, sys, urllib.request",
    "context = ssl.create_default_context(cafile=sys.argv[1])",
    "context.verify_flags |= ssl.VERIFY_X509_STRICT",
    "print(urllib.request.urlopen(sys.argv[2], context=context, timeout=10).read().decode())"
  ].join("\n")

  it.skipIf(!fs.existsSync(python))("Python's ssl module accepts the server by IP and by name", async () => {
    for (const host of ["127.0.0.1", "localhost"]) {
      const completed = await runAsync(python, [
        "-c",
        pythonClient,
        path.join(directory, "ca.pem"),
        `https://${host}:${port}/`
      ])
      assert.strictEqual(completed.exitCode, 0, completed.stderr)
      assert.strictEqual(completed.stdout.trim(), "hello from nodus")
    }
  })
})
