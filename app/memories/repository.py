"""Writes and reads of the ``memories`` table shared by formation, retrieval, tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import memories
from app.text.tokenize import search_tokens


@dataclass
class NewMemory:
    """A memory about to be written. ``search_text`` is what BM25 indexes (default: title + content)."""

    memory_type: str
    content: str
    timestamp: datetime
    memcell_id: UUID
    source_message_ids: list[str]
    embedding: list[float]
    user_id: str | None = None
    group_id: str | None = None
    title: str | None = None
    summary: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    search_text: str | None = None

    def row(self) -> dict[str, Any]:
        text = (
            self.search_text
            if self.search_text is not None
            else " ".join(part for part in (self.title, self.content) if part)
        )
        return {
            "memory_type": self.memory_type,
            "content": self.content,
            "timestamp": self.timestamp,
            "memcell_id": self.memcell_id,
            "source_message_ids": self.source_message_ids,
            "embedding": self.embedding,
            "user_id": self.user_id,
            "group_id": self.group_id,
            "title": self.title,
            "summary": self.summary,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "metadata": self.metadata,
            "search_tokens": search_tokens(text),
        }


RETURNED = [
    memories.c.id,
    memories.c.memory_type,
    memories.c.user_id,
    memories.c.group_id,
    memories.c.timestamp,
    memories.c.content,
    memories.c.title,
    memories.c.summary,
    memories.c.memcell_id,
    memories.c.source_message_ids,
    memories.c.valid_from,
    memories.c.valid_to,
    memories.c.metadata,
]


async def insert_memories(conn: AsyncConnection, new: Sequence[NewMemory]) -> list[dict[str, Any]]:
    """Insert in one statement (the BM25 statistics trigger runs once); rows come back API-shaped."""
    if not new:
        return []
    result = await conn.execute(memories.insert().returning(*RETURNED), [memory.row() for memory in new])
    return [to_api(dict(row)) for row in result.mappings()]


async def by_memcell(conn: AsyncConnection, memcell_id: UUID) -> list[dict[str, Any]]:
    statement = select(*RETURNED).where(memories.c.memcell_id == memcell_id).order_by(memories.c.created_at)
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()]


def to_api(row: dict[str, Any]) -> dict[str, Any]:
    """The memory as the API shows it: ids as strings, times in ISO 8601, days as YYYY-MM-DD."""
    out = dict(row)
    out["id"] = str(row["id"])
    out["memcell_id"] = str(row["memcell_id"])
    out["timestamp"] = row["timestamp"].isoformat()
    for key in ("valid_from", "valid_to"):
        if row.get(key) is not None:
            out[key] = row[key].isoformat()
    out["source_message_ids"] = list(row["source_message_ids"])
    return out
