/**
 * A Volume's files from and to this machine (docs/kinds/Volume.md, "Revisions"), as the admin, finding the server as
 * `nodus kubeconfig` does:
 *
 *   nodus volume put <volume> <dir> -n <project>                  the directory, as a tar.zst, committed as the next
 *                                                                 revision
 *   nodus volume get <volume> <dir> -n <project> [--revision N]   a revision (the latest without --revision) unpacked
 *
 * Both stream through `tar --zstd` (what the node agent unpacks on a host), and `get` checks the download against the
 * digest the server sends.
 */
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, statSync } from "node:fs"
import { pipeline } from "node:stream/promises"
import type { ServerConfig } from "../server/Config.ts"
import { connect, failure, findServer, text } from "./ServerClient.ts"
import { parse, progress } from "./Workloads.ts"

const usage = "nodus volume put|get <volume> <dir> -n <project> [--revision N] (nodus --help)"

/** Runs `nodus volume put` or `nodus volume get`; answers the exit code. */
export const volume = async (
  args: ReadonlyArray<string>,
  configFrom: (args: ReadonlyArray<string>) => ServerConfig
): Promise<number> => {
  const [action, ...rest] = args
  const { positional, values, rest: serverArgs } = parse(rest)
  const [name, dir] = positional
  const namespace = values.get("-n") ?? values.get("--namespace")
  if ((action !== "put" && action !== "get") || name === undefined || dir === undefined || namespace === undefined) {
    process.stderr.write(`nodus: volume needs put or get, a Volume, a directory and -n <project>: ${usage}\n`)
    return 2
  }
  try {
    const client = connect(await findServer(serverArgs, configFrom))
    const volumeUrl = `${client.base}/namespaces/${encodeURIComponent(namespace)}/volumes/${encodeURIComponent(name)}`
    return action === "put"
      ? await put(client, volumeUrl, name, dir)
      : await get(client, volumeUrl, name, dir, values.get("--revision"))
  } catch (error) {
    process.stderr.write(`nodus: volume ${action} failed: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
}

type Client = Awaited<ReturnType<typeof connect>>

const put = async (client: Client, volumeUrl: string, name: string, dir: string) => {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`)
  const tar = spawn("tar", ["--zstd", "--sparse", "-cf", "-", "-C", dir, "."], { stdio: ["ignore", "pipe", "pipe"] })
  let stderr = ""
  tar.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => tar.on("close", resolve))
  const response = await client.request("POST", `${volumeUrl}/revisions`, tar.stdout, "application/zstd")
  if ((await exited) !== 0) throw new Error(`tar could not archive ${dir}: ${stderr.trim()}`)
  if (response.statusCode !== 201) throw new Error(await failure(response))
  const status = (JSON.parse(await text(response)) as {
    status: { revision: number; revisions: ReadonlyArray<{ revision: number; sha256: string; sizeBytes: number }> }
  }).status
  const committed = status.revisions.find((entry) => entry.revision === status.revision)!
  process.stdout.write(
    `volume/${name} revision ${committed.revision} committed: ${committed.sizeBytes} bytes, sha256 ${committed.sha256}\n`
  )
  return 0
}

const get = async (client: Client, volumeUrl: string, name: string, dir: string, wanted: string | undefined) => {
  let revision = wanted
  if (revision === undefined) {
    const found = await client.request("GET", volumeUrl)
    if (found.statusCode !== 200) throw new Error(await failure(found))
    const latest = (JSON.parse(await text(found)) as { status?: { revision?: number } }).status?.revision ?? 0
    if (latest === 0) throw new Error(`Volume "${name}" has no committed revision yet (nodus volume put ${name} <dir>)`)
    revision = String(latest)
  }
  const response = await client.request("GET", `${volumeUrl}/revisions/${encodeURIComponent(revision)}`)
  if (response.statusCode !== 200) throw new Error(await failure(response))
  mkdirSync(dir, { recursive: true })
  const tar = spawn("tar", ["--zstd", "-xf", "-", "-C", dir], { stdio: ["pipe", "ignore", "pipe"] })
  let stderr = ""
  tar.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => tar.on("close", resolve))
  const total = Number(response.headers["content-length"] ?? 0)
  const hash = createHash("sha256")
  const showProgress = process.stderr.isTTY === true
  let written = 0
  await pipeline(response, async function*(chunks: AsyncIterable<Buffer>) {
    for await (const chunk of chunks) {
      hash.update(chunk)
      written += chunk.length
      if (showProgress) progress(written, total)
      yield chunk
    }
  }, tar.stdin)
  if (showProgress) process.stderr.write("\n")
  if ((await exited) !== 0) throw new Error(`tar could not unpack revision ${revision}: ${stderr.trim()}`)
  const digest = String(response.headers["digest"] ?? "").replace(/^sha-256=/u, "")
  if (digest !== "" && Buffer.from(digest, "base64").toString("hex") !== hash.digest("hex")) {
    throw new Error("the download does not match its SHA-256 (Digest header)")
  }
  process.stdout.write(`volume/${name} revision ${revision} unpacked into ${dir}\n`)
  return 0
}
