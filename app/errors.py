"""memsys's domain errors. The HTTP layer maps each to the seed's error envelope (app.http.errors)."""

from __future__ import annotations


class MemsysError(Exception):
    """Base of every error memsys raises on purpose."""

    code = "SYSTEM_ERROR"
    status_code = 500


class InvalidParameter(MemsysError):
    """The request is malformed; the message names the field."""

    code = "INVALID_PARAMETER"
    status_code = 400


class Unauthorized(MemsysError):
    """No valid API key (or anonymous access is not allowed)."""

    code = "UNAUTHORIZED"
    status_code = 401


class Forbidden(MemsysError):
    """Refused whoever asks: a browser's request from another origin or host."""

    code = "FORBIDDEN"
    status_code = 403


class UnsupportedMediaType(InvalidParameter):
    status_code = 415


class RequestTimeout(MemsysError):
    """The request's body did not arrive in time (408), or the request did not finish in time (504)."""

    code = "REQUEST_TIMEOUT"
    status_code = 408

    def __init__(self, message: str, status_code: int = 408) -> None:
        super().__init__(message)
        self.status_code = status_code


class TooManyRequests(MemsysError):
    """This API key holds its whole share of the server; ``retry_after_s`` goes out as ``Retry-After``."""

    code = "TOO_MANY_REQUESTS"
    status_code = 429

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotFound(MemsysError):
    code = "NOT_FOUND"
    status_code = 404


class NotSupported(MemsysError):
    """A route of another API that memsys does not serve (EverOS's object upload): it says what to do instead."""

    code = "NOT_SUPPORTED"
    status_code = 501


class PayloadTooLarge(MemsysError):
    code = "PAYLOAD_TOO_LARGE"
    status_code = 413


class ServiceUnavailable(MemsysError):
    """A dependency (database, LLM, embedder) did not answer; the client may retry."""

    code = "SERVICE_UNAVAILABLE"
    status_code = 503


class NotReady(ServiceUnavailable):
    """memsys is starting (``GET /health``: its embedding model is loading): expected, so not logged."""

    retry_after_s = 1


class ConfigurationError(MemsysError):
    """The settings cannot work (refused at start-up)."""
