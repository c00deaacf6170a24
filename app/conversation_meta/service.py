"""Conversation metadata: save (upsert by group_id) and read back."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncConnection

from app.conversation_meta import repository
from app.conversation_meta.schemas import ConversationMeta, ConversationMetaRequest, ConversationMetaSaved
from app.errors import NotFound


async def save(conn: AsyncConnection, request: ConversationMetaRequest) -> ConversationMetaSaved:
    record = request.model_dump(mode="python")
    record["user_details"] = {
        user_id: detail.model_dump(exclude_none=True) for user_id, detail in request.user_details.items()
    }
    row = await repository.upsert(conn, record)
    return ConversationMetaSaved(**_rendered(row, ConversationMetaSaved.model_fields))


DEFAULTS: dict[str, Any] = {
    "version": "1.0",
    "scene": "group_chat",
    "scene_desc": "",
    "description": "",
    "default_timezone": "UTC",
    "user_details": {},
    "tags": [],
}
"""What a record made by a partial save (the EverMemOS routes) has where the caller said nothing."""


async def save_partial(conn: AsyncConnection, group_id: str, changes: dict[str, Any]) -> ConversationMeta:
    """Create or update ``group_id``'s record with only the fields given; a new record takes ``DEFAULTS``,
    its group id as name and now as ``created_at``. The fields are checked as a full save checks them."""
    current = await repository.get(conn, group_id)
    if current is None:
        record: dict[str, Any] = {**DEFAULTS, "name": group_id, "created_at": datetime.now(UTC)}
    else:
        record = {key: current[key] for key in ConversationMetaRequest.model_fields if key in current}
    record.update({key: value for key, value in changes.items() if value is not None}, group_id=group_id)
    await save(conn, ConversationMetaRequest(**record))
    return await get(conn, group_id)


async def get(conn: AsyncConnection, group_id: str) -> ConversationMeta:
    row = await repository.get(conn, group_id)
    if row is None:
        raise NotFound(f"No conversation metadata for group_id {group_id!r}")
    return ConversationMeta(**_rendered(row, ConversationMeta.model_fields))


async def zone_of(conn: AsyncConnection, group_id: str | None) -> tzinfo:
    """The conversation's ``default_timezone`` (UTC without conversation-meta, or for a personal stream)."""
    row = await repository.get(conn, group_id) if group_id else None
    return ZoneInfo(row["default_timezone"]) if row else UTC


async def get_optional(conn: AsyncConnection, group_id: str) -> dict[str, Any] | None:
    """The raw record for memory formation (scene, participant names and roles), or None."""
    return await repository.get(conn, group_id)


def _rendered(row: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """Times are shown in the conversation's own time zone, as the seed's example shows them."""
    zone = ZoneInfo(row["default_timezone"])
    out = {key: row[key] for key in fields}
    out["id"] = str(row["id"])
    for key in ("created_at", "updated_at"):
        value: datetime = row[key]
        out[key] = value.astimezone(zone).isoformat(timespec="seconds")
    return out
