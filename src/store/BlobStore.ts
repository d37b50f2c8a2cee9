/**
 * Blob storage (docs/blobs.md): content-addressed bytes in the store's own database — PostgreSQL, or the embedded
 * PGlite — as chunks of `blobChunkBytes`, with the references that say which projects may read a blob and keep it.
 *
 * An upload stages its chunks under an id of its own; only when the bytes are whole and their digest checked does
 * `publish` make them the blob of that digest (or drop them, when the blob is already stored) and add the reference,
 * in one transaction. So a reader never sees part of a blob, and a failed or abandoned upload leaves nothing a reader
 * could find. A blob lives while a reference keeps it: `release` drops a holder's references and every blob no other
 * reference keeps. Publishing and releasing a digest hold its advisory lock, so a blob cannot be collected between a
 * publish's check that it exists and its new reference.
 */
import { Context, Effect, Exit, Fiber, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { once } from "node:events"
import { createWriteStream, type WriteStream } from "node:fs"
import { mkdir, open, rm } from "node:fs/promises"
import { join } from "node:path"
import { blobChunkBytes } from "../core/Limits.ts"
import { StoreError } from "./Store.ts"

/** Who keeps a blob, and for which project: an upload through the API, or a workload's stored state. */
export interface BlobRef {
  /** The project that may read the blob ("" for the organisation: every project). */
  readonly project: string
  /** What keeps it: "upload" for the API's uploads (never released), else the uid of the object whose state it is. */
  readonly holder: string
}

export interface StoredBlob {
  readonly digest: string
  readonly sizeBytes: number
  /** The staging id its chunks are kept under, and how many there are. */
  readonly upload: string
  readonly chunks: number
}

export interface BlobStoreShape {
  /**
   * Keeps one chunk of an upload in progress, written at `now`: an upload is abandoned (swept) once nothing was written
   * to it for `blobUploadAbandonedMs`, however long it has been going on.
   */
  readonly stage: (upload: string, seq: number, bytes: Uint8Array, now: number) => Effect.Effect<void, StoreError>
  /**
   * Makes a whole staged upload the blob `digest` (dropping it when that blob is already stored) and adds `ref`;
   * answers whether these bytes became the blob (false: it was stored already). Fails
   * when the blob is not stored and the upload's bytes are not there: it was swept meanwhile, or nothing was staged
   * because the blob was stored when the upload began and has been collected since (the caller uploads again).
   */
  readonly publish: (
    upload: string,
    blob: { readonly digest: string; readonly sizeBytes: number; readonly chunks: number },
    ref: BlobRef
  ) => Effect.Effect<boolean, StoreError>
  /** Drops a staged upload. */
  readonly discard: (upload: string) => Effect.Effect<void, StoreError>
  /** The stored blob, if any. */
  readonly stat: (digest: string) => Effect.Effect<StoredBlob | undefined, StoreError>
  /** Whether one of `projects` holds a reference to the blob. */
  readonly readable: (digest: string, projects: ReadonlyArray<string>) => Effect.Effect<boolean, StoreError>
  /** One chunk of a stored blob. */
  readonly chunk: (blob: StoredBlob, seq: number) => Effect.Effect<Uint8Array | undefined, StoreError>
  /**
   * Drops every reference `holder` has (in any project), or only its references to `digest` when one is named, and
   * every blob they alone kept; answers how many blobs went.
   */
  readonly release: (holder: string, digest?: string) => Effect.Effect<number, StoreError>
  /** Holders of references after `after` in order, but uploads' (for the collection of those whose object is gone). */
  readonly holders: (after: string, limit: number) => Effect.Effect<ReadonlyArray<string>, StoreError>
  /** Drops uploads begun before `before` that never published (a crashed server, a client gone). */
  readonly sweep: (before: number) => Effect.Effect<number, StoreError>
}

export class BlobStore extends Context.Service<BlobStore, BlobStoreShape>()("nodus/store/BlobStore") {}

/** Blobs in memory, for tests and the in-memory store. */
export const makeMemory = (): BlobStoreShape => {
  const staged = new Map<string, { touchedAt: number; readonly chunks: Map<number, Uint8Array> }>()
  const blobs = new Map<string, { readonly blob: StoredBlob; readonly chunks: Map<number, Uint8Array> }>()
  const refs = new Map<string, Set<string>>() // digest -> "project\u0000holder"
  const refKey = (ref: BlobRef) => `${ref.project}\u0000${ref.holder}`
  const dropUnreferenced = (digest: string) => {
    if ((refs.get(digest)?.size ?? 0) > 0) return 0
    refs.delete(digest)
    return blobs.delete(digest) ? 1 : 0
  }
  return {
    stage: (upload, seq, bytes, now) =>
      Effect.sync(() => {
        const entry = staged.get(upload) ?? { touchedAt: now, chunks: new Map() }
        entry.touchedAt = now
        entry.chunks.set(seq, Uint8Array.from(bytes))
        staged.set(upload, entry)
      }),
    publish: (upload, blob, ref) =>
      Effect.suspend(() => {
        const entry = staged.get(upload)
        staged.delete(upload)
        const created = !blobs.has(blob.digest)
        if (created) {
          if (entry === undefined && blob.sizeBytes > 0) return Effect.fail(missingBytes(upload))
          blobs.set(blob.digest, { blob: { ...blob, upload }, chunks: entry?.chunks ?? new Map() })
        }
        refs.set(blob.digest, (refs.get(blob.digest) ?? new Set()).add(refKey(ref)))
        return Effect.succeed(created)
      }),
    discard: (upload) => Effect.sync(() => void staged.delete(upload)),
    stat: (digest) => Effect.sync(() => blobs.get(digest)?.blob),
    readable: (digest, projects) =>
      Effect.sync(() =>
        [...refs.get(digest) ?? []].some((key) => projects.includes(key.slice(0, key.indexOf("\u0000"))))
      ),
    chunk: (blob, seq) => Effect.sync(() => blobs.get(blob.digest)?.chunks.get(seq)),
    release: (holder, only) =>
      Effect.sync(() => {
        let dropped = 0
        for (const [digest, keys] of refs) {
          if (only !== undefined && digest !== only) continue
          const held = [...keys].filter((key) => key.endsWith(`\u0000${holder}`))
          for (const key of held) keys.delete(key)
          if (held.length > 0) dropped += dropUnreferenced(digest)
        }
        return dropped
      }),
    sweep: (before) =>
      Effect.sync(() => {
        let dropped = 0
        for (const [upload, entry] of staged) {
          if (entry.touchedAt < before) dropped += staged.delete(upload) ? 1 : 0
        }
        return dropped
      }),
    holders: (after, limit) =>
      Effect.sync(() =>
        [...new Set([...refs.values()].flatMap((keys) => [...keys].map((key) => key.slice(key.indexOf("\u0000") + 1))))]
          .filter((holder) => holder > after && holder !== "upload").sort().slice(0, limit)
      )
  }
}

export const layerMemory: Layer.Layer<BlobStore> = Layer.sync(BlobStore, makeMemory)

/** The blob tables, a migration of the SQL store (store/SqlStore.ts). */
export const blobSchema = [
  `CREATE TABLE nodus_blob_uploads (
     upload text PRIMARY KEY,
     touched_at bigint NOT NULL)`,
  `CREATE TABLE nodus_blob_chunks (
     upload text NOT NULL,
     seq integer NOT NULL,
     bytes bytea NOT NULL,
     PRIMARY KEY (upload, seq))`,
  // Out of line and never compressed: what is stored is mostly tar.zst already, and trying pglz on every MiB costs CPU.
  `ALTER TABLE nodus_blob_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL`,
  `CREATE TABLE nodus_blobs (
     digest text PRIMARY KEY,
     size_bytes bigint NOT NULL,
     upload text NOT NULL,
     chunks integer NOT NULL)`,
  `CREATE TABLE nodus_blob_refs (
     digest text NOT NULL,
     project text NOT NULL,
     holder text NOT NULL,
     PRIMARY KEY (digest, project, holder))`,
  `CREATE INDEX nodus_blob_refs_holder ON nodus_blob_refs (holder)`
]

/** A blob to publish whose bytes are not there (see `publish`): its uploader uploads it again. */
const missingBytes = (upload: string) =>
  new StoreError({
    message:
      `the bytes of upload ${upload} are gone (swept, or the blob was collected while it was uploaded); upload it again`
  })
const failure = (message: string) => (cause: SqlError.SqlError) =>
  new StoreError({ message: `${message}: ${cause.message}`, cause })

/**
 * Where the bytes of staged and published uploads are: rows of `nodus_blob_chunks` (PostgreSQL), or one file per upload
 * in a directory beside the embedded database (PGlite, whose bytea moves at about 5 MB/s in and 10 MB/s out on this
 * project's machine: a 100 MiB /workspace snapshot took 16 s to save). Rows go with the transactions that drop them;
 * files are unlinked once those transactions committed.
 */
interface Chunks {
  readonly write: (upload: string, seq: number, bytes: Uint8Array) => Effect.Effect<void, StoreError>
  readonly read: (upload: string, seq: number) => Effect.Effect<Uint8Array | undefined, StoreError>
  /** Makes a whole upload as durable as the database before it is published. */
  readonly seal: (upload: string) => Effect.Effect<void, StoreError>
  /** Drops the bytes of uploads whose rows were deleted. */
  readonly drop: (uploads: ReadonlyArray<string>) => Effect.Effect<void>
  /** Lets every write of an upload that is being discarded finish (or fail), so that none lands after its discard. */
  readonly settle: (upload: string) => Effect.Effect<void>
}

/** Waits for a write stream to drain; rejects when it closes first. Neither listener outlives the wait. */
const drained = async (stream: WriteStream, upload: string) => {
  const stop = new AbortController()
  try {
    await Promise.race([
      once(stream, "drain", { signal: stop.signal }),
      once(stream, "close", { signal: stop.signal }).then(() =>
        Promise.reject(new Error(`upload ${upload} was dropped`))
      )
    ])
  } finally {
    stop.abort()
  }
}

const fileChunks = (dir: string): Chunks => {
  const fileOf = (upload: string) => join(dir, upload)
  const attempt = <A>(what: string, run: () => Promise<A>) =>
    Effect.tryPromise({
      try: run,
      catch: (cause) =>
        new StoreError({ message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })
    })
  // One open stream per upload being written: the disk writes while the next chunk is read and hashed.
  const writing = new Map<string, WriteStream>()
  const closed = (stream: WriteStream) =>
    new Promise<void>((resolve, reject) => {
      stream.once("error", reject)
      stream.end(() => resolve())
    })
  // Destroys an upload's stream and waits for it to close: a stream still opening its file creates the file when the
  // open completes, so removing the file before then would leave one behind (the sweep of a one-chunk upload did).
  const stop = (upload: string) => {
    const stream = writing.get(upload)
    writing.delete(upload)
    if (stream === undefined || stream.closed) return Promise.resolve()
    const gone = new Promise<void>((resolve) => stream.once("close", () => resolve()))
    stream.destroy()
    return gone
  }
  return {
    // Chunks come in order, each but the last blobChunkBytes long: appending puts chunk n at n × blobChunkBytes.
    write: (upload, _seq, bytes) =>
      attempt("writing a blob chunk failed", async () => {
        let stream = writing.get(upload)
        if (stream === undefined) {
          await mkdir(dir, { recursive: true })
          stream = createWriteStream(fileOf(upload), { flags: "a", mode: 0o600 })
          stream.on("error", () => undefined) // answered by the write or the seal that meets it
          writing.set(upload, stream)
        }
        if (stream.errored !== null) throw stream.errored
        if (stream.destroyed) throw new Error(`upload ${upload} was dropped`)
        // A stream dropped while this write waits (a sweep, a discard) closes without draining: the write fails then.
        if (!stream.write(bytes)) await drained(stream, upload)
      }),
    read: (upload, seq) =>
      attempt("reading a blob chunk failed", async () => {
        const file = await open(fileOf(upload), "r").catch(() => undefined)
        if (file === undefined) return undefined
        try {
          const buffer = Buffer.allocUnsafe(blobChunkBytes)
          const { bytesRead } = await file.read(buffer, 0, blobChunkBytes, seq * blobChunkBytes)
          return buffer.subarray(0, bytesRead)
        } finally {
          await file.close()
        }
      }),
    // Written out (no fsync: the embedded database these files go with runs with fsync off, PGlite's default). Whatever
    // a power loss leaves, only a row says a blob exists, and a row is written after its file.
    seal: (upload) =>
      attempt("writing a blob failed", async () => {
        const stream = writing.get(upload)
        if (stream === undefined) return
        writing.delete(upload)
        await closed(stream)
      }),
    settle: (upload) => Effect.promise(() => stop(upload)),
    drop: (uploads) =>
      Effect.promise(() =>
        Promise.all(uploads.map((upload) => stop(upload).then(() => rm(fileOf(upload), { force: true }))))
      ).pipe(Effect.asVoid)
  }
}

/** An upload says it is still going every this many chunks (64 MiB): what the sweep of abandoned ones reads. */
const uploadTouchEvery = 64

/** Chunk inserts of one upload in flight at once: each is a round trip carrying 1 MiB, so they overlap. */
export const chunkWritesInFlight = 4

const rowChunks = (sql: SqlClient.SqlClient): Chunks => {
  const inFlight = new Map<string, Array<Fiber.Fiber<void, StoreError>>>()
  const insert = (upload: string, seq: number, bytes: Uint8Array) =>
    sql.unsafe(`INSERT INTO nodus_blob_chunks (upload, seq, bytes) VALUES ($1, $2, $3)`, [
      upload,
      seq,
      Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
    ]).pipe(
      Effect.asVoid,
      Effect.mapError(failure("staging a blob chunk failed"))
    )
  /** Waits for every insert of the upload to land or fail; then fails with the first failure, if any. */
  const settle = (upload: string) =>
    Effect.suspend(() => {
      const fibers = inFlight.get(upload) ?? []
      inFlight.delete(upload)
      return Effect.flatMap(Effect.forEach(fibers, (fiber) => Fiber.await(fiber)), (exits) => {
        const failed = exits.find(Exit.isFailure)
        return failed === undefined ? Effect.void : Effect.failCause(failed.cause)
      })
    })
  return {
    // Rows name their seq: inserts may land in any order, and a seal waits for all of them.
    write: (upload, seq, bytes) =>
      Effect.gen(function*() {
        const fibers = inFlight.get(upload) ?? []
        inFlight.set(upload, fibers)
        // The oldest stays tracked while it is waited for: a discard meanwhile still waits for it to land.
        if (fibers.length >= chunkWritesInFlight) {
          yield* Fiber.join(fibers[0]!)
          fibers.shift()
        }
        fibers.push(yield* Effect.forkDetach(insert(upload, seq, bytes)))
      }),
    read: (upload, seq) =>
      sql.unsafe<{ bytes: Uint8Array }>(`SELECT bytes FROM nodus_blob_chunks WHERE upload = $1 AND seq = $2`, [
        upload,
        seq
      ]).pipe(
        Effect.map((rows) => rows[0]?.bytes),
        Effect.mapError(failure("reading a blob chunk failed"))
      ),
    seal: settle,
    // The transactions that dropped the uploads' rows deleted their chunks with them, once no insert was left to land.
    drop: () => Effect.void,
    settle: (upload) => Effect.ignore(settle(upload))
  }
}

/**
 * Blobs in the SQL store's database: one body of SQL for PostgreSQL and PGlite. With `filesDir`, the bytes are files
 * in that directory and the database keeps everything else (the embedded default; see `Chunks`).
 */
export const makeSql = (filesDir?: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const chunks = filesDir === undefined ? rowChunks(sql) : fileChunks(filesDir)
    // One advisory lock per digest (its first 15 hex digits, a positive bigint), held to the transaction's end.
    const lockDigest = (digest: string) =>
      sql.unsafe(`SELECT pg_advisory_xact_lock(('x' || substr($1, 1, 15))::bit(60)::bigint)`, [digest])
    /** Deletes the blob if no reference keeps it; answers the upload its bytes were kept under, if it went. */
    const dropUnreferenced = (digest: string) =>
      sql.unsafe<{ upload: string }>(
        `DELETE FROM nodus_blobs b WHERE digest = $1 AND NOT EXISTS (SELECT 1 FROM nodus_blob_refs r WHERE r.digest = b.digest) RETURNING upload`,
        [digest]
      ).pipe(Effect.flatMap((rows) =>
        rows.length === 0
          ? Effect.succeed(undefined)
          : Effect.as(sql.unsafe(`DELETE FROM nodus_blob_chunks WHERE upload = $1`, [rows[0]!.upload]), rows[0]!.upload)
      ))
    const dropUpload = (upload: string) =>
      Effect.andThen(
        sql.unsafe(`DELETE FROM nodus_blob_chunks WHERE upload = $1`, [upload]),
        sql.unsafe(`DELETE FROM nodus_blob_uploads WHERE upload = $1`, [upload])
      )

    return BlobStore.of({
      // Its first chunk registers the upload; every 64th says it is still going (an upload of hours is not abandoned).
      stage: (upload, seq, bytes, now) =>
        (seq === 0
          ? sql.unsafe(`INSERT INTO nodus_blob_uploads (upload, touched_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [
            upload,
            now
          ])
          : seq % uploadTouchEvery === 0
          ? sql.unsafe(`UPDATE nodus_blob_uploads SET touched_at = $2 WHERE upload = $1`, [upload, now])
          : Effect.succeed([])).pipe(
            Effect.mapError(failure("staging a blob chunk failed")),
            Effect.andThen(chunks.write(upload, seq, bytes))
          ),
      publish: (upload, blob, ref) =>
        chunks.seal(upload).pipe(
          Effect.andThen(
            sql.withTransaction(Effect.gen(function*() {
              yield* lockDigest(blob.digest)
              const inserted = yield* sql.unsafe<{ digest: string }>(
                `INSERT INTO nodus_blobs (digest, size_bytes, upload, chunks) VALUES ($1, $2, $3, $4) ON CONFLICT (digest) DO NOTHING RETURNING digest`,
                [blob.digest, blob.sizeBytes, upload, blob.chunks]
              )
              const staged = yield* sql.unsafe<{ upload: string }>(
                `DELETE FROM nodus_blob_uploads WHERE upload = $1 RETURNING upload`,
                [upload]
              )
              if (inserted.length === 0) yield* sql.unsafe(`DELETE FROM nodus_blob_chunks WHERE upload = $1`, [upload])
              else if (staged.length === 0 && blob.sizeBytes > 0) return yield* missingBytes(upload)
              yield* sql.unsafe(
                `INSERT INTO nodus_blob_refs (digest, project, holder) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
                [blob.digest, ref.project, ref.holder]
              )
              return inserted.length > 0
            })).pipe(
              Effect.mapError((error) =>
                error._tag === "StoreError" ? error : failure("publishing a blob failed")(error)
              )
            )
          ),
          // The same bytes were stored already: the staged copy goes.
          Effect.tap((created) => created ? Effect.void : chunks.drop([upload]))
        ),
      discard: (upload) =>
        chunks.settle(upload).pipe(
          Effect.andThen(sql.withTransaction(dropUpload(upload))),
          Effect.asVoid,
          Effect.mapError(failure("discarding an upload failed")),
          Effect.andThen(chunks.drop([upload]))
        ),
      stat: (digest) =>
        sql.unsafe<{ size_bytes: string; upload: string; chunks: number }>(
          `SELECT size_bytes::text AS size_bytes, upload, chunks FROM nodus_blobs WHERE digest = $1`,
          [digest]
        ).pipe(
          Effect.map((rows) =>
            rows[0] === undefined
              ? undefined
              : {
                digest,
                sizeBytes: Number(rows[0].size_bytes),
                upload: rows[0].upload,
                chunks: Number(rows[0].chunks)
              }
          ),
          Effect.mapError(failure("reading a blob failed"))
        ),
      readable: (digest, projects) =>
        sql.unsafe<{ found: number }>(
          `SELECT 1 AS found FROM nodus_blob_refs WHERE digest = $1 AND project = ANY($2::text[]) LIMIT 1`,
          [digest, [...projects]]
        ).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(failure("reading a blob's references failed"))
        ),
      chunk: (blob, seq) => chunks.read(blob.upload, seq),
      // One digest per transaction, so an owner of thousands of checkpoints never holds thousands of locks at once.
      release: (holder, only) =>
        (only === undefined
          ? sql.unsafe<{ digest: string }>(`SELECT DISTINCT digest FROM nodus_blob_refs WHERE holder = $1`, [holder])
          : sql.unsafe<{ digest: string }>(
            `SELECT DISTINCT digest FROM nodus_blob_refs WHERE holder = $1 AND digest = $2`,
            [holder, only]
          )).pipe(
            Effect.flatMap((released) =>
              Effect.forEach(released, ({ digest }) =>
                sql.withTransaction(Effect.gen(function*() {
                  yield* lockDigest(digest)
                  yield* sql.unsafe(`DELETE FROM nodus_blob_refs WHERE digest = $1 AND holder = $2`, [digest, holder])
                  return yield* dropUnreferenced(digest)
                })).pipe(Effect.tap((upload) => upload === undefined ? Effect.void : chunks.drop([upload]))))
            ),
            Effect.map((uploads) => uploads.filter((upload) => upload !== undefined).length),
            Effect.mapError(failure("releasing blobs failed"))
          ),
      holders: (after, limit) =>
        sql.unsafe<{ holder: string }>(
          `SELECT DISTINCT holder FROM nodus_blob_refs WHERE holder > $1 AND holder <> 'upload' ORDER BY holder LIMIT $2`,
          [after, limit]
        ).pipe(
          Effect.map((rows) => rows.map((row) => row.holder)),
          Effect.mapError(failure("listing blob holders failed"))
        ),
      sweep: (before) =>
        sql.withTransaction(Effect.gen(function*() {
          // The upload rows first: a publish that claimed its row meanwhile keeps its chunks; the sweep drops only what
          // it claimed.
          const abandoned = yield* sql.unsafe<{ upload: string }>(
            `DELETE FROM nodus_blob_uploads WHERE touched_at < $1 RETURNING upload`,
            [before]
          )
          for (const { upload } of abandoned) {
            yield* sql.unsafe(`DELETE FROM nodus_blob_chunks WHERE upload = $1`, [upload])
          }
          return abandoned.map(({ upload }) => upload)
        })).pipe(
          Effect.mapError(failure("sweeping abandoned uploads failed")),
          Effect.tap(chunks.drop),
          Effect.map((swept) => swept.length)
        )
    })
  })
