/**
 * What the egress proxy lets through (backends/live/EgressProxy.ts), a real proxy on its Unix socket: names of the
 * list (AllowList) or any host (Open), over HTTP and SOCKS5, and only addresses core/PublicAddress.ts `mayConnectTo`
 * allows — public ones, and an operator's exceptions. Only loopback is ever connected to; the other ranges are refused
 * before any packet.
 */
import { once } from "node:events"
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer as createHttpServer, type Server as HttpServer } from "node:http"
import { type AddressInfo, connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { allowedBy, type RunningProxy, startEgressProxy } from "../../../src/backends/live/EgressProxy.ts"
import { type ConnectRules, mayConnectTo, parseRange, publicOnly } from "../../../src/core/PublicAddress.ts"

describe("the allow list", () => {
  const allow = ["pypi.org", "*.hf.co"]

  it("lets exact names through, whatever their case or a final dot", () => {
    expect(allowedBy(allow, "pypi.org")).toBe(true)
    expect(allowedBy(allow, "PyPI.org.")).toBe(true)
    expect(allowedBy(allow, "files.pypi.org")).toBe(false)
    expect(allowedBy(allow, "pypi.org.evil.com")).toBe(false)
  })

  it("lets names below a *.suffix through, at any depth, never the suffix itself or a lookalike", () => {
    expect(allowedBy(allow, "cdn.hf.co")).toBe(true)
    expect(allowedBy(allow, "a.b.hf.co")).toBe(true)
    expect(allowedBy(allow, "hf.co")).toBe(false)
    expect(allowedBy(allow, "evilhf.co")).toBe(false)
  })
})

describe("addresses", () => {
  it.each([
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "127.0.0.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "fe80::1",
    "fd00::1",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "::"
  ])(
    "refuses %s (not public)",
    (address) => expect(mayConnectTo(address, publicOnly)).toBe(false)
  )

  it.each(["8.8.8.8", "151.101.0.223", "2606:4700::6810:84e5", "::ffff:8.8.8.8"])(
    "lets %s through",
    (address) => expect(mayConnectTo(address, publicOnly)).toBe(true)
  )
})

describe("the proxy", () => {
  let target: HttpServer
  let hits = 0
  let dir = ""
  let proxy: RunningProxy | undefined
  const targetPort = () => (target.address() as AddressInfo).port
  const loopbackOnly: ConnectRules = { exceptions: [parseRange("127.0.0.1/32")!] }

  beforeAll(async () => {
    target = createHttpServer((request, response) => {
      hits++
      response.end(`hello from ${request.url}`)
    })
    target.listen(0, "127.0.0.1")
    await once(target, "listening")
  })
  afterAll(() => target.close())
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "nodus-proxy-"))
    appendFileSync(join(dir, "log"), "")
  })
  afterEach(async () => {
    await proxy?.close()
    proxy = undefined
    rmSync(dir, { recursive: true, force: true })
  })

  const start = async (allow: "any" | ReadonlyArray<string>, rules: ConnectRules) => {
    proxy = await startEgressProxy({ socket: join(dir, "proxy.sock"), allow, logPath: join(dir, "log"), rules })
  }

  /** What the proxy answers to `request` (a whole exchange: the socket is read until it closes). */
  const exchange = async (request: string, encoding: BufferEncoding = "utf8"): Promise<string> => {
    const socket = connect(join(dir, "proxy.sock"))
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      // A tunnel stays open: once the target's answer is in, the exchange is done.
      if (Buffer.concat(chunks).includes("hello from")) socket.end()
    })
    socket.write(Buffer.from(request, encoding))
    await once(socket, "close")
    return Buffer.concat(chunks).toString(encoding)
  }
  const viaConnect = (authority: string) =>
    exchange(
      `CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\nGET /tunnelled HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`
    )
  const viaHttp = (url: string) => exchange(`GET ${url} HTTP/1.1\r\nhost: x\r\nproxy-connection: keep-alive\r\n\r\n`)
  const log = () => readFileSync(join(dir, "log"), "utf8")

  it("Open: refuses loopback, by address or by a name that resolves there, without the operator's exception", async () => {
    await start("any", publicOnly)
    const before = hits
    expect(await viaConnect(`127.0.0.1:${targetPort()}`)).toMatch(
      /^HTTP\/1\.1 403 .*127\.0\.0\.1 is not a public address/su
    )
    expect(await viaConnect(`localhost:${targetPort()}`)).toMatch(
      /^HTTP\/1\.1 403 .*localhost resolves to (127\.0\.0\.1|::1), which is not a public address/su
    )
    expect(await viaHttp(`http://127.0.0.1:${targetPort()}/plain`)).toMatch(/^HTTP\/1\.1 403 /u)
    expect(hits).toBe(before)
    expect(log()).toContain("localhost resolves to")
  })

  it("Open: refuses metadata, link-local and private addresses before connecting anywhere", async () => {
    await start("any", loopbackOnly)
    for (
      const authority of [
        "169.254.169.254:80",
        "10.0.0.1:5432",
        "[fe80::1]:22",
        "192.168.1.1:443",
        "[::ffff:169.254.169.254]:80",
        "0.0.0.0:22"
      ]
    ) {
      expect(await viaConnect(authority), authority).toMatch(/^HTTP\/1\.1 403 .* is not a public address/su)
    }
  })

  it("Open: reaches a loopback server where the operator's exception names it, by CONNECT and by plain http", async () => {
    await start("any", loopbackOnly)
    expect(await viaConnect(`127.0.0.1:${targetPort()}`)).toMatch(
      /^HTTP\/1\.1 200 Connection established\r\n\r\nHTTP\/1\.1 200 .*hello from \/tunnelled/su
    )
    const plain = await viaHttp(`http://127.0.0.1:${targetPort()}/plain?x=1`)
    expect(plain).toMatch(/^HTTP\/1\.1 200 .*hello from \/plain\?x=1$/su)
    expect(plain.toLowerCase()).toContain("connection: close")
  })

  it("AllowList: a listed name that resolves to loopback is refused without the exception; IP literals always", async () => {
    await start(["localhost"], publicOnly)
    expect(await viaConnect(`localhost:${targetPort()}`)).toMatch(/^HTTP\/1\.1 403 .* is not a public address/su)
    await proxy!.close()
    await start(["localhost"], loopbackOnly)
    expect(await viaConnect(`127.0.0.1:${targetPort()}`)).toMatch(
      /^HTTP\/1\.1 403 .*127\.0\.0\.1 is an IP address; the allow list names hosts/su
    )
    expect(await viaHttp(`http://unlisted.example:${targetPort()}/`)).toMatch(
      /^HTTP\/1\.1 403 .*unlisted\.example is not in the egress allow list/su
    )
  })

  /** A SOCKS5 exchange in one write: greeting, CONNECT to a domain name, then an HTTP request through the tunnel. */
  const viaSocks = async (host: string, port: number): Promise<Buffer> => {
    const name = Buffer.from(host)
    const portBytes = Buffer.from([port >> 8, port & 0xff])
    const request = Buffer.concat([
      Buffer.from([5, 1, 0]),
      Buffer.from([5, 1, 0, 3, name.length]),
      name,
      portBytes,
      Buffer.from("GET /socks HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    ])
    return Buffer.from(await exchange(request.toString("latin1"), "latin1"), "latin1")
  }

  it("SOCKS5 (ALL_PROXY): tunnels to a loopback server the operator's exception names, and answers \"not allowed\" otherwise", async () => {
    await start("any", loopbackOnly)
    const reached = await viaSocks("127.0.0.1", targetPort())
    expect([...reached.subarray(0, 2)]).toEqual([5, 0])
    expect([...reached.subarray(2, 4)]).toEqual([5, 0])
    expect(reached.subarray(12).toString()).toMatch(/^HTTP\/1\.1 200 .*hello from \/socks$/su)
    await proxy!.close()
    await start("any", publicOnly)
    const before = hits
    const refused = await viaSocks("localhost", targetPort())
    expect([...refused]).toEqual([5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0])
    expect(hits).toBe(before)
    expect(log()).toMatch(/localhost resolves to (127\.0\.0\.1|::1), which is not a public address/u)
  })

  it("answers 405 to what is neither CONNECT nor an absolute http request", async () => {
    await start("any", loopbackOnly)
    expect(await exchange("GET /relative HTTP/1.1\r\nhost: x\r\n\r\n")).toMatch(/^HTTP\/1\.1 405 /u)
  })
})
