"""The client errors of the spec's "Client library errors" table, all derived from one base.

A Status body's `reason` (a registered code) picks the class through `_codes.CODES`, which is generated from the
server's registry (src/core/meta/ErrorCodes.ts), so the client never guesses what the server meant. A reply that is
not a Status with a registered code falls back on its HTTP status.
"""

from ._codes import CODES


class NodusError(Exception):
    """The base of every client error.

    status_code: the HTTP status (None when no answer came: configuration, connection, timeout).
    code: the Status `reason` (a registered code), or None.
    payload: the parsed Status body (a dict), or None.
    request_id: the server's id of the request (header x-request-id, else the body's requestId), for support.
    """

    def __init__(self, message, status_code=None, code=None, payload=None, request_id=None):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.payload = payload
        self.request_id = request_id

    @property
    def fix(self):
        """What the server says to do next (the Status `fix`), or None."""
        return self.payload.get("fix") if isinstance(self.payload, dict) else None

    @property
    def causes(self):
        """The Status `details.causes` ({field, message, reason}), or []."""
        details = self.payload.get("details") if isinstance(self.payload, dict) else None
        return list(details.get("causes") or []) if isinstance(details, dict) else []

    @property
    def retry_after(self):
        """The Status `details.retryAfterSeconds`, or None."""
        details = self.payload.get("details") if isinstance(self.payload, dict) else None
        value = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        return value if isinstance(value, (int, float)) else None

    def __str__(self):
        parts = [self.message]
        if self.code is not None:
            parts.append("(%s%s)" % (self.code, "" if self.status_code is None else ", HTTP %d" % self.status_code))
        if self.fix:
            parts.append("fix: %s" % self.fix)
        if self.request_id:
            parts.append("request id: %s" % self.request_id)
        return " ".join(parts)


class ConfigurationError(NodusError):
    """Login or configuration is wrong: log in again or fix the configuration."""


class AuthenticationError(NodusError):
    """Check the deployment/key pairing, its expiry or revocation."""


class SignatureError(NodusError):
    """Check the signing secret and clock for signed requests (this client does not sign requests yet)."""


class ValidationError(NodusError):
    """Correct the rejected request field (`causes` names it)."""


class IdempotencyConflictError(NodusError):
    """Reuse the original payload, or assign a new logical key."""


class NotFoundError(NodusError):
    """Check the object's project and name; logs may not be committed yet."""


class BudgetExceededError(NodusError):
    """Inspect headroom and account limits (402)."""


class SpendCheckUnavailableError(NodusError):
    """Spending authorization is temporarily unavailable; retry with the same submission key."""


class RateLimitError(NodusError):
    """Pace requests; the client honours bounded retry-after delays."""


class CapacityUnavailableError(NodusError):
    """Retry later or relax the workload's constraints."""


class APIConnectionError(NodusError):
    """No answer came: the outcome may be unknown; keep the submission key."""


class APITimeoutError(APIConnectionError):
    """The answer did not come in time: the outcome may be unknown; keep the submission key."""


class AssetInUseError(NodusError):
    """Finish or cancel the dependent workloads before deleting the asset."""


class APIError(NodusError):
    """Any other refusal: inspect `status_code` and `payload`."""


class RemoteError(NodusError):
    """A FunctionCall ended Failed: `payload` is the call, `remote_type`/`remote_traceback` what the function raised."""

    def __init__(self, message, payload=None, remote_type=None, remote_traceback=None):
        super().__init__(message, code=None, payload=payload)
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback


_CLASSES = {
    cls.__name__: cls
    for cls in (
        ConfigurationError, AuthenticationError, SignatureError, ValidationError, IdempotencyConflictError,
        NotFoundError, BudgetExceededError, SpendCheckUnavailableError, RateLimitError, CapacityUnavailableError,
        APIConnectionError, APITimeoutError, AssetInUseError, APIError,
    )
}

# When a reply carries no registered code (a proxy's page, an older server), its HTTP status picks the class.
_BY_STATUS = {
    400: ValidationError,
    401: AuthenticationError,
    402: BudgetExceededError,
    404: NotFoundError,
    422: ValidationError,
    429: RateLimitError,
}


def error_class(code, status_code):
    """The client error class for a Status `reason` (registered) or, failing that, for an HTTP status."""
    entry = CODES.get(code) if isinstance(code, str) else None
    if entry is not None:
        return _CLASSES[entry[0]]
    return _BY_STATUS.get(status_code, APIError)


def is_retryable(code, status_code):
    """Whether the same request may succeed later: the registry says so for its codes; 429 and 503 otherwise."""
    entry = CODES.get(code) if isinstance(code, str) else None
    if entry is not None:
        return entry[2]
    return status_code in (429, 503)


def from_response(status_code, payload, request_id):
    """The error for a non-2xx answer whose body parsed to `payload` (a dict for a Status, else None)."""
    status = payload if isinstance(payload, dict) and payload.get("kind") == "Status" else None
    code = status.get("reason") if status is not None else None
    message = status.get("message") if status is not None and isinstance(status.get("message"), str) else None
    fix = status.get("fix") if status is not None else None
    # The server ends `message` with its fix too (kubectl prints only `message`); str() shows the fix on its own.
    if message is not None and isinstance(fix, str) and message.endswith("; fix: " + fix):
        message = message[: -len("; fix: " + fix)]
    if request_id is None and status is not None and isinstance(status.get("requestId"), str):
        request_id = status["requestId"]
    cls = error_class(code, status_code)
    return cls(message or "HTTP %d" % status_code, status_code=status_code, code=code, payload=payload, request_id=request_id)
