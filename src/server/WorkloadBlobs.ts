/**
 * What runs on live hosts leave the server to keep — Job outputs, Job checkpoints and Sandbox snapshots (docs/live.md,
 * "Outputs", "Checkpoints"; docs/sandboxes.md, "/workspace continuity") — kept in the blob store (docs/blobs.md), so
 * they are in the store's database like everything else, shared by every server on it, and read back by digest.
 *
 * Each is a blob referenced by its owner's uid (in the owner's project), released when the owner is forgotten. An
 * output is found through the owner's `status.outputs` (which lists its digest and size); a checkpoint through a
 * record `checkpoints/<owner uid>/<seq>` that names its digest, since a replacement restores it by number.
 */
import { Effect, Option, Stream } from "effect"
import { type Blobs, everything } from "../apiserver/Blobs.ts"
import { outputBytesMax } from "../backends/live/Protocol.ts"
import { isObject, type Json } from "../core/Json.ts"
import { checkpointMaxSizeBytesMax } from "../core/Limits.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import type { OutputFile } from "../runtime/WorkloadFiles.ts"
import type { StoreShape } from "../store/Store.ts"

/** The records that number an owner's checkpoints: `<owner uid>/<seq, 12 digits>` → {digest, sizeBytes}. */
export const checkpointsTable = "checkpoints"

const checkpointId = (owner: string, seq: number) => `${owner}/${String(seq).padStart(12, "0")}`

const asIterable = (bytes: Stream.Stream<Uint8Array, unknown>): AsyncIterable<Uint8Array> =>
  Stream.toAsyncIterable(bytes)

export const makeWorkloadBlobs = (blobs: Blobs["Service"], store: StoreShape) => {
  const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)

  /** Stores bytes for an owner; a failure (too large, the store gone) keeps nothing and rejects with its ApiError. */
  const keep = (owner: string, namespace: string, bytes: AsyncIterable<Uint8Array>, bytesMax: number) =>
    run(Effect.map(
      blobs.store({ project: namespace, holder: owner }, Stream.fromAsyncIterable(bytes, (error) => error), bytesMax),
      (stored) => ({ sha256: stored.digest, sizeBytes: stored.sizeBytes })
    ))

  /** A stored blob's bytes by digest, or undefined when it is not (or no longer) kept. */
  const open = (digest: string) =>
    Effect.map(
      blobs.stat(digest, everything),
      (blob) => blob === undefined ? undefined : { blob, bytes: blobs.read(blob) }
    )

  const checkpoints = {
    store: async (owner: string, namespace: string, seq: number, bytes: AsyncIterable<Uint8Array>) => {
      const stored = await keep(owner, namespace, bytes, checkpointMaxSizeBytesMax)
      await run(
        store.commit([{
          _tag: "PutRecord",
          table: checkpointsTable,
          id: checkpointId(owner, seq),
          value: { digest: stored.sha256, sizeBytes: stored.sizeBytes }
        }])
      )
      return stored
    },
    open: (owner: string, seq: number): Promise<AsyncIterable<Uint8Array> | undefined> =>
      run(Effect.gen(function*() {
        const record = yield* store.getRecord(checkpointsTable, checkpointId(owner, seq), 0)
        const digest = Option.isSome(record) && isObject(record.value) ? record.value["digest"] : undefined
        if (typeof digest !== "string") return undefined
        const found = yield* open(digest)
        return found === undefined ? undefined : asIterable(found.bytes)
      })),
    /** The highest number kept for the owner (0 when none), so numbers keep growing across server restarts. */
    latest: (owner: string): Promise<number> =>
      run(Effect.map(idsOf(owner), (ids) => ids.length === 0 ? 0 : Number(ids.at(-1)!.slice(owner.length + 1))))
  }

  /** Every checkpoint record of an owner, in number order. */
  const idsOf = (owner: string) =>
    Effect.gen(function*() {
      const ids: Array<string> = []
      for (let after = `${owner}/`;;) {
        const page = yield* store.records(checkpointsTable, after, 1_000, 0)
        const mine = page.filter((entry) => entry.id.startsWith(`${owner}/`))
        ids.push(...mine.map((entry) => entry.id))
        if (mine.length < 1_000) return ids
        after = mine.at(-1)!.id
      }
    })

  const outputs = {
    store: (owner: string, namespace: string, bytes: AsyncIterable<Uint8Array>) =>
      keep(owner, namespace, bytes, outputBytesMax),
    /** One output of the object, as its status lists it: the stored bytes must be what status says they are. */
    output: (object: ResourceObject, name: string, index: number): Effect.Effect<OutputFile, ApiError> =>
      Effect.gen(function*() {
        const listed =
          (isObject(object.status) && Array.isArray(object.status["outputs"]) ? object.status["outputs"] : [])
            .find((entry: Json) => isObject(entry) && entry["name"] === name && (entry["index"] ?? 0) === index) as {
              sha256: string
              size: number
            } | undefined
        const found = listed === undefined ? undefined : yield* open(listed.sha256)
        if (listed === undefined || found === undefined || found.blob.sizeBytes !== listed.size) {
          return yield* new ApiError({
            code: "NotFound",
            message: `${object.kind} "${object.metadata.name}" has no output "${name}" for index ${index}`,
            fix:
              "status.outputs lists the outputs collected so far, by name and index; an output is collected when its index succeeds."
          })
        }
        return {
          bytes: found.bytes.pipe(Stream.catchCause(() => Stream.empty)),
          sizeBytes: listed.size,
          sha256: listed.sha256
        }
      })
  }

  /** The stored bytes of another object's output, as an input reads them (the object as listed in its status). */
  const inputOf = (object: ResourceObject, name: string, index: number) =>
    Effect.map(
      outputs.output(object, name, index),
      (file) => ({ sha256: file.sha256, open: () => asIterable(file.bytes) })
    )

  /**
   * Everything kept for an owner goes: its blobs (unless another holder keeps the same bytes) and its checkpoint
   * numbers.
   */
  const forget = (owner: string) =>
    Effect.gen(function*() {
      yield* blobs.release(owner)
      const ids = yield* idsOf(owner)
      if (ids.length > 0) {
        yield* store.commit(ids.map((id) => ({ _tag: "DeleteRecord" as const, table: checkpointsTable, id })))
      }
    }).pipe(Effect.ignore)

  return { checkpoints, outputs, inputOf, forget }
}
