/**
 * Responses: JSON bodies, and the spec's Status body for every error (spec: Errors, Status body) with its docs link,
 * fix (also at the end of `message`, the one field kubectl prints) and request id. The HTTP status of a code comes only
 * from the registry in core/meta/ErrorCodes.ts.
 */
import { HttpServerResponse } from "effect/http"
import type { Json } from "../core/Json.ts"
import { type ApiError, messageWithFix } from "../core/meta/ApiError.ts"
import { errorCodeInfo } from "../core/meta/ErrorCodes.ts"

export interface ResponseContext {
  readonly requestId: string
  /** Absolute URL of the error docs, e.g. https://127.0.0.1:8443/docs/errors */
  readonly docsBase: string
}

export const requestIdHeader = "x-request-id"

export const json = (
  status: number,
  body: unknown,
  headers: Record<string, string> = {}
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(JSON.stringify(body), { status, contentType: "application/json", headers })

/** The Status body of an error. */
export const statusBody = (error: ApiError, context: ResponseContext): Json => {
  const info = errorCodeInfo(error.code)
  const subject = error.subject ?? {}
  const details = {
    ...(subject.name === undefined ? {} : { name: subject.name }),
    ...(subject.group === undefined ? {} : { group: subject.group }),
    ...(subject.kind === undefined ? {} : { kind: subject.kind }),
    ...(subject.uid === undefined ? {} : { uid: subject.uid }),
    ...(error.causes === undefined || error.causes.length === 0
      ? {}
      : { causes: error.causes.map((cause) => ({ ...cause })) }),
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds })
  }
  const fix = error.fix ?? info.fix
  return {
    apiVersion: "v1",
    kind: "Status",
    metadata: {},
    status: "Failure",
    message: messageWithFix(error.message, fix),
    reason: error.code,
    ...(Object.keys(details).length === 0 ? {} : { details }),
    code: info.httpStatus,
    docs: `${context.docsBase}/${error.code}`,
    fix,
    requestId: context.requestId
  }
}

export const statusResponse = (error: ApiError, context: ResponseContext): HttpServerResponse.HttpServerResponse =>
  json(errorCodeInfo(error.code).httpStatus, statusBody(error, context), {
    [requestIdHeader]: context.requestId,
    ...(error.retryAfterSeconds === undefined ? {} : { "retry-after": String(error.retryAfterSeconds) })
  })

/**
 * RFC 9111 §5.5-style `Warning: 299 - "text"` values, joined as one header (Kubernetes sends them this way). The text
 * may quote a client's field names in any script: `withSafeHeaders` escapes it on the way out.
 */
export const warningHeader = (warnings: ReadonlyArray<string>): Record<string, string> =>
  warnings.length === 0 ? {} : { warning: warnings.map((text) => `299 - ${JSON.stringify(text)}`).join(", ") }

const headerSafe = /^[\t\x20-\x7e]*$/u

/**
 * Text as a header value: printable ASCII, anything else escaped as JSON escapes it (`\u4e2d`). A value Node cannot
 * write would fail the answer after its commit, so no header carries raw client text.
 */
const headerText = (text: string): string =>
  text.replace(
    /[^\t\x20-\x7e]/gu,
    (character) =>
      Array.from({ length: character.length }, (_, index) =>
        `\\u${character.charCodeAt(index).toString(16).padStart(4, "0")}`).join("")
  )

/** A response whose every header value is `headerText`: the one guard before Node writes the head. */
export const withSafeHeaders = (
  response: HttpServerResponse.HttpServerResponse
): HttpServerResponse.HttpServerResponse =>
  Object.entries(response.headers).reduce(
    (safe, [name, value]) => (typeof value !== "string" || headerSafe.test(value)
      ? safe
      : HttpServerResponse.setHeader(safe, name, headerText(value))),
    response
  )
