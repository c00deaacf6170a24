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
