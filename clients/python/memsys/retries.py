"""When the client tries a request again, and how long it waits first.

Every v3 operation may be sent twice without harm: memorize stores a ``message_id`` once per conversation (a
repeat answers ``duplicate``), flush and conversation-meta are upserts, forget is idempotent and the rest read.
So a 429 (this key is over its share), a 503 (the server or one of its dependencies is busy or away) and a
connection that failed are retried, waiting ``Retry-After`` when the server sends one, else backing off
exponentially with jitter. A request that timed out while the server was working on it is not retried: it
may be long work (the agent), and the caller chose the timeout.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from memsys.errors import MemsysError, RateLimited, Unavailable

RETRIED_ERRORS = (RateLimited, Unavailable)
RETRIED_TRANSPORT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)
"""No connection, or it broke before an answer (a server restarting); never a read timeout."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    """Tries after the first; 0 turns retries off."""
    backoff_s: float = 0.5
    """The first wait without a Retry-After; doubled each time, up to ``max_backoff_s``."""
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0
    """A longer Retry-After is cut to this."""

    def should_retry(self, attempt: int, error: MemsysError | httpx.TransportError) -> bool:
        if attempt >= self.max_retries:
            return False
        return isinstance(error, (*RETRIED_ERRORS, *RETRIED_TRANSPORT_ERRORS))

    def delay_s(self, attempt: int, error: MemsysError | httpx.TransportError) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 0)."""
        retry_after = error.retry_after if isinstance(error, MemsysError) else None
        if retry_after is not None:
            # A little jitter so that the many requests refused in the same second do not all come back together.
            return min(retry_after, self.max_retry_after_s) + random.uniform(0, 0.25)
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * random.uniform(0.5, 1.0)
