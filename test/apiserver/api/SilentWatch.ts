/**
 * A watch client that stops reading, as a stalled or overwhelmed client does (docs/api-machinery.md, "Lists and
 * watches"): it sends the request over a raw socket and reads nothing until `resume`, so that the server's writes
 * fill the socket; then it reads until the server closes the connection (the request says `Connection: close`) and
 * decodes the chunked body into events.
 */
import { connect } from "node:net"
import type { TestServer } from "../../support/TestServer.ts"
import type { WatchEvent } from "./Support.ts"

export interface SilentWatchResult {
  readonly status: number
  readonly events: ReadonlyArray<WatchEvent>
  /** Whether the body ended with its last chunk: false when the server cut the connection in the middle of it. */
  readonly complete: boolean
}

export interface SilentWatch {
  /** Reads from now until the server closes the connection; fails after `timeoutMs`. */
  readonly resume: (timeoutMs?: number) => Promise<SilentWatchResult>
  readonly close: () => void
}

/** Opens the watch at `path` and reads nothing; resolves once the request is sent. */
export const openSilentWatch = (server: TestServer, path: string): Promise<SilentWatch> =>
  new Promise((resolve, reject) => {
    const url = new URL(path, server.url)
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(
        `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`
      )
      socket.pause()
      resolve({ resume, close: () => socket.destroy() })
    })
    socket.on("error", reject)
    const received: Array<Buffer> = []
    const resume = (timeoutMs = 10_000) =>
      new Promise<SilentWatchResult>((done, failed) => {
        const timer = setTimeout(() => {
          socket.destroy()
          failed(new Error(`the server did not close the watch within ${timeoutMs} ms after the client read again`))
        }, timeoutMs)
        socket.on("data", (chunk: Buffer) => received.push(chunk))
        socket.on("close", () => {
          clearTimeout(timer)
          done(decode(Buffer.concat(received)))
        })
        socket.resume()
      })
  })

/** The status, events and completeness of an HTTP/1.1 response with a chunked body of newline-delimited events. */
const decode = (response: Buffer): SilentWatchResult => {
  const headEnd = response.indexOf("\r\n\r\n")
  const status = Number(/^HTTP\/1\.1 (\d{3})/u.exec(response.subarray(0, headEnd).toString("latin1"))?.[1] ?? 0)
  const body: Array<Buffer> = []
  let offset = headEnd + 4
  let complete = false
  for (;;) {
    const lineEnd = response.indexOf("\r\n", offset)
    if (lineEnd < 0) break
    const size = Number.parseInt(response.subarray(offset, lineEnd).toString("latin1"), 16)
    if (size === 0) {
      complete = true
      break
    }
    const data = response.subarray(lineEnd + 2, lineEnd + 2 + size)
    body.push(data)
    if (data.length < size) break
    offset = lineEnd + 2 + size + 2
  }
  const lines = Buffer.concat(body).toString("utf8").split("\n")
  // A cut body may end inside an event: only whole lines are events.
  const events = lines.slice(0, -1).filter((line) => line.trim() !== "").map((line) => JSON.parse(line) as WatchEvent)
  return { status, events, complete }
}
