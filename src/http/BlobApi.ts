/**
 * Blob uploads over HTTP (spec: "uploads through /blobs/v1"; docs/blobs.md):
 *
 *   PUT  /blobs/v1/sha256:<hex>[?project=P]   the body, stored if its SHA-256 is <hex>: 201 (new)
 *                                             or 200 {digest, sizeBytes}
 *   HEAD /blobs/v1/sha256:<hex>               200 with Content-Length and Digest, or 404
 *   GET  /blobs/v1/sha256:<hex>               the bytes (application/octet-stream)
 *
 * Writing needs `blobs:write`, reading `blobs:read`. A key bound to a project uploads for that project; the admin
 * uploads for the project it names, or for the organisation (every project reads those). A blob the caller may not
 * read answers 404, exactly as one that is not stored.
 */
import { Effect } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { forbidden, grants, type Principal } from "../apiserver/Auth.ts"
import { type Blobs, everything, projectReader, uploadHolder } from "../apiserver/Blobs.ts"
import { ApiError, badRequest, fieldInvalid, methodNotAllowed, notFound } from "../core/meta/ApiError.ts"
import { blobScopePrefix } from "../core/meta/Scopes.ts"
import type { BlobRef } from "../store/BlobStore.ts"
import { json } from "./Respond.ts"

type Request = HttpServerRequest.HttpServerRequest

const digestPattern = /^sha256:([0-9a-f]{64})$/u

/** The hex digest a path's reference names, or a 400 that says what one looks like. */
const digestOf = (reference: string) => {
  const match = digestPattern.exec(reference)
  return match === null
    ? Effect.fail(
      badRequest(
        `a blob is named by its content address, sha256:<64 lowercase hex digits>, not ${JSON.stringify(reference)}`,
        [
          fieldInvalid(
            "path",
            `Invalid value: ${
              JSON.stringify(reference)
            }: must be sha256:<64 lowercase hex digits> (the body's SHA-256, as \`sha256sum\` prints it)`
          )
        ]
      )
    )
    : Effect.succeed(match[1]!)
}

const notStored = (digest: string) =>
  new ApiError({
    ...notFound({ kind: "blobs", name: `sha256:${digest}` }),
    fix:
      "Upload the bytes with PUT /blobs/v1/sha256:<hex> first; a blob another project uploaded is not visible to yours, so upload it for your project too."
  })

export interface BlobApiParts {
  readonly blobs: Blobs["Service"]
  /** Whether the project exists (an upload for one that does not is NotFound). */
  readonly projectExists: (project: string) => Effect.Effect<boolean, ApiError>
}

export const makeBlobApi = (parts: BlobApiParts) => {
  const { blobs } = parts

  const requireScope = (principal: Principal, access: "read" | "write") =>
    grants(principal.scopes, blobScopePrefix, access)
      ? Effect.void
      : Effect.fail(forbidden(principal, `cannot ${access} blobs: the key needs scope "${blobScopePrefix}:${access}"`))

  /** The project an upload is for: the key's own, or the one the admin names, or the organisation's (""). */
  const uploaderOf = (principal: Principal, query: URLSearchParams) =>
    Effect.gen(function*() {
      const named = query.get("project") ?? undefined
      if (principal.namespace !== undefined) {
        if (named !== undefined && named !== principal.namespace) {
          return yield* forbidden(
            principal,
            `cannot upload for project "${named}": the key is confined to project "${principal.namespace}"`
          )
        }
        return principal.namespace
      }
      if (named === undefined || named === "") return ""
      if (!(yield* parts.projectExists(named))) return yield* notFound({ kind: "namespaces", name: named })
      return named
    })

  const put = (request: Request, query: URLSearchParams, digest: string, principal: Principal) =>
    Effect.gen(function*() {
      yield* requireScope(principal, "write")
      const project = yield* uploaderOf(principal, query)
      const declared = Number(request.headers["content-length"] ?? "0")
      if (declared > blobs.bytesMax) {
        return yield* new ApiError({
          code: "FileTooLarge",
          message: `the body is ${declared} bytes; a blob is at most ${blobs.bytesMax}`
        })
      }
      const ref: BlobRef = { project, holder: uploadHolder }
      const stored = yield* blobs.put(digest, ref, request.stream)
      return json(stored.created ? 201 : 200, { digest: `sha256:${stored.digest}`, sizeBytes: stored.sizeBytes })
    })

  const readable = (digest: string, principal: Principal) =>
    Effect.gen(function*() {
      yield* requireScope(principal, "read")
      const blob = yield* blobs.stat(
        digest,
        principal.namespace === undefined ? everything : projectReader(principal.namespace)
      )
      return blob ?? (yield* notStored(digest))
    })

  const headers = (digest: string) => ({
    digest: `sha-256=${Buffer.from(digest, "hex").toString("base64")}`,
    etag: `"sha256:${digest}"`
  })

  const handle = (request: Request, query: URLSearchParams, reference: string, principal: Principal) =>
    Effect.gen(function*() {
      const digest = yield* digestOf(reference)
      switch (request.method) {
        case "PUT":
          return yield* put(request, query, digest, principal)
        case "HEAD": {
          const blob = yield* readable(digest, principal)
          return HttpServerResponse.empty({
            status: 200,
            headers: {
              ...headers(digest),
              "content-length": String(blob.sizeBytes),
              "content-type": "application/octet-stream"
            }
          })
        }
        case "GET": {
          const blob = yield* readable(digest, principal)
          return HttpServerResponse.stream(blobs.read(blob), {
            status: 200,
            contentType: "application/octet-stream",
            contentLength: blob.sizeBytes,
            headers: headers(digest)
          })
        }
        default:
          return yield* methodNotAllowed(request.method)
      }
    })

  return { handle }
}
