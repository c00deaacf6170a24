"""Bounded request concurrency: at most ``MEMSYS_MAX_CONCURRENT_REQUESTS`` API requests are handled at once.

More wait for a slot up to ``MEMSYS_REQUEST_QUEUE_SECONDS``, then get the 503 envelope (the service is busy, the
client retries): a burst queues briefly instead of piling up connections, memory and pool waits. Health,
metrics, the inspector and MCP are outside the bound, so that probes answer while the API is saturated.
"""

from __future__ import annotations

import asyncio

from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from app.concurrency import slot
from app.errors import ServiceUnavailable
from app.observability.metrics import REQUESTS_REJECTED


class Busy(ServiceUnavailable):
    """Every request slot stayed taken for the whole wait."""


class RequestLimit(ASGIMiddleware):
    def __init__(self, limit: int, wait_s: float) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._wait_s = wait_s

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await next_app(scope, receive, send)
            return
        async with slot(self._slots, self._wait_s, self._busy):
            await next_app(scope, receive, send)

    def _busy(self) -> Busy:
        REQUESTS_REJECTED.labels(reason="busy").inc()
        return Busy(f"memsys is busy (every request slot stayed taken for {self._wait_s:g}s); retry")
