/**
 * What a server needs on disk before it serves: the data directory, its TLS material (a self-signed CA and a server
 * certificate for 127.0.0.1/localhost, generated once on first start), the admin key (NODUS_BOOTSTRAP_TOKEN, or
 * generated once into `<data dir>/admin.token`, mode 0600) and the key sealing Secret values (NODUS_SECRET_KEY, or
 * generated once into `<data dir>/secrets.key`, mode 0600). `nodus kubeconfig` reads the same files.
 */
import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { isIP } from "node:net"
import { join } from "node:path"
import { keyPrefix } from "../apiserver/Auth.ts"
import { generateTlsMaterial } from "../apiserver/tls/Certificates.ts"
import { secretKeyBytes } from "../runtime/SecretCipher.ts"
import { decodeSecretKey, secretKeyProblem, type ServerConfig } from "./Config.ts"
import { ensureDataDir, pgliteDirectory } from "./DataDir.ts"

export { ensureDataDir, pgliteDirectory }

export interface TlsFiles {
  readonly cert: string
  readonly key: string
  /** The CA clients should trust (the generated CA, or the configured certificate itself). */
  readonly ca: string
}

export const tlsDirectory = (dataDir: string): string => join(dataDir, "tls")
export const adminTokenFile = (dataDir: string): string => join(dataDir, "admin.token")
export const secretKeyFile = (dataDir: string): string => join(dataDir, "secrets.key")

export const lockFile = (dataDir: string): string => join(dataDir, "server.pid")

const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Claims the data directory for this process: embedded PGlite is a single session, and two servers opening the same
 * files corrupt them. A lock left by a process that no longer runs is taken over. Returns the release function, or
 * the pid of the live holder.
 */
export const lockDataDir = (
  dataDir: string
): { readonly _tag: "Locked"; readonly release: () => void } | { readonly _tag: "Held"; readonly pid: number } => {
  const file = lockFile(dataDir)
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: "wx", mode: 0o600 })
      return { _tag: "Locked", release: () => rmSync(file, { force: true }) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      const pid = Number(readFileSync(file, "utf8").trim())
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isRunning(pid)) return { _tag: "Held", pid }
      rmSync(file, { force: true })
    }
  }
  return { _tag: "Held", pid: Number(readFileSync(file, "utf8").trim()) }
}

const writePrivate = (path: string, content: string): void => {
  writeFileSync(path, content, { mode: 0o600 })
  chmodSync(path, 0o600)
}

/** The hosts the generated certificate names: loopback always, and the listen host when it is a real address. */
export const certificateHosts = (host: string): ReadonlyArray<string> => {
  const hosts = new Set(["127.0.0.1", "localhost", "::1"])
  if (host !== "0.0.0.0" && host !== "::" && host !== "") hosts.add(isIP(host) === 0 ? host.toLowerCase() : host)
  return [...hosts]
}

/** The TLS files to serve with, generating the CA and server certificate on first start. */
export const ensureTls = (config: ServerConfig, now: Date): TlsFiles => {
  if (config.tlsCert !== undefined && config.tlsKey !== undefined) {
    return {
      cert: readFileSync(config.tlsCert, "utf8"),
      key: readFileSync(config.tlsKey, "utf8"),
      ca: readFileSync(config.tlsCert, "utf8")
    }
  }
  const directory = tlsDirectory(config.dataDir)
  const files = {
    ca: join(directory, "ca.crt"),
    caKey: join(directory, "ca.key"),
    cert: join(directory, "server.crt"),
    key: join(directory, "server.key")
  }
  if (!existsSync(files.cert) || !existsSync(files.key) || !existsSync(files.ca)) {
    mkdirSync(directory, { recursive: true, mode: 0o700 })
    const material = generateTlsMaterial({ hosts: certificateHosts(config.host), now })
    writeFileSync(files.ca, material.caCertPem)
    writePrivate(files.caKey, material.caKeyPem)
    writeFileSync(files.cert, material.certPem)
    writePrivate(files.key, material.keyPem)
  }
  return {
    cert: readFileSync(files.cert, "utf8"),
    key: readFileSync(files.key, "utf8"),
    ca: readFileSync(files.ca, "utf8")
  }
}

/** The admin key: configured, or read from (or generated once into) `<data dir>/admin.token`. */
export const ensureAdminToken = (config: ServerConfig): string => {
  if (config.bootstrapToken !== undefined) return config.bootstrapToken
  const file = adminTokenFile(config.dataDir)
  if (existsSync(file)) return readFileSync(file, "utf8").trim()
  const token = `${keyPrefix}${randomBytes(32).toString("base64url")}`
  writePrivate(file, `${token}\n`)
  return token
}

/**
 * The key Secret values are sealed with (docs/secrets.md): NODUS_SECRET_KEY, or read from (or generated once into)
 * `<data dir>/secrets.key`, mode 0600. Losing it loses every stored secret value; servers sharing a database need the
 * same key.
 */
export const ensureSecretKey = (config: ServerConfig): Uint8Array => {
  if (config.secretKey !== undefined) return decodeSecretKey(config.secretKey)!
  const file = secretKeyFile(config.dataDir)
  if (!existsSync(file)) writePrivate(file, `${randomBytes(secretKeyBytes).toString("base64")}\n`)
  const key = decodeSecretKey(readFileSync(file, "utf8"))
  if (key === undefined) throw new Error(secretKeyProblem(file))
  return key
}

/** The URL clients use: loopback when listening on every interface. */
export const serverUrl = (config: ServerConfig, port: number = config.port): string => {
  const host = config.host === "0.0.0.0" || config.host === ""
    ? "127.0.0.1"
    : config.host === "::"
    ? "::1"
    : config.host
  const shown = isIP(host) === 6 ? `[${host}]` : host
  return `${config.tls ? "https" : "http"}://${shown}:${port}`
}

/** A kubeconfig for the admin: server, CA data and token, as `nodus kubeconfig` prints it. */
export const kubeconfig = (
  options: {
    readonly server: string
    readonly ca: string | undefined
    readonly token: string
    readonly namespace?: string
  }
): string => {
  const cluster = options.ca === undefined
    ? `    server: ${options.server}\n`
    : `    server: ${options.server}\n    certificate-authority-data: ${Buffer.from(options.ca).toString("base64")}\n`
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: nodus",
    "  cluster:",
    cluster.trimEnd(),
    "users:",
    "- name: nodus-admin",
    "  user:",
    `    token: ${options.token}`,
    "contexts:",
    "- name: nodus",
    "  context:",
    "    cluster: nodus",
    "    user: nodus-admin",
    ...(options.namespace === undefined ? [] : [`    namespace: ${options.namespace}`]),
    "current-context: nodus",
    ""
  ].join("\n")
}
