/**
 * `nodus sandbox` (docs/sandboxes.md, "The CLI"): a Sandbox driven from a terminal, as the admin, over the server's
 * commands, files and terminal API.
 *
 *   nodus sandbox exec <name> [-n <project>] [-i] [-w <dir>] [-e NAME=value]… [--timeout 30s] -- <command> [args…]
 *       runs one command and exits with its code; -i sends this process's stdin to it
 *   nodus sandbox cp <name>:<path> <local>   |   nodus sandbox cp <local> <name>:<path>   [-n <project>]
 *       copies one file out of or into the Sandbox ("-" is stdout or stdin)
 *   nodus sandbox shell <name> [-n <project>] [--shell /bin/bash]
 *       an interactive terminal (WebSocket), resized with this one, until the shell exits
 */
import { readFileSync, writeFileSync } from "node:fs"
import type { ServerConfig } from "../server/Config.ts"
import { connect, failure, findServer, type ServerClient, text } from "./ServerClient.ts"

interface Parsed {
  readonly positional: ReadonlyArray<string>
  readonly values: ReadonlyMap<string, ReadonlyArray<string>>
  readonly switches: ReadonlySet<string>
  /** What the server settings read (Config.ts). */
  readonly rest: ReadonlyArray<string>
  /** After `--`: the command. */
  readonly command: ReadonlyArray<string>
}

const valued = new Set(["-n", "--namespace", "-w", "--workdir", "-e", "--env", "--timeout", "--shell"])
const switchNames = new Set(["-i", "--stdin"])

const parse = (args: ReadonlyArray<string>): Parsed => {
  const positional: Array<string> = []
  const values = new Map<string, Array<string>>()
  const switches = new Set<string>()
  const rest: Array<string> = []
  const end = args.indexOf("--")
  const own = end < 0 ? args : args.slice(0, end)
  for (let index = 0; index < own.length; index++) {
    const arg = own[index]!
    if (valued.has(arg)) values.set(arg, [...(values.get(arg) ?? []), own[++index] ?? ""])
    else if (switchNames.has(arg)) switches.add(arg)
    else if (arg.startsWith("-") && arg !== "-") {
      rest.push(arg)
      if (!arg.includes("=") && own[index + 1] !== undefined && !own[index + 1]!.startsWith("-")) {
        rest.push(own[++index]!)
      }
    } else positional.push(arg)
  }
  return { positional, values, switches, rest, command: end < 0 ? [] : args.slice(end + 1) }
}

const one = (parsed: Parsed, ...names: ReadonlyArray<string>) =>
  names.map((name) => parsed.values.get(name)?.at(-1)).find((value) => value !== undefined)

const sandboxPath = (client: ServerClient, namespace: string, name: string) =>
  `${client.base}/namespaces/${encodeURIComponent(namespace)}/sandboxes/${encodeURIComponent(name)}`

const usage = (message: string) => {
  process.stderr.write(`nodus sandbox: ${message} (nodus --help)\n`)
  return 2
}

const exec = async (client: ServerClient, parsed: Parsed, namespace: string): Promise<number> => {
  const name = parsed.positional[1]
  if (name === undefined || parsed.command.length === 0) {
    return usage("exec needs a Sandbox and a command: nodus sandbox exec <name> -n <project> -- <command> [args…]")
  }
  const env: Record<string, string> = {}
  for (const pair of [...(parsed.values.get("-e") ?? []), ...(parsed.values.get("--env") ?? [])]) {
    const at = pair.indexOf("=")
    if (at <= 0) return usage(`-e takes NAME=value, not "${pair}"`)
    env[pair.slice(0, at)] = pair.slice(at + 1)
  }
  const workingDir = one(parsed, "-w", "--workdir")
  const timeout = one(parsed, "--timeout")
  const stdin = parsed.switches.has("-i") || parsed.switches.has("--stdin") ? readFileSync(0, "utf8") : undefined
  const body = {
    command: parsed.command,
    env,
    ...(workingDir === undefined ? {} : { workingDir }),
    ...(timeout === undefined ? {} : { timeout }),
    ...(stdin === undefined ? {} : { stdin })
  }
  const response = await client.request(
    "POST",
    `${sandboxPath(client, namespace, name)}/commands`,
    JSON.stringify(body)
  )
  if (response.statusCode !== 200) throw new Error(await failure(response))
  const result = JSON.parse(await text(response)) as {
    exitCode: number | null
    signal?: string
    stdout: string
    stderr: string
    timedOut?: boolean
  }
  process.stdout.write(result.stdout)
  process.stderr.write(result.stderr)
  if (result.timedOut === true) process.stderr.write("nodus sandbox: the command was killed at its timeout\n")
  return result.exitCode ?? 128 + (result.signal === "SIGKILL" ? 9 : result.signal === "SIGTERM" ? 15 : 0)
}

/** `<name>:<path>`, or undefined for a local path. */
const remoteOf = (argument: string): { readonly name: string; readonly path: string } | undefined => {
  const match = /^([a-z0-9][-a-z0-9.]*):(.+)$/u.exec(argument)
  return match === null ? undefined : { name: match[1]!, path: match[2]! }
}

const copy = async (client: ServerClient, parsed: Parsed, namespace: string): Promise<number> => {
  const [, from, to] = parsed.positional
  if (from === undefined || to === undefined) {
    return usage("cp needs a source and a destination, one of them <name>:<path>")
  }
  const source = remoteOf(from)
  const target = remoteOf(to)
  if ((source === undefined) === (target === undefined)) {
    return usage("cp copies between this host and a Sandbox: exactly one side is <name>:<path>")
  }
  if (source !== undefined) {
    const response = await client.request(
      "GET",
      `${sandboxPath(client, namespace, source.name)}/files?path=${encodeURIComponent(source.path)}`
    )
    if (response.statusCode !== 200) throw new Error(await failure(response))
    if (String(response.headers["content-type"]).startsWith("application/json")) {
      throw new Error(`${source.path} is a directory; cp copies one file`)
    }
    const chunks: Array<Buffer> = []
    for await (const chunk of response) chunks.push(chunk as Buffer)
    if (to === "-") process.stdout.write(Buffer.concat(chunks))
    else writeFileSync(to, Buffer.concat(chunks))
    return 0
  }
  const bytes = readFileSync(from === "-" ? 0 : from)
  const response = await client.request(
    "PUT",
    `${sandboxPath(client, namespace, target!.name)}/files?path=${encodeURIComponent(target!.path)}`,
    bytes,
    "application/octet-stream"
  )
  if (response.statusCode !== 200) throw new Error(await failure(response))
  await text(response)
  return 0
}

/** Runs `nodus sandbox exec|cp|shell`; answers the exit code. */
export const sandbox = async (
  args: ReadonlyArray<string>,
  configFrom: (args: ReadonlyArray<string>) => ServerConfig
): Promise<number> => {
  const parsed = parse(args)
  const verb = parsed.positional[0]
  const namespace = one(parsed, "-n", "--namespace")
  if (verb !== "exec" && verb !== "cp" && verb !== "shell") {
    return usage(`unknown subcommand ${JSON.stringify(verb ?? "")}: exec, cp or shell`)
  }
  if (namespace === undefined) return usage(`${verb} needs -n <project>`)
  if (verb === "shell") {
    const problem = (await import("./SandboxShell.ts")).noTerminal(process.stdin)
    if (problem !== undefined) {
      process.stderr.write(`nodus sandbox shell: ${problem}\n`)
      return 2
    }
  }
  try {
    const client = connect(await findServer(parsed.rest, configFrom))
    if (verb === "exec") return await exec(client, parsed, namespace)
    if (verb === "cp") return await copy(client, parsed, namespace)
    const { shell } = await import("./SandboxShell.ts")
    const name = parsed.positional[1]
    if (name === undefined) return usage("shell needs a Sandbox: nodus sandbox shell <name> -n <project>")
    return await shell(client.server, `${sandboxPath(client, namespace, name)}/terminal`, one(parsed, "--shell"))
  } catch (error) {
    process.stderr.write(`nodus sandbox ${verb} failed: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
}
