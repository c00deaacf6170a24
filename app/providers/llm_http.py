"""The HTTP client of LLM calls: an answer is read only up to ``MEMSYS_LLM_MAX_ANSWER_BYTES``.

An endpoint's answer is untrusted (a client names its own endpoint in ``llm_config``), and read whole it
costs memory in proportion to what the endpoint sends: a 300 MB answer once took 1 GB of the server's RSS,
kept. So the client asks for an uncompressed answer (a compressed one would expand past any cap of the
bytes read), refuses one announced larger than the cap, and stops reading one that grows past it. Event
hooks, not a transport: they apply whichever transport carries the request (a pinned client URL's, a proxy's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from app.providers.llm_urls import PinnedHost, pinned_http_client

# The connection pool the OpenAI client would make for itself (its DEFAULT_CONNECTION_LIMITS).
_POOL = httpx.Limits(max_connections=1000, max_keepalive_connections=100)


class UnreadableAnswer(Exception):
    """The endpoint's answer was larger than the cap, or compressed although asked not to be."""


def answer_capped_client(max_answer_bytes: int, timeout_s: float, pinned: PinnedHost | None) -> httpx.AsyncClient:
    """An HTTP client for an LLM endpoint whose answers are read up to ``max_answer_bytes``: reaching only
    ``pinned``'s checked addresses when given (a client's URL), else anywhere (the server's own URL)."""
    hooks = {"request": [_ask_uncompressed], "response": [_capped(max_answer_bytes)]}
    if pinned is not None:
        return pinned_http_client(pinned, timeout_s, event_hooks=hooks)
    return httpx.AsyncClient(timeout=timeout_s, limits=_POOL, follow_redirects=True, event_hooks=hooks)


async def _ask_uncompressed(request: httpx.Request) -> None:
    request.headers["Accept-Encoding"] = "identity"


def _capped(limit: int) -> Callable[[httpx.Response], Awaitable[None]]:
    async def cap(response: httpx.Response) -> None:
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        length = response.headers.get("Content-Length", "")
        if encoding not in ("", "identity"):
            await response.aclose()
            raise UnreadableAnswer(f"came compressed ({encoding[:40]}) although asked for identity")
        if length.isdigit() and int(length) > limit:
            await response.aclose()
            raise UnreadableAnswer(f"is {int(length)} bytes, more than {limit} (MEMSYS_LLM_MAX_ANSWER_BYTES)")
        response.stream = _CappedStream(response.stream, limit)

    return cap


class _CappedStream(httpx.AsyncByteStream):
    """The body, read until it would pass ``limit`` bytes; then ``UnreadableAnswer`` (the caller's client
    closes the connection)."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._stream:
            read += len(chunk)
            if read > self._limit:
                raise UnreadableAnswer(f"is larger than {self._limit} bytes (MEMSYS_LLM_MAX_ANSWER_BYTES)")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
