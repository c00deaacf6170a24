"""Server-sent events as the upstream sends them: whole events, each passed on byte for byte.

The proxy relays a stream event by event rather than chunk by chunk so that it can read each event's data
(the answer's text, to memorize) and hold back the final ``data: [DONE]`` until the turn is memorized.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
DONE = "[DONE]"


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Whole events (their closing blank line included); what follows the last blank line comes last, if any.
    Each byte is searched once, however the chunks cut the events."""
    buffer = bytearray()
    searched = 0
    async for chunk in chunks:
        buffer += chunk
        while match := _EVENT_END.search(buffer, max(0, searched - 3)):
            yield bytes(buffer[: match.end()])
            del buffer[: match.end()]
            searched = 0
        searched = len(buffer)
    if buffer.strip():
        yield bytes(buffer)


def data_of(event: bytes) -> str | None:
    """The event's ``data`` (its data lines joined), or None for an event with none (a comment, a keep-alive)."""
    lines = event.decode("utf-8", errors="replace").splitlines()
    data = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
    return "\n".join(data) if data else None


def error_event(code: str, message: str, kind: str) -> bytes:
    """An error in the shape OpenAI's SDKs raise from a stream: ``data: {"error": {...}}``."""
    error: dict[str, Any] = {"message": message, "type": kind, "param": None, "code": code}
    return b"data: " + json.dumps({"error": error}, ensure_ascii=False).encode() + b"\n\n"
