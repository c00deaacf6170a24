"""Listing memories with filters, newest first, with an opaque cursor (keyset pagination on timestamp, id)."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from uuid import UUID

from app.errors import InvalidParameter
from app.memories import repository
from app.memories.schemas import MemoryListQuery, MemoryPage
from app.runtime import Runtime


async def list_memories(runtime: Runtime, query: MemoryListQuery) -> MemoryPage:
    after = _decode(query.cursor) if query.cursor else None
    async with runtime.engine.begin() as conn:
        rows = await repository.page(
            conn,
            user_id=query.user_id,
            group_id=query.group_id,
            memory_type=query.memory_type,
            start_time=query.start_time,
            end_time=query.end_time,
            after=after,
            limit=query.limit + 1,
        )
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    next_cursor = _encode(rows[-1]["timestamp"], rows[-1]["id"]) if more else None
    return MemoryPage(memories=rows, count=len(rows), next_cursor=next_cursor)


def _encode(timestamp: str, memory_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([timestamp, memory_id]).encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[datetime, UUID]:
    try:
        timestamp, memory_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return datetime.fromisoformat(timestamp), UUID(memory_id)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidParameter("Invalid field cursor: pass the next_cursor of the previous page") from exc
