/**
 * A Volume's revisions over HTTP (spec: "a Volume has revisions"; the paths are not shown, so these are nodus's,
 * docs/kinds/Volume.md "Revisions"):
 *
 *   POST /apis/{group}/v1/namespaces/{ns}/volumes/{name}/revisions[?sha256=<hex>]   the Volume's files as one tar.zst
 *        → 201, the Volume with the new revision in status (revision, revisions[], usedBytes)
 *   GET  /apis/{group}/v1/namespaces/{ns}/volumes/{name}/revisions/{revision}       that revision's archive
 *
 * Like a Job's outputs, the archive lives in the blob store (docs/blobs.md), held by the Volume's uid, so it goes
 * with the Volume; a revision dropped past `volumeRevisionsKept` releases its archive unless a kept one has the same
 * bytes. A commit is authorized as a write of the Volume, a read as a read of it.
 */
import { Clock, Effect, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { pipeline } from "node:stream/promises"
import { createZstdDecompress } from "node:zlib"
import { Blobs, everything } from "../../../apiserver/Blobs.ts"
import { Resources, type WriteOptions } from "../../../apiserver/Resources.ts"
import { isObject, type Json } from "../../../core/Json.ts"
import * as Limits from "../../../core/Limits.ts"
import { ApiError, badRequest, fieldInvalid, methodNotAllowed } from "../../../core/meta/ApiError.ts"
import type { ResourceRef } from "../../../core/meta/Kinds.ts"
import type { ResourceObject } from "../../../core/meta/ObjectMeta.ts"
import { commitRevision, keepsArchive, pickRevision, volumeSizeBytes } from "../../../core/VolumeRevisions.ts"
import type { KindRegistration } from "../../../http/KindApi.ts"
import { json } from "../../../http/Respond.ts"

type Request = HttpServerRequest.HttpServerRequest

/** Concurrent commits to one Volume (from several servers) race on its resourceVersion: the loser tries again. */
const commitTries = 5

/** zstd's frame magic number (RFC 8878, 3.1.1): an archive that does not start with it is not a tar.zst. */
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd]

export interface VolumeApiParts {
  readonly resources: Resources["Service"]
  readonly blobs: Blobs["Service"]
}

export interface VolumeTarget {
  readonly ref: ResourceRef
  readonly namespace: string
  readonly name: string
  readonly item: string | undefined
  readonly options: WriteOptions
}

const busy = (volume: ResourceObject) => {
  const holder = isObject(volume.status ?? null) && isObject((volume.status as { boundTo?: Json }).boundTo ?? null)
    ? (volume.status as { boundTo: { kind?: string; name?: string } }).boundTo
    : undefined
  return holder === undefined
    ? undefined
    : new ApiError({
      code: "VolumeBusy",
      message: `Volume "${volume.metadata.name}" is held for writing by ${holder.kind ?? "a workload"} "${
        holder.name ?? ""
      }"`,
      fix:
        "Commit once that workload has released it (status.boundTo is empty then), or mount a committed revision read-only."
    })
}

export const makeVolumeApi = (parts: VolumeApiParts) => {
  const { resources, blobs } = parts

  /** The archive's bytes, stored for the Volume's project and held by its uid; the first bytes must be zstd's. */
  const store = (request: Request, query: URLSearchParams, volume: ResourceObject, bytesMax: number) =>
    Effect.gen(function*() {
      const declared = Number(request.headers["content-length"] ?? "0")
      if (declared > bytesMax) return yield* tooLarge(declared, bytesMax, volume)
      const ref = { project: volume.metadata.namespace ?? "", holder: volume.metadata.uid }
      const expected = query.get("sha256")
      if (expected !== null && !/^[0-9a-f]{64}$/u.test(expected)) {
        return yield* badRequest(`sha256 must be 64 lowercase hex digits, not ${JSON.stringify(expected)}`, [
          fieldInvalid(
            "sha256",
            `Invalid value: ${JSON.stringify(expected)}: must be the archive's SHA-256 as sha256sum prints it`
          )
        ])
      }
      const stored = expected === null
        ? yield* blobs.store(ref, request.stream, bytesMax)
        : yield* blobs.put(expected, ref, request.stream)
      if (stored.sizeBytes > bytesMax) {
        yield* blobs.release(ref.holder, stored.digest)
        return yield* tooLarge(stored.sizeBytes, bytesMax, volume)
      }
      const blob = yield* blobs.stat(stored.digest, everything)
      const head = blob === undefined ? new Uint8Array() : yield* firstBytes(blobs.read(blob))
      const notZstd = badRequest(
        "a revision is the Volume's files as one tar.zst archive; the body is not zstd-compressed",
        [
          fieldInvalid(
            "body",
            "Invalid value: must be a tar archive compressed with zstd (tar --zstd -cf - -C <dir> .)"
          )
        ]
      )
      if (blob === undefined || !zstdMagic.every((byte, index) => head[index] === byte)) {
        yield* blobs.release(ref.holder, stored.digest)
        return yield* notZstd
      }
      // What it expands to is bounded too (a few KB of zstd can expand to gigabytes), counted without keeping any of
      // it.
      const expandedMax = volumeSizeBytes(volume.spec) + Limits.volumeArchiveHeadroomBytes
      const expands = yield* Effect.tryPromise(() => expandsPast(Stream.toAsyncIterable(blobs.read(blob)), expandedMax))
        .pipe(Effect.result)
      if (expands._tag === "Failure" || expands.success) {
        yield* blobs.release(ref.holder, stored.digest)
        return yield* (expands._tag === "Failure" ? notZstd : expandsTooFar(expandedMax, volume))
      }
      return stored
    })

  /** Commits the stored archive as the next revision, retrying a lost race; releases what the commit dropped. */
  const commit = (
    target: VolumeTarget,
    first: ResourceObject,
    stored: { readonly digest: string; readonly sizeBytes: number }
  ) =>
    Effect.gen(function*() {
      let volume = first
      for (let tries = 1;; tries++) {
        const problem = busy(volume)
        if (problem !== undefined) return yield* problem
        const now = new Date(yield* Clock.currentTimeMillis).toISOString().replace(/\.\d{3}Z$/u, "Z")
        const next = commitRevision(volume.status, {
          sha256: stored.digest,
          sizeBytes: stored.sizeBytes,
          createdTime: now
        })
        const body = { ...volume, status: next.status }
        const written = yield* Effect.result(
          resources.replace(target.ref, target.namespace, target.name, body, target.options, "status")
        )
        if (written._tag === "Success") {
          for (const digest of next.released) yield* blobs.release(volume.metadata.uid, digest)
          return written.success.object
        }
        if (written.failure.code !== "Conflict" || tries >= commitTries) return yield* written.failure
        volume = yield* resources.get(target.ref, target.namespace, target.name)
      }
    })

  const post = (request: Request, query: URLSearchParams, target: VolumeTarget) =>
    Effect.gen(function*() {
      const volume = yield* resources.get(target.ref, target.namespace, target.name)
      const problem = busy(volume)
      if (problem !== undefined) return yield* problem
      const stored = yield* store(request, query, volume, Math.min(blobs.bytesMax, volumeSizeBytes(volume.spec)))
      const committed = yield* commit(target, volume, stored).pipe(
        // Nothing names the archive when the commit failed: it goes, unless a kept revision has the same bytes.
        Effect.tapError(() =>
          Effect.flatMap(resources.get(target.ref, target.namespace, target.name), (now) =>
            keepsArchive(now.status, stored.digest)
              ? Effect.void
              : Effect.asVoid(blobs.release(volume.metadata.uid, stored.digest))).pipe(Effect.ignore)
        )
      )
      return json(201, committed)
    })

  const get = (target: VolumeTarget) =>
    Effect.gen(function*() {
      const revision = Number(target.item)
      if (!/^[1-9][0-9]{0,15}$/u.test(target.item ?? "")) {
        return yield* badRequest(`a revision is a number from 1, not ${JSON.stringify(target.item)}`, [
          fieldInvalid(
            "revision",
            `Invalid value: ${JSON.stringify(target.item)}: must be a revision number (status.revisions lists them)`
          )
        ])
      }
      const volume = yield* resources.get(target.ref, target.namespace, target.name)
      const picked = pickRevision(target.name, volume.status, revision)
      const blob = typeof picked === "string" ? undefined : yield* blobs.stat(picked.sha256, everything)
      if (typeof picked === "string" || blob === undefined) {
        return yield* new ApiError({
          code: "NotFound",
          message: typeof picked === "string"
            ? picked
            : `revision ${revision} of Volume "${target.name}" is not stored`,
          fix: "status.revisions lists the revisions kept."
        })
      }
      return HttpServerResponse.stream(blobs.read(blob), {
        status: 200,
        contentType: "application/zstd",
        contentLength: blob.sizeBytes,
        headers: {
          digest: `sha-256=${Buffer.from(picked.sha256, "hex").toString("base64")}`,
          "content-disposition": `attachment; filename="${target.name}-${revision}.tar.zst"`
        }
      })
    })

  const handle = (request: Request, query: URLSearchParams, target: VolumeTarget) => {
    if (request.method === "POST" && target.item === undefined) return post(request, query, target)
    if (request.method === "GET" && target.item !== undefined) return get(target)
    return Effect.fail(methodNotAllowed(request.method))
  }

  return { handle }
}

const tooLarge = (bytes: number, bytesMax: number, volume: ResourceObject) =>
  new ApiError({
    code: "FileTooLarge",
    message:
      `the archive is ${bytes} bytes; Volume "${volume.metadata.name}" takes at most ${bytesMax} bytes per revision`,
    fix: "Commit fewer files, or create a larger Volume (spec.size bounds each revision's archive)."
  })

const expandsTooFar = (bytesMax: number, volume: ResourceObject) =>
  new ApiError({
    code: "FileTooLarge",
    message: `the archive expands to more than ${bytesMax} bytes; Volume "${volume.metadata.name}" holds at most ${
      volumeSizeBytes(volume.spec)
    } bytes (spec.size) per revision`,
    fix: "Commit fewer files, or create a larger Volume (spec.size bounds what each revision holds, unpacked)."
  })

/** Whether a zstd stream decompresses to more than `bytesMax` bytes: counted as it decompresses, stopped past it. */
const expandsPast = async (bytes: AsyncIterable<Uint8Array>, bytesMax: number): Promise<boolean> => {
  let expanded = 0
  try {
    // In 1 MiB chunks: zlib's default 16 KiB costs a thread-pool round trip per 16 KiB (backends/live/Archive.ts).
    await pipeline(bytes, createZstdDecompress({ chunkSize: 1024 * 1024 }), async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) {
        expanded += chunk.length
        if (expanded > bytesMax) return
      }
    })
  } catch (error) {
    if (expanded <= bytesMax) throw error
  }
  return expanded > bytesMax
}

/** The first bytes of a stream (its first chunk), without reading the rest. */
const firstBytes = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runHead(stream), (head) => head._tag === "Some" ? head.value : new Uint8Array())

/** The Volume's registration: its revisions. */
export const volumeRegistration: KindRegistration<Resources | Blobs> = {
  kind: "Volume",
  items: { revisions: "items" },
  make: Effect.gen(function*() {
    const api = makeVolumeApi({ resources: yield* Resources, blobs: yield* Blobs })
    return {
      subresources: [{
        names: ["revisions"],
        access: (method, route) => (route.name === undefined ? undefined : method === "GET" ? "read" : "write"),
        handle: (call) =>
          Effect.flatMap(call.writeOptions, (options) =>
            api.handle(call.request, call.query, {
              ref: call.ref,
              namespace: call.namespace ?? "",
              name: call.name,
              item: call.item,
              options
            }))
      }]
    }
  })
}
