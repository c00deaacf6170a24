"""CPU-bound work on a client's text (time expressions, jieba segmentation) runs off the event loop, in
one worker thread per event loop at a time.

One thread, not many: the work is pure Python and holds the GIL, so more threads add no throughput, only
contention: each busy thread is one more that the event loop competes with for the GIL at every wake-up.
Under eight concurrent 8,000-character hostile queries, GET /health took p95 69 ms / max 110 ms with a
thread per query, 30 / 56 ms with one thread (and the queries themselves got through faster).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
from anyio.lowlevel import RunVar

T = TypeVar("T")

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("memsys_text_cpu_limiter")


async def run_off_loop(function: Callable[..., T], *args: object) -> T:
    """``function(*args)`` in the text worker thread, awaited without blocking the event loop."""
    try:
        limiter = _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(1)
        _LIMITER.set(limiter)
    return await anyio.to_thread.run_sync(function, *args, limiter=limiter)
