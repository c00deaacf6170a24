"""SQL of the retrieval agent: what it took out of its context, kept whole (``agent_offloads``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import agent_offloads


async def store(
    conn: AsyncConnection, *, ref: str, chat_id: str, user_id: str | None, kind: str, content: str, tokens: int
) -> None:
    await conn.execute(
        agent_offloads.insert().values(
            ref=ref, chat_id=chat_id, user_id=user_id, kind=kind, content=content, tokens=tokens
        )
    )


async def read(conn: AsyncConnection, ref: str, *, chat_id: str, user_id: str | None) -> dict[str, Any] | None:
    """The content ``chat_id`` offloaded for ``user_id`` under ``ref``, in the session's tenant (row-level
    security), or None."""
    statement = select(agent_offloads).where(
        agent_offloads.c.ref == ref,
        agent_offloads.c.chat_id == chat_id,
        agent_offloads.c.user_id.is_not_distinct_from(user_id),
    )
    row = (await conn.execute(statement)).mappings().first()
    return dict(row) if row else None
