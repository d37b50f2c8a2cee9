/**
 * Request bodies: read with a size limit (413 RequestEntityTooLarge past it), decoded by media type (JSON, or YAML
 * as Kubernetes also accepts), and never trusted: a malformed body is a 400 BadRequest with the parser's reason.
 */
import { ByteSize, Effect } from "effect"
import { HttpIncomingMessage, type HttpServerRequest } from "effect/http"
import { parse as parseYaml } from "yaml"
import { ApiError, badRequest, fieldInvalid } from "../core/meta/ApiError.ts"
import { decodeNamespace, protobufMediaType } from "./Protobuf.ts"

/** Kubernetes' limit on a request body (apiserver MaxRequestBodyBytes is 3 MiB). */
export const requestBodyMaxBytes = 3 * 1024 * 1024

const tooLarge = () =>
  new ApiError({
    code: "RequestEntityTooLarge",
    message: `the request body is larger than ${requestBodyMaxBytes} bytes`,
    fix: "Send a smaller object; large payloads belong in a Volume or an uploaded blob (/blobs/v1)."
  })

/** The media type of a Content-Type header, lower-cased and without parameters ("" when absent). */
export const mediaTypeOf = (contentType: string | undefined): string =>
  (contentType ?? "").split(";")[0]!.trim().toLowerCase()

const isTooLarge = (error: unknown): boolean => {
  for (let cause = error; cause !== undefined && cause !== null; cause = (cause as { cause?: unknown }).cause) {
    if ((cause as { _tag?: string })._tag === "MaxBytesError" || (cause as Error).name === "MaxBytesError") return true
    if (typeof cause !== "object") break
    const reason = (cause as { reason?: unknown }).reason
    if (reason !== undefined && isTooLarge(reason)) return true
  }
  return false
}

/** The raw body bytes, refused past the limit (`maxBytes`, with its own error) before they are all read. */
export const readBytes = (
  request: HttpServerRequest.HttpServerRequest,
  limit: { readonly maxBytes: number; readonly tooLarge: () => ApiError } = { maxBytes: requestBodyMaxBytes, tooLarge }
): Effect.Effect<Uint8Array, ApiError> => {
  const declared = Number(request.headers["content-length"] ?? "0")
  if (declared > limit.maxBytes) return Effect.fail(limit.tooLarge())
  return request.arrayBuffer.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(BigInt(limit.maxBytes))),
    Effect.map((buffer) => new Uint8Array(buffer)),
    Effect.mapError((
      error
    ) => (isTooLarge(error) ? limit.tooLarge() : badRequest("the request body could not be read")))
  )
}

const decoder = new TextDecoder()

/** The raw body text (UTF-8), refused past the limit before it is all read. */
export const readText = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, ApiError> =>
  Effect.map(readBytes(request), (bytes) => decoder.decode(bytes))

/**
 * How deeply a body may nest. No kind's schema comes near it; bounding it keeps every recursive walk over a body
 * (merge patches, admission, canonical JSON) far from the stack's end, whatever a client sends.
 */
export const bodyDepthMax = 64

const segmentOf = (path: string, key: string | number): string =>
  typeof key === "number"
    ? `${path}[${key}]`
    : /^[A-Za-z_][A-Za-z0-9_]*$/u.test(key)
    ? (path === "" ? key : `${path}.${key}`)
    : `${path}[${JSON.stringify(key)}]`

/**
 * What no stored text may hold: the NUL character, which neither PostgreSQL text nor a process's argv and environment
 * can carry, and lone UTF-16 surrogates, which have no UTF-8 form (JSON's `\ud800` escape makes one).
 */
export const textProblem = (text: string): string | undefined =>
  text.includes("\u0000") ? "a NUL character" : text.isWellFormed() ? undefined : "a lone UTF-16 surrogate"

/**
 * What no stored document may hold: nesting past `bodyDepthMax`, and text `textProblem` refuses. Walked with an
 * explicit stack, so depth cannot overflow it.
 */
export const documentProblem = (document: unknown): ApiError | undefined => {
  const pending: Array<{ readonly value: unknown; readonly path: string; readonly depth: number }> = [{
    value: document,
    path: "",
    depth: 0
  }]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path, depth } = next
    if (typeof value === "string") {
      const problem = textProblem(value)
      if (problem !== undefined) {
        return badRequest(`the request body holds ${problem} at ${path || "its top level"}`, [
          fieldInvalid(path, `Invalid value: ${problem} is not allowed`)
        ])
      }
      continue
    }
    if (typeof value !== "object" || value === null) continue
    if (depth >= bodyDepthMax) {
      return badRequest(`the request body nests deeper than ${bodyDepthMax} levels`, [
        fieldInvalid(path, `Invalid value: nested deeper than ${bodyDepthMax} levels`)
      ])
    }
    const entries: ReadonlyArray<readonly [string | number, unknown]> = Array.isArray(value)
      ? value.map((item, index) => [index, item] as const)
      : Object.entries(value)
    for (const [key, child] of entries) {
      const childPath = segmentOf(path, key)
      const problem = typeof key === "string" ? textProblem(key) : undefined
      if (problem !== undefined) {
        return badRequest(`the request body holds ${problem} in a key at ${path || "its top level"}`, [
          fieldInvalid(childPath, `Invalid value: ${problem} is not allowed`)
        ])
      }
      pending.push({ value: child, path: childPath, depth: depth + 1 })
    }
  }
  return undefined
}

const checked = (document: unknown): Effect.Effect<unknown, ApiError> => {
  const problem = documentProblem(document)
  return problem === undefined ? Effect.succeed(document) : Effect.fail(problem)
}

/** Parses a JSON document; empty text is `undefined` (no body). */
export const parseJson = (text: string): Effect.Effect<unknown, ApiError> =>
  text.trim() === ""
    ? Effect.succeed(undefined)
    : Effect.flatMap(
      Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: (error) => badRequest(`the request body is not valid JSON: ${(error as Error).message}`)
      }),
      checked
    )

/** Parses a YAML document (JSON is YAML too). */
export const parseYamlDocument = (text: string): Effect.Effect<unknown, ApiError> =>
  text.trim() === ""
    ? Effect.succeed(undefined)
    : Effect.flatMap(
      Effect.try({
        try: () => parseYaml(text) as unknown,
        catch: (error) => badRequest(`the request body is not valid YAML: ${(error as Error).message}`)
      }),
      checked
    )

const jsonTypes = new Set(["", "application/json", "*/*"])
const yamlTypes = new Set(["application/yaml", "application/x-yaml", "text/yaml"])

/**
 * Reads and decodes the body of a create or replace: JSON or YAML, and for Namespaces also Kubernetes protobuf,
 * which `kubectl create namespace` sends because Namespace is a built-in type.
 */
export const readObject = (
  request: HttpServerRequest.HttpServerRequest,
  kind: string
): Effect.Effect<unknown, ApiError> => {
  const mediaType = mediaTypeOf(request.headers["content-type"])
  if (jsonTypes.has(mediaType)) return Effect.flatMap(readText(request), parseJson)
  if (yamlTypes.has(mediaType)) return Effect.flatMap(readText(request), parseYamlDocument)
  if (mediaType === protobufMediaType && kind === "Namespace") {
    return Effect.flatMap(readBytes(request), (bytes) => {
      const decoded = decodeNamespace(bytes)
      return decoded._tag === "Ok"
        ? checked(decoded.value)
        : Effect.fail(badRequest(`the protobuf body could not be decoded: ${decoded.message}`))
    })
  }
  return Effect.fail(
    new ApiError({
      code: "UnsupportedMediaType",
      message: `the body media type "${mediaType}" is not supported; send application/json`
    })
  )
}
