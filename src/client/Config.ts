/**
 * Where a client finds its server, key and CA (docs/clients.md, "Where it finds the server"), as the Python client
 * does: each from its option, else NODUS_URL / NODUS_TOKEN / NODUS_CA, else the kubeconfig `nodus kubeconfig` prints
 * (at $KUBECONFIG, its first file, else ~/.kube/config). Anything missing or unreadable is a ConfigurationError before
 * any request is sent.
 */
import { Effect } from "effect"
import { X509Certificate } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { homedir } from "node:os"
import { delimiter, dirname, isAbsolute, join, resolve } from "node:path"
import { parse } from "yaml"
import { ConfigurationError, noAnswer } from "./Errors.ts"

export interface ClientOptions {
  /** The server, `https://host:port` (NODUS_URL). */
  readonly baseUrl?: string
  /** The API key (NODUS_TOKEN). */
  readonly token?: string
  /** The CA that signed the server's certificate: a PEM file path or PEM text (NODUS_CA: a path). */
  readonly ca?: string
  /** A kubeconfig to read instead of $KUBECONFIG or ~/.kube/config. */
  readonly kubeconfig?: string
  /** The API group (default `nodus.dev`, for a server started with another). */
  readonly group?: string
  /** Seconds one request may take (default 60). */
  readonly timeout?: number
  /** Retries after the first try (default 3): a request is sent at most `1 + maxRetries` times. */
  readonly maxRetries?: number
  /** The longest Retry-After, in seconds, the client sleeps through (default 30); a longer one is raised at once. */
  readonly maxRetryWait?: number
  /** The environment to read NODUS_* and KUBECONFIG from (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>
}

export interface ClientConfig {
  readonly baseUrl: string
  readonly token: string
  /** PEM text of the CA, when one was given (else the system's roots). */
  readonly ca: string | undefined
  /** The kubeconfig context's namespace, if it names one (a default project for callers that want one). */
  readonly defaultProject: string | undefined
  readonly group: string
  readonly timeoutMs: number
  readonly maxRetries: number
  readonly maxRetryWaitMs: number
}

const how =
  "set NODUS_URL and NODUS_TOKEN, pass baseUrl and token, or write a kubeconfig with `nodus kubeconfig > ~/.kube/config`"

const fail = (message: string) => noAnswer(ConfigurationError, message)

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {}

const text = (value: unknown) => typeof value === "string" && value !== "" ? value : undefined

interface Kubeconfig {
  readonly server: string | undefined
  readonly token: string | undefined
  /** PEM text or a file path. */
  readonly ca: string | undefined
  readonly namespace: string | undefined
}

const named = (entries: unknown, name: unknown, what: string, path: string): Record<string, unknown> => {
  const entry = (Array.isArray(entries) ? entries : []).map(record).find((candidate) => candidate["name"] === name)
  if (entry === undefined) {
    throw fail(`kubeconfig ${path} names ${what} '${String(name)}', which it does not define; ${how}`)
  }
  return record(entry[what])
}

/** The current context's server, token, CA and namespace. */
const readKubeconfig = (path: string): Kubeconfig => {
  let document: Record<string, unknown>
  try {
    const parsed: unknown = parse(readFileSync(path, "utf8"))
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not a mapping")
    document = parsed as Record<string, unknown>
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === undefined
      ? `is not a kubeconfig: ${(error as Error).message}`
      : `cannot be read: ${(error as Error).message}`
    throw fail(`kubeconfig ${path} ${reason}; ${how}`)
  }
  const contexts = Array.isArray(document["contexts"]) ? document["contexts"] : []
  const current = document["current-context"] ?? (contexts.length === 1 ? record(contexts[0])["name"] : undefined)
  if (current === undefined || current === null) throw fail(`kubeconfig ${path} has no current-context; ${how}`)
  const context = named(contexts, current, "context", path)
  const cluster = named(document["clusters"], context["cluster"], "cluster", path)
  const user = named(document["users"], context["user"], "user", path)
  const caData = text(cluster["certificate-authority-data"])
  const caFile = text(cluster["certificate-authority"])
  return {
    server: text(cluster["server"]),
    token: text(user["token"]),
    ca: caData !== undefined
      ? Buffer.from(caData, "base64").toString("utf8")
      : caFile === undefined
      ? undefined
      : isAbsolute(caFile)
      ? caFile
      : join(dirname(resolve(path)), caFile),
    namespace: text(context["namespace"])
  }
}

/** The CA's PEM text, checked to hold a certificate: a path that cannot be read or text that is none is refused. */
const readCa = (ca: string): string => {
  const inline = ca.trimStart().startsWith("-----BEGIN")
  const where = inline ? "the CA given as PEM text" : `the CA ${ca}`
  try {
    const pem = inline ? ca : readFileSync(ca, "utf8")
    new X509Certificate(pem)
    return pem
  } catch (error) {
    throw fail(`cannot read ${where}: ${(error as Error).message}`)
  }
}

/**
 * The client's configuration, thrown as a ConfigurationError (resolveConfig fails with it): for the `nodus` commands.
 */
export const resolveConfigSync = (options: ClientOptions): ClientConfig => {
  const env = options.env ?? process.env
  let baseUrl = text(options.baseUrl) ?? text(env["NODUS_URL"])
  let token = text(options.token) ?? text(env["NODUS_TOKEN"])
  let ca = text(options.ca) ?? text(env["NODUS_CA"])
  let defaultProject: string | undefined
  const kubeconfigPath = options.kubeconfig ?? text(env["KUBECONFIG"])?.split(delimiter)[0] ??
    join(homedir(), ".kube", "config")
  if (baseUrl === undefined || token === undefined || options.kubeconfig !== undefined) {
    if (options.kubeconfig !== undefined || existsSync(kubeconfigPath)) {
      const found = readKubeconfig(kubeconfigPath)
      baseUrl ??= found.server
      token ??= found.token
      ca ??= found.ca
      defaultProject = found.namespace
    }
  }
  if (baseUrl === undefined) throw fail(`no server URL: ${how}`)
  if (token === undefined) throw fail(`no API key for ${baseUrl}: ${how}`)
  if (!/^https?:\/\//u.test(baseUrl)) throw fail(`server URL '${baseUrl}' is not http(s)://host:port`)
  return {
    baseUrl: baseUrl.replace(/\/+$/u, ""),
    token,
    ca: ca === undefined ? undefined : readCa(ca),
    defaultProject,
    group: options.group ?? "nodus.dev",
    timeoutMs: (options.timeout ?? 60) * 1000,
    maxRetries: options.maxRetries ?? 3,
    maxRetryWaitMs: (options.maxRetryWait ?? 30) * 1000
  }
}

/** The client's configuration from its options, the environment and the kubeconfig; ConfigurationError otherwise. */
export const resolveConfig = (options: ClientOptions = {}): Effect.Effect<ClientConfig, ConfigurationError> =>
  Effect.try({
    try: () => resolveConfigSync(options),
    catch: (error) => error instanceof ConfigurationError ? error : fail(String(error))
  })
