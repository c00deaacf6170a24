"""SQL of memory formation: the per-stream lock, the pending buffer, MemCells and profile versions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import memcells, messages, profiles
from app.db.tables import tenants as tenants_table
from app.formation.streams import Stream
from app.tenancy.scope import tenant_of

# hashtextextended gives a bigint key per stream; a collision between two streams only serialises them.
_LOCK = text("SELECT pg_advisory_lock(hashtextextended(:key, 0))")
_UNLOCK = text("SELECT pg_advisory_unlock(hashtextextended(:key, 0))")
_LOCK_TRANSACTION = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
_WAIT_UNBOUNDED = text("SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)")
"""For this transaction only: waiting for a stream's lock is waiting on purpose (another worker, or forget's
re-forming, forms it meanwhile, LLM calls included), not the stuck statement MEMSYS_DB_LOCK_TIMEOUT_SECONDS and
MEMSYS_DB_STATEMENT_TIMEOUT_SECONDS stop."""

PENDING_COLUMNS = [
    messages.c.id,
    messages.c.message_id,
    messages.c.group_name,
    messages.c.create_time,
    messages.c.sender,
    messages.c.sender_name,
    messages.c.content,
    messages.c.refer_list,
    messages.c.boundary_checked,
    messages.c.extract_attempts,
    messages.c.role,
    messages.c.app_id,
    messages.c.project_id,
    messages.c.agent_id,
    messages.c.session_id,
    messages.c.custom_metadata,
]


async def lock_stream(conn: AsyncConnection, stream: Stream, *, transaction: bool = False) -> None:
    """Take the stream's session-level advisory lock (held across transactions, until unlock or the
    connection ends), waiting while another session holds it, however long; with ``transaction``, the same lock
    held until this transaction ends (behind a transaction pooler, whose sessions are not the client's)."""
    await conn.execute(_WAIT_UNBOUNDED)
    await conn.execute(_LOCK_TRANSACTION if transaction else _LOCK, {"key": _lock_key(conn, stream)})


async def unlock_stream(conn: AsyncConnection, stream: Stream) -> bool:
    return bool((await conn.execute(_UNLOCK, {"key": _lock_key(conn, stream)})).scalar())


def _lock_key(conn: AsyncConnection, stream: Stream) -> str:
    # The same group id in two tenants is two streams.
    return f"{tenant_of(conn)}/{stream.lock_key()}"


async def pending_messages(conn: AsyncConnection, stream: Stream, limit: int | None = None) -> list[dict[str, Any]]:
    """The stream's pending messages in conversation order (ties by arrival); the first ``limit`` only."""
    statement = (
        select(*PENDING_COLUMNS)
        .where(
            messages.c.stream_kind == stream.kind,
            messages.c.stream_id == stream.id,
            messages.c.status == "pending",
        )
        .order_by(messages.c.create_time, messages.c.id)
        .limit(limit)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def draft_vectors(conn: AsyncConnection, ids: Sequence[int], embedding_model: str) -> dict[str, list[float]]:
    """The vectors of ``embedding_model`` the intake worker gave these pending messages, by the MD5 of the text
    each was made from (``app.memorize.searchable``): formation keeps one where a memory's text is the same."""
    statement = select(messages.c.embedding_text_md5, messages.c.embedding).where(
        messages.c.id.in_(list(ids)),
        messages.c.embedding_model == embedding_model,
        messages.c.embedding_text_md5.is_not(None),
    )
    return dict((await conn.execute(statement)).all())


async def judge_streak(conn: AsyncConnection, stream: Stream, limit: int) -> int:
    """How many of the stream's latest MemCells (at most ``limit``), newest first, the LLM judge closed after a
    single message: its "end" answers in a row so far (``boundary.ENDS_IN_A_ROW``)."""
    statement = (
        select(memcells.c.boundary_reason, func.cardinality(memcells.c.message_ids).label("size"))
        .where(memcells.c.stream_kind == stream.kind, memcells.c.stream_id == stream.id)
        .order_by(memcells.c.end_time.desc())
        .limit(limit)
    )
    streak = 0
    for row in (await conn.execute(statement)).mappings():
        if row["boundary_reason"] != "llm" or row["size"] != 1:
            break
        streak += 1
    return streak


async def mark_boundary_checked(conn: AsyncConnection, ids: Sequence[int]) -> None:
    """The LLM judged that these messages do not start a new episode: do not ask again."""
    if ids:
        await conn.execute(update(messages).where(messages.c.id.in_(ids)).values(boundary_checked=True))


async def count_failed_extraction(conn: AsyncConnection, ids: Sequence[int]) -> None:
    await conn.execute(
        update(messages)
        .where(messages.c.id.in_(ids), messages.c.status == "pending")
        .values(extract_attempts=messages.c.extract_attempts + 1)
    )


async def insert_memcell(conn: AsyncConnection, row: dict[str, Any]) -> UUID:
    return (await conn.execute(memcells.insert().values(**row).returning(memcells.c.id))).scalar_one()


async def mark_processed(conn: AsyncConnection, ids: Sequence[int], memcell_id: UUID) -> int:
    """Flip exactly these messages from pending to processed; the count tells whether all still were."""
    result = await conn.execute(
        update(messages)
        .where(messages.c.id.in_(ids), messages.c.status == "pending")
        .values(status="processed", memcell_id=memcell_id)
    )
    return result.rowcount


async def latest_profiles(
    conn: AsyncConnection, user_ids: Sequence[str], group_id: str | None
) -> dict[str, dict[str, Any]]:
    """The newest version of each user's profile in this group (``group_id`` None: personal)."""
    if not user_ids:
        return {}
    group_match = profiles.c.group_id.is_(None) if group_id is None else profiles.c.group_id == group_id
    statement = (
        select(profiles.c.user_id, profiles.c.version, profiles.c.profile, profiles.c.source)
        .where(profiles.c.user_id.in_(list(user_ids)), group_match)
        .ext(distinct_on(profiles.c.user_id))
        .order_by(profiles.c.user_id, profiles.c.version.desc())
    )
    return {row["user_id"]: dict(row) for row in (await conn.execute(statement)).mappings()}


async def insert_profiles(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(profiles.insert(), list(rows))


async def tenants(conn: AsyncConnection) -> list[str]:
    """Every tenant (the service's role may read them; their data it reads tenant by tenant)."""
    return list((await conn.execute(select(tenants_table.c.tenant_id).order_by(tenants_table.c.tenant_id))).scalars())


async def idle_streams(conn: AsyncConnection, idle_seconds: float) -> list[Stream]:
    """The tenant's streams with pending messages and none received in the last ``idle_seconds``."""
    statement = (
        select(messages.c.stream_kind, messages.c.stream_id)
        .where(messages.c.status == "pending")
        .group_by(messages.c.stream_kind, messages.c.stream_id)
        .having(func.max(messages.c.received_at) < func.now() - func.make_interval(0, 0, 0, 0, 0, 0, idle_seconds))
    )
    return [Stream(kind, stream_id) for kind, stream_id in (await conn.execute(statement)).all()]


async def request_flush(conn: AsyncConnection, stream: Stream) -> list[int]:
    """Ask the worker to close everything the stream has pending; the ids (rows) of those messages."""
    result = await conn.execute(
        update(messages)
        .where(messages.c.stream_kind == stream.kind, messages.c.stream_id == stream.id, messages.c.status == "pending")
        .values(flush_requested=True)
        .returning(messages.c.id)
    )
    return list(result.scalars())


async def flush_requested(conn: AsyncConnection, stream: Stream) -> bool:
    statement = select(
        select(messages.c.id)
        .where(
            messages.c.stream_kind == stream.kind,
            messages.c.stream_id == stream.id,
            messages.c.status == "pending",
            messages.c.flush_requested,
        )
        .exists()
    )
    return bool((await conn.execute(statement)).scalar())


async def count_pending(conn: AsyncConnection, ids: Sequence[int]) -> int:
    statement = select(func.count()).where(messages.c.id.in_(list(ids)), messages.c.status == "pending")
    return int((await conn.execute(statement)).scalar_one())


async def memcells_of(conn: AsyncConnection, ids: Sequence[int]) -> list[UUID]:
    """The MemCells these messages (rows) were formed into, in the order they were formed."""
    statement = (
        select(messages.c.memcell_id)
        .where(messages.c.id.in_(list(ids)), messages.c.memcell_id.is_not(None))
        .group_by(messages.c.memcell_id)
        .order_by(func.min(messages.c.id))
    )
    return list((await conn.execute(statement)).scalars())
