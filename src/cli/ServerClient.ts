/**
 * How the `nodus` commands that talk to a running server reach it, as the admin: the server found as `nodus kubeconfig`
 * finds it (flags, environment, data directory: its URL, CA and admin token), a request, and a failed answer turned
 * into one line with the server's fix.
 */
import { request as httpRequest, type IncomingMessage } from "node:http"
import { request as httpsRequest } from "node:https"
import type { Readable } from "node:stream"
import type { ServerConfig } from "../server/Config.ts"

export interface ServerClient {
  /** `<server>/apis/<group>/v1` */
  readonly base: string
  /** A request; a Readable body is streamed (chunked), the others sent whole. */
  readonly request: (method: string, url: string, body?: Uint8Array | string | Readable, contentType?: string) => Promise<IncomingMessage>
}

export const connect = async (config: ServerConfig): Promise<ServerClient> => {
  const { ensureAdminToken, ensureDataDir, ensureTls, serverUrl } = await import("../server/Bootstrap.ts")
  ensureDataDir(config.dataDir)
  const ca = config.tls ? ensureTls(config, new Date()).ca : undefined
  const token = ensureAdminToken(config)
  const request = (method: string, url: string, body?: Uint8Array | string | Readable, contentType = "application/json") =>
    new Promise<IncomingMessage>((resolve, reject) => {
      const headers = { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": contentType }) }
      const call = (config.tls ? httpsRequest : httpRequest)(url, { method, headers, ...(ca === undefined ? {} : { ca }) }, resolve)
      call.on("error", reject)
      if (body === undefined || typeof body === "string" || body instanceof Uint8Array) return call.end(body)
      body.on("error", (error) => call.destroy(error))
      body.pipe(call)
    })
  return { base: `${serverUrl(config)}/apis/${config.apiGroup}/v1`, request }
}

export const text = async (response: IncomingMessage) => {
  let body = ""
  for await (const chunk of response.setEncoding("utf8")) body += chunk
  return body
}

/** A failed answer in one line, with the server's fix. */
export const failure = async (response: IncomingMessage) => {
  const body = await text(response)
  try {
    const status = JSON.parse(body) as { reason?: string; message?: string; fix?: string }
    return `${status.reason ?? `HTTP ${response.statusCode}`}: ${status.message ?? ""}${status.fix === undefined ? "" : `\n  fix: ${status.fix}`}`
  } catch {
    return `HTTP ${response.statusCode}: ${body.slice(0, 200)}`
  }
}
