/**
 * The outputs of runs on live hosts (docs/live.md, "Outputs"), as agents upload them: one file per index and output,
 * `<dir>/<owner uid>/<index>/<name>`, its SHA-256 and size computed as it arrives (an upload above `outputBytesMax`
 * is cut off and kept nowhere). They go when their owner is forgotten (the object deleted, its ttl included).
 */
import { createHash } from "node:crypto"
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { pipeline } from "node:stream/promises"
import { Effect, Stream } from "effect"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { isObject } from "../core/Json.ts"
import { outputBytesMax } from "../backends/live/Protocol.ts"
import type { OutputFile } from "../apiserver/WorkloadFiles.ts"

/**
 * Writes an upload to `file` with its SHA-256 and size, replacing what was there only once it is whole; past `maxBytes`
 * it is cut off and nothing is kept.
 */
export const storeUpload = async (file: string, bytes: AsyncIterable<Uint8Array>, maxBytes: number, what: string) => {
  mkdirSync(dirname(file), { recursive: true })
  const partial = `${file}.partial`
  const hash = createHash("sha256")
  let sizeBytes = 0
  async function* counted() {
    for await (const chunk of bytes) {
      sizeBytes += chunk.length
      if (sizeBytes > maxBytes) throw new Error(`${what} is larger than ${maxBytes} bytes`)
      hash.update(chunk)
      yield chunk
    }
  }
  try {
    await pipeline(counted, createWriteStream(partial, { mode: 0o600 }))
  } catch (error) {
    rmSync(partial, { force: true })
    throw error
  }
  renameSync(partial, file)
  return { sha256: hash.digest("hex"), sizeBytes }
}

export const makeJobOutputs = (dir: string) => {
  const fileOf = (owner: string, index: number, name: string) => join(dir, owner, `${index}`, name)

  const store = (owner: string, index: number, name: string, bytes: AsyncIterable<Uint8Array>) =>
    storeUpload(fileOf(owner, index, name), bytes, outputBytesMax, `output ${name}`)

  const forget = (owner: string) => rmSync(join(dir, owner), { recursive: true, force: true })

  /** One output of the object, as its status lists it: the stored bytes must be what status says they are. */
  const output = (object: ResourceObject, name: string, index: number): Effect.Effect<OutputFile, ApiError> => Effect.suspend(() => {
    const listed = (isObject(object.status) && Array.isArray(object.status["outputs"]) ? object.status["outputs"] : [])
      .find((entry) => isObject(entry) && entry["name"] === name && (entry["index"] ?? 0) === index) as { sha256: string; size: number } | undefined
    const file = fileOf(object.metadata.uid, index, name)
    if (listed === undefined || !existsSync(file) || statSync(file).size !== listed.size) {
      return Effect.fail(new ApiError({
        code: "NotFound",
        message: `${object.kind} "${object.metadata.name}" has no output "${name}" for index ${index}`,
        fix: "status.outputs lists the outputs collected so far, by name and index; an output is collected when its index succeeds."
      }))
    }
    const bytes = Stream.fromAsyncIterable(createReadStream(file) as AsyncIterable<Uint8Array>, (error) => error).pipe(Stream.catchCause(() => Stream.empty))
    return Effect.succeed({ bytes, sizeBytes: listed.size, sha256: listed.sha256 })
  })

  /** The stored bytes of another object's output, as an input reads them (the object as listed in its status). */
  const inputOf = (object: ResourceObject, name: string, index: number) =>
    Effect.map(output(object, name, index), (file) => ({ sha256: file.sha256, open: () => createReadStream(fileOf(object.metadata.uid, index, name)) as AsyncIterable<Uint8Array> }))

  return { store, forget, output, inputOf }
}
