"""Bounded concurrency, written once: slots waited for at most a while, and shared fairly between API keys.

Used for API requests (``app.http.limits``), LLM calls and embedding calls: more callers than slots wait, and a
caller that waits too long gets the caller's error (a 503 of its kind) instead of queueing without end. The
request's key (``PRINCIPAL``, set by ``app.http.limits``) may hold at most its share of a pool's slots, those it
waits for included: one key's flood waits behind itself, never in front of another key's requests. Work with no
principal (anonymous access, formation workers) has no share.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar

PRINCIPAL: ContextVar[str | None] = ContextVar("memsys_principal", default=None)
"""Who the work is done for: a hash of the request's API key, or None."""


class Slots:
    """``size`` slots; one principal holds (or waits for) at most ``share`` of them."""

    def __init__(self, size: int, share: float = 1.0) -> None:
        self.size = size
        self.per_principal = max(1, math.ceil(size * share))
        self._all = asyncio.Semaphore(size)
        self._own: dict[str, _Share] = {}

    @contextlib.asynccontextmanager
    async def slot(
        self, wait_s: float, refused: Callable[[], Exception], over_share: Callable[[], Exception] | None = None
    ) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Hold a slot while inside. A principal over its share gets ``over_share()`` at once (without it, it
        waits for one of its own to end); ``refused()`` when no slot frees within ``wait_s``. Yields ``release``,
        which gives the slot back before the block ends (once; leaving the block then releases nothing)."""
        who = PRINCIPAL.get() if self.per_principal < self.size else None
        async with contextlib.AsyncExitStack() as held:
            deadline = asyncio.get_running_loop().time() + wait_s
            if who is not None:
                own = self._own.get(who) or self._own.setdefault(who, _Share(self.per_principal))
                if own.users >= self.per_principal and over_share is not None:
                    raise over_share()
                own.users += 1
                held.callback(self._leave, who, own)
                await held.enter_async_context(_taken(own.slots, deadline, refused))
            await held.enter_async_context(_taken(self._all, deadline, refused))
            yield held.aclose

    def _leave(self, who: str, own: _Share) -> None:
        own.users -= 1
        if not own.users:
            self._own.pop(who, None)


class _Share:
    def __init__(self, size: int) -> None:
        self.slots = asyncio.Semaphore(size)
        self.users = 0


@contextlib.asynccontextmanager
async def _taken(slots: asyncio.Semaphore, deadline: float, refused: Callable[[], Exception]) -> AsyncIterator[None]:
    async with slot(slots, max(deadline - asyncio.get_running_loop().time(), 0), refused):
        yield


@contextlib.asynccontextmanager
async def slot(slots: asyncio.Semaphore, wait_s: float, refused: Callable[[], Exception]) -> AsyncIterator[None]:
    """Hold one of ``slots`` while inside; ``refused()`` is raised when none frees within ``wait_s``."""
    try:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation (the request's deadline)
        # that arrives in the turn the slot is granted, and the caller goes on with it.
        async with asyncio.timeout(wait_s):
            await slots.acquire()
    except TimeoutError:
        raise refused() from None
    try:
        yield
    finally:
        slots.release()
