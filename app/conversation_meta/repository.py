"""Reads and writes of conversation_meta."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import conversation_meta


async def upsert(conn: AsyncConnection, record: dict[str, Any]) -> dict[str, Any]:
    """Insert or replace the whole record of ``group_id``; the row's first ``created_at`` is kept."""
    statement = insert(conversation_meta).values(**record)
    replaced = {key: statement.excluded[key] for key in record if key not in ("group_id", "created_at")}
    statement = statement.on_conflict_do_update(
        index_elements=[conversation_meta.c.tenant_id, conversation_meta.c.group_id],
        # The proposed row's updated_at, its default now(): Citus takes no function in DO UPDATE SET.
        set_={**replaced, "updated_at": statement.excluded.updated_at},
    ).returning(*conversation_meta.c)
    return dict((await conn.execute(statement)).mappings().one())


async def get(conn: AsyncConnection, group_id: str) -> dict[str, Any] | None:
    statement = select(conversation_meta).where(conversation_meta.c.group_id == group_id)
    row = (await conn.execute(statement)).mappings().first()
    return dict(row) if row else None
