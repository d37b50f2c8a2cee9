/**
 * `nodus agent` (docs/live.md, "Enrolling a host"): joins this host to a control plane as a Node and runs what the
 * server places on it, until SIGINT or SIGTERM (which stop every program first).
 *
 *   nodus agent --server https://cp:8443 --token nde_… [--ca ca.crt] [--data-dir ./.nodus-agent] [--name NAME]
 *               [--warm-boxes 1] [--egress-allow-cidr 127.0.0.1/32]…
 *
 * The first start enrolls with the token and a key the agent makes (the server keeps only its hash); the key is saved
 * in `<data dir>/credential.json` (0600), so later starts need no token. The agent connects outbound only.
 */
import { createHash, randomBytes } from "node:crypto"
import { lookup } from "node:dns/promises"
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { hostname } from "node:os"
import { dirname, join, resolve } from "node:path"
import { Agent } from "../backends/live/Agent.ts"
import { type Endpoint, enroll, httpLink } from "../backends/live/AgentHttp.ts"
import { detectGpus, helloOf } from "../backends/live/HostFacts.ts"
import { detectIsolation } from "../backends/live/Isolation.ts"
import { type AddressRange, parseRange } from "../core/PublicAddress.ts"
import { warmBoxesMax } from "../server/Config.ts"

interface Credential {
  readonly server: string
  readonly node: string
  readonly namespace: string
  readonly pool: string
  readonly key: string
}

const flag = (args: ReadonlyArray<string>, name: string): string | undefined => {
  const index = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`))
  if (index === -1) return undefined
  const arg = args[index]!
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : args[index + 1]
}

/** Every value of a repeatable flag, in order. */
const flagValues = (args: ReadonlyArray<string>, name: string): ReadonlyArray<string> =>
  args.flatMap((arg, index) =>
    arg === `--${name}`
      ? (args[index + 1] === undefined ? [] : [args[index + 1]!])
      : arg.startsWith(`--${name}=`)
      ? [arg.slice(name.length + 3)]
      : []
  )

/** The control plane's addresses: no box and no `url` input may reach them (a name that does not resolve: none). */
const controlPlaneAddresses = async (server: string): Promise<ReadonlyArray<string>> => {
  const host = URL.canParse(server) ? new URL(server).hostname.replace(/^\[|\]$/gu, "") : ""
  return host === "" ? [] : lookup(host, { all: true }).then((found) => found.map((entry) => entry.address), () => [])
}

/** The first directory above `dir` that others may not search, if any. */
const closedAncestor = (dir: string): string | undefined => {
  for (let current = dirname(dir);; current = dirname(current)) {
    if ((statSync(current).mode & 0o001) === 0) return current
    if (dirname(current) === current) return undefined
  }
}

/** A host name as a Node name: a DNS label. */
const nodeNameOf = (host: string) =>
  host.toLowerCase().split(".")[0]!.replace(/[^a-z0-9-]/gu, "-").replace(/^-+|-+$/gu, "").slice(0, 63) || "host"

export const runAgent = async (args: ReadonlyArray<string>): Promise<number> => {
  const server = flag(args, "server")
  if (server === undefined) {
    process.stderr.write("nodus agent: --server <url> is required (nodus --help)\n")
    return 2
  }
  const warmBoxes = flag(args, "warm-boxes") ?? "1"
  if (!/^[0-9]{1,2}$/u.test(warmBoxes) || Number(warmBoxes) > warmBoxesMax) {
    process.stderr.write(`nodus agent: --warm-boxes must be a whole number from 0 to ${warmBoxesMax}\n`)
    return 2
  }
  const egressAllow: Array<AddressRange> = []
  for (const text of flagValues(args, "egress-allow-cidr")) {
    const range = parseRange(text)
    if (range === undefined) {
      process.stderr.write(
        `nodus agent: --egress-allow-cidr "${text}" is not an address range: write one such as 127.0.0.1/32 or fd00::/8\n`
      )
      return 2
    }
    egressAllow.push(range)
  }
  const caFile = flag(args, "ca")
  const endpoint: Endpoint = { server, ca: caFile === undefined ? undefined : readFileSync(caFile, "utf8") }
  const dataDir = resolve(flag(args, "data-dir") ?? ".nodus-agent")
  // Searchable, not readable: the runs' areas below are bound into boxes that run as an unprivileged user, who must
  // reach them through every directory above.
  mkdirSync(dataDir, { recursive: true })
  chmodSync(dataDir, 0o711)
  const closed = closedAncestor(dataDir)
  if (closed !== undefined) {
    process.stderr.write(
      `nodus agent: ${closed} cannot be searched by other users, so programs could not reach their work areas under ${dataDir}: chmod o+x ${closed}, or choose another --data-dir\n`
    )
    return 2
  }
  const credentialPath = join(dataDir, "credential.json")
  let credential: Credential
  if (existsSync(credentialPath)) {
    credential = JSON.parse(readFileSync(credentialPath, "utf8")) as Credential
  } else {
    const token = flag(args, "token")
    if (token === undefined) {
      process.stderr.write(
        `nodus agent: this host is not enrolled yet (no ${credentialPath}): pass --token with an EnrollmentToken\n`
      )
      return 2
    }
    const key = `ndk_${randomBytes(32).toString("base64url")}`
    const node = flag(args, "name") ?? nodeNameOf(hostname())
    try {
      const enrolled = await enroll(endpoint, {
        token,
        node,
        hostname: hostname(),
        credentialHash: createHash("sha256").update(key).digest("hex")
      })
      credential = { server, node: enrolled.node, namespace: enrolled.namespace, pool: enrolled.pool, key }
    } catch (error) {
      process.stderr.write(
        `nodus agent: enrollment failed: ${error instanceof Error ? error.message : String(error)}\n`
      )
      return 1
    }
    writeFileSync(credentialPath, JSON.stringify(credential, null, 2), { mode: 0o600 })
  }
  const privateDir = join(dataDir, "private")
  mkdirSync(privateDir, { recursive: true, mode: 0o700 })
  const isolation = detectIsolation()
  for (const problem of isolation.problems) process.stderr.write(`nodus agent: ${problem}\n`)
  const gpus = detectGpus()
  const agent = new Agent({
    link: httpLink(endpoint, credential.key),
    hello: helloOf(credential.node, dataDir, isolation, gpus),
    gpus: gpus.map((gpu) => gpu.device),
    dataDir: privateDir,
    runsDir: join(dataDir, "runs"),
    support: isolation,
    hidden: [credentialPath, privateDir],
    now: () => Date.now(),
    warmBoxes: Number(warmBoxes),
    egressAllow,
    unreachable: await controlPlaneAddresses(server),
    log: (message) => process.stderr.write(`${message}\n`)
  })
  for (;;) {
    try {
      await agent.connect()
      break
    } catch (error) {
      process.stderr.write(
        `nodus agent: cannot say hello to ${server} (${
          error instanceof Error ? error.message : String(error)
        }); trying again in 2 s\n`
      )
      await new Promise((done) => setTimeout(done, 2_000))
    }
  }
  process.stdout.write(
    `nodus agent: Node ${credential.node} in project ${credential.namespace}, Pool ${credential.pool}, connected to ${server}\n`
  )
  const timer = setInterval(agent.tick, 1_000)
  await new Promise<void>((done) => {
    const stop = () => void agent.stop().then(done)
    process.once("SIGINT", stop)
    process.once("SIGTERM", stop)
  })
  clearInterval(timer)
  return 0
}
