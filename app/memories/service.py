"""One memory's life as the API offers it (read, correct, delete, restore, its history), and listing memories with
filters, newest first, with an opaque cursor (keyset pagination on timestamp, id).

Every door (the v3 routes, the v1 delete, MCP, the inspector) calls these; formation's supersession is in
``app.memories.supersession`` and records through the same history. A memory another tenant holds is simply not
found (row-level security): a 404, never a 403 that would confirm it exists.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app import queue
from app.errors import InvalidParameter, NotFound
from app.memories import history, repository
from app.memories.history import Event
from app.memories.schemas import MemoryDetail, MemoryHistory, MemoryListQuery, MemoryPage, MemoryPatch
from app.retrieval import filters as caller_filters
from app.retrieval.filters import Filter
from app.runtime import Runtime

SWEEP_BATCH = 500


async def list_memories(runtime: Runtime, query: MemoryListQuery) -> MemoryPage:
    after = _decode(query.cursor) if query.cursor else None
    async with runtime.engine.begin() as conn:
        rows = await repository.page(
            conn,
            user_id=query.user_id,
            group_id=query.group_id,
            memory_type=query.memory_type,
            start_time=query.start_time,
            end_time=query.end_time,
            after=after,
            limit=query.limit + 1,
            caller=_filter_of(query.filters),
        )
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    next_cursor = _encode(rows[-1]["timestamp"], rows[-1]["id"]) if more else None
    return MemoryPage(memories=rows, count=len(rows), next_cursor=next_cursor)


def _filter_of(raw: str | None) -> Filter | None:
    """The listing's ``filters``: the filter language (app.retrieval.filters) as a JSON query parameter."""
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise InvalidParameter("Invalid field filters: a JSON object (the filter language, docs/filters.md)") from exc
    return caller_filters.parse(parsed)


def _encode(timestamp: str, memory_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([timestamp, memory_id]).encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[datetime, UUID]:
    try:
        timestamp, memory_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return datetime.fromisoformat(timestamp), UUID(memory_id)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidParameter("Invalid field cursor: pass the next_cursor of the previous page") from exc


def memory_uuid(memory_id: str) -> UUID:
    """A memory id as the API gives it; anything else names no memory (404, as another tenant's would)."""
    try:
        return UUID(memory_id)
    except (ValueError, TypeError, AttributeError) as exc:
        raise NotFound(f"No memory {memory_id!r}") from exc


async def _existing(conn: AsyncConnection, memory_id: UUID, *, lock: bool = False) -> dict[str, Any]:
    row = await (repository.locked if lock else repository.read)(conn, memory_id)
    if row is not None:
        return row
    if await history.was_purged(conn, memory_id):
        raise NotFound(f"Memory {memory_id} was purged: deleted for good, it cannot be restored")
    raise NotFound(f"No memory {memory_id}")


async def get_memory(runtime: Runtime, memory_id: str) -> MemoryDetail:
    uuid = memory_uuid(memory_id)
    async with runtime.engine.begin() as conn:
        row = await _existing(conn, uuid)
        newer = await repository.read(conn, row["superseded_by"]) if row["superseded_by"] else None
        older = await repository.superseded_by(conn, uuid)
    return MemoryDetail(
        memory=_shown(row),
        sources={"memcell_id": str(row["memcell_id"]), "message_ids": list(row["source_message_ids"])},
        superseded_by=_shown(newer) if newer else None,
        supersedes=older,
    )


async def memory_history(runtime: Runtime, memory_id: str) -> MemoryHistory:
    uuid = memory_uuid(memory_id)
    async with runtime.engine.begin() as conn:
        events = await history.of_memory(conn, uuid)
        if not events:
            await _existing(conn, uuid)  # 404 unless it exists (formed before histories were kept)
    return MemoryHistory(memory_id=str(uuid), events=events)


async def edit_memory(runtime: Runtime, memory_id: str, patch: MemoryPatch, actor: str) -> MemoryDetail:
    """Correct a memory: the fields given change, one ``edited`` event records old and new values. The row is locked
    first, so concurrent edits apply one after another, each recorded against what the one before left."""
    uuid = memory_uuid(memory_id)
    given = patch.model_fields_set
    if not given:
        raise InvalidParameter("Missing fields: give content, valid_from, valid_to, expires_at or status")
    async with runtime.engine.begin() as conn:
        row = await _existing(conn, uuid, lock=True)
        if row["status"] == "deleted":
            raise InvalidParameter(f"Memory {uuid} is deleted: POST .../{uuid}/restore brings it back first")
        values: dict[str, Any] = _revived() if patch.status == "current" and row["status"] != "current" else {}
        values.update(
            {field: getattr(patch, field) for field in ("valid_from", "valid_to", "expires_at") if field in given}
        )
        valid_from = values.get("valid_from", row["valid_from"])
        valid_to = values.get("valid_to", row["valid_to"])
        if valid_from is not None and valid_to is not None and valid_to < valid_from:
            field = "valid_to" if "valid_to" in given else "valid_from"
            raise InvalidParameter(f"Invalid field {field}: valid_to {valid_to} is before valid_from {valid_from}")
        search_text = None
        if patch.content is not None and patch.content != row["content"]:
            values.update(content=patch.content, embedding_model=repository.EDITED_MODEL, embedding_xl=None)
            search_text = "\n".join(part for part in (row["title"], patch.content) if part)
        changed = {key: value for key, value in values.items() if key not in ("embedding_model", "embedding_xl")}
        before = {key: _plain(row.get(key)) for key in changed}
        await repository.change(conn, [uuid], values, search_text=search_text)
        await history.record(
            conn,
            [
                Event(
                    uuid,
                    "edited",
                    actor,
                    user_id=row["user_id"],
                    details={"before": before, "after": {key: _plain(value) for key, value in changed.items()}},
                )
            ],
        )
        if search_text is not None:
            await queue.defer_reembedding(conn, runtime.tenant)
        row = await repository.read(conn, uuid)
    return MemoryDetail(
        memory=_shown(row),
        sources={"memcell_id": str(row["memcell_id"]), "message_ids": list(row["source_message_ids"])},
    )


async def delete_memory(runtime: Runtime, memory_id: str, actor: str) -> dict[str, Any]:
    """A soft delete: hidden from every search and listing at once; ``restore`` brings it back until the purge."""
    uuid = memory_uuid(memory_id)
    async with runtime.engine.begin() as conn:
        row = await _existing(conn, uuid, lock=True)
        if row["status"] != "deleted":
            await _soft_delete(conn, [row], actor)
    purge_at = datetime.now(UTC) + timedelta(days=runtime.settings.deleted_retention_days)
    return {"id": str(uuid), "status": "deleted", "purge_after": purge_at.isoformat()}


async def delete_matching(
    runtime: Runtime,
    *,
    memory_id: UUID | None,
    user_id: str | None,
    group_id: str | None,
    actor: str,
    caller: Filter | None = None,
) -> int:
    """Soft-delete the current memories matching every filter given (the v1 and v2 compatibility deletes); how
    many. ``caller``: a filter of app.retrieval.filters (v2's scopes)."""
    async with runtime.engine.begin() as conn:
        ids = await repository.matching_ids(
            conn, memory_id=memory_id, user_id=user_id, group_id=group_id, caller=caller
        )
        rows = [row for uuid in ids if (row := await repository.locked(conn, uuid)) is not None]
        await _soft_delete(conn, rows, actor)
    return len(rows)


def _group_copies(rows: list[dict[str, Any]]) -> list[UUID]:
    return [row["memcell_id"] for row in rows if row["memory_type"] == "episode" and row["user_id"] is None]


async def _soft_delete(conn: AsyncConnection, rows: list[dict[str, Any]], actor: str) -> None:
    await repository.change(conn, [row["id"] for row in rows], {"status": "deleted", "deleted_at": datetime.now(UTC)})
    await repository.mark_group_copy(conn, _group_copies(rows), present=False)
    await history.record(
        conn,
        [Event(row["id"], "deleted", actor, user_id=row["user_id"], details={"was": row["status"]}) for row in rows],
    )


async def restore_memory(runtime: Runtime, memory_id: str, actor: str) -> MemoryDetail:
    """Bring back a deleted, superseded or expired memory as current (a purged one is gone: 404 saying so)."""
    uuid = memory_uuid(memory_id)
    async with runtime.engine.begin() as conn:
        row = await _existing(conn, uuid, lock=True)
        if row["status"] != "current":
            await repository.change(conn, [uuid], _revived())
            if row["status"] == "deleted":
                await repository.mark_group_copy(conn, _group_copies([row]), present=True)
            details = {"was": row["status"]}
            if row["superseded_by"] is not None:
                details["superseded_by"] = str(row["superseded_by"])
            await history.record(conn, [Event(uuid, "restored", actor, user_id=row["user_id"], details=details)])
        row = await repository.read(conn, uuid)
    return MemoryDetail(
        memory=_shown(row),
        sources={"memcell_id": str(row["memcell_id"]), "message_ids": list(row["source_message_ids"])},
    )


def _revived() -> dict[str, Any]:
    """What makes a memory current again: no longer superseded (its validity open again), deleted or expired."""
    return {
        "status": "current",
        "superseded_by": None,
        "superseded_at": None,
        "valid_to": None,
        "deleted_at": None,
        "expires_at": None,
    }


async def sweep(runtime: Runtime) -> dict[str, int]:
    """The periodic sweep of one tenant: memories past ``expires_at`` marked expired, and deleted ones older than
    ``deleted_retention_days`` purged (their history replaced by a ``purged`` tombstone without their content)."""
    before = datetime.now(UTC) - timedelta(days=runtime.settings.deleted_retention_days)
    async with runtime.engine.begin() as conn:
        expired = await repository.expire_due(conn, SWEEP_BATCH)
        await history.record(
            conn,
            [
                Event(
                    row["id"],
                    "expired",
                    "sweep",
                    user_id=row["user_id"],
                    details={"expires_at": row["expires_at"].isoformat()},
                )
                for row in expired
            ],
        )
        gone = await repository.deleted_before(conn, before, SWEEP_BATCH)
        ids = [row["id"] for row in gone]
        await history.forget_memories(conn, ids)
        purged = await repository.purge(conn, ids)
        await history.record(
            conn,
            [
                Event(
                    row["id"],
                    "purged",
                    "sweep",
                    user_id=row["user_id"],
                    reason=f"deleted more than {runtime.settings.deleted_retention_days:g} days ago",
                )
                for row in gone
            ],
        )
    return {"expired": len(expired), "purged": purged}


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    shown = repository.to_api({key: value for key, value in row.items() if key != "embedding_model"})
    shown["embedded"] = row.get("embedding_model") != repository.EDITED_MODEL
    return shown


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
