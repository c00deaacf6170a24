"""The inspector's reads: groups and users with their counts, and one group's messages, memories and profiles.

Every statement runs in the caller's tenant (row-level security) and returns a bounded number of rows. The
lists of groups and users aggregate whole tables: fine for a page a person opens, not for a hot path.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Select, delete, func, insert, select, union
from sqlalchemy.dialects.postgresql import aggregate_order_by, distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import conversation_meta, inspector_sessions, memories, messages, profiles

MAX_LISTED = 500
"""Groups or users listed on the overview, most recently active first."""


async def groups(conn: AsyncConnection, limit: int = MAX_LISTED) -> list[dict[str, Any]]:
    """Each group (with messages, memories or conversation metadata): its name, message counts (all and
    pending), memory count, time of its last message, and last activity (a message received, a memory
    formed or the metadata saved)."""
    ids = union(
        select(messages.c.group_id).where(messages.c.group_id.is_not(None)),
        select(memories.c.group_id).where(memories.c.group_id.is_not(None)),
        select(conversation_meta.c.group_id),
    ).subquery("ids")
    sent = (
        select(
            messages.c.group_id,
            func.count().label("messages"),
            func.count().filter(messages.c.status == "pending").label("pending"),
            func.max(messages.c.create_time).label("last_message"),
            func.max(messages.c.received_at).label("last_received"),
        )
        .where(messages.c.group_id.is_not(None))
        .group_by(messages.c.group_id)
        .subquery("sent")
    )
    formed = _memory_counts(memories.c.group_id).subquery("formed")
    meta = conversation_meta
    last_activity = func.greatest(sent.c.last_received, formed.c.last_formed, meta.c.updated_at).label("last_activity")
    statement = (
        select(
            ids.c.group_id,
            meta.c.name,
            func.coalesce(sent.c.messages, 0).label("messages"),
            func.coalesce(sent.c.pending, 0).label("pending"),
            func.coalesce(formed.c.memories, 0).label("memories"),
            sent.c.last_message,
            last_activity,
        )
        .select_from(ids)
        .outerjoin(sent, sent.c.group_id == ids.c.group_id)
        .outerjoin(formed, formed.c.group_id == ids.c.group_id)
        .outerjoin(meta, meta.c.group_id == ids.c.group_id)
        .order_by(last_activity.desc().nulls_last(), ids.c.group_id)
        .limit(limit)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def users(conn: AsyncConnection, limit: int = MAX_LISTED) -> list[dict[str, Any]]:
    """Each user (a sender of messages, or the owner of memories or profiles): a name they sent under, the
    groups they wrote in (None: none), their message and memory counts, and their last activity."""
    ids = union(
        select(messages.c.sender.label("user_id")),
        select(memories.c.user_id).where(memories.c.user_id.is_not(None)),
        select(profiles.c.user_id),
    ).subquery("ids")
    sent = (
        select(
            messages.c.sender.label("user_id"),
            func.max(messages.c.sender_name).label("name"),
            func.count().label("messages"),
            func.array_agg(aggregate_order_by(messages.c.group_id.distinct(), messages.c.group_id))
            .filter(messages.c.group_id.is_not(None))
            .label("groups"),
            func.max(messages.c.received_at).label("last_received"),
        )
        .group_by(messages.c.sender)
        .subquery("sent")
    )
    formed = _memory_counts(memories.c.user_id).subquery("formed")
    last_activity = func.greatest(sent.c.last_received, formed.c.last_formed).label("last_activity")
    statement = (
        select(
            ids.c.user_id,
            sent.c.name,
            sent.c.groups,
            func.coalesce(sent.c.messages, 0).label("messages"),
            func.coalesce(formed.c.memories, 0).label("memories"),
            last_activity,
        )
        .select_from(ids)
        .outerjoin(sent, sent.c.user_id == ids.c.user_id)
        .outerjoin(formed, formed.c.user_id == ids.c.user_id)
        .order_by(last_activity.desc().nulls_last(), ids.c.user_id)
        .limit(limit)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


def _memory_counts(by: Column) -> Select:
    return (
        select(by, func.count().label("memories"), func.max(memories.c.created_at).label("last_formed"))
        .where(by.is_not(None))
        .group_by(by)
    )


async def group_messages(conn: AsyncConnection, group_id: str, limit: int) -> list[dict[str, Any]]:
    """The group's messages, newest first (by conversation time)."""
    statement = (
        select(
            messages.c.message_id,
            messages.c.create_time,
            messages.c.sender,
            messages.c.sender_name,
            messages.c.content,
            messages.c.status,
            messages.c.memcell_id,
        )
        .where(messages.c.group_id == group_id)
        .order_by(messages.c.create_time.desc(), messages.c.id.desc())
        .limit(limit)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def group_memories(conn: AsyncConnection, group_id: str, limit_per_type: int) -> list[dict[str, Any]]:
    """The group's memories (group-level and the members' own), at most ``limit_per_type`` of each type,
    newest first within a type."""
    ranked = (
        select(
            memories.c.id,
            memories.c.memory_type,
            memories.c.user_id,
            memories.c.timestamp,
            memories.c.title,
            memories.c.content,
            memories.c.valid_from,
            memories.c.valid_to,
            memories.c.source_message_ids,
            memories.c.status,
            memories.c.superseded_by,
            func.row_number()
            .over(partition_by=memories.c.memory_type, order_by=(memories.c.timestamp.desc(), memories.c.id.desc()))
            .label("position"),
        )
        .where(memories.c.group_id == group_id, memories.c.status != "deleted")
        .subquery()
    )
    statement = (
        select(*(column for column in ranked.c if column.name != "position"))
        .where(ranked.c.position <= limit_per_type)
        .order_by(ranked.c.memory_type, ranked.c.position)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def group_profiles(conn: AsyncConnection, group_id: str) -> list[dict[str, Any]]:
    """The latest profile version of each user in the group."""
    statement = (
        select(profiles.c.user_id, profiles.c.version, profiles.c.source, profiles.c.profile, profiles.c.created_at)
        .where(profiles.c.group_id == group_id)
        .ext(distinct_on(profiles.c.user_id))
        .order_by(profiles.c.user_id, profiles.c.version.desc())
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


# --- sign-ins (inspector_sessions: no tenant; looked up before the request's tenant is known) -----------------
async def open_session(conn: AsyncConnection, row: dict[str, Any], seconds: int) -> None:
    """Store a sign-in that ends ``seconds`` from now; drop the ones that have ended."""
    await conn.execute(delete(inspector_sessions).where(inspector_sessions.c.expires_at < func.now()))
    ends = func.now() + func.make_interval(0, 0, 0, 0, 0, 0, seconds)
    await conn.execute(insert(inspector_sessions).values(**row, expires_at=ends))


async def session(conn: AsyncConnection, id_hash: str) -> dict[str, Any] | None:
    """A sign-in that has not ended."""
    found = await conn.execute(
        select(inspector_sessions.c.key_hash, inspector_sessions.c.actor, inspector_sessions.c.csrf_token).where(
            inspector_sessions.c.id_hash == id_hash, inspector_sessions.c.expires_at > func.now()
        )
    )
    row = found.mappings().first()
    return dict(row) if row else None


async def close_session(conn: AsyncConnection, id_hash: str) -> None:
    await conn.execute(delete(inspector_sessions).where(inspector_sessions.c.id_hash == id_hash))
