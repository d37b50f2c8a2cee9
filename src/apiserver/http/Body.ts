/**
 * Request bodies: read with a size limit (413 RequestEntityTooLarge past it), decoded by media type (JSON, or YAML
 * as Kubernetes also accepts), and never trusted: a malformed body is a 400 BadRequest with the parser's reason.
 */
import { ByteSize, Effect } from "effect"
import { HttpIncomingMessage, type HttpServerRequest } from "effect/http"
import { parse as parseYaml } from "yaml"
import { ApiError, badRequest } from "../../core/meta/ApiError.ts"
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
export const mediaTypeOf = (contentType: string | undefined): string => (contentType ?? "").split(";")[0]!.trim().toLowerCase()

const isTooLarge = (error: unknown): boolean => {
  for (let cause = error; cause !== undefined && cause !== null; cause = (cause as { cause?: unknown }).cause) {
    if ((cause as { _tag?: string })._tag === "MaxBytesError" || (cause as Error).name === "MaxBytesError") return true
    if (typeof cause !== "object") break
    const reason = (cause as { reason?: unknown }).reason
    if (reason !== undefined && isTooLarge(reason)) return true
  }
  return false
}

/** The raw body bytes, refused past the limit before they are all read. */
export const readBytes = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<Uint8Array, ApiError> => {
  const declared = Number(request.headers["content-length"] ?? "0")
  if (declared > requestBodyMaxBytes) return Effect.fail(tooLarge())
  return request.arrayBuffer.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(BigInt(requestBodyMaxBytes))),
    Effect.map((buffer) => new Uint8Array(buffer)),
    Effect.mapError((error) => (isTooLarge(error) ? tooLarge() : badRequest("the request body could not be read")))
  )
}

const decoder = new TextDecoder()

/** The raw body text (UTF-8), refused past the limit before it is all read. */
export const readText = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, ApiError> =>
  Effect.map(readBytes(request), (bytes) => decoder.decode(bytes))

/** Parses a JSON document; empty text is `undefined` (no body). */
export const parseJson = (text: string): Effect.Effect<unknown, ApiError> =>
  text.trim() === ""
    ? Effect.succeed(undefined)
    : Effect.try({ try: () => JSON.parse(text) as unknown, catch: (error) => badRequest(`the request body is not valid JSON: ${(error as Error).message}`) })

/** Parses a YAML document (JSON is YAML too). */
export const parseYamlDocument = (text: string): Effect.Effect<unknown, ApiError> =>
  text.trim() === ""
    ? Effect.succeed(undefined)
    : Effect.try({ try: () => parseYaml(text) as unknown, catch: (error) => badRequest(`the request body is not valid YAML: ${(error as Error).message}`) })

const jsonTypes = new Set(["", "application/json", "*/*"])
const yamlTypes = new Set(["application/yaml", "application/x-yaml", "text/yaml"])

/**
 * Reads and decodes the body of a create or replace: JSON or YAML, and for Namespaces also Kubernetes protobuf,
 * which `kubectl create namespace` sends because Namespace is a built-in type.
 */
export const readObject = (request: HttpServerRequest.HttpServerRequest, kind: string): Effect.Effect<unknown, ApiError> => {
  const mediaType = mediaTypeOf(request.headers["content-type"])
  if (jsonTypes.has(mediaType)) return Effect.flatMap(readText(request), parseJson)
  if (yamlTypes.has(mediaType)) return Effect.flatMap(readText(request), parseYamlDocument)
  if (mediaType === protobufMediaType && kind === "Namespace") {
    return Effect.flatMap(readBytes(request), (bytes) => {
      const decoded = decodeNamespace(bytes)
      return decoded._tag === "Ok" ? Effect.succeed(decoded.value) : Effect.fail(badRequest(`the protobuf body could not be decoded: ${decoded.message}`))
    })
  }
  return Effect.fail(new ApiError({ code: "UnsupportedMediaType", message: `the body media type "${mediaType}" is not supported; send application/json` }))
}
