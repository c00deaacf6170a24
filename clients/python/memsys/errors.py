"""Typed errors: every refusal of the server is raised as a ``MemsysError`` carrying its envelope
(``{"status": "failed", "code", "message", "timestamp", "path"}``), as the subclass its ``code`` names."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class MemsysError(Exception):
    """A request memsys refused or could not answer. ``code`` is the envelope's (``INVALID_PARAMETER``, …),
    ``status`` the HTTP status (None when no answer came), ``message`` the server's sentence."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.body = body or {}
        self.retry_after = retry_after
        """Seconds the server asked to wait (``Retry-After``), if it did."""

    @property
    def path(self) -> str | None:
        return self.body.get("path")

    @property
    def request_id(self) -> str | None:
        """The request's id (``X-Request-Id``), as the server's log lines carry it: quote it when reporting."""
        return self.body.get("request_id")

    def __str__(self) -> str:
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.code}: {self.message}"


class InvalidParameter(MemsysError):
    """400 (and 415): the message names the field."""


class Unauthorized(MemsysError):
    """401: no key, a wrong or revoked key, or anonymous access on a server that has keys."""


class Forbidden(MemsysError):
    """403."""


class NotFound(MemsysError):
    """404: no such record (e.g. conversation metadata of an unknown group) or route."""


class MethodNotAllowed(MemsysError):
    """405."""


class PayloadTooLarge(MemsysError):
    """413: a body or a message's content over the server's limit."""


class RequestTimeout(MemsysError):
    """408 or 504: the body did not arrive, or the request did not finish, in the server's time."""


class RateLimited(MemsysError):
    """429: this key holds its whole share of the server (``MEMSYS_TENANT_SHARE``); retried after
    ``retry_after`` seconds unless the retries ran out."""


class Unavailable(MemsysError):
    """503: the database, an LLM or the embedder did not answer, or the server is busy; retried."""


class ServerError(MemsysError):
    """500 (``SYSTEM_ERROR``): a bug of the server; its log has the details."""


class ConnectionFailed(MemsysError):
    """No answer: the server could not be reached (after the retries), or the connection broke."""


_BY_CODE: dict[str, type[MemsysError]] = {
    "INVALID_PARAMETER": InvalidParameter,
    "UNAUTHORIZED": Unauthorized,
    "FORBIDDEN": Forbidden,
    "NOT_FOUND": NotFound,
    "METHOD_NOT_ALLOWED": MethodNotAllowed,
    "PAYLOAD_TOO_LARGE": PayloadTooLarge,
    "REQUEST_TIMEOUT": RequestTimeout,
    "TOO_MANY_REQUESTS": RateLimited,
    "SERVICE_UNAVAILABLE": Unavailable,
    "SYSTEM_ERROR": ServerError,
}
_BY_STATUS: dict[int, type[MemsysError]] = {
    400: InvalidParameter,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    408: RequestTimeout,
    413: PayloadTooLarge,
    415: InvalidParameter,
    429: RateLimited,
    503: Unavailable,
    504: RequestTimeout,
}


def retry_after_seconds(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (memsys sends seconds; an HTTP date from a proxy in front is honoured too)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(response: httpx.Response) -> MemsysError:
    """The typed error of a refused request: by the envelope's code, else by status (an answer that is not
    memsys's envelope, e.g. a proxy's 502 page, keeps its status and a code ``HTTP_<status>``)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        code, message = body["code"], str(body.get("message", ""))
    else:
        code, message, body = f"HTTP_{response.status_code}", response.text[:500] or response.reason_phrase, None
    kind = _BY_CODE.get(code) or _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else MemsysError
    return kind(message, code=code, status=response.status_code, body=body, retry_after=retry_after_seconds(response))
