/**
 * The client errors of the spec's "Client library errors" table (spec: Errors), one tagged class each, all derived from
 * `NodusError` with `statusCode`, `code`, `payload` and `requestId` (docs/clients.md, "Errors").
 *
 * A Status body's `reason` (a registered code) picks the class through the server's own registry
 * (core/meta/ErrorCodes.ts, its `clientError`), so the client never guesses what the server meant; a reply that is not
 * a Status with a registered code falls back on its HTTP status, as the Python client does.
 */
import { Data } from "effect"
import { messageWithoutFix } from "../core/meta/ApiError.ts"
import { type ClientErrorName, type ErrorCode, errorCodes } from "../core/meta/ErrorCodes.ts"

export interface NodusErrorFields {
  readonly message: string
  /** The HTTP status; undefined when no answer came (configuration, connection, timeout). */
  readonly statusCode: number | undefined
  /** The Status `reason` (a registered code), if the answer was a Status. */
  readonly code: string | undefined
  /** The parsed body of the answer (a Status object for the server's refusals), if any. */
  readonly payload: unknown
  /** The server's id of the request (header x-request-id, else the body's requestId), for support. */
  readonly requestId: string | undefined
}

/** One cause of a 422 (`details.causes`): the field the server rejected and why. */
export interface StatusCause {
  readonly field?: string
  readonly message?: string
  readonly reason?: string
}

const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined

/** The base of every client error; `_tag` names its class, so `Effect.catchTag("NotFoundError", …)` works. */
export abstract class NodusError extends Data.Error<NodusErrorFields> {
  abstract readonly _tag: ClientErrorName | "RemoteError"

  /** What the server says to do next (the Status `fix`). */
  get fix(): string | undefined {
    const fix = record(this.payload)?.["fix"]
    return typeof fix === "string" ? fix : undefined
  }

  /** The Status `details.causes` ({field, message, reason}), or []. */
  get causes(): ReadonlyArray<StatusCause> {
    const causes = record(record(this.payload)?.["details"])?.["causes"]
    return Array.isArray(causes) ? causes as ReadonlyArray<StatusCause> : []
  }

  /** The Status `details.retryAfterSeconds`: how long the server asked the client to wait. */
  get retryAfter(): number | undefined {
    const seconds = record(record(this.payload)?.["details"])?.["retryAfterSeconds"]
    return typeof seconds === "number" ? seconds : undefined
  }

  override toString(): string {
    const parts = [`${this._tag}: ${this.message}`]
    if (this.code !== undefined) {
      parts.push(`(${this.code}${this.statusCode === undefined ? "" : `, HTTP ${this.statusCode}`})`)
    }
    if (this.fix !== undefined) parts.push(`fix: ${this.fix}`)
    if (this.requestId !== undefined) parts.push(`request id: ${this.requestId}`)
    return parts.join(" ")
  }
}

/** A class of the table whose tag is its name (the name shows in stack traces and Cause.pretty). */
const tagged = <Tag extends ClientErrorName>(tag: Tag) =>
  class extends NodusError {
    readonly _tag: Tag = tag
    override readonly name: string = tag
  }

/** Login or configuration is wrong: log in again or fix the configuration (raised before any request). */
export class ConfigurationError extends tagged("ConfigurationError") {}
/** Check the deployment/key pairing, its expiry or revocation. */
export class AuthenticationError extends tagged("AuthenticationError") {}
/** Check the signing secret and clock for signed requests (this client does not sign requests yet). */
export class SignatureError extends tagged("SignatureError") {}
/** Correct the rejected request field (`causes` names it). */
export class ValidationError extends tagged("ValidationError") {}
/** Reuse the original payload, or assign a new logical key. */
export class IdempotencyConflictError extends tagged("IdempotencyConflictError") {}
/** Check the object's project and name; logs may not be committed yet. */
export class NotFoundError extends tagged("NotFoundError") {}
/** Inspect headroom and account limits (402). */
export class BudgetExceededError extends tagged("BudgetExceededError") {}
/** Spending authorization is temporarily unavailable; retry with the same submission key. */
export class SpendCheckUnavailableError extends tagged("SpendCheckUnavailableError") {}
/** Pace requests; the client honours bounded Retry-After delays. */
export class RateLimitError extends tagged("RateLimitError") {}
/** Retry later or relax the workload's constraints. */
export class CapacityUnavailableError extends tagged("CapacityUnavailableError") {}
/** Finish or cancel the dependent workloads before deleting the asset. */
export class AssetInUseError extends tagged("AssetInUseError") {}
/** Any other refusal: inspect `statusCode` and `payload`. */
export class APIError extends tagged("APIError") {}

/** No answer came: the outcome may be unknown; keep the submission key. */
export class APIConnectionError extends NodusError {
  readonly _tag: "APIConnectionError" | "APITimeoutError" = "APIConnectionError"
  override readonly name: string = "APIConnectionError"
}

/** The answer did not come in time (a kind of connection error, as in the spec): keep the submission key. */
export class APITimeoutError extends APIConnectionError {
  override readonly _tag = "APITimeoutError" as const
  override readonly name: string = "APITimeoutError"
}

/** A FunctionCall ended Failed or Cancelled (outside the spec's table): `payload` is the call. */
export class RemoteError extends NodusError {
  readonly _tag = "RemoteError" as const
  override readonly name: string = "RemoteError"
  /** The type of what the function raised (`status.error.type`). */
  readonly remoteType: string | undefined
  /** Its traceback, scrubbed by the server (`status.error.traceback`). */
  readonly remoteTraceback: string | undefined

  constructor(
    fields: NodusErrorFields & { readonly remoteType: string | undefined; readonly remoteTraceback: string | undefined }
  ) {
    super(fields)
    this.remoteType = fields.remoteType
    this.remoteTraceback = fields.remoteTraceback
  }
}

/** Every class by the name the registry's `clientError` uses: a name the registry adds fails to type-check here. */
export const errorClasses: Record<ClientErrorName, new(fields: NodusErrorFields) => NodusError> = {
  ConfigurationError,
  AuthenticationError,
  SignatureError,
  ValidationError,
  IdempotencyConflictError,
  NotFoundError,
  BudgetExceededError,
  SpendCheckUnavailableError,
  RateLimitError,
  CapacityUnavailableError,
  APIConnectionError,
  APITimeoutError,
  AssetInUseError,
  APIError
}

/** Every error a request can fail with. */
export type ClientError =
  | ConfigurationError
  | AuthenticationError
  | SignatureError
  | ValidationError
  | IdempotencyConflictError
  | NotFoundError
  | BudgetExceededError
  | SpendCheckUnavailableError
  | RateLimitError
  | CapacityUnavailableError
  | APIConnectionError
  | APITimeoutError
  | AssetInUseError
  | APIError

// When a reply carries no registered code (a proxy's page, an older server), its HTTP status picks the class.
const byStatus: Partial<Record<number, ClientErrorName>> = {
  400: "ValidationError",
  401: "AuthenticationError",
  402: "BudgetExceededError",
  404: "NotFoundError",
  422: "ValidationError",
  429: "RateLimitError"
}

const registered = (code: unknown) =>
  typeof code === "string" && Object.hasOwn(errorCodes, code) ? errorCodes[code as ErrorCode] : undefined

/** The class name for a Status `reason` (registered) or, failing that, for an HTTP status. */
export const errorClassName = (code: unknown, statusCode: number): ClientErrorName =>
  registered(code)?.clientError ?? byStatus[statusCode] ?? "APIError"

/** Whether the same request may succeed later: the registry says so for its codes; 429 and 503 otherwise. */
export const isRetryable = (code: unknown, statusCode: number): boolean =>
  registered(code)?.retryable ?? (statusCode === 429 || statusCode === 503)

/** The error for a non-2xx answer whose body parsed to `payload` (a Status object, or anything else). */
export const fromResponse = (statusCode: number, payload: unknown, requestId: string | undefined): ClientError => {
  const body = record(payload)
  const status = body?.["kind"] === "Status" ? body : undefined
  const code = typeof status?.["reason"] === "string" ? status["reason"] : undefined
  const message = typeof status?.["message"] === "string"
    ? messageWithoutFix(status["message"], status["fix"])
    : `HTTP ${statusCode}`
  const id = requestId ?? (typeof status?.["requestId"] === "string" ? status["requestId"] : undefined)
  const Class = errorClasses[errorClassName(code, statusCode)]
  return new Class({ message, statusCode, code, payload, requestId: id }) as ClientError
}

/** A client error raised before or without an answer (configuration, connection, timeout). */
export const noAnswer = <E extends NodusError>(Class: new(fields: NodusErrorFields) => E, message: string): E =>
  new Class({ message, statusCode: undefined, code: undefined, payload: undefined, requestId: undefined })
