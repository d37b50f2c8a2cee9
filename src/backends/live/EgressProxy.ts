/**
 * The egress of a box with a network policy other than Deny (spec: Network; docs/live.md, "Network"): a box with no
 * network of its own reaches the outside only through this proxy, one per run, on a Unix socket bound into the box.
 * Inside, a small forwarder listens on 127.0.0.1:3128 (HTTPS_PROXY, HTTP_PROXY and ALL_PROXY point there) and relays
 * each connection to the socket.
 *
 * The proxy speaks HTTP — CONNECT (what clients use for https, and any TCP a client tunnels) and plain-http requests
 * in absolute form (one request per connection) — and SOCKS5 CONNECT on the same port (Socks5.ts). Under AllowList a
 * name is let through when it is in the list, or matches a `*.suffix` pattern (any depth below the suffix, never the
 * suffix itself), and IP literals are refused: the list names hosts. Under Open any host is let through. Either way
 * the name is resolved here, on the host, every address it resolves to must pass the address rule
 * (core/PublicAddress.ts: public and not this host's own, or in an operator's `--egress-allow-cidr` range), and the
 * connection goes to one of the addresses checked (net/Outbound.ts) — so no name (DNS rebinding included) leads to
 * the host, its network or a cloud's metadata service. Each refusal is written to the run's log. */
import { appendFileSync, chmodSync, rmSync } from "node:fs"
import { connect, createServer, isIP, type Socket } from "node:net"
import type { ConnectRules } from "../../core/PublicAddress.ts"
import { bareHost, resolveChecked } from "../../net/Outbound.ts"
import * as Socks5 from "./Socks5.ts"

/** The forwarder's address inside the box. */
export const proxyPort = 3128
/** Where the proxy's socket is bound inside the box. */
export const proxySocketInBox = "/run/nodus/proxy.sock"

/** The most a request's head may be. */
const headMaxBytes = 8 * 1024

/** Whether `host` is in the list: an exact name, or below a `*.suffix` pattern. */
export const allowedBy = (allow: ReadonlyArray<string>, host: string): boolean => {
  const name = host.toLowerCase().replace(/\.$/u, "")
  return allow.some((entry) => {
    const pattern = entry.toLowerCase()
    return pattern.startsWith("*.")
      ? name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1
      : name === pattern
  })
}

export interface ProxyOptions {
  readonly socket: string
  /** Open: any host the address rule lets through; AllowList: the names of the list. */
  readonly allow: "any" | ReadonlyArray<string>
  /** Where refusals are written (the run's log). */
  readonly logPath: string
  /** What addresses may be connected to: public ones, and the operator's exceptions. */
  readonly rules: ConnectRules
}

export interface RunningProxy {
  readonly close: () => Promise<void>
}

/** Starts the run's proxy on its Unix socket (reachable by the box's user), until `close`. */
export const startEgressProxy = (options: ProxyOptions): Promise<RunningProxy> =>
  new Promise((resolve, reject) => {
    rmSync(options.socket, { force: true })
    const clients = new Set<Socket>()
    const server = createServer((client) => {
      clients.add(client)
      client.on("close", () => clients.delete(client))
      client.on("error", () => client.destroy())
      serve(client, options)
    })
    server.on("error", reject)
    server.listen(options.socket, () => {
      chmodSync(options.socket, 0o666)
      resolve({
        close: () =>
          new Promise<void>((done) => {
            for (const client of clients) client.destroy()
            server.close(() => {
              rmSync(options.socket, { force: true })
              done()
            })
          })
      })
    })
  })

const logRefusal = (options: ProxyOptions, why: string) => appendFileSync(options.logPath, `nodus egress: ${why}\n`)

const refuse = (client: Socket, options: ProxyOptions, status: string, why: string) => {
  logRefusal(options, why)
  client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${why}\n`)
}

/**
 * One client connection: SOCKS5 when its first byte says so, else an HTTP request's head; checked, then bytes both
 * ways. What came before the handshake ended is buffered (at most a request head's worth).
 */
const serve = (client: Socket, options: ProxyOptions) => {
  let buffered: Buffer = Buffer.alloc(0)
  let socksGreeted = false
  const stop = () => {
    client.off("data", onData)
    client.pause()
  }
  const bad = (parsed: { readonly reply: Buffer; readonly why: string }) => {
    stop()
    logRefusal(options, parsed.why)
    client.end(parsed.reply)
  }
  const socksStep = () => {
    if (!socksGreeted) {
      const greeting = Socks5.parseGreeting(buffered)
      if (greeting._tag === "More") return
      if (greeting._tag === "Bad") return bad(greeting)
      socksGreeted = true
      client.write(greeting.value)
      buffered = greeting.rest
    }
    const request = Socks5.parseRequest(buffered)
    if (request._tag === "More") return
    if (request._tag === "Bad") return bad(request)
    stop()
    void socks(client, options, request.value, request.rest)
  }
  const httpStep = () => {
    const end = buffered.indexOf("\r\n\r\n")
    if (end < 0) return
    stop()
    void route(client, options, buffered.subarray(0, end).toString("latin1"), buffered.subarray(end + 4))
  }
  function onData(chunk: Buffer) {
    buffered = Buffer.concat([buffered, chunk])
    if (buffered.length > headMaxBytes) {
      stop()
      return refuse(client, options, "431 Request Header Fields Too Large", "a request head above 8 KiB")
    }
    return buffered[0] === Socks5.version ? socksStep() : httpStep()
  }
  client.on("data", onData)
}

/** Where a request goes: a CONNECT's authority, or a plain-http request's absolute URL. */
type Target = { readonly host: string; readonly port: number; readonly tunnel: boolean; readonly send: Buffer }

const targetOf = (head: string, rest: Buffer): Target | string => {
  const [line = "", ...headers] = head.split("\r\n")
  const connectTo = /^CONNECT ([^\s:]+|\[[0-9a-f:.]+\]):(\d{1,5}) HTTP\/1\.[01]$/iu.exec(line)
  if (connectTo !== null) return { host: bareHost(connectTo[1]!), port: Number(connectTo[2]), tunnel: true, send: rest }
  const request = /^([A-Z]+) (http:\/\/\S+) (HTTP\/1\.[01])$/u.exec(line)
  if (request === null || !URL.canParse(request[2]!)) {
    return "only CONNECT and plain-http requests in absolute form (http://host/path) go through the egress proxy"
  }
  const url = new URL(request[2]!)
  // One request per connection: the upstream closes after its answer, so a second request cannot reach it unchecked.
  const kept = headers.filter((header) => !/^(proxy-[a-z-]*|connection|keep-alive)\s*:/iu.test(header))
  const upstreamHead = [
    `${request[1]} ${url.pathname}${url.search} ${request[3]}`,
    ...kept,
    "connection: close",
    "",
    ""
  ].join("\r\n")
  return {
    host: bareHost(url.hostname),
    port: url.port === "" ? 80 : Number(url.port),
    tunnel: false,
    send: Buffer.concat([Buffer.from(upstreamHead, "latin1"), rest])
  }
}

const route = async (client: Socket, options: ProxyOptions, head: string, rest: Buffer) => {
  const target = targetOf(head, rest)
  if (typeof target === "string") return refuse(client, options, "405 Method Not Allowed", target)
  const opened = await open(options, target.host, target.port)
  if ("why" in opened) {
    return refuse(client, options, opened.refused === "forbidden" ? "403 Forbidden" : "502 Bad Gateway", opened.why)
  }
  if (target.tunnel) client.write("HTTP/1.1 200 Connection established\r\n\r\n")
  splice(client, opened.socket, target.send)
}

const socks = async (
  client: Socket,
  options: ProxyOptions,
  target: { readonly host: string; readonly port: number },
  rest: Buffer
) => {
  const opened = await open(options, target.host, target.port)
  if ("why" in opened) {
    logRefusal(options, opened.why)
    return void client.end(
      Socks5.reply(opened.refused === "forbidden" ? Socks5.replyCodes.notAllowed : Socks5.replyCodes.hostUnreachable)
    )
  }
  client.write(Socks5.reply(Socks5.replyCodes.succeeded))
  splice(client, opened.socket, rest)
}

type Opened = { readonly socket: Socket } | { readonly refused: "forbidden" | "unreachable"; readonly why: string }

/** A connection to host:port, where the policy and the address rule allow it (the same for every protocol). */
const open = async (options: ProxyOptions, host: string, port: number): Promise<Opened> => {
  if (options.allow !== "any") {
    if (isIP(host) !== 0) return { refused: "forbidden", why: `${host} is an IP address; the allow list names hosts` }
    if (!allowedBy(options.allow, host)) return { refused: "forbidden", why: `${host} is not in the egress allow list` }
  }
  const resolution = await resolveChecked(host, options.rules)
  if (resolution._tag === "Unresolved") return { refused: "unreachable", why: `${host} does not resolve` }
  if (resolution._tag === "Barred") {
    return {
      refused: "forbidden",
      why: `${
        host === resolution.address ? host : `${host} resolves to ${resolution.address}, which`
      } is not a public address`
    }
  }
  const socket = await connectAny(resolution.addresses.map((entry) => entry.address), port)
  return socket === undefined ? { refused: "unreachable", why: `${host}:${port} could not be reached` } : { socket }
}

/** Bytes both ways until either side closes; `first` (what the client sent past its handshake) goes up first. */
const splice = (client: Socket, upstream: Socket, first: Buffer) => {
  if (first.length > 0) upstream.write(first)
  client.pipe(upstream)
  upstream.pipe(client)
  client.resume()
  client.on("close", () => upstream.destroy())
  upstream.on("close", () => client.destroy())
  upstream.on("error", () => client.destroy())
}

/** The first of the addresses that takes a connection, in the resolver's order. */
const connectAny = async (addresses: ReadonlyArray<string>, port: number): Promise<Socket | undefined> => {
  for (const address of addresses) {
    const socket = await new Promise<Socket | undefined>((resolve) => {
      const attempt = connect({ host: address, port, timeout: 10_000 })
      attempt.once("connect", () => {
        attempt.setTimeout(0)
        resolve(attempt)
      })
      attempt.once("error", () => resolve(undefined))
      attempt.once("timeout", () => {
        attempt.destroy()
        resolve(undefined)
      })
    })
    if (socket !== undefined) return socket
  }
  return undefined
}

/**
 * The forwarder inside the box (run by the host's node, bound read-only): listens on 127.0.0.1:3128, relays each
 * connection to the proxy's socket, runs the program, and ends as the program ended.
 */
export const forwarderScript = [
  `const net = require("net"), { spawn } = require("child_process")`,
  `const server = net.createServer((c) => { const u = net.connect(${
    JSON.stringify(proxySocketInBox)
  }); c.pipe(u); u.pipe(c); c.on("error", () => u.destroy()); u.on("error", () => c.destroy()) })`,
  `server.listen(${proxyPort}, "127.0.0.1", () => {`,
  `  const p = spawn(process.argv[1], process.argv.slice(2), { stdio: "inherit" })`,
  `  p.on("error", (e) => { console.error(e.message); process.exit(127) })`,
  `  p.on("exit", (code, signal) => { if (signal) process.kill(process.pid, signal); else process.exit(code ?? 1) })`,
  `})`
].join("\n")
