"""Reads of a user's export, in the caller's tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Select, Table, and_, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import conversation_meta, memcells, memories, messages, profiles
from app.memories.repository import RETURNED, to_api
from app.memorize.repository import memcells_of_sender

MESSAGE_COLUMNS = [
    messages.c.message_id,
    messages.c.group_id,
    messages.c.group_name,
    messages.c.create_time,
    messages.c.sender,
    messages.c.sender_name,
    messages.c.content,
    messages.c.refer_list,
    messages.c.status,
    messages.c.received_at,
]


async def messages_of(conn: AsyncConnection, user_id: str) -> list[dict[str, Any]]:
    statement = (
        select(*MESSAGE_COLUMNS).where(messages.c.sender == user_id).order_by(messages.c.create_time, messages.c.id)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def memories_of(conn: AsyncConnection, user_id: str) -> list[dict[str, Any]]:
    """Memories about the user, and the group-level memories (no user) of MemCells with a message of theirs;
    not the other participants' own memories of those MemCells."""
    statement = (
        select(*RETURNED, memories.c.created_at)
        .where(_of_user("memory", user_id))
        .order_by(memories.c.timestamp, memories.c.id)
    )
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()]


async def profiles_of(conn: AsyncConnection, user_id: str) -> list[dict[str, Any]]:
    statement = (
        select(profiles.c.group_id, profiles.c.version, profiles.c.profile, profiles.c.source, profiles.c.created_at)
        .where(profiles.c.user_id == user_id)
        .order_by(profiles.c.group_id.nulls_first(), profiles.c.version)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def participant_details_of(conn: AsyncConnection, user_id: str) -> list[dict[str, Any]]:
    """The user's entry in each conversation's ``user_details`` (name, role, ...)."""
    statement = (
        select(conversation_meta.c.group_id, conversation_meta.c.user_details[user_id].label("details"))
        .where(conversation_meta.c.user_details.has_key(user_id))
        .order_by(conversation_meta.c.group_id)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


def dump_statement(kind: str, table: Table, columns: list, user_id: str | None) -> Select:
    """The rows of one dump type in the transaction's tenant, in a stable order; with ``user_id``, what a
    user's export holds (their messages, memories about them and their MemCells' group memories, the
    MemCells those come from, their profiles, the conversations naming them)."""
    statement = select(*columns)
    if user_id is not None:
        statement = statement.where(_of_user(kind, user_id))
    order = [table.c.created_at] if "created_at" in table.c else []
    return statement.order_by(*order, *table.primary_key.columns)


def _of_user(kind: str, user_id: str):
    """The rows of ``kind`` that a user's export holds."""
    about = or_(
        memories.c.user_id == user_id,
        and_(memories.c.user_id.is_(None), memories.c.memcell_id.in_(memcells_of_sender(user_id))),
    )
    if kind == "conversation_meta":
        return conversation_meta.c.user_details.has_key(user_id)
    if kind == "memcell":
        of_memories = select(memories.c.memcell_id).where(about)
        return or_(memcells.c.id.in_(memcells_of_sender(user_id)), memcells.c.id.in_(of_memories))
    if kind == "message":
        return messages.c.sender == user_id
    if kind == "memory":
        return about
    return profiles.c.user_id == user_id


async def stream_rows(conn: AsyncConnection, statement: Select) -> AsyncIterator[dict[str, Any]]:
    result = await conn.stream(statement.execution_options(yield_per=500))
    async for row in result.mappings():
        yield dict(row)


async def insert_rows(conn: AsyncConnection, table: Table, rows: list[dict[str, Any]]) -> int:
    """Insert what is not there yet (an import run again adds nothing twice); returns how many were new."""
    if not rows:
        return 0
    result = await conn.execute(insert(table).on_conflict_do_nothing().returning(table.c.id), rows)
    return len(result.fetchall())
