"""Reads of a user's export, in the caller's tenant."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import conversation_meta, memories, messages, profiles
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
        .where(
            or_(
                memories.c.user_id == user_id,
                and_(memories.c.user_id.is_(None), memories.c.memcell_id.in_(memcells_of_sender(user_id))),
            )
        )
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
