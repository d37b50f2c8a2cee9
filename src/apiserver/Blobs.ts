/**
 * Blobs (docs/blobs.md; spec: "uploads through /blobs/v1, content-addressed bundles referenced as sha256:<hex>"):
 * bytes stored under their SHA-256, checked as they arrive, at most `blobBytesMax` each, kept in the store's database
 * (store/BlobStore.ts). A project reads a blob it uploaded, one the organisation uploaded, or one the platform stored
 * for it (a workload's state); a blob another project uploaded is, to it, not there — the same bytes must be uploaded
 * again, which costs nothing but the transfer, so a digest never tells anyone what another project holds.
 */
import { Clock, Context, Effect, Layer, Stream } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { blobBytesMax, blobChunkBytes } from "../core/Limits.ts"
import { ApiError, fieldInvalid } from "../core/meta/ApiError.ts"
import { type BlobRef, BlobStore, type StoredBlob } from "../store/BlobStore.ts"
import type { StoreError } from "../store/Store.ts"

/** What an upload stored: the blob's digest (hex) and size, and whether these bytes were new to the store. */
export interface PutBlob {
  readonly digest: string
  readonly sizeBytes: number
  readonly created: boolean
}

/** Who reads: the projects whose blobs it may read, or every blob (the organisation's admin, the server itself). */
export type Reader = { readonly _tag: "Everything" } | {
  readonly _tag: "Projects"
  readonly projects: ReadonlyArray<string>
}

export const everything: Reader = { _tag: "Everything" }

/** A project's reader: its own blobs and the organisation's. */
export const projectReader = (project: string): Reader => ({ _tag: "Projects", projects: [project, ""] })

export const uploadHolder = "upload"

/** Chunks of a blob read at once while it is sent. */
const chunkReadsAhead = 4

const unavailable = (error: StoreError) =>
  new ApiError({
    code: "Unavailable",
    message: `the blob store is unavailable: ${error.message}`,
    retryAfterSeconds: 1
  })

const tooLarge = (bytesMax: number) =>
  new ApiError({
    code: "FileTooLarge",
    message: `a blob is at most ${bytesMax} bytes`,
    fix: `Split the content into blobs of at most ${bytesMax} bytes, or keep large data in a Volume or a bucket input.`
  })

/** The body of an upload whose digest differs from the one its path names; nothing was stored. */
const mismatch = (expected: string, actual: string) =>
  new ApiError({
    code: "SHA256Mismatch",
    message: `the body's SHA-256 is ${actual}, not the ${expected} the path names; nothing was stored`,
    causes: [fieldInvalid("path", `Invalid value: "sha256:${expected}": the body's digest is sha256:${actual}`)]
  })

export class Blobs extends Context.Service<Blobs, {
  /** The largest blob an upload stores. */
  readonly bytesMax: number
  /** Stores `body` as the blob `digest` (hex) for `ref`, if its SHA-256 is that digest (SHA256Mismatch otherwise). */
  readonly put: (
    digest: string,
    ref: BlobRef,
    body: Stream.Stream<Uint8Array, unknown>
  ) => Effect.Effect<PutBlob, ApiError>
  /**
   * Stores `body` under the digest it turns out to have: a workload's state, which the platform keeps for `ref`, with
   * the workload's own bound (a checkpoint may be far larger than an upload).
   */
  readonly store: (
    ref: BlobRef,
    body: Stream.Stream<Uint8Array, unknown>,
    bytesMax: number
  ) => Effect.Effect<PutBlob, ApiError>
  /** The blob, if `reader` may read it. */
  readonly stat: (digest: string, reader: Reader) => Effect.Effect<StoredBlob | undefined, ApiError>
  /** A blob's bytes, chunk by chunk. */
  readonly read: (blob: StoredBlob) => Stream.Stream<Uint8Array, ApiError>
  /** Drops the references of `holder` (an object's uid), or only those to `digest`, and every blob only they kept. */
  readonly release: (holder: string, digest?: string) => Effect.Effect<number, ApiError>
}>()("nodus/apiserver/Blobs") {
  /** Blobs over the store's BlobStore, each at most `bytesMax` (tests lower it). */
  static readonly layerWith = (bytesMax: number) =>
    Layer.effect(
      Blobs,
      Effect.gen(function*() {
        const store = yield* BlobStore

        /**
         * Reads `body` to its end, hashing it; unless `stage` is false (the uploader can already read the blob), keeps
         * it in chunks under a new upload id. Anything short of a whole, bounded body leaves nothing staged.
         */
        const receive = (body: Stream.Stream<Uint8Array, unknown>, stage: boolean, bound: number) =>
          Effect.gen(function*() {
            const upload = randomUUID()
            const hash = createHash("sha256")
            let sizeBytes = 0
            let chunks = 0
            let pending: Array<Uint8Array> = []
            let pendingBytes = 0
            const stageChunk = (bytes: Uint8Array) =>
              Effect.flatMap(Clock.currentTimeMillis, (now) => store.stage(upload, chunks++, bytes, now)).pipe(
                Effect.mapError(unavailable)
              )
            const take = (chunk: Uint8Array) =>
              Effect.suspend(() => {
                sizeBytes += chunk.length
                if (sizeBytes > bound) return Effect.fail(tooLarge(bound))
                hash.update(chunk)
                if (!stage) return Effect.void
                const full: Array<Uint8Array> = []
                let rest = chunk
                while (pendingBytes + rest.length >= blobChunkBytes) {
                  const room = blobChunkBytes - pendingBytes
                  full.push(Buffer.concat([...pending, rest.subarray(0, room)], blobChunkBytes))
                  pending = []
                  pendingBytes = 0
                  rest = rest.subarray(room)
                }
                if (rest.length > 0) {
                  pending.push(rest)
                  pendingBytes += rest.length
                }
                return Effect.forEach(full, stageChunk, { discard: true })
              })
            const flush = Effect.suspend(() =>
              stage && pendingBytes > 0 ? stageChunk(Buffer.concat(pending, pendingBytes)) : Effect.void
            )
            yield* Stream.runForEach(body, take).pipe(
              Effect.mapError((error) =>
                error instanceof ApiError
                  ? error
                  : new ApiError({
                    code: "BadRequest",
                    message: "the upload's body could not be read to its end; nothing was stored"
                  })
              ),
              Effect.andThen(flush),
              Effect.onError(() => Effect.ignore(store.discard(upload)))
            )
            return { upload, digest: hash.digest("hex"), sizeBytes, chunks }
          })

        /** Publishes what was received; answers whether its bytes became the blob (they were not stored before). */
        const publish = (
          received: {
            readonly upload: string
            readonly digest: string
            readonly sizeBytes: number
            readonly chunks: number
          },
          ref: BlobRef
        ) =>
          store.publish(received.upload, received, ref).pipe(
            Effect.mapError(unavailable),
            // Refused (swept meanwhile, or the bytes it relied on collected): what it staged goes, and the uploader
            // retries.
            Effect.onError(() => Effect.ignore(store.discard(received.upload)))
          )

        /**
         * An upload: staged unless its project can already read the blob, and answered as new unless it could. What
         * another project stores changes neither the answer nor the work (no staging skipped for it), so an upload
         * tells nobody what others hold; the same bytes are kept once all the same.
         */
        const put = (digest: string, ref: BlobRef, body: Stream.Stream<Uint8Array, unknown>) =>
          Effect.gen(function*() {
            const known = (yield* stat(digest, projectReader(ref.project))) !== undefined
            const received = yield* receive(body, !known, bytesMax)
            if (received.digest !== digest) {
              yield* Effect.ignore(store.discard(received.upload))
              return yield* mismatch(digest, received.digest)
            }
            yield* publish(received, ref)
            return { digest: received.digest, sizeBytes: received.sizeBytes, created: !known } satisfies PutBlob
          })

        const storeComputed = (ref: BlobRef, body: Stream.Stream<Uint8Array, unknown>, bound: number) =>
          Effect.gen(function*() {
            const received = yield* receive(body, true, bound)
            const created = yield* publish(received, ref)
            return { digest: received.digest, sizeBytes: received.sizeBytes, created } satisfies PutBlob
          })

        const stat = (digest: string, reader: Reader) =>
          Effect.gen(function*() {
            const blob = yield* store.stat(digest)
            if (blob === undefined) return undefined
            if (reader._tag === "Everything") return blob
            return (yield* store.readable(digest, reader.projects)) ? blob : undefined
          }).pipe(Effect.mapError(unavailable))

        // The next chunks are read while one is sent (in order): each read is a round trip to the database or the disk.
        const read = (blob: StoredBlob): Stream.Stream<Uint8Array, ApiError> =>
          Stream.range(0, blob.chunks - 1).pipe(
            Stream.mapEffect((seq) =>
              Effect.flatMap(Effect.mapError(store.chunk(blob, seq), unavailable), (bytes) =>
                bytes === undefined
                  ? Effect.fail(
                    new ApiError({
                      code: "NotFound",
                      message: `blob sha256:${blob.digest} was deleted while it was read`
                    })
                  )
                  : Effect.succeed(bytes)), { concurrency: chunkReadsAhead })
          )

        return Blobs.of({
          bytesMax,
          put,
          store: storeComputed,
          stat,
          read,
          release: (holder, digest) => Effect.mapError(store.release(holder, digest), unavailable)
        })
      })
    )

  static readonly layer = Blobs.layerWith(blobBytesMax)
}
