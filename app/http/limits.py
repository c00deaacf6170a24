"""Admission: what one request, and one API key, may take of the server.

Every request to the API (``/api/…``), MCP (``/mcp``) and the inspector (``/inspect``) passes here, in order:

1. **Browser checks**, before anything is read: a request without a key must name a loopback ``Host`` (or one of
   ``MEMSYS_ALLOWED_HOSTS``), so a page that rebinds its DNS name to 127.0.0.1 cannot reach an anonymous memsys;
   an ``Origin`` other than memsys's own (or ``MEMSYS_ALLOWED_ORIGINS``) is refused. (A body must also be
   ``application/json``, checked where bodies are decoded: ``app.http.json_body``.)
2. **The body is read whole** within ``MEMSYS_BODY_TIMEOUT_SECONDS`` (408) and ``MEMSYS_MAX_BODY_BYTES`` (413),
   before the request takes a slot: a client that trickles its body holds a connection, never a slot.
3. **A request slot**: ``MEMSYS_MAX_CONCURRENT_REQUESTS`` in all, of which one key may hold or wait for
   ``MEMSYS_TENANT_SHARE`` (429 with ``Retry-After``, answered after that second, beyond it: the other keys are
   unaffected); a slot not free
   within ``MEMSYS_REQUEST_QUEUE_SECONDS`` is a 503. The key's hash is the request's ``PRINCIPAL``
   (``app.concurrency``): the LLM and embedding slots it takes count against the same key's share.
4. **A deadline**: the handler is stopped after ``MEMSYS_REQUEST_TIMEOUT_SECONDS`` (504), and at once when its
   client disconnects.

Health, metrics and the API docs are outside: probes answer while the API is saturated. The MCP event stream
(``GET /mcp``) holds no slot and has no deadline. Incomplete request heads are closed by the server
(``header_deadline_protocol``, ``MEMSYS_HEADER_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from litestar.datastructures import Headers
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.concurrency import PRINCIPAL, Slots
from app.errors import Forbidden, PayloadTooLarge, RequestTimeout, ServiceUnavailable, TooManyRequests
from app.http.auth import INSPECTOR_PATH, INSPECTOR_SESSION_COOKIE
from app.observability.metrics import REQUESTS_REJECTED
from app.settings import Settings

ADMITTED = ("/api/", "/v1/", "/mcp", INSPECTOR_PATH)
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}
RETRY_AFTER_S = 2


class Busy(ServiceUnavailable):
    """Every request slot stayed taken for the whole wait."""


class RequestLimit(ASGIMiddleware):
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._slots = Slots(settings.max_concurrent_requests, settings.tenant_share)
        self._hosts = LOOPBACK_NAMES | {host.lower() for host in settings.allowed_hosts}
        self._origins = {origin.rstrip("/").lower() for origin in settings.allowed_origins}

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        path = request_path(scope)
        if scope["type"] != "http" or not path.startswith(ADMITTED):
            await next_app(scope, receive, send)
            return
        headers = Headers.from_scope(scope)
        principal = _principal(headers)
        self._check_browser(scope, headers, keyed=principal is not None)
        if scope["method"] == "GET" and path.startswith("/mcp"):
            await next_app(scope, receive, send)  # MCP's event stream: long-lived, no body
            return
        try:
            body = await self._read_body(receive, headers)
        except ClientGone:
            REQUESTS_REJECTED.labels(reason="client_gone").inc()
            return  # nobody to answer
        PRINCIPAL.set(principal)
        try:
            async with self._slots.slot(self._settings.request_queue_seconds, self._busy, self._over_share) as release:
                timeout_s = self._settings.request_timeout_seconds
                await _run_bounded(next_app, scope, body, receive, send, timeout_s, before_last=release)
        except TooManyRequests:
            # Answered after the Retry-After it names, holding no slot: a key that floods without waiting for
            # its answers sends one request per connection every two seconds, not thousands that each cost CPU
            # (benchmarks/noisy_neighbour.py: an MCP flood cost another tenant 5.6x its p95 answered at once,
            # 2.8x after 1 s, 1.9x after 2 s).
            await asyncio.sleep(RETRY_AFTER_S)
            raise

    def _check_browser(self, scope: Scope, headers: Headers, *, keyed: bool) -> None:
        host = headers.get("host", "")
        if not keyed and _hostname(host) not in self._hosts:
            REQUESTS_REJECTED.labels(reason="host").inc()
            raise Forbidden(
                f"Host {host[:100]!r} is not allowed without an API key (loopback names only; "
                "MEMSYS_ALLOWED_HOSTS adds others)"
            )
        origin = headers.get("origin")
        # A page with Referrer-Policy: no-referrer (the inspector's) sends Origin: null on its own form POSTs; the
        # browser's Sec-Fetch-Site, which no page can set, says it was same-origin (app.inspect.browser).
        same_page_form = origin == "null" and headers.get("sec-fetch-site") == "same-origin"
        if origin is not None and not same_page_form and not self._same_or_allowed(origin, host, scope):
            REQUESTS_REJECTED.labels(reason="origin").inc()
            raise Forbidden(f"Origin {origin[:100]!r} may not call memsys (MEMSYS_ALLOWED_ORIGINS)")

    def _same_or_allowed(self, origin: str, host: str, scope: Scope) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in self._origins:
            return True
        parts = urlsplit(origin)
        return parts.netloc == host.lower() and parts.scheme == scope.get("scheme", "http")

    async def _read_body(self, receive: Receive, headers: Headers) -> bytes:
        limit = self._settings.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"Request body is too large: the limit is {limit} bytes (MEMSYS_MAX_BODY_BYTES)")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self._settings.body_timeout_seconds):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ClientGone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise PayloadTooLarge(
                            f"Request body is too large: the limit is {limit} bytes (MEMSYS_MAX_BODY_BYTES)"
                        )
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            REQUESTS_REJECTED.labels(reason="slow_body").inc()
            raise RequestTimeout(
                f"The request body did not arrive within {self._settings.body_timeout_seconds:g}s "
                "(MEMSYS_BODY_TIMEOUT_SECONDS)"
            ) from None

    def _busy(self) -> Busy:
        REQUESTS_REJECTED.labels(reason="busy").inc()
        return Busy(
            f"memsys is busy (every request slot stayed taken for {self._settings.request_queue_seconds:g}s); retry"
        )

    def _over_share(self) -> TooManyRequests:
        REQUESTS_REJECTED.labels(reason="tenant_share").inc()
        return TooManyRequests(
            f"This API key has {self._slots.per_principal} requests in flight, its share of the server "
            "(MEMSYS_TENANT_SHARE); retry when one has finished",
            retry_after_s=RETRY_AFTER_S,
        )


class ClientGone(Exception):
    """The client disconnected before its request was read: nothing to answer."""


async def _run_bounded(
    next_app: ASGIApp,
    scope: Scope,
    body: bytes,
    receive: Receive,
    send: Send,
    timeout_s: float,
    before_last: Callable[[], Awaitable[None]],
) -> None:
    """Run the app on the body already read, stopped after ``timeout_s`` or when the client disconnects.
    ``before_last`` runs before the answer's last part is sent: the request's slot is free by the time its client
    can send the next one (a key using exactly its share would otherwise race its own answers into 429s)."""
    gone = asyncio.Event()
    started = False
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def sending(message: Message) -> None:
        nonlocal started
        started = True
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            await before_last()
        await send(message)

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    app = asyncio.create_task(next_app(scope, replay, sending))
    watcher = asyncio.create_task(watch())
    try:
        done, _ = await asyncio.wait({app, watcher}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if app in done:
            app.result()
            return
        app.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await app
        if watcher in done:
            REQUESTS_REJECTED.labels(reason="client_gone").inc()
            return  # nobody to answer
        REQUESTS_REJECTED.labels(reason="deadline").inc()
        if not started:
            raise RequestTimeout(
                f"The request did not finish within {timeout_s:g}s (MEMSYS_REQUEST_TIMEOUT_SECONDS)", status_code=504
            )
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if not app.done():
            app.cancel()


def request_path(scope: Scope) -> str:
    """The path the client asked for: a mount (``/mcp``) sees its own path in scope["path"], the raw one is the
    request's."""
    return (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")


def _principal(headers: Headers) -> str | None:
    """A hash of the request's credential (bearer key, or the inspector's session cookie), or None."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    credential = token.strip() if scheme.lower() == "bearer" else ""
    if not credential:
        cookies = headers.get("cookie", "")
        credential = next(
            (
                value.strip()
                for name, _, value in (part.strip().partition("=") for part in cookies.split(";"))
                if name == INSPECTOR_SESSION_COOKIE and value.strip()
            ),
            "",
        )
    return hashlib.sha256(credential.encode()).hexdigest()[:32] if credential else None


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(name).is_loopback:
            return "127.0.0.1"
    return name


def header_deadline_protocol(timeout_s: float) -> type[HttpToolsProtocol]:
    """uvicorn's HTTP protocol, closing a connection whose request head has not arrived ``timeout_s`` after it
    opened or after its last answer (uvicorn's own keep-alive timeout covers only an idle connection)."""

    class HeaderDeadline(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[no-untyped-def]
            super().connection_made(transport)
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(timeout_s, self._late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _late(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                REQUESTS_REJECTED.labels(reason="slow_head").inc()
                self.transport.close()

    return HeaderDeadline
