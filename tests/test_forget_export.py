"""Forget a user or a group, export a user, list memories: end to end through HTTP, in tenants."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, conversation, message, rows, wait_for
from tests.tenancy_support import bearer, create_key

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

MEMORIES = "/api/v3/agentic/memories"


def _group(client: TestClient, headers: dict, group_id: str = "group_123") -> None:
    assert client.post(META, json={**META_BODY, "group_id": group_id}, headers=headers).status_code == 200
    for body in conversation(group_id):
        assert client.post(MEMORIZE, json=body, headers=headers).status_code == 200
    assert client.post(FLUSH, json={"group_id": group_id}, headers=headers).status_code == 200


def _personal(client: TestClient, headers: dict, sender: str) -> None:
    body = message(100, "I keep my bicycle in the garage", sender=sender, group_id=None)
    assert client.post(MEMORIZE, json=body, headers=headers).status_code == 200
    assert client.post(FLUSH, json={"sender": sender}, headers=headers).status_code == 200


def test_forget_a_user_keeps_the_others_memories_formed_again(client: TestClient, database_url: str):
    mine, other = bearer(create_key(database_url, "acme")), bearer(create_key(database_url, "other"))
    _group(client, mine)
    _personal(client, mine, "user_001")
    _group(client, other)  # the same group and users in another tenant
    before = rows(database_url, "SELECT count(*) AS n FROM memories WHERE tenant_id = 'other'")[0]["n"]

    answer = client.delete("/api/v3/agentic/users/user_001", headers=mine)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["deleted"]["messages"] == 4  # three in the group, one personal
    assert result["deleted"]["memcells"] == 2 and result["deleted"]["memories"] > 0
    # The group's MemCell is queued to be formed again from user_002's two messages; the worker forms a group
    # episode, user_002's copy and two event-log entries.
    assert result["reformed"] == {"memcells": 1, "messages": 2}
    # Recorded, so that an import of an older dump leaves them out (tests/test_import_after_forget.py).
    recorded = rows(database_url, "SELECT tenant_id, user_id, forgotten_at FROM forgotten_users")
    assert [(r["tenant_id"], r["user_id"], r["forgotten_at"].isoformat()) for r in recorded] == [
        ("acme", "user_001", result["forgotten_at"])
    ]
    wait_for(database_url, "SELECT count(*) FROM messages WHERE tenant_id = 'acme' AND status = 'pending'", 0)

    acme = "tenant_id = 'acme'"
    assert rows(database_url, f"SELECT * FROM messages WHERE {acme} AND sender = 'user_001'") == []
    assert rows(database_url, f"SELECT * FROM profiles WHERE {acme} AND user_id = 'user_001'") == []
    left = rows(database_url, f"SELECT memory_type, user_id, content, source_message_ids FROM memories WHERE {acme}")
    assert left and all(m["user_id"] in (None, "user_002") for m in left)
    texts = " ".join(m["content"] for m in left)
    assert "mockups" in texts and "PostgreSQL full-text search" not in texts and "bicycle" not in texts
    assert {i for m in left for i in m["source_message_ids"]} == {"msg_002", "msg_004"}
    assert rows(database_url, f"SELECT status FROM messages WHERE {acme}") == [{"status": "processed"}] * 2
    assert rows(database_url, f"SELECT user_id FROM profiles WHERE {acme}") == [{"user_id": "user_002"}]
    # The other tenant's user_001 is someone else, untouched.
    assert rows(database_url, "SELECT count(*) AS n FROM memories WHERE tenant_id = 'other'")[0]["n"] == before
    assert rows(database_url, "SELECT count(*) AS n FROM messages WHERE tenant_id = 'other' AND sender = 'user_001'")

    export = client.get("/api/v3/agentic/users/user_001/export", headers=mine).json()["result"]
    assert export["messages"] == [] and export["memories"] == [] and export["profiles"] == []
    again = client.delete("/api/v3/agentic/users/user_001", headers=mine).json()["result"]  # idempotent
    assert again["deleted"] == {
        "memcells": 0,
        "memories": 0,
        "profiles": 0,
        "messages": 0,
        "memory_history": 0,
        "participant_details": 0,
        "agent_offloads": 0,
    }
    # Their name and role left the conversation's participants.
    details = rows(database_url, f"SELECT user_details FROM conversation_meta WHERE {acme}")[0]["user_details"]
    assert set(details) == {"user_002"}


def test_forget_a_group(client: TestClient, database_url: str):
    headers = bearer(create_key(database_url, "acme"))
    _group(client, headers, "group_123")
    _group(client, headers, "group_456")
    answer = client.delete("/api/v3/agentic/groups/group_123", headers=headers)
    assert answer.status_code == 200
    deleted = answer.json()["result"]["deleted"]
    assert deleted["messages"] == 5 and deleted["memcells"] == 1 and deleted["conversation_meta"] == 1
    for table in ("messages", "memcells", "memories", "profiles", "conversation_meta"):
        assert rows(database_url, f"SELECT * FROM {table} WHERE group_id = 'group_123'") == [], table
        assert rows(database_url, f"SELECT * FROM {table} WHERE group_id = 'group_456'"), table
    assert client.get(f"{META}?group_id=group_123", headers=headers).status_code == 404


def test_export_holds_messages_memories_and_profiles(client: TestClient, database_url: str):
    headers = bearer(create_key(database_url, "acme"))
    _group(client, headers)
    _group(client, bearer(create_key(database_url, "other")), "group_999")
    answer = client.get("/api/v3/agentic/users/user_002/export", headers=headers)
    assert answer.status_code == 200
    export = answer.json()["result"]
    assert export["format"] == "memsys.user-export" and export["version"] == 1 and export["tenant"] == "acme"
    assert [m["message_id"] for m in export["messages"]] == ["msg_002", "msg_004"]
    assert all(m["sender"] == "user_002" and m["create_time"].startswith("2025-01-15") for m in export["messages"])
    # A message's scopes and the caller's metadata are part of it.
    assert all(m["app_id"] == "default" and m["custom_metadata"] == {} for m in export["messages"])
    assert {"role", "project_id", "agent_id", "session_id"} <= set(export["messages"][0])
    types = {m["memory_type"] for m in export["memories"]}
    assert types == {"episode", "event_log"}
    assert all(m["timestamp"] and m["memcell_id"] for m in export["memories"])
    assert all(m["group_id"] == "group_123" for m in export["memories"])  # nothing of the other tenant
    assert [p["version"] for p in export["profiles"]] == [1] and export["profiles"][0]["group_id"] == "group_123"
    assert "embedding" not in str(export["memories"][0].keys())
    # Not the other participant's own memories of the shared MemCell.
    assert all(m["user_id"] in (None, "user_002") for m in export["memories"])
    assert export["participant_details"] == [
        {"group_id": "group_123", "details": {"full_name": "Li Si", "role": "designer"}}
    ]


def test_list_memories_filters_and_pages(client: TestClient, database_url: str):
    headers = bearer(create_key(database_url, "acme"))
    _group(client, headers)
    _group(client, bearer(create_key(database_url, "other")))
    everything = client.get(f"{MEMORIES}?limit=200", headers=headers).json()["result"]
    assert everything["count"] == 8 and everything["next_cursor"] is None  # 1 + 2 episodes, 5 event logs
    seen, cursor = [], None
    for _ in range(5):
        url = f"{MEMORIES}?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(url, headers=headers).json()["result"]
        seen += [m["id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [m["id"] for m in everything["memories"]] and len(set(seen)) == 8
    stamps = [m["timestamp"] for m in everything["memories"]]
    assert stamps == sorted(stamps, reverse=True)

    logs = client.get(f"{MEMORIES}?memory_type=event_log&user_id=user_002", headers=headers).json()["result"]
    assert logs["count"] == 2 and all(m["memory_type"] == "event_log" for m in logs["memories"])
    window = "start_time=2025-01-15T10:02:00%2B08:00&end_time=2025-01-15T10:04:00%2B08:00"
    timed = client.get(f"{MEMORIES}?memory_type=event_log&{window}", headers=headers).json()["result"]
    assert [m["source_message_ids"] for m in timed["memories"]] == [["msg_003"], ["msg_002"]]

    for query, field in (("cursor=nonsense", "cursor"), ("memory_type=fact", "memory_type"), ("limit=0", "limit"),
                         ("start_time=yesterday", "start_time")):  # fmt: skip
        bad = client.get(f"{MEMORIES}?{query}", headers=headers)
        assert bad.status_code == 400 and field in bad.json()["message"], (query, bad.text)


def test_forget_rebuilds_the_others_profiles_without_the_forgotten_words(client: TestClient, database_url: str):
    """Profile versions build on the previous one: a version after the shared MemCell carries the forgotten
    user's part too, so every MemCell of the stream from the first shared one on is formed again."""
    headers = bearer(create_key(database_url, "acme"))
    talk = [(1, "user_001", "Shall we plan the launch party"), (2, "user_002", "Yes, on the roof terrace")]
    alone = [(3, "user_002", "I booked the terrace for Friday"), (4, "user_002", "And ordered the cake")]
    for part in (talk, alone):
        for i, sender, text in part:
            assert client.post(MEMORIZE, json=message(i, text, sender=sender), headers=headers).status_code == 200
        assert client.post(FLUSH, json={"group_id": "group_123"}, headers=headers).status_code == 200
    result = client.delete("/api/v3/agentic/users/user_001", headers=headers).json()["result"]
    assert result["deleted"]["memcells"] == 2 and result["reformed"]["memcells"] == 2
    wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0)
    texts = " ".join(r["content"] for r in rows(database_url, "SELECT content FROM memories"))
    assert "launch party" not in texts and "roof terrace" in texts and "cake" in texts
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 2
    # The profile is what user_002's three messages alone give: formed from scratch, the same.
    fresh = bearer(create_key(database_url, "fresh"))
    for part in ([talk[1]], alone):
        for i, sender, text in part:
            assert client.post(MEMORIZE, json=message(i, text, sender=sender), headers=fresh).status_code == 200
        assert client.post(FLUSH, json={"group_id": "group_123"}, headers=fresh).status_code == 200
    alone_only = rows(
        database_url,
        "SELECT profile FROM profiles WHERE tenant_id = 'fresh' AND user_id = 'user_002' ORDER BY version DESC LIMIT 1",
    )[0]["profile"]
    rebuilt = rows(
        database_url,
        "SELECT profile FROM profiles WHERE tenant_id = 'acme' AND user_id = 'user_002' ORDER BY version DESC LIMIT 1",
    )[0]["profile"]
    assert rebuilt == alone_only
