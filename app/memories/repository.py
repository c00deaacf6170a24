"""Writes and reads of the ``memories`` table shared by formation, retrieval, tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import delete, func, literal, literal_column, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import memories
from app.retrieval.filters import Filter
from app.text.tokenize import search_tokens


@dataclass
class NewMemory:
    """A memory about to be written. ``search_text`` is what BM25 indexes (default: title + content)."""

    memory_type: str
    content: str
    timestamp: datetime
    memcell_id: UUID
    source_message_ids: list[str]
    embedding: list[float]
    embedding_model: str
    user_id: str | None = None
    group_id: str | None = None
    title: str | None = None
    summary: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    search_text: str | None = None
    embedding_xl: list[float] | None = None
    """The cross-lingual vector (migration 0014), with ``language``, the language of the text."""
    language: str | None = None
    search_tokens: str | None = None
    """BM25's tokens of ``search_text``, when the writer tokenised it before its transaction (formation does)."""
    scope: dict[str, Any] = field(default_factory=dict)
    """Its app_id, project_id, agent_id, session_id and custom_metadata (its MemCell's, ``MemCell.scope``); the
    columns' defaults where absent."""

    def bm25_text(self) -> str:
        if self.search_text is not None:
            return self.search_text
        return " ".join(part for part in (self.title, self.content) if part)

    def row(self) -> dict[str, Any]:
        return {
            "memory_type": self.memory_type,
            "content": self.content,
            "timestamp": self.timestamp,
            "memcell_id": self.memcell_id,
            "source_message_ids": self.source_message_ids,
            "embedding": self.embedding,
            "embedding_model": self.embedding_model,
            "embedding_xl": self.embedding_xl,
            "language": self.language,
            "user_id": self.user_id,
            "group_id": self.group_id,
            "title": self.title,
            "summary": self.summary,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "metadata": self.metadata,
            "search_tokens": self.search_tokens if self.search_tokens is not None else search_tokens(self.bm25_text()),
            **SCOPE_DEFAULTS,
            **self.scope,
        }


SCOPE_DEFAULTS = {
    "app_id": "default",
    "project_id": "default",
    "agent_id": None,
    "session_id": None,
    "custom_metadata": {},
}
"""A memory's scopes and metadata where its writer names none (the columns' defaults, migration 0029): every row of
one insert has every key."""

EDITED_MODEL = "edited"
"""``embedding_model`` of a memory whose content was corrected and is not embedded again yet: the vector leg, which
compares only vectors of the query's model, passes it by until the worker has embedded it (``reembed.edited``)."""

RETURNED = [
    memories.c.id,
    memories.c.memory_type,
    memories.c.user_id,
    memories.c.group_id,
    memories.c.timestamp,
    memories.c.content,
    memories.c.title,
    memories.c.summary,
    memories.c.memcell_id,
    memories.c.source_message_ids,
    memories.c.valid_from,
    memories.c.valid_to,
    memories.c.metadata,
    memories.c.status,
    memories.c.superseded_by,
    memories.c.superseded_at,
    memories.c.expires_at,
    memories.c.app_id,
    memories.c.project_id,
    memories.c.agent_id,
    memories.c.session_id,
    memories.c.custom_metadata,
]


async def insert_memories(conn: AsyncConnection, new: Sequence[NewMemory]) -> list[dict[str, Any]]:
    """Insert in one statement (the BM25 statistics trigger runs once); rows come back API-shaped."""
    if not new:
        return []
    result = await conn.execute(memories.insert().returning(*RETURNED), [memory.row() for memory in new])
    return [to_api(dict(row)) for row in result.mappings()]


async def by_memcell(conn: AsyncConnection, memcell_id: UUID) -> list[dict[str, Any]]:
    statement = select(*RETURNED).where(memories.c.memcell_id == memcell_id).order_by(memories.c.created_at)
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()]


def to_api(row: dict[str, Any]) -> dict[str, Any]:
    """The memory as the API shows it: ids as strings, times in ISO 8601, days as YYYY-MM-DD."""
    out = dict(row)
    out["id"] = str(row["id"])
    out["memcell_id"] = str(row["memcell_id"])
    out["timestamp"] = row["timestamp"].isoformat()
    if row.get("created_at") is not None:
        out["created_at"] = row["created_at"].isoformat()
    for key in ("valid_from", "valid_to"):
        if row.get(key) is not None:
            out[key] = row[key].isoformat()
    out["source_message_ids"] = list(row["source_message_ids"])
    for key in ("superseded_at", "expires_at", "deleted_at"):
        if row.get(key) is not None:
            out[key] = row[key].isoformat()
    if row.get("superseded_by") is not None:
        out["superseded_by"] = str(row["superseded_by"])
    return out


async def page(
    conn: AsyncConnection,
    *,
    user_id: str | None,
    group_id: str | None,
    memory_type: str | None,
    start_time: datetime | None,
    end_time: datetime | None,
    after: tuple[datetime, UUID] | None,
    limit: int,
    caller: Filter | None = None,
) -> list[dict[str, Any]]:
    """Newest first by (timestamp, id); ``after`` is the last row of the previous page (keyset pagination)."""
    group_ids = [group_id] if group_id is not None else None
    conditions = _listed(user_id, group_ids, memory_type, start_time, end_time, caller=caller)
    if after is not None:
        conditions.append(tuple_(memories.c.timestamp, memories.c.id) < tuple_(*after))
    statement = (
        select(*RETURNED, memories.c.created_at)
        .where(*conditions)
        .order_by(memories.c.timestamp.desc(), memories.c.id.desc())
        .limit(limit)
    )
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()]


async def numbered_page(
    conn: AsyncConnection,
    *,
    user_id: str | None,
    group_ids: list[str] | None,
    memory_type: str,
    start_time: datetime | None,
    end_time: datetime | None,
    offset: int,
    limit: int,
    caller: Filter | None = None,
    ascending: bool = False,
) -> tuple[list[dict[str, Any]], int]:
    """Page ``offset // limit + 1`` newest first (oldest first when ``ascending``), and how many match in all (the
    EverMemOS routes' paging)."""
    conditions = _listed(user_id, group_ids, memory_type, start_time, end_time, caller=caller)
    total = (await conn.execute(select(func.count()).select_from(memories).where(*conditions))).scalar_one()
    statement = (
        select(*RETURNED, memories.c.created_at)
        .where(*conditions)
        .order_by(
            *(
                (memories.c.timestamp, memories.c.id)
                if ascending
                else (memories.c.timestamp.desc(), memories.c.id.desc())
            )
        )
        .offset(offset)
        .limit(limit)
    )
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()], total


def _listed(
    user_id: str | None,
    group_ids: list[str] | None,
    memory_type: str | None,
    start_time: datetime | None,
    end_time: datetime | None,
    *,
    current_only: bool = True,
    caller: Filter | None = None,
) -> list:
    """The listing's conditions; a listing shows current memories only (not superseded, deleted or expired).
    ``caller``: the caller's filter (app.retrieval.filters)."""
    conditions = [
        or_(memories.c.expires_at.is_(None), memories.c.expires_at > func.now()) if current_only else None,
        memories.c.status == "current" if current_only else None,
        memories.c.user_id == user_id if user_id is not None else None,
        memories.c.group_id.in_(group_ids) if group_ids is not None else None,
        memories.c.memory_type == memory_type if memory_type is not None else None,
        memories.c.timestamp >= start_time if start_time is not None else None,
        memories.c.timestamp < end_time if end_time is not None else None,
        caller.clause() if caller is not None else None,
    ]
    return [condition for condition in conditions if condition is not None]


async def matching_ids(
    conn: AsyncConnection,
    *,
    memory_id: UUID | None,
    user_id: str | None,
    group_id: str | None,
    caller: Filter | None = None,
) -> list[UUID]:
    """The current memories matching every filter given: ``memory_id`` names a memory or the MemCell it came from
    (upstream's clients delete by either)."""
    if memory_id is None and user_id is None and group_id is None and caller is None:
        raise ValueError("matching_ids needs at least one filter")
    conditions = _listed(user_id, [group_id] if group_id is not None else None, None, None, None, caller=caller)
    if memory_id is not None:
        conditions.append(or_(memories.c.id == memory_id, memories.c.memcell_id == memory_id))
    return list((await conn.execute(select(memories.c.id).where(*conditions))).scalars())


LOCKED = [*RETURNED, memories.c.created_at, memories.c.deleted_at, memories.c.embedding_model]


async def locked(conn: AsyncConnection, memory_id: UUID) -> dict[str, Any] | None:
    """The memory, its row locked for the rest of the transaction (concurrent edits of one memory queue here, so each
    is applied and recorded in turn); None when the tenant has no such memory."""
    statement = select(*LOCKED).where(memories.c.id == memory_id).with_for_update()
    row = (await conn.execute(statement)).mappings().first()
    return dict(row) if row else None


async def read(conn: AsyncConnection, memory_id: UUID) -> dict[str, Any] | None:
    row = (await conn.execute(select(*LOCKED).where(memories.c.id == memory_id))).mappings().first()
    return dict(row) if row else None


async def change(
    conn: AsyncConnection, memory_ids: Sequence[UUID], values: dict[str, Any], *, search_text: str | None = None
) -> None:
    """Set ``values`` on these memories; ``search_text``, what BM25 indexes from now on (tokenised here, in the same
    statement: searchable by keyword at once)."""
    if search_text is not None:
        values = {**values, "search_tokens": search_tokens(search_text)}
    await conn.execute(update(memories).where(memories.c.id.in_(list(memory_ids))).values(**values))


async def mark_group_copy(conn: AsyncConnection, memcell_ids: Sequence[UUID], present: bool) -> None:
    """The participants' episodes of these MemCells: whether their group's copy is there to stand for them (a search
    without a user shows one copy, migration 0020): a deleted group copy brings them back, a restored one hides them."""
    if memcell_ids:
        await conn.execute(
            update(memories)
            .where(
                memories.c.memcell_id.in_(list(memcell_ids)),
                memories.c.memory_type == "episode",
                memories.c.user_id.is_not(None),
                memories.c.group_id.is_not(None),
            )
            .values(has_group_copy=present)
        )


async def superseded_by(conn: AsyncConnection, memory_id: UUID) -> list[dict[str, Any]]:
    """The memories that ``memory_id`` superseded."""
    statement = select(*RETURNED).where(memories.c.superseded_by == memory_id).order_by(memories.c.timestamp)
    return [to_api(dict(row)) for row in (await conn.execute(statement)).mappings()]


async def with_facts_of(conn: AsyncConnection, user_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The current memories stating a fact (``metadata.facts``) about one of these users, whoever's copy they are and
    in whichever group: the candidates a new fact may supersede or restate."""
    # The expression of migration 0024's GIN index, ix_memories_facts, and its condition.
    facts = literal_column("memories.metadata -> 'facts'", JSONB)
    about = or_(*[facts.op("@>")(literal([{"user": user}], JSONB)) for user in user_ids])
    statement = select(
        memories.c.id,
        memories.c.memory_type,
        memories.c.user_id,
        memories.c.timestamp,
        memories.c.source_message_ids,
        memories.c.metadata,
    ).where(memories.c.status == "current", memories.c.metadata.has_key("facts"), about)
    # Locked in one order (timestamp, id): two MemCells of one user closing at once settle one after the other,
    # each on what the other wrote, and cannot deadlock.
    statement = statement.order_by(memories.c.timestamp, memories.c.id).with_for_update()
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def nearest(
    conn: AsyncConnection,
    *,
    user_id: str,
    memory_type: str,
    embedding: list[float],
    embedding_model: str,
    limit: int,
    min_cosine: float,
) -> list[dict[str, Any]]:
    """The user's current memories of the type most similar to ``embedding`` (by cosine, exact: a user's memories
    of one type, read by the user's index), at least ``min_cosine`` alike."""
    distance = memories.c.embedding.cosine_distance(embedding)
    statement = (
        select(memories.c.id, memories.c.content, memories.c.timestamp, (1 - distance).label("cosine"))
        .where(
            memories.c.status == "current",
            memories.c.user_id == user_id,
            memories.c.memory_type == memory_type,
            memories.c.embedding_model == embedding_model,
        )
        .order_by(distance)
        .limit(limit)
    )
    rows = [dict(row) for row in (await conn.execute(statement)).mappings()]
    return [row for row in rows if row["cosine"] >= min_cosine]


async def add_sources(conn: AsyncConnection, memory_id: UUID, message_ids: Sequence[str]) -> None:
    """A memory said again: it gains the messages that said it."""
    await conn.execute(
        update(memories)
        .where(memories.c.id == memory_id)
        .values(source_message_ids=func.array_cat(memories.c.source_message_ids, list(message_ids)))
    )


async def deleted_before(conn: AsyncConnection, before: datetime, limit: int) -> list[dict[str, Any]]:
    statement = select(memories.c.id, memories.c.user_id).where(
        memories.c.status == "deleted", memories.c.deleted_at < before
    )
    return [dict(row) for row in (await conn.execute(statement.limit(limit))).mappings()]


async def purge(conn: AsyncConnection, memory_ids: Sequence[UUID]) -> int:
    """Delete these memories for good (the BM25 statistics follow by trigger)."""
    if not memory_ids:
        return 0
    return (await conn.execute(delete(memories).where(memories.c.id.in_(list(memory_ids))))).rowcount


async def expire_due(conn: AsyncConnection, limit: int) -> list[dict[str, Any]]:
    """Mark the memories past their ``expires_at`` expired (searches hid them already); which."""
    due = (
        select(memories.c.id)
        .where(memories.c.status.in_(["current", "superseded"]), memories.c.expires_at <= func.now())
        .limit(limit)
        .scalar_subquery()
    )
    statement = (
        update(memories)
        .where(memories.c.id.in_(due))
        .values(status="expired")
        .returning(memories.c.id, memories.c.user_id, memories.c.expires_at)
    )
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def count_by_type(conn: AsyncConnection) -> dict[str, int]:
    """Memories per type in the connection's tenant."""
    statement = select(memories.c.memory_type, func.count()).group_by(memories.c.memory_type)
    return {memory_type: count for memory_type, count in (await conn.execute(statement)).all()}
