"""How many memorize requests ``memorize_conversation`` keeps in flight, and what it does with a 429.

A server gives one API key a share of its request slots (``MEMSYS_TENANT_SHARE``: 8 of a default server's 64, the
key's requests waiting for a slot included) and answers a request beyond it 429 with a ``Retry-After``, after holding
it that long. The server frees a request's slot before the last part of its answer is sent, so a batch that keeps
exactly the share in flight is not refused by its own requests; but the application may be using the same key
meanwhile, and other servers may be configured with a smaller share. So the batch starts below a default key's share
(``DEFAULT_CONCURRENCY``), and on a 429 it halves its window (once per ``Retry-After``: the requests already in flight
then are refused as one signal), takes the window that was refused, less one, as its ceiling from then on, and waits
the ``Retry-After`` before sending the refused message again. It grows back by one request per ``Retry-After`` without
a refusal: a 429 comes back a ``Retry-After`` after its request was sent, and growing faster would outrun the signal.
Additive increase, multiplicative decrease, as TCP paces itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass

import httpx
from tqdm import tqdm

from memsys.errors import MemsysError, RateLimited
from memsys.retries import RetryPolicy

DEFAULT_CONCURRENCY = 4
"""Half a key's share of a default server (64 slots x 0.125 = 8): the other half stays for the application's own
requests with the same key."""


class Pace:
    """The window of requests in flight, and the retries so far (shown on the progress bar). Not locked: the
    thread or asyncio gate that holds it is."""

    def __init__(self, concurrency: int, bar: tqdm) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.ceiling = concurrency
        self.window = concurrency
        self.in_flight = 0
        self.retries = 0
        self._cut_at = self._grown_at = 0.0
        self._period = 1.0
        """The last Retry-After: refusals within it of a cut are the same signal, and the window grows once per it."""
        self._bar = bar

    def may_start(self) -> bool:
        return self.in_flight < self.window

    def answered(self) -> None:
        now = time.monotonic()
        if self.window < self.ceiling and now >= max(self._cut_at, self._grown_at) + self._period:
            self.window += 1
            self._grown_at = now

    def refused(self, error: MemsysError | httpx.TransportError) -> None:
        """A try failed and will be made again: a 429 also narrows the window, once per Retry-After."""
        self.retries += 1
        now = time.monotonic()
        if isinstance(error, RateLimited) and now >= self._cut_at + self._period:
            self.ceiling = max(1, self.window - 1)
            self.window = max(1, self.window // 2)
            self._period = error.retry_after or 1.0
            self._cut_at = now
        self._bar.set_postfix_str(f"{self.retries} retried, at most {self.window} in flight")


@dataclass(frozen=True)
class BatchRetries(RetryPolicy):
    """The client's policy, less its 429 retries: the batch retries those itself, narrowing its window first."""

    @classmethod
    def of(cls, policy: RetryPolicy) -> BatchRetries:
        return cls(**asdict(policy))

    def should_retry(self, attempt: int, error: MemsysError | httpx.TransportError) -> bool:
        return not isinstance(error, RateLimited) and super().should_retry(attempt, error)


class ThreadGate:
    """``Pace`` for threads: ``slot`` blocks while the window is full."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(self.pace.may_start)
            self.pace.in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self.pace.in_flight -= 1
                self._changed.notify_all()

    def answered(self) -> None:
        with self._changed:
            self.pace.answered()
            self._changed.notify_all()

    def refused(self, error: MemsysError | httpx.TransportError) -> None:
        with self._changed:
            self.pace.refused(error)


class TaskGate:
    """``Pace`` for asyncio tasks."""

    def __init__(self, pace: Pace) -> None:
        self.pace = pace
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(self.pace.may_start)
            self.pace.in_flight += 1
        try:
            yield
        finally:
            async with self._changed:
                self.pace.in_flight -= 1
                self._changed.notify_all()

    async def answered(self) -> None:
        async with self._changed:
            self.pace.answered()
            self._changed.notify_all()

    def refused(self, error: MemsysError | httpx.TransportError) -> None:
        self.pace.refused(error)  # one event loop: nothing to lock
