/**
 * A Job's `url` input as the node agent reads it (src/backends/live/InputFetch.ts), against real https servers on
 * loopback: the address rule after DNS, on the URL and on every redirect, the operator's exception, and failures that
 * say only their class — the same for an open port and a closed one.
 */
import { once } from "node:events"
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https"
import { type AddressInfo, createServer as createTcpServer, type Server as TcpServer } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { generateTlsMaterial } from "../../../src/apiserver/tls/Certificates.ts"
import { fetchInput, fetchProblem } from "../../../src/backends/live/InputFetch.ts"
import { parseRange, publicOnly } from "../../../src/core/PublicAddress.ts"

const material = generateTlsMaterial({ hosts: ["127.0.0.1", "localhost"], now: new Date() })
const exception = { exceptions: [parseRange("127.0.0.1/32")!] }

let files: HttpsServer
let plain: TcpServer
let closedPort = 0
let requests = 0

const portOf = (server: { address: () => unknown }) => (server.address() as AddressInfo).port
const base = () => `https://127.0.0.1:${portOf(files)}`

beforeAll(async () => {
  files = createHttpsServer({ cert: material.certPem, key: material.keyPem }, (request, response) => {
    requests++
    const to = /^\/redirect\?to=(.*)$/u.exec(request.url ?? "")?.[1]
    if (to !== undefined) return response.writeHead(302, { location: decodeURIComponent(to) }).end()
    if (request.url === "/missing") return response.writeHead(404).end()
    response.end("input bytes")
  })
  files.listen(0, "127.0.0.1")
  await once(files, "listening")
  // An open port that speaks no TLS (the store's database, say).
  plain = createTcpServer((socket) => socket.end("not tls\n"))
  plain.listen(0, "127.0.0.1")
  await once(plain, "listening")
  const probe = createTcpServer().listen(0, "127.0.0.1")
  await once(probe, "listening")
  closedPort = portOf(probe)
  await new Promise((done) => probe.close(done))
})
afterAll(() => {
  files.close()
  plain.close()
})

const problemOf = async (url: string, rules = publicOnly): Promise<string> => {
  try {
    const body = await fetchInput(url, { rules, extraCa: material.caCertPem })
    for await (const _ of body) void _
    return "fetched"
  } catch (error) {
    return fetchProblem(url, error)
  }
}

const read = async (url: string): Promise<string> => {
  const chunks: Array<Uint8Array> = []
  for await (const chunk of await fetchInput(url, { rules: exception, extraCa: material.caCertPem })) chunks.push(chunk)
  return Buffer.concat(chunks).toString()
}

describe("a url input", () => {
  it("on 127.0.0.1 is refused without the operator's exception, before any connection, open port or closed", async () => {
    const before = requests
    expect(await problemOf(`${base()}/data`)).toBe(`could not fetch ${base()}/data: address not allowed`)
    expect(await problemOf(`https://127.0.0.1:${portOf(plain)}/`)).toBe(
      `could not fetch https://127.0.0.1:${portOf(plain)}/: address not allowed`
    )
    expect(await problemOf(`https://127.0.0.1:${closedPort}/`)).toBe(
      `could not fetch https://127.0.0.1:${closedPort}/: address not allowed`
    )
    expect(requests).toBe(before)
  })

  it("through a name that resolves to loopback is refused the same way", async () => {
    expect(await problemOf(`https://localhost:${portOf(files)}/data`)).toBe(
      `could not fetch https://localhost:${portOf(files)}/data: address not allowed`
    )
  })

  it("is refused for the metadata service, private and link-local ranges, before any packet", async () => {
    for (
      const url of [
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.1/",
        "https://[fe80::1]/",
        "https://[::ffff:192.168.0.1]/"
      ]
    ) {
      expect(await problemOf(url)).toBe(`could not fetch ${url}: address not allowed`)
    }
  })

  it("is read where the operator's exception names its address", async () => {
    expect(await read(`${base()}/data`)).toBe("input bytes")
  })

  it("tells an open port that speaks no TLS from a closed one by nothing, even where it may be reached", async () => {
    const open = await problemOf(`https://127.0.0.1:${portOf(plain)}/`, exception)
    const closed = await problemOf(`https://127.0.0.1:${closedPort}/`, exception)
    expect(open.replace(String(portOf(plain)), "PORT")).toBe(closed.replace(String(closedPort), "PORT"))
    expect(closed).toBe(`could not fetch https://127.0.0.1:${closedPort}/: connection failed`)
  })

  it("says an HTTP error by its status alone", async () => {
    expect(await problemOf(`${base()}/missing`, exception)).toBe(`could not fetch ${base()}/missing: HTTP 404`)
  })

  it("follows a redirect to an allowed address, and refuses one to an address that is not allowed", async () => {
    expect(await read(`${base()}/redirect?to=${encodeURIComponent(`${base()}/data`)}`)).toBe("input bytes")
    for (const to of ["https://127.0.0.2/", "https://169.254.169.254/", "https://10.1.2.3/", "https://[::1]/"]) {
      const url = `${base()}/redirect?to=${encodeURIComponent(to)}`
      expect(await problemOf(url, exception)).toBe(`could not fetch ${url}: address not allowed`)
    }
  })

  it("refuses a redirect to http, and plain http itself", async () => {
    const url = `${base()}/redirect?to=${encodeURIComponent("http://127.0.0.1/")}`
    expect(await problemOf(url, exception)).toBe(`could not fetch ${url}: not an https URL (only https is read)`)
    expect(await problemOf("http://127.0.0.1/", exception)).toBe(
      "could not fetch http://127.0.0.1/: not an https URL (only https is read)"
    )
  })
})
