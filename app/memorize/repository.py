"""Writes and reads of the messages buffer."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, Text, and_, bindparam, delete, func, or_, select, update
from sqlalchemy.dialects.postgresql import array, insert
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


def messages_of_user(user_id: str) -> ColumnElement[bool]:
    """The messages that are the user's: those they sent, and every message of their personal stream (an assistant's
    answers there, as the proxy files them, speak to and of them): forget deletes them, export holds them."""
    personal = and_(messages.c.stream_kind == "personal", messages.c.stream_id == user_id)
    return or_(messages.c.sender == user_id, personal)


def memcells_of_sender(user_id: str) -> Select:
    """The ids of the MemCells formed from the user's messages (``messages_of_user``), for forget and export."""
    return select(messages.c.memcell_id).where(messages_of_user(user_id), messages.c.memcell_id.is_not(None))


async def message_status(conn: AsyncConnection, stream_kind: str, stream_id: str, message_id: str) -> str | None:
    """``pending`` (waiting for formation), ``processed`` (in a MemCell), or None if the stream has no such message."""
    statement = select(messages.c.status).where(
        messages.c.stream_kind == stream_kind, messages.c.stream_id == stream_id, messages.c.message_id == message_id
    )
    return (await conn.execute(statement)).scalar_one_or_none()


async def unindexed_pending(
    conn: AsyncConnection, tenant: str, embedding_model: str, limit: int, below_id: int | None = None
) -> list[dict[str, Any]]:
    """Pending messages below ``below_id`` with no vector of ``embedding_model`` yet, newest first: what the
    intake worker indexes, each with the pending message before it in its stream (``before``: its sender name
    and content; None when there is none). ``tenant`` is the transaction's (row-level security holds it
    anyway): named, Citus routes to one shard."""
    earlier = messages.alias("earlier")
    # A scalar subquery, not a lateral join: Citus plans no outer join with a constant condition (ON true).
    before = (
        select(array([earlier.c.sender_name, earlier.c.content]))
        .where(
            earlier.c.tenant_id == tenant,
            earlier.c.stream_kind == messages.c.stream_kind,
            earlier.c.stream_id == messages.c.stream_id,
            earlier.c.status == "pending",
            earlier.c.create_time <= messages.c.create_time,  # the pending index's range; ties by id
            (earlier.c.create_time < messages.c.create_time) | (earlier.c.id < messages.c.id),
        )
        .order_by(earlier.c.create_time.desc(), earlier.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    statement = (
        select(
            messages.c.id,
            messages.c.sender_name,
            messages.c.content,
            messages.c.search_tokens.is_(None).label("needs_tokens"),
            before.label("before"),
        )
        .where(
            messages.c.tenant_id == tenant,
            *([messages.c.id < below_id] if below_id is not None else []),
            messages.c.status == "pending",
            (messages.c.embedding_model.is_distinct_from(embedding_model)) | messages.c.embedding.is_(None),
        )
        .order_by(messages.c.id.desc())
        .limit(limit)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def index_pending(
    conn: AsyncConnection, tenant: str, rows: list[dict[str, Any]], embedding_model: str
) -> tuple[int, int]:
    """Store each message's vector (``id``, ``embedding``, ``embedding_text_md5``; its BM25 text
    ``search_tokens`` where it had none) if it is still pending: (stored, skipped). A message that formation holds
    locked is skipped, never waited for: waiting for one while holding another is how two transactions
    deadlock."""
    ids = [row["id"] for row in rows]
    locked = set(
        (
            await conn.execute(
                select(messages.c.id)
                .where(messages.c.tenant_id == tenant, messages.c.id.in_(ids), messages.c.status == "pending")
                .with_for_update(skip_locked=True)
            )
        ).scalars()
    )
    stored = [row for row in rows if row["id"] in locked]
    if stored:  # ours now: these updates wait for no one; one trip for all (psycopg's pipeline)
        await conn.execute(
            update(messages)
            .where(messages.c.tenant_id == tenant, messages.c.id == bindparam("row_id"))
            .values(
                embedding=bindparam("vector", type_=messages.c.embedding.type),
                embedding_model=embedding_model,
                embedding_text_md5=bindparam("md5"),
                search_tokens=func.coalesce(bindparam("tokens", type_=Text), messages.c.search_tokens),
            ),
            [
                {
                    "row_id": row["id"],
                    "vector": row["embedding"],
                    "md5": row["embedding_text_md5"],
                    "tokens": row.get("search_tokens"),
                }
                for row in stored
            ],
        )
    pending = await conn.execute(
        select(func.count()).where(
            messages.c.tenant_id == tenant, messages.c.id.in_(ids), messages.c.status == "pending"
        )
    )
    return len(stored), pending.scalar_one() - len(stored)


async def count_waiting(conn: AsyncConnection) -> dict[str, int]:
    """Messages of the connection's tenant waiting for formation, and of those not yet searchable."""
    statement = select(
        func.count().label("waiting"), func.count().filter(messages.c.embedding.is_(None)).label("unsearchable")
    ).where(messages.c.status == "pending")
    return dict((await conn.execute(statement)).mappings().one())


async def delete_formed_before(conn: AsyncConnection, before: datetime, limit: int) -> int:
    """Delete at most ``limit`` messages formed into memories and received before ``before``; how many."""
    due = (
        select(messages.c.id)
        .where(messages.c.status == "processed", messages.c.received_at < before)
        .limit(limit)
        .scalar_subquery()
    )
    return (await conn.execute(delete(messages).where(messages.c.id.in_(due)))).rowcount
