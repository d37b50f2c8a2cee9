/**
 * How the `nodus` commands that talk to a running server reach it, as the admin, and a failed answer turned into one
 * line with the server's fix. The server is found as kubectl plugins find theirs when nothing names it otherwise: no
 * server flag and no NODUS_ADDR, NODUS_DATA_DIR, NODUS_PUBLIC_URL or NODUS_BOOTSTRAP_TOKEN, and a kubeconfig to read
 * ($KUBECONFIG, else ~/.kube/config; or NODUS_URL and NODUS_TOKEN): its current context's server, CA and token, read
 * by the TypeScript client's configuration (client/Config.ts). Otherwise as `nodus kubeconfig` finds it: flags,
 * environment, data directory (its URL, CA and admin token).
 */
import { existsSync } from "node:fs"
import { type IncomingMessage, request as httpRequest } from "node:http"
import { request as httpsRequest } from "node:https"
import { homedir } from "node:os"
import { join } from "node:path"
import type { Readable } from "node:stream"
import { resolveConfigSync } from "../client/Config.ts"
import { messageWithoutFix } from "../core/meta/ApiError.ts"
import type { ServerConfig } from "../server/Config.ts"

/** A running server and the admin's way in. */
export interface Server {
  /** `https://host:port` (or http). */
  readonly url: string
  readonly token: string
  /** PEM text of the CA that signed its certificate; undefined: the system's roots. */
  readonly ca: string | undefined
  readonly apiGroup: string
}

export interface ServerClient {
  readonly server: Server
  /** `<server>/apis/<group>/v1` */
  readonly base: string
  /** A request; a Readable body is streamed (chunked), the others sent whole. */
  readonly request: (
    method: string,
    url: string,
    body?: Uint8Array | string | Readable,
    contentType?: string
  ) => Promise<IncomingMessage>
}

/** The variables that name a server of a data directory: set, they win over any kubeconfig. */
const serverVariables = ["NODUS_ADDR", "NODUS_DATA_DIR", "NODUS_PUBLIC_URL", "NODUS_BOOTSTRAP_TOKEN"]

const set = (value: string | undefined) => value !== undefined && value !== ""

/** Whether the server comes from a kubeconfig (or NODUS_URL): nothing names a data directory's, and one is there. */
const fromKubeconfig = (
  serverArgs: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>
): boolean =>
  serverArgs.length === 0 && !serverVariables.some((name) => set(env[name])) &&
  (set(env["KUBECONFIG"]) || set(env["NODUS_URL"]) || existsSync(join(homedir(), ".kube", "config")))

/** The server the admin means (the module's comment); `serverArgs` are the server flags of the command line. */
export const findServer = async (
  serverArgs: ReadonlyArray<string>,
  configFrom: (args: ReadonlyArray<string>) => ServerConfig,
  env: Readonly<Record<string, string | undefined>> = process.env
): Promise<Server> => {
  const apiGroup = set(env["NODUS_API_GROUP"]) ? env["NODUS_API_GROUP"]! : "nodus.dev"
  if (fromKubeconfig(serverArgs, env)) {
    const found = resolveConfigSync({ env, group: apiGroup })
    return { url: found.baseUrl, token: found.token, ca: found.ca, apiGroup }
  }
  const config = configFrom(serverArgs)
  const { ensureAdminToken, ensureDataDir, ensureTls, serverUrl } = await import("../server/Bootstrap.ts")
  ensureDataDir(config.dataDir)
  return {
    url: serverUrl(config),
    token: ensureAdminToken(config),
    ca: config.tls ? ensureTls(config, new Date()).ca : undefined,
    apiGroup: config.apiGroup
  }
}

export const connect = (server: Server): ServerClient => {
  const send = server.url.startsWith("https:") ? httpsRequest : httpRequest
  const request = (
    method: string,
    url: string,
    body?: Uint8Array | string | Readable,
    contentType = "application/json"
  ) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      const headers = {
        authorization: `Bearer ${server.token}`,
        ...(body === undefined ? {} : { "content-type": contentType })
      }
      const call = send(url, { method, headers, ...(server.ca === undefined ? {} : { ca: server.ca }) }, resolve)
      call.on("error", reject)
      if (body === undefined || typeof body === "string" || body instanceof Uint8Array) return call.end(body)
      body.on("error", (error) => call.destroy(error))
      body.pipe(call)
    })
  return { server, base: `${server.url}/apis/${server.apiGroup}/v1`, request }
}

export const text = async (response: IncomingMessage) => {
  let body = ""
  for await (const chunk of response.setEncoding("utf8")) body += chunk
  return body
}

/** A Status body in one line, with the server's fix on the next (the message without the fix it also carries). */
export const statusLine = (
  status: { readonly reason?: unknown; readonly message?: unknown; readonly fix?: unknown },
  httpStatus: number | undefined
): string => {
  const message = typeof status.message === "string" ? messageWithoutFix(status.message, status.fix) : ""
  return `${typeof status.reason === "string" ? status.reason : `HTTP ${httpStatus}`}: ${message}${
    typeof status.fix === "string" ? `\n  fix: ${status.fix}` : ""
  }`
}

/** A failed answer in one line, with the server's fix. */
export const failure = async (response: IncomingMessage) => {
  const body = await text(response)
  try {
    return statusLine(JSON.parse(body) as Record<string, unknown>, response.statusCode)
  } catch {
    return `HTTP ${response.statusCode}: ${body.slice(0, 200)}`
  }
}
