"""A request's id: taken from its ``X-Request-Id`` header when that is a short token, made otherwise, sent back as
``X-Request-Id`` on every answer (error envelopes carry it as ``request_id`` too), and put on every log line written
while the request is handled.

``RequestIds`` wraps the whole ASGI app, routes that do not exist included; the id lives in a context variable for
the log lines (``RequestIdFilter``) and in the ASGI scope for the error envelope.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the logging of every command imports this module: no Litestar at run time
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "x-request-id"
MAX_LENGTH = 128
"""A given id longer than this is replaced by a new one."""
_TOKEN = re.compile(rf"[A-Za-z0-9!#$%&'*+.^_`|~-]{{1,{MAX_LENGTH}}}")
"""An HTTP token (RFC 9110's tchar): no space, no quote, no control character, nothing a log or a header could
be forged with."""

_SCOPE_KEY = "memsys.request_id"

CURRENT: ContextVar[str | None] = ContextVar("memsys_request_id", default=None)
"""The id of the request being handled in this task, if any."""


def accepted(given: str | None) -> str:
    """``given`` if it is a token of at most ``MAX_LENGTH`` characters, else a new id (uuid4, hex)."""
    if given is not None and _TOKEN.fullmatch(given):
        return given
    return uuid.uuid4().hex


def of_scope(scope: Scope) -> str:
    """The request's id, decided once per request (the header's, or a new one)."""
    found = scope.get(_SCOPE_KEY)
    if found is None:
        given = next((value for name, value in scope.get("headers", ()) if name == HEADER.encode()), None)
        found = accepted(given.decode("latin-1") if given is not None else None)
        scope[_SCOPE_KEY] = found  # type: ignore[literal-required]
    return found


class RequestIds:
    """ASGI wrapper: the id set for the request's task, and sent back on the answer's head."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        request_id = of_scope(scope)
        token = CURRENT.set(request_id)

        async def with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(name, value) for name, value in message.get("headers", ()) if name != HEADER.encode()]
                message = {**message, "headers": [*headers, (HEADER.encode(), request_id.encode())]}
            await send(message)

        try:
            await self._app(scope, receive, with_id)
        finally:
            CURRENT.reset(token)


class RequestIdFilter(logging.Filter):
    """Gives every record ``request_id``: the id of the request its task handles, or None."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = CURRENT.get()
        return True
