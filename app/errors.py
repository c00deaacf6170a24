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


class NotFound(MemsysError):
    code = "NOT_FOUND"
    status_code = 404


class PayloadTooLarge(MemsysError):
    code = "PAYLOAD_TOO_LARGE"
    status_code = 413


class ServiceUnavailable(MemsysError):
    """A dependency (database, LLM, embedder) did not answer; the client may retry."""

    code = "SERVICE_UNAVAILABLE"
    status_code = 503


class ConfigurationError(MemsysError):
    """The settings cannot work (refused at start-up)."""
