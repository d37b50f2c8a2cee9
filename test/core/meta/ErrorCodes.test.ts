// Checks the error-code registry against the spec: exactly the 73 registered
// codes in the spec's order, sane statuses and texts, the anchored statuses,
// retryability of "try later" codes, and the code guard.
import { assert, describe, it } from "@effect/vitest"
import {
  errorCodeInfo,
  errorCodeList,
  errorCodes,
  httpReasonPhrase,
  isErrorCode
} from "../../../src/core/meta/ErrorCodes.ts"
import type { ErrorCode } from "../../../src/core/meta/ErrorCodes.ts"

// Verbatim from the spec, "Errors" → "Registered codes".
const specRegisteredCodes = [
  "AdmissionsPaused, AgentGroupClosed, AgentGroupFull, AgentRunFinished, AgentStopped, AlreadyExists,",
  "ArrearsOutstanding, BadRequest, BudgetExceeded, CapacityUnavailable, CloudAccountCredentialsRejected,",
  "CloudAccountInUse, CloudAccountNotVerified, CloudConnectUnavailable, CloudExecuteNotEnabled,",
  "CloudUnreachable, ComputeSuspended, Conflict, ConnectionNotReady, EncryptionFailed,",
  "EnrollmentTokenInvalid, EnvironmentTasksFailed, Expired, FieldImmutable, FileTooLarge, Forbidden,",
  "FunctionCallBatchTooLarge, FunctionNotFound, IdempotencyKeyReused, ImageBuildUnavailable,",
  "ImageNotFound, ImageNotReady, ImagePullFailed, InsufficientCredits, InternalError, Invalid,",
  "MethodNotAllowed, NoSSHKey, NotFound, OutputIndexRequired, OutputNotFound, PaymentDisputed,",
  "PaymentMethodRequired, PaymentVerificationUnavailable, PaymentsNotConfigured, PoolActPaused,",
  "PoolActionNotPending, PoolActionNotReversible, PoolInUse, PreconditionFailed, PriceConsentRequired,",
  "PromoCodeExpired, PromoCodeUsed, QuotaExceeded, RequestEntityTooLarge, RequestInProgress,",
  "SandboxFailed, SandboxNotRunning, SandboxStarting, SecretValueInEnv, SHA256Mismatch,",
  "StdinBackpressure, TooManyRequests, TopUpLimitReached, TrialLimitExceeded, Unauthorized, Unavailable,",
  "Unsupported, UnsupportedMediaType, VolumeBusy, WorkerNotAllowed, WorkspaceStarting,",
  "WorkspaceToolUnavailable."
].join(" ")

const specCodes = specRegisteredCodes.replace(/\.$/, "").split(", ")

// The client error classes of the spec's "Client library errors" table.
const specClientErrors = new Set([
  "ConfigurationError",
  "AuthenticationError",
  "SignatureError",
  "ValidationError",
  "IdempotencyConflictError",
  "NotFoundError",
  "BudgetExceededError",
  "SpendCheckUnavailableError",
  "RateLimitError",
  "CapacityUnavailableError",
  "APIConnectionError",
  "APITimeoutError",
  "AssetInUseError",
  "APIError"
])

const isSentence = (text: string): boolean => /^[A-Z`]/.test(text) && /[.!?]$/.test(text) && text.trim() === text

describe("ErrorCodes", () => {
  it("registers exactly the spec's 73 codes, in the spec's order", () => {
    assert.strictEqual(specCodes.length, 73)
    assert.deepStrictEqual([...errorCodeList], specCodes)
    assert.deepStrictEqual(Object.keys(errorCodes), specCodes)
    assert.strictEqual(new Set(errorCodeList).size, 73)
  })

  it("gives every code a 4xx or 5xx status, a one-sentence summary and a fix", () => {
    for (const code of errorCodeList) {
      const info = errorCodeInfo(code)
      assert.isTrue(Number.isInteger(info.httpStatus), code)
      assert.isTrue(info.httpStatus >= 400 && info.httpStatus <= 599, `${code}: ${info.httpStatus}`)
      assert.isTrue(isSentence(info.summary), `${code} summary: ${info.summary}`)
      // One sentence: no sentence break inside the summary.
      assert.isFalse(/[.!?]\s+[A-Z]/.test(info.summary), `${code} summary has several sentences`)
      assert.isTrue(isSentence(info.fix), `${code} fix: ${info.fix}`)
      assert.notStrictEqual(info.summary, info.fix, code)
      assert.isTrue(specClientErrors.has(info.clientError), `${code}: ${info.clientError}`)
      const phrase = httpReasonPhrase(info.httpStatus)
      assert.isFalse(
        phrase === "Client Error" || phrase === "Server Error",
        `${code}: status ${info.httpStatus} has no phrase`
      )
    }
  })

  it("uses the anchored statuses", () => {
    const anchored: ReadonlyArray<readonly [ErrorCode, number]> = [
      ["PaymentMethodRequired", 402],
      ["NotFound", 404],
      ["AlreadyExists", 409],
      ["Conflict", 409],
      ["Invalid", 422],
      ["FieldImmutable", 422],
      ["PreconditionFailed", 412],
      ["UnsupportedMediaType", 415],
      ["RequestEntityTooLarge", 413],
      ["MethodNotAllowed", 405],
      ["Unauthorized", 401],
      ["Forbidden", 403],
      ["Expired", 410],
      ["BadRequest", 400],
      ["TooManyRequests", 429],
      ["InternalError", 500],
      ["Unavailable", 503],
      ["IdempotencyKeyReused", 409],
      ["RequestInProgress", 409],
      ["SecretValueInEnv", 422],
      ["SHA256Mismatch", 422],
      ["InsufficientCredits", 402],
      ["BudgetExceeded", 402],
      ["CapacityUnavailable", 503]
    ]
    for (const [code, status] of anchored) {
      assert.strictEqual(errorCodes[code].httpStatus, status, code)
    }
  })

  it("maps codes to the client errors the spec names", () => {
    assert.strictEqual(errorCodes.PaymentMethodRequired.clientError, "BudgetExceededError")
    assert.strictEqual(errorCodes.IdempotencyKeyReused.clientError, "IdempotencyConflictError")
    assert.strictEqual(errorCodes.TooManyRequests.clientError, "RateLimitError")
    assert.strictEqual(errorCodes.CapacityUnavailable.clientError, "CapacityUnavailableError")
    assert.strictEqual(errorCodes.Unauthorized.clientError, "AuthenticationError")
    assert.strictEqual(errorCodes.Invalid.clientError, "ValidationError")
    for (const code of errorCodeList) {
      const info = errorCodes[code]
      if (info.httpStatus === 402) assert.strictEqual(info.clientError, "BudgetExceededError", code)
      if (info.httpStatus === 404) assert.strictEqual(info.clientError, "NotFoundError", code)
      if (code.endsWith("NotFound")) assert.strictEqual(info.httpStatus, 404, code)
      if (code.endsWith("InUse")) assert.strictEqual(info.clientError, "AssetInUseError", code)
    }
  })

  it("marks every 503 and 429 code, and RequestInProgress, retryable", () => {
    for (const code of errorCodeList) {
      const info = errorCodes[code]
      if (info.httpStatus === 503 || info.httpStatus === 429) assert.isTrue(info.retryable, code)
    }
    assert.isTrue(errorCodes.RequestInProgress.retryable)
    assert.isFalse(errorCodes.IdempotencyKeyReused.retryable)
    assert.isFalse(errorCodes.Invalid.retryable)
    assert.isFalse(errorCodes.InsufficientCredits.retryable)
  })

  it("recognises exactly the registered spellings", () => {
    for (const code of specCodes) assert.isTrue(isErrorCode(code), code)
    assert.isFalse(isErrorCode("NotACode"))
    assert.isFalse(isErrorCode("notfound"))
    assert.isFalse(isErrorCode(""))
    assert.isFalse(isErrorCode("toString"))
    assert.isFalse(isErrorCode("__proto__"))
  })

  it("returns the registry entry from errorCodeInfo", () => {
    assert.strictEqual(errorCodeInfo("NotFound"), errorCodes.NotFound)
    assert.strictEqual(errorCodeInfo("FieldImmutable").fix, errorCodes.FieldImmutable.fix)
  })

  it("names the conventional reason phrases", () => {
    assert.strictEqual(httpReasonPhrase(422), "Unprocessable Entity")
    assert.strictEqual(httpReasonPhrase(402), "Payment Required")
    assert.strictEqual(httpReasonPhrase(428), "Precondition Required")
    assert.strictEqual(httpReasonPhrase(503), "Service Unavailable")
    assert.strictEqual(httpReasonPhrase(499), "Client Error")
    assert.strictEqual(httpReasonPhrase(599), "Server Error")
    assert.strictEqual(httpReasonPhrase(42), "Unknown Status")
  })
})
