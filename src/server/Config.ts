/**
 * Server configuration: every setting has an environment variable and a CLI flag (the flag wins), one row each in
 * `settings` below, which also writes `nodus --help`. The names are part of the product: later checks and users'
 * scripts depend on them (README, Configuration).
 */
import { isIP } from "node:net"
import { type AddressRange, parseRange } from "../core/PublicAddress.ts"

export interface ServerConfig {
  readonly host: string
  readonly port: number
  readonly dataDir: string
  /** PostgreSQL URL; when absent the embedded PGlite store lives in `<dataDir>/pglite`. */
  readonly databaseUrl: string | undefined
  readonly tls: boolean
  readonly tlsCert: string | undefined
  readonly tlsKey: string | undefined
  /** The admin key; when absent one is generated once into `<dataDir>/admin.token`. */
  readonly bootstrapToken: string | undefined
  /** The key Secret values are sealed with (base64 or hex of 32 bytes); when absent, `<dataDir>/secrets.key`. */
  readonly secretKey: string | undefined
  readonly apiGroup: string
  /** What runs the workloads behind the API: this host's processes (docs/live.md), the simulator, or nothing. */
  readonly backend: Backend
  /** Virtual seconds per wall-clock second of the sim backend. */
  readonly simSpeed: number
  /** Sandbox boxes the local backend keeps started ahead (docs/sandboxes.md, "Warm boxes"). */
  readonly warmBoxes: number
  /** The URL clients reach the server at, when it is not the listening address (behind a proxy). */
  readonly publicUrl: string | undefined
  /** Development only: webhook receivers on loopback, over http or https with any certificate (docs/webhooks.md). */
  readonly webhookAllowLoopback: boolean
  /** What this process runs of a store shared by several (docs/scale-out.md, "Roles"). */
  readonly role: Role
  /**
   * Ranges boxes (through their egress proxies) and the agent's `url` inputs may reach although they are not public
   * (docs/live.md, "Network"): an operator's explicit exceptions, none by default.
   */
  readonly egressAllow: ReadonlyArray<AddressRange>
}

/**
 * What a process runs (docs/scale-out.md, "Roles"): `all` the API and a share of the controllers; `api` the API alone
 * (it owns no object and joins no cluster); `controllers` a share of the controllers, its listener answering only the
 * health checks, /version and the node agents. Several processes on one database may mix them; the embedded store has
 * one process, which runs everything.
 */
export const roles = ["all", "api", "controllers"] as const
export type Role = typeof roles[number]

/**
 * The backends `NODUS_BACKEND` names. `local` runs workloads as real processes on this host through an in-process node
 * agent (docs/live.md); `sim` on the simulator (docs/simulator.md); `none` serves the API alone: objects are stored and
 * validated, nothing runs them (the API benchmark measures the machinery this way).
 */
export const backends = ["local", "sim", "none"] as const
export type Backend = typeof backends[number]

interface Setting {
  readonly env: string
  readonly flag: string
  readonly fallback: string | undefined
  readonly description: string
  /** A switch: the bare flag means on (`1`); its variable takes 1/0, on/off or true/false. */
  readonly switch?: boolean
  /** The flag may be given several times; its values, and its variable's, are a comma-separated list. */
  readonly repeatable?: boolean
}

/** The most warm boxes a host keeps (each is a bwrap box and a node process, about 40 MB). */
export const warmBoxesMax = 16

export const settings: ReadonlyArray<Setting> = [
  { env: "NODUS_ADDR", flag: "--addr", fallback: "127.0.0.1:8443", description: "host:port to listen on" },
  {
    env: "NODUS_DATA_DIR",
    flag: "--data-dir",
    fallback: "./.nodus",
    description: "state directory: TLS material, admin token, embedded database"
  },
  {
    env: "DATABASE_URL",
    flag: "--database-url",
    fallback: undefined,
    description: "PostgreSQL URL; when absent, embedded PGlite in the data directory"
  },
  {
    env: "NODUS_TLS",
    flag: "--tls",
    fallback: "on",
    description: "on: HTTPS (self-signed CA generated on first start unless --tls-cert/--tls-key); off: plain HTTP"
  },
  {
    env: "NODUS_TLS_CERT",
    flag: "--tls-cert",
    fallback: undefined,
    description: "PEM certificate file to serve instead of the generated one"
  },
  { env: "NODUS_TLS_KEY", flag: "--tls-key", fallback: undefined, description: "PEM private key file for --tls-cert" },
  {
    env: "NODUS_BOOTSTRAP_TOKEN",
    flag: "--bootstrap-token",
    fallback: undefined,
    description: "the admin API key; generated into <data dir>/admin.token when unset"
  },
  {
    env: "NODUS_SECRET_KEY",
    flag: "--secret-key",
    fallback: undefined,
    description:
      "key sealing Secret values at rest (32 bytes, base64 or hex); generated into <data dir>/secrets.key when unset"
  },
  { env: "NODUS_API_GROUP", flag: "--api-group", fallback: "nodus.dev", description: "API group of every nodus kind" },
  {
    env: "NODUS_BACKEND",
    flag: "--backend",
    fallback: "local",
    description: "what runs workloads: local (real processes on this host), sim (the simulator) or none (the API alone)"
  },
  {
    env: "NODUS_SIM_SPEED",
    flag: "--sim-speed",
    fallback: "1",
    description: "sim backend: virtual seconds per wall-clock second (a positive number)"
  },
  {
    env: "NODUS_WARM_BOXES",
    flag: "--warm-boxes",
    fallback: "1",
    description: "local backend: Sandbox boxes kept started ahead, 0 to 16"
  },
  {
    env: "NODUS_PUBLIC_URL",
    flag: "--public-url",
    fallback: undefined,
    description: "URL clients reach the server at, for links in answers; default the listening address"
  },
  {
    env: "NODUS_WEBHOOK_ALLOW_LOOPBACK",
    flag: "--webhook-allow-loopback",
    fallback: "0",
    switch: true,
    description: "development only: webhook receivers on loopback, over http or https (any certificate)"
  },
  {
    env: "NODUS_ROLE",
    flag: "--role",
    fallback: "all",
    description:
      "with --database-url: all (the API and the controllers), api (the API alone) or controllers (the controllers alone)"
  },
  {
    env: "NODUS_EGRESS_ALLOW_CIDR",
    flag: "--egress-allow-cidr",
    fallback: undefined,
    repeatable: true,
    description:
      "local backend: a range (CIDR, such as 127.0.0.1/32) boxes and url inputs may reach although it is not public; repeatable"
  }
]

const switchValues: Readonly<Record<string, boolean>> = {
  "1": true,
  on: true,
  true: true,
  "0": false,
  off: false,
  false: false
}

/** A bare switch means on, unless a switch value follows it (`--switch 1`, `--switch off`): then that value. */
const switchValue = (next: string | undefined): string =>
  next !== undefined && switchValues[next] !== undefined ? next : "1"

export type ConfigResult = { readonly _tag: "Ok"; readonly config: ServerConfig } | {
  readonly _tag: "Err"
  readonly message: string
}

const apiGroupPattern = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/u

/** Splits `host:port`, `[::1]:port`, or `:port`. */
export const parseAddress = (address: string): { readonly host: string; readonly port: number } | undefined => {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/u.exec(address)
  if (match === null) return undefined
  const host = match[1] ?? (match[2] === "" ? "127.0.0.1" : match[2]!)
  const port = Number(match[3])
  if (port > 65_535 || (match[1] !== undefined && isIP(host) !== 6)) return undefined
  return { host, port }
}

/** Reads flags (`--name value` or `--name=value`) over environment variables over defaults. */
export const resolve = (
  env: Readonly<Record<string, string | undefined>>,
  args: ReadonlyArray<string>
): ConfigResult => {
  const values = new Map<string, string>()
  for (const setting of settings) {
    const fromEnv = env[setting.env]
    const value = fromEnv !== undefined && fromEnv !== "" ? fromEnv : setting.fallback
    if (value !== undefined) values.set(setting.env, value)
  }
  // A repeatable flag's values add up; the first replaces its variable's.
  const flagged = new Set<string>()
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    const [flag, inline] = arg.includes("=")
      ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
      : [arg, undefined]
    const setting = settings.find((candidate) => candidate.flag === flag)
    if (setting === undefined) return { _tag: "Err", message: `unknown flag ${flag} (see nodus --help)` }
    const bareSwitch = inline === undefined && setting.switch === true
    const value = inline ?? (bareSwitch ? switchValue(args[index + 1]) : args[++index])
    if (bareSwitch && value === args[index + 1]) index++
    if (value === undefined || (inline === undefined && value.startsWith("--"))) {
      return { _tag: "Err", message: `flag ${flag} needs a value` }
    }
    const earlier = setting.repeatable === true && flagged.has(setting.env) ? values.get(setting.env) : undefined
    values.set(setting.env, earlier === undefined ? value : `${earlier},${value}`)
    flagged.add(setting.env)
  }
  const address = parseAddress(values.get("NODUS_ADDR")!)
  if (address === undefined) {
    return { _tag: "Err", message: `NODUS_ADDR "${values.get("NODUS_ADDR")}" is not host:port` }
  }
  const tls = values.get("NODUS_TLS")!
  if (tls !== "on" && tls !== "off") return { _tag: "Err", message: `NODUS_TLS must be on or off, not "${tls}"` }
  const cert = values.get("NODUS_TLS_CERT")
  const key = values.get("NODUS_TLS_KEY")
  if ((cert === undefined) !== (key === undefined)) {
    return { _tag: "Err", message: "NODUS_TLS_CERT and NODUS_TLS_KEY go together: set both or neither" }
  }
  const secretKey = values.get("NODUS_SECRET_KEY")
  if (secretKey !== undefined && decodeSecretKey(secretKey) === undefined) {
    return { _tag: "Err", message: secretKeyProblem("NODUS_SECRET_KEY") }
  }
  const apiGroup = values.get("NODUS_API_GROUP")!
  if (!apiGroupPattern.test(apiGroup)) {
    return {
      _tag: "Err",
      message: `NODUS_API_GROUP "${apiGroup}" must be a DNS subdomain with a dot, such as nodus.dev`
    }
  }
  const backend = values.get("NODUS_BACKEND")!
  if (!(backends as ReadonlyArray<string>).includes(backend)) {
    return { _tag: "Err", message: `NODUS_BACKEND "${backend}" is not a backend: choose local, sim or none` }
  }
  const simSpeed = parseSpeed(values.get("NODUS_SIM_SPEED")!)
  if (simSpeed === undefined) {
    return {
      _tag: "Err",
      message: `NODUS_SIM_SPEED "${values.get("NODUS_SIM_SPEED")}" must be a positive number, such as 1 or 60`
    }
  }
  const warmBoxes = values.get("NODUS_WARM_BOXES")!
  if (!/^[0-9]{1,2}$/u.test(warmBoxes) || Number(warmBoxes) > warmBoxesMax) {
    return { _tag: "Err", message: `NODUS_WARM_BOXES "${warmBoxes}" must be a whole number from 0 to ${warmBoxesMax}` }
  }
  const webhookAllowLoopback = switchValues[values.get("NODUS_WEBHOOK_ALLOW_LOOPBACK")!]
  if (webhookAllowLoopback === undefined) {
    return {
      _tag: "Err",
      message: `NODUS_WEBHOOK_ALLOW_LOOPBACK "${
        values.get("NODUS_WEBHOOK_ALLOW_LOOPBACK")
      }" must be 1 or 0 (on/off, true/false)`
    }
  }
  const role = roleOf(values.get("NODUS_ROLE")!, values.get("DATABASE_URL"), backend)
  if (typeof role === "object") return { _tag: "Err", message: role.problem }
  const egressAllow = rangesOf(values.get("NODUS_EGRESS_ALLOW_CIDR"))
  if (typeof egressAllow === "string") {
    return {
      _tag: "Err",
      message:
        `NODUS_EGRESS_ALLOW_CIDR: "${egressAllow}" is not an address range: write one such as 127.0.0.1/32 or fd00::/8`
    }
  }
  const publicUrl = values.get("NODUS_PUBLIC_URL")
  if (publicUrl !== undefined && !isBaseUrl(publicUrl)) {
    return {
      _tag: "Err",
      message:
        `NODUS_PUBLIC_URL "${publicUrl}" must be an http or https URL without query or fragment, such as https://nodus.example.com`
    }
  }
  return {
    _tag: "Ok",
    config: {
      ...address,
      dataDir: values.get("NODUS_DATA_DIR")!,
      databaseUrl: values.get("DATABASE_URL"),
      tls: tls === "on",
      tlsCert: cert,
      tlsKey: key,
      bootstrapToken: values.get("NODUS_BOOTSTRAP_TOKEN"),
      secretKey,
      apiGroup,
      backend: backend as Backend,
      simSpeed,
      warmBoxes: Number(warmBoxes),
      publicUrl: publicUrl?.replace(/\/+$/u, ""),
      webhookAllowLoopback,
      role,
      egressAllow
    }
  }
}

/** A comma-separated list of CIDR ranges, or the first entry that is none. */
const rangesOf = (text: string | undefined): ReadonlyArray<AddressRange> | string => {
  const ranges: Array<AddressRange> = []
  for (const entry of (text ?? "").split(",").map((part) => part.trim()).filter((part) => part !== "")) {
    const range = parseRange(entry)
    if (range === undefined) return entry
    ranges.push(range)
  }
  return ranges
}

/** The role, or why it cannot be this process's. */
const roleOf = (
  role: string,
  databaseUrl: string | undefined,
  backend: string
): Role | { readonly problem: string } => {
  if (!isRole(role)) return { problem: `NODUS_ROLE "${role}" is not a role: choose all, api or controllers` }
  if (role !== "all" && databaseUrl === undefined) {
    return {
      problem:
        `NODUS_ROLE ${role} needs a PostgreSQL database (--database-url) shared with other servers: the embedded store has one server, which runs the API and the controllers (--role all)`
    }
  }
  if (role === "api" && backend === "local") {
    return {
      problem:
        "NODUS_ROLE api runs no workloads, so --backend local would offer this host to no controller: use --backend none on it, and local on the servers that run the controllers"
    }
  }
  return role
}

const isRole = (role: string): role is Role => (roles as ReadonlyArray<string>).includes(role)

/** A positive, finite decimal number ("1", "0.5", "3600"); hex, exponents and blanks are refused. */
const parseSpeed = (text: string): number | undefined => {
  if (!/^[0-9]+(\.[0-9]+)?$/u.test(text)) return undefined
  const speed = Number(text)
  return Number.isFinite(speed) && speed > 0 ? speed : undefined
}

const isBaseUrl = (text: string): boolean => {
  if (!URL.canParse(text)) return false
  const url = new URL(text)
  return (url.protocol === "http:" || url.protocol === "https:") && url.search === "" && url.hash === "" &&
    url.username === ""
}

/** The 32 bytes of a secret key written as base64 (standard or URL-safe, 43 characters and an optional `=`) or hex. */
export const decodeSecretKey = (text: string): Uint8Array | undefined => {
  const trimmed = text.trim()
  if (/^[0-9a-fA-F]{64}$/u.test(trimmed)) return Buffer.from(trimmed, "hex")
  if (/^[A-Za-z0-9+/_-]{43}=?$/u.test(trimmed)) {
    return Buffer.from(trimmed.replace(/-/gu, "+").replace(/_/gu, "/"), "base64")
  }
  return undefined
}

/** What a malformed secret key is told (it never echoes the key). */
export const secretKeyProblem = (where: string): string =>
  `${where} must be 32 random bytes in base64 or hex, such as the output of \`openssl rand -base64 32\``

/** How --help states a setting's default: a switch is off unless given (its variable takes 1/0). */
const defaultText = (setting: Setting): string => {
  if (setting.switch === true) return ` (a switch: off unless given, or ${setting.env}=1)`
  return setting.fallback === undefined ? "" : ` (default ${setting.fallback})`
}

/** The --help text of the settings. */
export const usage = (): string =>
  settings.map((setting) =>
    `  ${setting.flag.padEnd(18)} ${setting.env.padEnd(22)} ${setting.description}${defaultText(setting)}`
  ).join("\n")
