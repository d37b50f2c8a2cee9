/**
 * Egress AllowList on a live host (spec: Network; docs/live.md, "Network"): a box with no network of its own reaches
 * the outside only through this proxy, one per run, on a Unix socket bound into the box. Inside, a small forwarder
 * listens on 127.0.0.1:3128 (HTTPS_PROXY points there) and relays each connection to the socket.
 *
 * The proxy speaks HTTP CONNECT only (what clients use for https). A name is let through when it is in the list, or
 * matches a `*.suffix` pattern (any depth below the suffix, never the suffix itself). IP literals are refused: the list
 * names hosts. The name is resolved here, on the host, and every address it resolves to must be public
 * (core/PublicAddress.ts: private, loopback, link-local with cloud metadata, multicast, documentation and IPv6 forms
 * that carry such an IPv4 address are refused) —
 * so a name that resolves somewhere it should not (DNS rebinding included) reaches nothing. Each refusal is written to
 * the run's log.
 */
import { lookup } from "node:dns/promises"
import { appendFileSync, chmodSync, rmSync } from "node:fs"
import { connect, createServer, isIP, type Socket } from "node:net"
import { mayConnectTo } from "../../core/PublicAddress.ts"

/** The forwarder's address inside the box. */
export const proxyPort = 3128
/** Where the proxy's socket is bound inside the box. */
export const proxySocketInBox = "/run/nodus/proxy.sock"

/** The most a CONNECT request's head may be. */
const headMaxBytes = 8 * 1024

/** Whether `host` is in the list: an exact name, or below a `*.suffix` pattern. */
export const allowedBy = (allow: ReadonlyArray<string>, host: string): boolean => {
  const name = host.toLowerCase().replace(/\.$/u, "")
  return allow.some((entry) => {
    const pattern = entry.toLowerCase()
    return pattern.startsWith("*.") ? name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1 : name === pattern
  })
}

export interface ProxyOptions {
  readonly socket: string
  readonly allow: ReadonlyArray<string>
  /** Where refusals are written (the run's log). */
  readonly logPath: string
  /** Development and tests only: loopback addresses are let through (never on a production host). */
  readonly allowLoopback?: boolean
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
        close: () => new Promise<void>((done) => {
          for (const client of clients) client.destroy()
          server.close(() => {
            rmSync(options.socket, { force: true })
            done()
          })
        })
      })
    })
  })

const refuse = (client: Socket, options: ProxyOptions, status: string, why: string) => {
  appendFileSync(options.logPath, `nodus egress: ${why}\n`)
  client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${why}\n`)
}

/** One client connection: its CONNECT request, checked, then bytes both ways. */
const serve = (client: Socket, options: ProxyOptions) => {
  let head = Buffer.alloc(0)
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk])
    const end = head.indexOf("\r\n\r\n")
    if (end < 0) {
      if (head.length > headMaxBytes) refuse(client, options, "431 Request Header Fields Too Large", "a request head above 8 KiB")
      return
    }
    client.off("data", onData)
    client.pause()
    void tunnel(client, options, head.subarray(0, end).toString("latin1"), head.subarray(end + 4))
  }
  client.on("data", onData)
}

const tunnel = async (client: Socket, options: ProxyOptions, head: string, rest: Buffer) => {
  const match = /^CONNECT ([^\s:]+|\[[0-9a-f:.]+\]):(\d{1,5}) HTTP\/1\.[01]$/iu.exec(head.split("\r\n")[0] ?? "")
  if (match === null) return refuse(client, options, "405 Method Not Allowed", "only CONNECT (https) goes through the egress allow list")
  const host = match[1]!.replace(/^\[|\]$/gu, "")
  const port = Number(match[2])
  if (isIP(host) !== 0) return refuse(client, options, "403 Forbidden", `${host} is an IP address; the allow list names hosts`)
  if (!allowedBy(options.allow, host)) return refuse(client, options, "403 Forbidden", `${host} is not in the egress allow list`)
  let addresses: ReadonlyArray<{ readonly address: string }>
  try {
    addresses = await lookup(host, { all: true })
  } catch {
    return refuse(client, options, "502 Bad Gateway", `${host} does not resolve`)
  }
  const barred = addresses.find((entry) => !mayConnectTo(entry.address, options.allowLoopback === true))
  if (barred !== undefined || addresses.length === 0) return refuse(client, options, "403 Forbidden", `${host} resolves to ${barred?.address ?? "nothing"}, which is not a public address`)
  const upstream = await connectAny(addresses.map((entry) => entry.address), port)
  if (upstream === undefined) return refuse(client, options, "502 Bad Gateway", `${host}:${port} could not be reached`)
  {
    client.write("HTTP/1.1 200 Connection established\r\n\r\n")
    if (rest.length > 0) upstream.write(rest)
    client.pipe(upstream)
    upstream.pipe(client)
    client.resume()
    client.on("close", () => upstream.destroy())
    upstream.on("close", () => client.destroy())
    upstream.on("error", () => client.destroy())
  }
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
  `const server = net.createServer((c) => { const u = net.connect(${JSON.stringify(proxySocketInBox)}); c.pipe(u); u.pipe(c); c.on("error", () => u.destroy()); u.on("error", () => c.destroy()) })`,
  `server.listen(${proxyPort}, "127.0.0.1", () => {`,
  `  const p = spawn(process.argv[1], process.argv.slice(2), { stdio: "inherit" })`,
  `  p.on("error", (e) => { console.error(e.message); process.exit(127) })`,
  `  p.on("exit", (code, signal) => { if (signal) process.kill(process.pid, signal); else process.exit(code ?? 1) })`,
  `})`
].join("\n")
