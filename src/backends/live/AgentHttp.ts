/**
 * The agent protocol over HTTPS (Protocol.ts), the client end: what `nodus agent` on another host uses. Every call is
 * a POST of JSON that the agent makes (outbound only); hello and sync carry the agent's key as a bearer credential.
 * A sync's long poll is answered within `waitMs`; the request allows that plus a margin before it gives up.
 */
import { createReadStream, statSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { request as httpsRequest } from "node:https"
import {
  type AgentLink,
  agentPaths,
  type EnrollRequest,
  type EnrollResponse,
  type Lease,
  type OutputTarget,
  type SyncResponse
} from "./Protocol.ts"

export interface Endpoint {
  /** https://host:port (http:// only for loopback tests). */
  readonly server: string
  /** PEM of the CA that signed the server's certificate, when it is not a public one. */
  readonly ca: string | undefined
}

/** What a call waits for beyond the server's long poll. */
const marginMs = 15_000

export class AgentHttpError extends Error {
  readonly status: number
  constructor(status: number, message: string) {
    super(message)
    this.status = status
  }
}

const post = <A>(
  endpoint: Endpoint,
  path: string,
  body: unknown,
  credential: string | undefined,
  timeoutMs: number
): Promise<A> =>
  new Promise((resolve, reject) => {
    const url = new URL(path, endpoint.server)
    const payload = JSON.stringify(body)
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(payload))
    }
    if (credential !== undefined) headers["authorization"] = `Bearer ${credential}`
    const options = {
      method: "POST",
      headers,
      timeout: timeoutMs,
      ...(endpoint.ca === undefined ? {} : { ca: endpoint.ca })
    }
    const call = url.protocol === "https:" ? httpsRequest(url, options) : httpRequest(url, options)
    call.on("timeout", () => call.destroy(new Error(`no answer from ${url.origin} within ${timeoutMs} ms`)))
    call.on("error", reject)
    call.on("response", (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("error", reject)
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let parsed: unknown
        try {
          parsed = JSON.parse(text)
        } catch {
          return reject(
            new AgentHttpError(
              response.statusCode ?? 0,
              `${url.pathname}: HTTP ${response.statusCode}: ${text.slice(0, 200)}`
            )
          )
        }
        const status = response.statusCode ?? 0
        if (status >= 200 && status < 300) return resolve(parsed as A)
        const message = typeof parsed === "object" && parsed !== null && "message" in parsed
          ? String(parsed.message)
          : text.slice(0, 200)
        reject(new AgentHttpError(status, `${url.pathname}: HTTP ${status}: ${message}`))
      })
    })
    call.end(payload)
  })

/** Streams a file as an upload (an output, a checkpoint); the answer is JSON as for every call. */
const upload = <A>(
  endpoint: Endpoint,
  path: string,
  target: OutputTarget,
  file: string,
  credential: string
): Promise<A> =>
  new Promise((resolve, reject) => {
    const query = new URLSearchParams({
      node: target.node,
      epoch: `${target.epoch}`,
      run: target.run,
      name: target.name
    })
    const url = new URL(`${path}?${query}`, endpoint.server)
    const headers = {
      "content-type": "application/octet-stream",
      "content-length": String(statSync(file).size),
      authorization: `Bearer ${credential}`
    }
    const options = {
      method: "POST",
      headers,
      timeout: uploadIdleMs,
      ...(endpoint.ca === undefined ? {} : { ca: endpoint.ca })
    }
    const call = url.protocol === "https:" ? httpsRequest(url, options) : httpRequest(url, options)
    call.on("timeout", () => call.destroy(new Error(`the upload to ${url.origin} stalled for ${uploadIdleMs} ms`)))
    call.on("error", reject)
    call.on("response", (response) => {
      let text = ""
      response.setEncoding("utf8").on("data", (chunk: string) => (text += chunk))
      response.on("end", () => ((response.statusCode ?? 0) < 300
        ? resolve(JSON.parse(text) as A)
        : reject(
          new AgentHttpError(
            response.statusCode ?? 0,
            `${url.pathname}: HTTP ${response.statusCode}: ${text.slice(0, 200)}`
          )
        )))
    })
    createReadStream(file).on("error", reject).pipe(call)
  })

/** Bytes the server streams (an input, a checkpoint to restore); a non-2xx answer is an error with its message. */
const download = (
  endpoint: Endpoint,
  path: string,
  target: OutputTarget,
  credential: string
): Promise<AsyncIterable<Uint8Array>> =>
  new Promise((resolve, reject) => {
    const query = new URLSearchParams({
      node: target.node,
      epoch: `${target.epoch}`,
      run: target.run,
      name: target.name
    })
    const url = new URL(`${path}?${query}`, endpoint.server)
    const options = {
      method: "POST",
      headers: { authorization: `Bearer ${credential}` },
      timeout: uploadIdleMs,
      ...(endpoint.ca === undefined ? {} : { ca: endpoint.ca })
    }
    const call = url.protocol === "https:" ? httpsRequest(url, options) : httpRequest(url, options)
    call.on("timeout", () => call.destroy(new Error(`the download from ${url.origin} stalled for ${uploadIdleMs} ms`)))
    call.on("error", reject)
    call.on("response", (response) => {
      if ((response.statusCode ?? 0) < 300) return resolve(response)
      let text = ""
      response.setEncoding("utf8").on("data", (chunk: string) => (text += chunk))
      response.on("end", () =>
        reject(
          new AgentHttpError(
            response.statusCode ?? 0,
            `${url.pathname}: HTTP ${response.statusCode}: ${text.slice(0, 200)}`
          )
        ))
    })
    call.end()
  })

/** An upload that moves no byte for this long is given up (it is retried by nobody: the run fails with the reason). */
const uploadIdleMs = 60_000

export const enroll = (endpoint: Endpoint, request: EnrollRequest): Promise<EnrollResponse> =>
  post<EnrollResponse>(endpoint, agentPaths.enroll, request, undefined, marginMs)

/** The link of an enrolled agent: its key as the bearer credential of every call. */
export const httpLink = (endpoint: Endpoint, credential: string): AgentLink => ({
  hello: (hello) => post<Lease>(endpoint, agentPaths.hello, hello, credential, marginMs),
  sync: (request) => post<SyncResponse>(endpoint, agentPaths.sync, request, credential, request.waitMs + marginMs),
  putOutput: (target, file) =>
    upload<unknown>(endpoint, agentPaths.outputs, target, file, credential).then(() => undefined),
  getInput: (target) => download(endpoint, agentPaths.inputs, target, credential),
  putCheckpoint: (target, file) =>
    upload<{ readonly seq: number }>(endpoint, agentPaths.checkpoints, target, file, credential),
  getCheckpoint: (target) => download(endpoint, agentPaths.restores, target, credential)
})
