"""A user's export: everything held about them as one JSON document (format ``memsys.user-export`` v1).

Messages they sent, memories about them and the group-level memories formed from their messages (types,
times, provenance), every version of their profiles, and their entry in conversations' ``user_details``.
Embeddings are left out: they are derived, large, and model-specific.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.runtime import Runtime
from app.transfer import repository

EXPORT_FORMAT = "memsys.user-export"
EXPORT_VERSION = 1


async def export_user(runtime: Runtime, user_id: str) -> dict[str, Any]:
    async with runtime.engine.begin() as conn:
        messages = await repository.messages_of(conn, user_id)
        memories = await repository.memories_of(conn, user_id)
        profiles = await repository.profiles_of(conn, user_id)
        details = await repository.participant_details_of(conn, user_id)
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "tenant": runtime.tenant,
        "user_id": user_id,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "messages": [_times(m, "create_time", "received_at") for m in messages],
        "memories": memories,
        "profiles": [_times(p, "created_at") for p in profiles],
        "participant_details": details,
    }


def _times(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {**row, **{key: row[key].isoformat() for key in keys}}
