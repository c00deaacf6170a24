"""What the formation tests share: message builders, an app with its own settings, database reads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from litestar.testing import TestClient
from psycopg.rows import dict_row

from app.settings import Settings

MEMORIZE = "/api/v3/agentic/memorize"
FLUSH = "/api/v3/agentic/flush"
META = "/api/v3/agentic/conversation-meta"

START = datetime.fromisoformat("2025-01-15T10:00:00+08:00")

META_BODY = {
    "version": "1.0",
    "scene": "group_chat",
    "scene_desc": "Project team discussion",
    "name": "Project Discussion Group",
    "description": "Technical discussion for new feature development",
    "group_id": "group_123",
    "created_at": "2025-01-15T10:00:00+08:00",
    "default_timezone": "Asia/Shanghai",
    "user_details": {
        "user_001": {"full_name": "Zhang San", "role": "developer"},
        "user_002": {"full_name": "Li Si", "role": "designer"},
    },
    "tags": ["work"],
}

CONVERSATION = [
    ("user_001", "Zhang San", "Let's discuss the technical approach for the new feature today"),
    ("user_002", "Li Si", "I think the search page needs a new design first"),
    ("user_001", "Zhang San", "Agreed. The backend will use PostgreSQL full-text search"),
    ("user_002", "Li Si", "I will share the search page mockups tomorrow"),
    ("user_001", "Zhang San", "Great, then the release is planned for next Friday"),
]


def message(
    i: int,
    content: str,
    *,
    sender: str = "user_001",
    sender_name: str | None = None,
    group_id: str | None = "group_123",
    at: datetime | None = None,
) -> dict[str, Any]:
    body = {
        "message_id": f"msg_{i:03d}",
        "create_time": (at or START + timedelta(minutes=i)).isoformat(),
        "sender": sender,
        "content": content,
    }
    if sender_name:
        body["sender_name"] = sender_name
    if group_id:
        body.update(group_id=group_id, group_name="Project Discussion Group")
    return body


def conversation(group_id: str = "group_123", n: int | None = None) -> list[dict[str, Any]]:
    lines = CONVERSATION if n is None else [CONVERSATION[i % len(CONVERSATION)] for i in range(n)]
    return [
        message(i + 1, content, sender=sender, sender_name=name, group_id=group_id)
        for i, (sender, name, content) in enumerate(lines)
    ]


@contextmanager
def app_client(settings: Settings, **overrides: Any) -> Iterator[TestClient]:
    """The app with settings of its own (the session's ``client`` runs the defaults, offline)."""
    from app.http.app import create_app

    with TestClient(create_app(settings.model_copy(update=overrides)), raise_server_exceptions=False) as client:
        yield client


def rows(database_url: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        return conn.execute(sql, params or None).fetchall()


def wait_for(database_url: str, sql: str, expected: Any, *params: Any, timeout: float = 20.0) -> None:
    """Wait until ``sql``'s first column of its first row equals ``expected`` (the worker forms in the
    background); fail with the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        found = rows(database_url, sql, *params)
        value = next(iter(found[0].values())) if found else None
        if value == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{sql!r} gave {value!r}, not {expected!r}, after {timeout:g}s")
        time.sleep(0.05)


def assert_each_message_in_one_memcell(database_url: str, expected_ids: set[str]) -> None:
    """Every message processed exactly once: in one MemCell, and MemCells never overlap."""
    cells = rows(database_url, "SELECT id, message_ids FROM memcells")
    seen: list[str] = [mid for cell in cells for mid in cell["message_ids"]]
    assert len(seen) == len(set(seen)), "a message is in two MemCells"
    assert set(seen) == expected_ids
    pending = rows(database_url, "SELECT message_id FROM messages WHERE status = 'pending'")
    assert pending == []
    linked = rows(
        database_url,
        "SELECT m.message_id FROM messages m JOIN memcells c ON c.tenant_id = m.tenant_id AND c.id = m.memcell_id "
        "WHERE m.message_id = ANY(c.message_ids)",
    )
    assert {r["message_id"] for r in linked} == expected_ids
