"""Writes and reads of the ``memories`` table shared by formation, retrieval, tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import delete, func, or_, select, tuple_
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
    embedding_model: str
    user_id: str | None = None
    group_id: str | None = None
    title: str | None = None
    summary: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    search_text: str | None = None
    embedding_xl: list[float] | None = None
    """The cross-lingual vector (migration 0014), with ``language``, the language of the text."""
    language: str | None = None

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
            "embedding_model": self.embedding_model,
            "embedding_xl": self.embedding_xl,
            "language": self.language,
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
    if row.get("created_at") is not None:
        out["created_at"] = row["created_at"].isoformat()
    for key in ("valid_from", "valid_to"):
        if row.get(key) is not None:
            out[key] = row[key].isoformat()
    out["source_message_ids"] = list(row["source_message_ids"])
    return out


async def page(
    conn: AsyncConnection,
    *,
    user_id: str | None,
    group_id: str | None,
    memory_type: str | None,
    start_time: datetime | None,
    end_time: datetime | None,
    after: tuple[datetime, UUID] | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Newest first by (timestamp, id); ``after`` is the last row of the previous page (keyset pagination)."""
    conditions = _listed(user_id, [group_id] if group_id is not None else None, memory_type, start_time, end_time)
    if after is not None:
        conditions.append(tuple_(memories.c.timestamp, memories.c.id) < tuple_(*after))
    statement = (
        select(*RETURNED, memories.c.created_at)
        .where(*conditions)
        .order_by(memories.c.timestamp.desc(), memories.c.id.desc())
        .limit(limit)
    )
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()]


async def numbered_page(
    conn: AsyncConnection,
    *,
    user_id: str | None,
    group_ids: list[str] | None,
    memory_type: str,
    start_time: datetime | None,
    end_time: datetime | None,
    offset: int,
    limit: int,
) -> tuple[list[dict[str, Any]], int]:
    """Page ``offset // limit + 1`` newest first, and how many match in all (the EverMemOS routes' paging)."""
    conditions = _listed(user_id, group_ids, memory_type, start_time, end_time)
    total = (await conn.execute(select(func.count()).select_from(memories).where(*conditions))).scalar_one()
    statement = (
        select(*RETURNED, memories.c.created_at)
        .where(*conditions)
        .order_by(memories.c.timestamp.desc(), memories.c.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()], total


def _listed(
    user_id: str | None,
    group_ids: list[str] | None,
    memory_type: str | None,
    start_time: datetime | None,
    end_time: datetime | None,
) -> list:
    conditions = [
        memories.c.user_id == user_id if user_id is not None else None,
        memories.c.group_id.in_(group_ids) if group_ids is not None else None,
        memories.c.memory_type == memory_type if memory_type is not None else None,
        memories.c.timestamp >= start_time if start_time is not None else None,
        memories.c.timestamp < end_time if end_time is not None else None,
    ]
    return [condition for condition in conditions if condition is not None]


async def delete_matching(
    conn: AsyncConnection, *, memory_id: UUID | None, user_id: str | None, group_id: str | None
) -> int:
    """Delete the memories matching every filter given: ``memory_id`` names a memory or the MemCell it came
    from (upstream's clients delete by either). Messages stay; the BM25 statistics follow by trigger."""
    conditions = _listed(user_id, [group_id] if group_id is not None else None, None, None, None)
    if memory_id is not None:
        conditions.append(or_(memories.c.id == memory_id, memories.c.memcell_id == memory_id))
    if not conditions:
        raise ValueError("delete_matching needs at least one filter")
    result = await conn.execute(delete(memories).where(*conditions).returning(memories.c.id))
    return len(result.fetchall())


async def count_by_type(conn: AsyncConnection) -> dict[str, int]:
    """Memories per type in the connection's tenant."""
    statement = select(memories.c.memory_type, func.count()).group_by(memories.c.memory_type)
    return {memory_type: count for memory_type, count in (await conn.execute(statement)).all()}
