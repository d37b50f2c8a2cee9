/**
 * What a user reads of workloads on live hosts (docs/live.md), as the admin, finding the server through the kubeconfig
 * or as `nodus kubeconfig` does (ServerClient.ts):
 *
 *   nodus logs job/<name> [-n <project>] [-f] [--index N] [--attempt N] [--tail N]   the log, as text
 *   nodus output job/<name> <output> [-n <project>] [--index N] [-o <file>]          an output's bytes (a progress
 *                                                                                     line on stderr at a terminal)
 *   nodus nodes [-n <project>]                                                        enrolled Nodes, as a table
 */
import { createHash } from "node:crypto"
import { createWriteStream } from "node:fs"
import type { Writable } from "node:stream"
import type { ServerConfig } from "../server/Config.ts"
import { connect, failure, findServer, text } from "./ServerClient.ts"

interface Parsed {
  readonly positional: ReadonlyArray<string>
  readonly values: ReadonlyMap<string, string>
  readonly flags: ReadonlySet<string>
  /** What the server settings read (Config.ts). */
  readonly rest: ReadonlyArray<string>
}

const valued = new Set(["-n", "--namespace", "--index", "--attempt", "--tail", "-o", "--output", "--revision"])
const switches = new Set(["-f", "--follow"])

export const parse = (args: ReadonlyArray<string>): Parsed => {
  const positional: Array<string> = []
  const values = new Map<string, string>()
  const flags = new Set<string>()
  const rest: Array<string> = []
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    if (valued.has(arg)) values.set(arg, args[++index] ?? "")
    else if (switches.has(arg)) flags.add(arg)
    else if (arg.startsWith("-")) {
      rest.push(arg)
      if (!arg.includes("=") && args[index + 1] !== undefined && !args[index + 1]!.startsWith("-")) {
        rest.push(args[++index]!)
      }
    } else positional.push(arg)
  }
  return { positional, values, flags, rest }
}

const jobName = (target: string | undefined) => {
  const match = /^(?:jobs?(?:\.[a-z.]+)?\/)?([a-z0-9][-a-z0-9.]*)$/u.exec(target ?? "")
  return match?.[1]
}

export const progress = (written: number, total: number) =>
  process.stderr.write(
    `\r${(written / 1048576).toFixed(1)} of ${(total / 1048576).toFixed(1)} MiB (${
      total === 0 ? 100 : Math.floor((written / total) * 100)
    } %)`
  )

/** Runs `nodus logs`, `nodus output` or `nodus nodes`; answers the exit code. */
export const workloads = async (
  command: "logs" | "output" | "nodes",
  args: ReadonlyArray<string>,
  configFrom: (args: ReadonlyArray<string>) => ServerConfig
): Promise<number> => {
  const { positional, values, flags, rest } = parse(args)
  const namespace = values.get("-n") ?? values.get("--namespace")
  try {
    const client = connect(await findServer(rest, configFrom))
    const get = (url: string) => client.request("GET", url)
    const base = client.base
    if (command === "nodes") {
      const response = await get(
        `${base}${namespace === undefined ? "" : `/namespaces/${encodeURIComponent(namespace)}`}/nodes`
      )
      if (response.statusCode !== 200) throw new Error(await failure(response))
      const items = (JSON.parse(await text(response)) as { items: ReadonlyArray<any> }).items
      const rows = [
        ["PROJECT", "NAME", "POOL", "PHASE", "CPU", "MEMORY", "GPUS", "CORDONED", "HEARTBEAT"],
        ...items.map((node) => [
          node.metadata.namespace,
          node.metadata.name,
          node.spec.pool,
          node.status?.phase ?? "Pending",
          node.status?.capacity?.cpu ?? "",
          node.status?.capacity?.memory ?? "",
          `${node.status?.capacity?.gpus ?? 0}`,
          `${node.spec.cordoned === true}`,
          node.status?.lastHeartbeatTime ?? ""
        ])
      ]
      const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => String(row[column]).length)))
      for (const row of rows) {
        process.stdout.write(
          `${row.map((cell, column) => String(cell).padEnd(widths[column]!)).join("   ").trimEnd()}\n`
        )
      }
      return 0
    }
    const name = jobName(positional[0])
    if (name === undefined || namespace === undefined) {
      process.stderr.write(`nodus: ${command} needs job/<name> and -n <project> (nodus --help)\n`)
      return 2
    }
    const job = `${base}/namespaces/${encodeURIComponent(namespace)}/jobs/${encodeURIComponent(name)}`
    if (command === "logs") {
      const query = new URLSearchParams({ index: values.get("--index") ?? "0" })
      if (values.has("--attempt")) query.set("attempt", values.get("--attempt")!)
      if (values.has("--tail")) query.set("tailLines", values.get("--tail")!)
      if (flags.has("-f") || flags.has("--follow")) query.set("follow", "true")
      const response = await get(`${job}/log?${query}`)
      if (response.statusCode !== 200) throw new Error(await failure(response))
      for await (const chunk of response) process.stdout.write(chunk as Buffer)
      return 0
    }
    const output = positional[1]
    if (output === undefined) {
      process.stderr.write("nodus: output needs the output's name (nodus output job/<name> <output> -n <project>)\n")
      return 2
    }
    const response = await get(
      `${job}/outputs/${encodeURIComponent(output)}?index=${encodeURIComponent(values.get("--index") ?? "0")}`
    )
    if (response.statusCode !== 200) throw new Error(await failure(response))
    const total = Number(response.headers["content-length"] ?? 0)
    const file = values.get("-o") ?? values.get("--output")
    const sink: Writable = file === undefined ? process.stdout : createWriteStream(file)
    const hash = createHash("sha256")
    const showProgress = process.stderr.isTTY === true
    let written = 0
    for await (const chunk of response) {
      hash.update(chunk as Buffer)
      written += (chunk as Buffer).length
      if (!sink.write(chunk)) await new Promise((resolve) => sink.once("drain", resolve))
      if (showProgress) progress(written, total)
    }
    if (sink !== process.stdout) await new Promise((resolve) => sink.end(resolve))
    if (showProgress) process.stderr.write("\n")
    const digest = String(response.headers["digest"] ?? "").replace(/^sha-256=/u, "")
    if (digest !== "" && Buffer.from(digest, "base64").toString("hex") !== hash.digest("hex")) {
      throw new Error("the download does not match its SHA-256 (Digest header)")
    }
    return 0
  } catch (error) {
    process.stderr.write(`nodus: ${command} failed: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
}
