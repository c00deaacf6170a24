"""Bounded concurrency, written once: a slot of a semaphore waited for at most a while, else an error.

Used for API requests (``app.http.limits``), LLM calls and embedding calls: more callers than slots wait, and a
caller that waits too long gets the caller's error (a 503 of its kind) instead of queueing without end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable


@contextlib.asynccontextmanager
async def slot(slots: asyncio.Semaphore, wait_s: float, refused: Callable[[], Exception]) -> AsyncIterator[None]:
    """Hold one of ``slots`` while inside; ``refused()`` is raised when none frees within ``wait_s``."""
    try:
        await asyncio.wait_for(slots.acquire(), wait_s)
    except TimeoutError:
        raise refused() from None
    try:
        yield
    finally:
        slots.release()
