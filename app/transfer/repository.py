"""Reads of a user's export, in the caller's tenant; the dump's reads and the import's writes. The import runs
with the owner's login, which row-level security may not hold (a superuser): its reads name their tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ARRAY, Select, Table, Text, and_, bindparam, delete, func, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import (
    conversation_meta,
    forgotten_users,
    memcells,
    memories,
    memory_history,
    messages,
    profiles,
)
from app.forget.repository import conversations_alone_with_assistant
from app.memories.repository import RETURNED, to_api
from app.memorize.repository import memcells_of_sender, messages_of_user

MESSAGE_COLUMNS = [
    messages.c.message_id,
    messages.c.group_id,
    messages.c.group_name,
    messages.c.create_time,
    messages.c.sender,
    messages.c.sender_name,
    messages.c.role,
    messages.c.content,
    messages.c.refer_list,
    messages.c.status,
    messages.c.received_at,
    messages.c.app_id,
    messages.c.project_id,
    messages.c.agent_id,
    messages.c.session_id,
    messages.c.custom_metadata,
]


async def messages_of(conn: AsyncConnection, user_id: str) -> list[dict[str, Any]]:
    """The messages they sent, and an assistant's in their conversations with it alone (which forget deletes)."""
    statement = (
        select(*MESSAGE_COLUMNS).where(_of_user("message", user_id)).order_by(messages.c.create_time, messages.c.id)
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
    alone = conversations_alone_with_assistant(user_id)
    about = or_(
        memories.c.user_id == user_id,
        and_(memories.c.user_id.is_(None), memories.c.memcell_id.in_(memcells_of_sender(user_id))),
        memories.c.group_id.in_(alone),
    )
    if kind == "conversation_meta":
        return conversation_meta.c.user_details.has_key(user_id)
    if kind == "memcell":
        of_memories = select(memories.c.memcell_id).where(about)
        return or_(memcells.c.id.in_(memcells_of_sender(user_id)), memcells.c.id.in_(of_memories))
    if kind == "message":
        return or_(messages_of_user(user_id), messages.c.group_id.in_(alone))
    if kind == "memory":
        return about
    if kind == "forgotten_user":
        return forgotten_users.c.user_id == user_id
    if kind == "memory_event":
        return or_(
            memory_history.c.user_id == user_id, memory_history.c.memory_id.in_(select(memories.c.id).where(about))
        )
    return or_(profiles.c.user_id == user_id, profiles.c.group_id.in_(alone))


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


async def insert_history(conn: AsyncConnection, rows: list[dict[str, Any]]) -> int:
    """Insert the events of memories stored here that are not recorded yet (by memory, event and time: an import run
    again adds nothing twice); an event of a memory the import left out is left out too. How many were new."""
    if not rows:
        return 0
    ids = list({row["memory_id"] for row in rows})
    present = select(memories.c.id).where(memories.c.id.in_(ids))
    stored = {row for row in (await conn.execute(present)).scalars()}
    recorded = select(memory_history.c.memory_id, memory_history.c.event, memory_history.c.at).where(
        memory_history.c.memory_id.in_(ids)
    )
    seen = {tuple(row) for row in (await conn.execute(recorded)).all()}
    new = [
        row for row in rows if row["memory_id"] in stored and (row["memory_id"], row["event"], row["at"]) not in seen
    ]
    if new:
        await conn.execute(insert(memory_history), new)
    return len(new)


async def insert_messages(conn: AsyncConnection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Insert the messages not stored yet; the new ones' row id and key (stream and ``message_id``)."""
    if not rows:
        return []
    statement = (
        insert(messages)
        .on_conflict_do_nothing()
        .returning(messages.c.id, messages.c.stream_kind, messages.c.stream_id, messages.c.message_id)
    )
    return [dict(row) for row in (await conn.execute(statement, rows)).mappings()]


async def forgotten_in(conn: AsyncConnection, tenant: str) -> dict[str, datetime]:
    """The tenant's forgotten users and when each was (last) forgotten."""
    statement = select(forgotten_users.c.user_id, forgotten_users.c.forgotten_at).where(
        forgotten_users.c.tenant_id == tenant
    )
    return dict((await conn.execute(statement)).tuples().all())


async def record_forgotten(conn: AsyncConnection, rows: list[dict[str, Any]]) -> int:
    """Record forgotten users (in the transaction's tenant), keeping the later time where one is recorded already;
    how many were new or later."""
    if not rows:
        return 0
    statement = insert(forgotten_users)
    statement = statement.on_conflict_do_update(
        index_elements=[forgotten_users.c.tenant_id, forgotten_users.c.user_id],
        set_={"forgotten_at": statement.excluded.forgotten_at},
        where=forgotten_users.c.forgotten_at < statement.excluded.forgotten_at,
    ).returning(forgotten_users.c.user_id)
    return len((await conn.execute(statement, rows)).fetchall())


async def clear_forgotten(conn: AsyncConnection, tenant: str, users: Collection[str] | None) -> list[str]:
    """Forget that these users (``None``: every one) of the tenant were forgotten; who was."""
    statement = delete(forgotten_users).where(forgotten_users.c.tenant_id == tenant)
    if users is not None:
        statement = statement.where(forgotten_users.c.user_id.in_(list(users)))
    return list((await conn.execute(statement.returning(forgotten_users.c.user_id))).scalars())


async def stored_messages(
    conn: AsyncConnection, tenant: str, keys: list[tuple[str, str, str]]
) -> dict[tuple[str, str, str], UUID | None]:
    """Which of these messages ((stream_kind, stream_id, message_id)) the tenant stores, with the MemCell holding
    each (``None``: waiting to be formed). One statement: the keys go as three arrays."""
    if not keys:
        return {}
    kinds, streams, ids = (list(column) for column in zip(*keys, strict=True))
    wanted = (
        func.unnest(
            bindparam("kinds", kinds, type_=ARRAY(Text)),
            bindparam("streams", streams, type_=ARRAY(Text)),
            bindparam("ids", ids, type_=ARRAY(Text)),
        )
        .table_valued("stream_kind", "stream_id", "message_id")
        .render_derived(name="wanted")
    )
    statement = (
        select(messages.c.stream_kind, messages.c.stream_id, messages.c.message_id, messages.c.memcell_id)
        .join(
            wanted,
            and_(
                messages.c.stream_kind == wanted.c.stream_kind,
                messages.c.stream_id == wanted.c.stream_id,
                messages.c.message_id == wanted.c.message_id,
            ),
        )
        .where(messages.c.tenant_id == tenant)
    )
    return {(kind, stream, mid): cell for kind, stream, mid, cell in (await conn.execute(statement)).tuples()}
