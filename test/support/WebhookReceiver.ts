/**
 * A webhook receiver for tests: a real HTTPS server on loopback (a self-signed certificate; the sender takes any on
 * loopback under the development switch). It keeps every request it got, answers with the status `respond` says, and
 * verifies each delivery's signature with the `standardwebhooks` package — an implementation that is not ours.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import { Webhook } from "standardwebhooks"
import { generateTlsMaterial } from "../../src/apiserver/tls/Certificates.ts"

export interface Received {
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly json: any
  readonly path: string
  /** When it arrived (epoch ms). */
  readonly at: number
}

/** A receiver over HTTPS (a self-signed certificate), or plain HTTP with `{ http: true }` (a development receiver). */
export const startReceiver = async (options: { readonly http?: boolean } = {}) => {
  const received: Array<Received> = []
  let respond: (request: Received) => number = () => 200
  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]))
      const got: Received = { headers, body, json: JSON.parse(body), path: request.url ?? "", at: Date.now() }
      received.push(got)
      const status = respond(got)
      if (status === 0) return // no answer: the sender times out
      response.writeHead(status).end()
    })
  }
  const material = options.http === true
    ? undefined
    : generateTlsMaterial({ hosts: ["127.0.0.1", "receiver.example.com"], now: new Date() })
  const server: Server | ReturnType<typeof createHttpServer> = material === undefined
    ? createHttpServer(handle)
    : createServer({ cert: material.certPem, key: material.keyPem }, handle)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    received,
    /** What the receiver answers from now on (0: nothing, until the sender gives up waiting). */
    answer: (next: (request: Received) => number) => {
      respond = next
    },
    /** Whether `secret` verifies a delivery (standardwebhooks: signature, and a timestamp within 5 minutes of now). */
    verifies: (secret: string, got: Received, now?: Date) => {
      // A delivery signed at simulated time is checked against that time, as a receiver whose clock agrees would.
      const real = Date.now
      if (now !== undefined) Date.now = () => now.getTime()
      try {
        new Webhook(secret).verify(got.body, got.headers)
        return true
      } catch {
        return false
      } finally {
        Date.now = real
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>
