"""SQL of forgetting. Every statement runs in the caller's tenant (row-level security), in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Select, Table, delete, func, literal, not_, or_, select, union, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import (
    agent_offloads,
    conversation_meta,
    forgotten_users,
    memcells,
    memories,
    memory_history,
    messages,
    profiles,
)
from app.memorize.repository import memcells_of_sender, messages_of_user
from app.text.memory_text import ASSISTANT_SENDERS


def personal_conversation(user_id: str) -> str:
    """The group id the EverMemOS v1 routes give a user's personal conversation (app.compat.v1) without a session."""
    return f"personal:{user_id}"


def conversations_alone_with_assistant(user_id: str) -> Select:
    """The group ids of the user's conversations with an assistant only: their v1 personal conversation, and every
    group whose messages all come from them or an assistant (a v1 session). The assistant's replies there quote
    them, so these conversations go whole with the user."""
    theirs = select(messages.c.group_id).where(messages.c.sender == user_id, messages.c.group_id.is_not(None))
    alone = (
        select(messages.c.group_id)
        .where(messages.c.group_id.in_(theirs))
        .group_by(messages.c.group_id)
        .having(func.bool_and(messages.c.sender.in_([user_id, *ASSISTANT_SENDERS])))
    )
    return union(alone, select(literal(personal_conversation(user_id)))).subquery().select()


async def group_ids_in(conn: AsyncConnection, groups: Select) -> list[str]:
    return list((await conn.execute(groups)).scalars())


async def memcells_from_first_of_sender(conn: AsyncConnection, user_id: str) -> list[UUID]:
    """In every stream where the user has a message in a MemCell, that MemCell and all later ones of the
    stream: profile versions build on the previous one, so every version from the first MemCell with the
    user's words on may carry them."""
    theirs = (
        select(memcells.c.stream_kind, memcells.c.stream_id, func.min(memcells.c.start_time).label("since"))
        .where(memcells.c.id.in_(memcells_of_sender(user_id)))
        .group_by(memcells.c.stream_kind, memcells.c.stream_id)
        .subquery()
    )
    statement = select(memcells.c.id).join(
        theirs,
        (memcells.c.stream_kind == theirs.c.stream_kind)
        & (memcells.c.stream_id == theirs.c.stream_id)
        & (memcells.c.start_time >= theirs.c.since),
    )
    return list((await conn.execute(statement)).scalars())


async def other_messages_of(conn: AsyncConnection, memcell_ids: Sequence[UUID], user_id: str) -> list[dict[str, Any]]:
    """The messages of these MemCells that others sent, with their MemCell, in conversation order."""
    if not memcell_ids:
        return []
    statement = (
        select(messages.c.id, messages.c.stream_kind, messages.c.stream_id, messages.c.memcell_id)
        .where(messages.c.memcell_id.in_(list(memcell_ids)), not_(messages_of_user(user_id)))
        .order_by(messages.c.create_time, messages.c.id)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def delete_memcells(conn: AsyncConnection, ids: Sequence[UUID]) -> dict[str, int]:
    """Delete the MemCells, their memories (ON DELETE CASCADE) and the profile versions they produced; their
    messages stay, detached (``memcell_id`` NULL)."""
    if not ids:
        return {"memcells": 0, "memories": 0, "profiles": 0}
    ids = list(ids)
    await _delete(conn, memory_history, memory_history.c.memory_id.in_(_memories_where(memories.c.memcell_id.in_(ids))))
    await conn.execute(update(messages).where(messages.c.memcell_id.in_(ids)).values(memcell_id=None))
    count = select(func.count()).select_from(memories).where(memories.c.memcell_id.in_(ids))
    memory_count = (await conn.execute(count)).scalar_one()
    profile_count = await _delete(conn, profiles, profiles.c.memcell_id.in_(ids))
    return {
        "memcells": await _delete(conn, memcells, memcells.c.id.in_(ids)),
        "memories": memory_count,
        "profiles": profile_count,
    }


async def reset_to_pending(conn: AsyncConnection, message_ids: Sequence[int]) -> None:
    """Put messages whose MemCell was just deleted back in the intake buffer, to be formed again. Only
    those still without a MemCell: a concurrent forget may have formed them again already."""
    if message_ids:
        await conn.execute(
            update(messages)
            .where(
                messages.c.id.in_(list(message_ids)),
                messages.c.status == "processed",
                messages.c.memcell_id.is_(None),
            )
            .values(status="pending", boundary_checked=False, extract_attempts=0)
        )


async def delete_user_rows(conn: AsyncConnection, user_id: str) -> dict[str, int]:
    """The user's messages, the memories about them left after their MemCells went, their profiles, and
    their entry in every conversation's participants (``user_details``)."""
    details = await conn.execute(
        update(conversation_meta)
        .where(conversation_meta.c.user_details.has_key(user_id))
        .values(user_details=conversation_meta.c.user_details.op("-")(user_id))
    )
    about = or_(
        memory_history.c.user_id == user_id,
        memory_history.c.memory_id.in_(_memories_where(memories.c.user_id == user_id)),
    )
    return {
        "messages": await _delete(conn, messages, messages_of_user(user_id)),
        "memory_history": await _delete(conn, memory_history, about),
        "memories": await _delete(conn, memories, memories.c.user_id == user_id),
        "profiles": await _delete(conn, profiles, profiles.c.user_id == user_id),
        "participant_details": details.rowcount,
        "agent_offloads": await _delete(conn, agent_offloads, agent_offloads.c.user_id == user_id),
    }


async def record_forgotten(conn: AsyncConnection, user_id: str) -> datetime:
    """Remember that the user was forgotten, and when (the last time, if again): an import leaves out what a dump
    holds about them from before then."""
    statement = insert(forgotten_users).values(user_id=user_id, forgotten_at=func.now())
    statement = statement.on_conflict_do_update(
        # EXCLUDED, not now(): Citus allows only immutable functions in DO UPDATE SET.
        index_elements=[forgotten_users.c.tenant_id, forgotten_users.c.user_id],
        set_={"forgotten_at": statement.excluded.forgotten_at},
    ).returning(forgotten_users.c.forgotten_at)
    return (await conn.execute(statement)).scalar_one()


async def delete_group_rows(conn: AsyncConnection, group_id: str) -> dict[str, int]:
    """Everything of the group: messages, MemCells (and their memories), memories, profiles, metadata."""
    of_group = _memories_where(memories.c.group_id == group_id)
    await _delete(conn, memory_history, memory_history.c.memory_id.in_(of_group))
    memory_count = await _delete(conn, memories, memories.c.group_id == group_id)
    profile_count = await _delete(conn, profiles, profiles.c.group_id == group_id)
    message_count = await _delete(conn, messages, messages.c.group_id == group_id)
    return {
        "messages": message_count,
        "memcells": await _delete(conn, memcells, memcells.c.group_id == group_id),
        "memories": memory_count,
        "profiles": profile_count,
        "conversation_meta": await _delete(conn, conversation_meta, conversation_meta.c.group_id == group_id),
    }


async def _delete(conn: AsyncConnection, table: Table, condition) -> int:
    return (await conn.execute(delete(table).where(condition))).rowcount


def _memories_where(condition):
    return select(memories.c.id).where(condition)
