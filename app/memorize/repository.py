"""Writes and reads of the messages buffer."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import messages


async def insert_message(conn: AsyncConnection, row: dict[str, Any]) -> bool:
    """Store one message; False when the stream already has this message_id (nothing is written)."""
    statement = (
        insert(messages)
        .values(**row)
        .on_conflict_do_nothing(index_elements=["tenant_id", "stream_kind", "stream_id", "message_id"])
        .returning(messages.c.id)
    )
    return (await conn.execute(statement)).first() is not None


def memcells_of_sender(user_id: str) -> Select:
    """The ids of the MemCells formed from messages ``user_id`` sent (a subquery for forget and export)."""
    return select(messages.c.memcell_id).where(messages.c.sender == user_id, messages.c.memcell_id.is_not(None))


async def message_status(conn: AsyncConnection, stream_kind: str, stream_id: str, message_id: str) -> str | None:
    """``pending`` (waiting for formation), ``processed`` (in a MemCell), or None if the stream has no such message."""
    statement = select(messages.c.status).where(
        messages.c.stream_kind == stream_kind, messages.c.stream_id == stream_id, messages.c.message_id == message_id
    )
    return (await conn.execute(statement)).scalar_one_or_none()
