"""One place that turns every exception into the seed's error envelope.

``{"status": "failed", "code", "message", "timestamp", "path", "request_id"}`` for validation errors, bad JSON,
unknown routes, wrong methods, oversized bodies, a database that is down and bugs alike. A 500 never
carries a stack trace or SQL; the log has them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime

import psycopg
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db import citus
from app.errors import MemsysError, NotReady, NotSupported
from app.observability import request_ids
from app.observability.metrics import DB_POOL_TIMEOUTS
from app.validation import UNKNOWN

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "INVALID_PARAMETER",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "INVALID_PARAMETER",
    503: "SERVICE_UNAVAILABLE",
}


V2_PREFIX = "/api/v2/"
"""EverOS's v2 API (app.compat.v2): an error also carries EverOS's ``error: {code, message}``, and a bad request is a
422 whose ``detail`` names the field, as its clients expect."""
_NAMED_FIELD = re.compile(r"^(?:Invalid field ([^:]+):|Missing required field: ([^;,( ]+))")


def envelope(
    request: Request, status_code: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    body = {
        "status": "failed",
        "code": code,
        "message": message,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "path": request.url.path,
        "request_id": request_ids.of_scope(request.scope),
    }
    if request.url.path.startswith(V2_PREFIX):
        body["error"] = {"code": code, "message": message}  # EverOS's error envelope: {request_id, error}
        if status_code == 400:
            status_code = 422
            named = _NAMED_FIELD.match(message)
            field = (named[1] or named[2]) if named else ""
            loc = ["body", *[part for part in re.split(r"[.\[\]]+", field) if part]]
            body["detail"] = [{"loc": loc, "msg": message, "type": "value_error"}]
    return Response(body, status_code=status_code, headers=headers)


MAX_FIELDS_NAMED = 10
"""A request with more wrong fields than this names the first ones and counts the rest."""
_UNION_MEMBER = re.compile(r"str|int|float|bool|list|dict|none|[\w-]+\[.*\]")


def describe_validation_error(error: ValidationError) -> str:
    """Every wrong field, each in one clause: 'Missing required field: sender; Invalid field top_k: …'."""
    return _clauses(
        _field_message([str(part) for part in item.get("loc", ())], item.get("msg", "invalid value"), item["type"])
        for item in error.errors()
    )


def _clauses(clauses: Iterable[str]) -> str:
    """One clause per field: a value that fits none of a union's members says what each wanted, once."""
    by_field: dict[str, str] = {}
    for clause in clauses:
        head, _, said = clause.partition(": ")
        if not head.startswith("Invalid field "):
            by_field.setdefault(clause, clause)
        elif head not in by_field:
            by_field[head] = clause
        elif said not in by_field[head]:
            by_field[head] += f", or {said}"
    named = list(by_field.values())
    message = "; ".join(named[:MAX_FIELDS_NAMED])
    return message + (f"; and {len(named) - MAX_FIELDS_NAMED} more" if len(named) > MAX_FIELDS_NAMED else "")


def _field_message(loc: list[str], message: str, kind: str = "") -> str:
    of_key = loc[-1:] == ["[key]"]  # a dict key is wrong: name the dict, not the (client-sized) key
    if of_key:
        loc = loc[:-2]
    if len(loc) > 1 and _UNION_MEMBER.fullmatch(loc[-1]):
        loc = loc[:-1]  # pydantic names the union's member that refused the value: name the field
    field = ".".join(part if len(part) <= 64 else part[:64] + "…" for part in loc) or "body"
    if kind == "missing" or message == "Field required":
        return f"Missing required field: {field}"
    if kind == "extra_forbidden" or message == "Extra inputs are not permitted" or message.startswith(UNKNOWN):
        # RequestModel (app.validation) says which field was meant: "Unknown field (did you mean 'group_id'?)"
        hint = message.removeprefix(UNKNOWN) if message.startswith(UNKNOWN) else ""
        return f"{UNKNOWN} {field!r}{hint}"
    message = message.removeprefix("Value error, ")
    return f"Invalid field {field}: a key is invalid ({message})" if of_key else f"Invalid field {field}: {message}"


def handle_memsys_error(request: Request, exc: MemsysError) -> Response:
    if isinstance(exc, NotReady | NotSupported):
        pass  # starting up (asked about every second by a load balancer), or a route memsys refuses by design
    elif exc.status_code == 503:
        _unavailable(request, exc)
    elif exc.status_code >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
    retry_after = getattr(exc, "retry_after_s", None)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return envelope(request, exc.status_code, exc.code, str(exc), headers)


def handle_validation_error(request: Request, exc: ValidationError) -> Response:
    return envelope(request, 400, "INVALID_PARAMETER", describe_validation_error(exc))


def handle_http_exception(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        # Litestar raises this for bodies that are not JSON, and for query parameters.
        detail = exc.detail or "Invalid request"
        if "JSON" in detail or "decode" in detail.lower():
            message = "Malformed JSON body"
        else:
            message = _describe_litestar_validation(exc)
        return envelope(request, 400, "INVALID_PARAMETER", message)
    if isinstance(exc, NotFoundException):
        return envelope(request, 404, "NOT_FOUND", f"No such route: {request.method} {request.url.path}")
    if status == 405:
        return envelope(request, 405, "METHOD_NOT_ALLOWED", f"Method {request.method} is not allowed here")
    if status == 413:
        return envelope(request, 413, "PAYLOAD_TOO_LARGE", "Request body is too large")
    if status >= 500:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return envelope(request, status, "SYSTEM_ERROR", "Internal error, please try again later")
    return envelope(request, status, _HTTP_CODES.get(status, "INVALID_PARAMETER"), exc.detail or "Bad request")


def _describe_litestar_validation(exc: ValidationException) -> str:
    clauses = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if not isinstance(item, dict):
            continue
        key, message = item.get("key"), str(item.get("message", "invalid value")).removeprefix("Value error, ")
        if not key:
            return "Request body must be a JSON object" if "dictionary" in message else message
        clauses.append(_field_message(key.split("."), message))
    return _clauses(clauses) if clauses else exc.detail or "Invalid request"


def handle_database_error(request: Request, exc: Exception) -> Response:
    cause = exc.orig if isinstance(exc, DBAPIError) else None
    if isinstance(cause, psycopg.errors.QueryCanceled):  # MEMSYS_DB_STATEMENT_TIMEOUT_SECONDS
        _unavailable(request, cause)
        return envelope(
            request, 504, "REQUEST_TIMEOUT", "A database statement took too long and was cancelled, please retry"
        )
    if isinstance(cause, psycopg.errors.LockNotAvailable):  # MEMSYS_DB_LOCK_TIMEOUT_SECONDS
        _unavailable(request, cause)
        return envelope(
            request,
            503,
            "SERVICE_UNAVAILABLE",
            "The data is locked by other work (a migration, a long transaction), please retry",
            {"Retry-After": "1"},
        )
    if cause is not None and citus.placement_moved(cause):  # a shard moved between planning and running
        _unavailable(request, cause)
        return envelope(
            request, 503, "SERVICE_UNAVAILABLE", "The data is moving between database nodes, please retry",
            {"Retry-After": "1"},
        )  # fmt: skip
    if isinstance(exc, PoolTimeout):
        DB_POOL_TIMEOUTS.inc()
    if isinstance(exc, OperationalError | PoolTimeout | OSError):
        _unavailable(request, exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc)
        return envelope(request, 503, "SERVICE_UNAVAILABLE", "The database is not available, please retry")
    log.error("%s %s: database error", request.method, request.url.path, exc_info=exc)
    return envelope(request, 500, "SYSTEM_ERROR", "Internal error, please try again later")


def _unavailable(request: Request, cause: BaseException) -> None:
    """A dependency is away: an outage answers many requests so, one log line each rather than a traceback."""
    first = (str(cause).strip().splitlines() or [""])[0]
    log.warning("%s %s: unavailable (%s: %s)", request.method, request.url.path, type(cause).__name__, first)


def handle_unexpected(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return envelope(request, HTTP_500_INTERNAL_SERVER_ERROR, "SYSTEM_ERROR", "Internal error, please try again later")


EXCEPTION_HANDLERS = {
    MemsysError: handle_memsys_error,
    ValidationError: handle_validation_error,
    HTTPException: handle_http_exception,
    DBAPIError: handle_database_error,
    OperationalError: handle_database_error,
    PoolTimeout: handle_database_error,
    ConnectionError: handle_database_error,
    Exception: handle_unexpected,
}
