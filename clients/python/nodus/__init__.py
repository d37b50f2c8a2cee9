"""nodus: the Python client of the nodus API (docs/clients.md). Standard library only, Python 3.10+."""

from .client import Client, ExecResult, Job, Sandbox
from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AssetInUseError,
    AuthenticationError,
    BudgetExceededError,
    CapacityUnavailableError,
    ConfigurationError,
    IdempotencyConflictError,
    NodusError,
    NotFoundError,
    RateLimitError,
    RemoteError,
    SignatureError,
    SpendCheckUnavailableError,
    ValidationError,
)
from .functions import Function, FunctionCall

__all__ = [
    "Client", "ExecResult", "Job", "Sandbox", "Function", "FunctionCall",
    "NodusError", "ConfigurationError", "AuthenticationError", "SignatureError", "ValidationError",
    "IdempotencyConflictError", "NotFoundError", "BudgetExceededError", "SpendCheckUnavailableError",
    "RateLimitError", "CapacityUnavailableError", "APIConnectionError", "APITimeoutError", "AssetInUseError",
    "APIError", "RemoteError",
]
