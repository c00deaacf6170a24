"""Memory formation without an LLM, end to end: memorize message by message, boundaries, flush, rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from litestar.testing import TestClient

from app.settings import Settings
from tests.formation_helpers import (
    FLUSH,
    MEMORIZE,
    META,
    META_BODY,
    START,
    app_client,
    conversation,
    message,
    rows,
    wait_for,
)

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus


def test_conversation_then_flush_leaves_episodes_event_logs_and_profiles(client: TestClient, database_url: str):
    assert client.post(META, json=META_BODY).status_code == 200
    sent = conversation()
    for body in sent:
        answer = client.post(MEMORIZE, json=body).json()
        assert answer == {
            "status": "ok",
            "message": "Message queued, awaiting boundary detection",
            "result": {
                "saved_memories": [],
                "count": 0,
                "status_info": "accumulated",
                "warning": None,
                "formation": "Searchable within seconds as a message not yet formed; formed into memories at a "
                "topic boundary, on POST /api/v3/agentic/flush, or after 600s without new messages in its "
                "conversation",
                "idle_close_seconds": 600.0,
            },
        }

    flushed = client.post(FLUSH, json={"group_id": "group_123"})
    assert flushed.status_code == 200
    body = flushed.json()
    # 1 group episode + 2 personal episodes + 5 event-log entries
    assert body["message"] == "Extracted 8 memories"
    result = body["result"]
    assert result["status_info"] == "extracted" and result["count"] == 8 and result["warning"] is None
    saved = result["saved_memories"]
    for memory in saved:
        assert {"id", "memory_type", "user_id", "group_id", "timestamp", "content"} <= memory.keys()
        assert memory["group_id"] == "group_123"

    cells = rows(database_url, "SELECT * FROM memcells")
    assert len(cells) == 1
    cell = cells[0]
    ids = [b["message_id"] for b in sent]
    assert cell["message_ids"] == ids
    assert cell["participants"] == ["user_001", "user_002"]
    assert (cell["boundary_reason"], cell["extraction_mode"], cell["group_id"]) == ("flush", "offline", "group_123")
    assert {str(m["memcell_id"]) for m in saved} == {str(cell["id"])}

    buffered = rows(database_url, "SELECT status, memcell_id FROM messages")
    assert {(r["status"], r["memcell_id"]) for r in buffered} == {("processed", cell["id"])}

    episodes = rows(
        database_url,
        "SELECT user_id, title, summary, content, source_message_ids, memcell_id, embedding::text AS vec, "
        "timestamp FROM memories WHERE memory_type = 'episode' ORDER BY user_id NULLS FIRST",
    )
    assert [e["user_id"] for e in episodes] == [None, "user_001", "user_002"]
    assert len({(e["title"], e["summary"], e["content"], e["vec"]) for e in episodes}) == 1
    episode = episodes[0]
    assert episode["source_message_ids"] == ids and episode["memcell_id"] == cell["id"]
    assert episode["timestamp"] == START + timedelta(minutes=1)
    # Readable transcript in the conversation's time zone, with the names from conversation-meta.
    assert episode["content"].splitlines()[0] == (
        "[2025-01-15 10:01] Zhang San: Let's discuss the technical approach for the new feature today"
    )
    assert episode["title"].startswith("Project Discussion Group on 15 Jan 2025: search")
    assert "5 messages between Zhang San (developer) and Li Si (designer)" in episode["summary"]

    events = rows(
        database_url,
        "SELECT user_id, content, source_message_ids, timestamp FROM memories "
        "WHERE memory_type = 'event_log' ORDER BY timestamp",
    )
    assert [e["source_message_ids"] for e in events] == [[i] for i in ids]
    assert [e["user_id"] for e in events] == [b["sender"] for b in sent]
    assert events[1]["content"] == "Li Si: I think the search page needs a new design first"
    assert rows(database_url, "SELECT count(*) AS n FROM memories WHERE memory_type = 'semantic_memory'")[0]["n"] == 0

    profiles = rows(database_url, "SELECT * FROM profiles ORDER BY user_id")
    assert [(p["user_id"], p["group_id"], p["version"], p["source"]) for p in profiles] == [
        ("user_001", "group_123", 1, "derived"),
        ("user_002", "group_123", 1, "derived"),
    ]
    zhang = profiles[0]["profile"]
    assert (zhang["name"], zhang["role"], zhang["message_count"], zhang["derived"]) == (
        "Zhang San",
        "developer",
        3,
        True,
    )
    assert (
        "search"
        in rows(database_url, "SELECT profile FROM profiles WHERE user_id='user_002'")[0]["profile"][
            "frequent_keywords"
        ]
    )
    assert zhang["first_seen"] < zhang["last_seen"]

    # Nothing pending: a second flush has nothing to extract.
    again = client.post(FLUSH, json={"group_id": "group_123"}).json()
    assert again["result"]["status_info"] == "extracted" and again["result"]["count"] == 0
    assert again["message"].startswith("Nothing to flush: group 'group_123' has no message waiting")

    # A second MemCell gives new profile versions merged with the first.
    later = START + timedelta(hours=1)
    client.post(MEMORIZE, json=message(50, "The search mockups are ready", sender="user_002", at=later))
    client.post(FLUSH, json={"group_id": "group_123"})
    latest = rows(database_url, "SELECT version, profile FROM profiles WHERE user_id='user_002' ORDER BY version")
    assert [p["version"] for p in latest] == [1, 2]
    assert latest[1]["profile"]["message_count"] == 3
    assert latest[1]["profile"]["first_seen"] == latest[0]["profile"]["first_seen"]


def test_time_gap_closes_the_open_memcell_before_the_new_message(client: TestClient, database_url: str):
    client.post(MEMORIZE, json=message(1, "Morning, who reviews the migration?"))
    client.post(MEMORIZE, json=message(2, "I will", sender="user_002"))
    late = START + timedelta(hours=4, minutes=30)
    answer = client.post(MEMORIZE, json=message(3, "Evening: the release went fine", at=late)).json()
    assert answer["message"] == "Message queued, awaiting boundary detection"
    assert answer["result"]["status_info"] == "accumulated"
    # The worker forms the first MemCell without a flush: group + 2 personal episodes, 2 event logs.
    wait_for(database_url, "SELECT count(*) FROM memories", 5)
    assert {m["memory_type"] for m in rows(database_url, "SELECT memory_type FROM memories")} == {
        "episode",
        "event_log",
    }
    cell = rows(database_url, "SELECT message_ids, boundary_reason FROM memcells")
    assert cell == [{"message_ids": ["msg_001", "msg_002"], "boundary_reason": "time_gap"}]
    assert rows(database_url, "SELECT message_id FROM messages WHERE status = 'pending'") == [{"message_id": "msg_003"}]


def test_max_messages_and_max_tokens(settings: Settings, database_url: str):
    with app_client(settings, boundary_max_messages=3) as client:
        answers = [client.post(MEMORIZE, json=body).json()["result"] for body in conversation(n=7)]
        assert [a["status_info"] for a in answers] == ["accumulated"] * 7
        wait_for(database_url, "SELECT count(*) FROM memcells", 2)
        cells = rows(database_url, "SELECT message_ids, boundary_reason FROM memcells ORDER BY start_time")
        assert [(c["message_ids"], c["boundary_reason"]) for c in cells] == [
            (["msg_001", "msg_002", "msg_003"], "max_messages"),
            (["msg_004", "msg_005", "msg_006"], "max_messages"),
        ]
        assert client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["status_info"] == "extracted"
        assert rows(database_url, "SELECT count(*) AS n FROM messages WHERE status = 'pending'")[0]["n"] == 0

    with app_client(settings, boundary_max_tokens=20) as client:
        for i in range(1, 4):  # 9 tokens each ("user_001: token budget filler text"): the third would pass 20
            client.post(MEMORIZE, json=message(100 + i, "token budget filler text", group_id="g_tokens"))
        wait_for(database_url, "SELECT count(*) FROM memcells WHERE group_id = 'g_tokens'", 1)
        cells = rows(database_url, "SELECT message_ids, boundary_reason FROM memcells WHERE group_id = 'g_tokens'")
        assert cells == [{"message_ids": ["msg_101", "msg_102"], "boundary_reason": "max_tokens"}]


def test_personal_stream(client: TestClient, database_url: str):
    for i in range(1, 4):
        body = message(i, f"Note {i}: buy oat milk and call the dentist", sender="alice", group_id=None)
        assert client.post(MEMORIZE, json=body).json()["result"]["status_info"] == "accumulated"
    answer = client.post(FLUSH, json={"sender": "alice"}).json()
    assert answer["result"]["count"] == 4  # alice's episode + 3 event logs; no group episode
    memories = rows(database_url, "SELECT memory_type, user_id, group_id FROM memories ORDER BY memory_type")
    assert [(m["memory_type"], m["user_id"], m["group_id"]) for m in memories] == [("episode", "alice", None)] + [
        ("event_log", "alice", None)
    ] * 3
    cell = rows(database_url, "SELECT stream_kind, stream_id, group_id FROM memcells")
    assert cell == [{"stream_kind": "personal", "stream_id": "alice", "group_id": None}]
    assert rows(database_url, "SELECT user_id, group_id, version FROM profiles") == [
        {"user_id": "alice", "group_id": None, "version": 1}
    ]
    # A flush of another stream does not touch alice's.
    assert client.post(FLUSH, json={"sender": "bob"}).json()["result"]["count"] == 0


def test_chinese_conversation_gives_chinese_title_and_summary(client: TestClient, database_url: str):
    client.post(MEMORIZE, json=message(1, "我们今天讨论一下新功能的技术方案", sender="u1", sender_name="张三"))
    client.post(MEMORIZE, json=message(2, "我觉得搜索页面需要重新设计", sender="u2", sender_name="李四"))
    saved = client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["saved_memories"]
    episode = next(m for m in saved if m["memory_type"] == "episode")
    assert episode["title"].startswith("Project Discussion Group 2025年1月15日：")
    assert "张三、李四共发了2条消息" in episode["summary"]
    assert episode["content"].splitlines()[1] == "[2025-01-15 02:02] 李四: 我觉得搜索页面需要重新设计"


def test_an_idle_stream_is_formed_without_a_flush(settings: Settings, database_url: str):
    """A conversation that simply stops: after ``boundary_idle_seconds`` with no new message the worker's
    periodic idle close (every 10 s) forms it, nobody calls flush."""
    with app_client(settings, boundary_idle_seconds=1) as client:
        for body in conversation()[:3]:
            assert client.post(MEMORIZE, json=body).json()["result"]["status_info"] == "accumulated"
        assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 0
        wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0, timeout=30)
    assert rows(database_url, "SELECT message_ids, boundary_reason FROM memcells") == [
        {"message_ids": ["msg_001", "msg_002", "msg_003"], "boundary_reason": "flush"}
    ]


def test_two_apps_in_one_process_each_form_with_their_own_workers(settings: Settings, database_url: str):
    """Each running memsys has a queue app and a connection pool of its own: a second one opened in the same
    process (as tests do) neither takes the first's workers onto its pool nor loses its own when the first stops."""
    first = app_client(settings)
    first_client = first.__enter__()
    try:
        with app_client(settings) as second:
            for app, group in ((first_client, "group_first"), (second, "group_second")):
                for body in conversation(group_id=group)[:3]:
                    assert app.post(MEMORIZE, json=body).status_code == 200
                flushed = app.post(FLUSH, json={"group_id": group}).json()["result"]
                assert flushed["status_info"] == "extracted" and flushed["warning"] is None, flushed
            first.__exit__(None, None, None)
            first = None
            for body in conversation(group_id="group_after")[:3]:
                assert second.post(MEMORIZE, json=body).status_code == 200
            flushed = second.post(FLUSH, json={"group_id": "group_after"}).json()["result"]
            assert flushed["warning"] is None, flushed
    finally:
        if first is not None:
            first.__exit__(None, None, None)
    formed = rows(database_url, "SELECT group_id, count(*) AS n FROM memcells GROUP BY group_id ORDER BY group_id")
    assert formed == [{"group_id": g, "n": 1} for g in ("group_after", "group_first", "group_second")]
