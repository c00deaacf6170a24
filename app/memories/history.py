"""Reads and writes of ``memory_history``: every event of a memory's life, append-only (migration 0024)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import memory_history


@dataclass
class Event:
    """One event of a memory's life: what happened (``memory_history.event``), by what and why."""

    memory_id: UUID
    event: str
    actor: str
    user_id: str | None = None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "user_id": self.user_id,
            "event": self.event,
            "actor": self.actor,
            "reason": self.reason,
            "details": self.details,
        }


async def record(conn: AsyncConnection, events: Sequence[Event]) -> None:
    """Append ``events`` in the caller's transaction, in order (their ids grow in that order)."""
    if events:
        await conn.execute(memory_history.insert(), [event.row() for event in events])


async def of_memory(conn: AsyncConnection, memory_id: UUID) -> list[dict[str, Any]]:
    """The memory's events, oldest first, API-shaped."""
    statement = select(memory_history).where(memory_history.c.memory_id == memory_id).order_by(memory_history.c.id)
    return [
        {
            "id": row["id"],
            "event": row["event"],
            "at": row["at"].isoformat(),
            "actor": row["actor"],
            "reason": row["reason"],
            "details": row["details"],
        }
        for row in (await conn.execute(statement)).mappings()
    ]


async def was_purged(conn: AsyncConnection, memory_id: UUID) -> bool:
    statement = select(memory_history.c.id).where(
        memory_history.c.memory_id == memory_id, memory_history.c.event == "purged"
    )
    return (await conn.execute(statement.limit(1))).first() is not None


async def forget_memories(conn: AsyncConnection, memory_ids: Sequence[UUID]) -> int:
    """Remove every event of these memories (a purge keeps its tombstone, recorded after)."""
    if not memory_ids:
        return 0
    result = await conn.execute(delete(memory_history).where(memory_history.c.memory_id.in_(list(memory_ids))))
    return result.rowcount


async def forget_user(conn: AsyncConnection, user_id: str) -> int:
    """Remove the history of a forgotten user's memories (``memsys forget``; the memories go with it)."""
    result = await conn.execute(delete(memory_history).where(memory_history.c.user_id == user_id))
    return result.rowcount
