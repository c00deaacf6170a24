"""Offline event-log entries are found through the turns around them, and return only their own message."""

from __future__ import annotations

import psycopg
from litestar.testing import TestClient

FLUSH = "/api/v3/agentic/flush"
MEMORIZE = "/api/v3/agentic/memorize"
RETRIEVE = "/api/v3/agentic/retrieve_lightweight"

TURNS = [
    ("alice", "Did you finish the marathon in Lisbon?"),
    ("bob", "Yes! Crossed the line in four hours."),
    ("alice", "Amazing, congratulations."),
    ("bob", "Thanks. Are you free for coffee on Friday?"),
    ("alice", "Sure, the usual place at ten."),
]


def test_a_reply_is_found_by_what_it_answers(client: TestClient, database_url: str) -> None:
    for i, (sender, text) in enumerate(TURNS):
        body = {
            "group_id": "runners",
            "message_id": f"t{i}",
            "create_time": f"2024-04-07T10:0{i}:00Z",
            "sender": sender,
            "content": text,
        }
        assert client.post(MEMORIZE, json=body).status_code == 200
    assert client.post(FLUSH, json={"group_id": "runners"}).json()["result"]["status_info"] == "extracted"

    with psycopg.connect(database_url) as conn:
        rows = dict(
            conn.execute(
                "SELECT source_message_ids[1], search_tokens FROM memories WHERE memory_type = 'event_log'"
            ).fetchall()
        )
    assert "lisbon" in rows["t1"].split()  # the question before it
    assert "congratul" in rows["t1"].split()  # the reply after it
    assert rows["t1"].split().count("line") == 2  # its own words count twice
    assert "lisbon" in rows["t2"].split() and "lisbon" not in rows["t3"].split()  # two turns either side

    result = client.post(
        RETRIEVE,
        json={
            "query": "Lisbon marathon",
            "group_id": "runners",
            "data_source": "event_log",
            "retrieval_mode": "bm25",
            "current_time": "2024-04-08",
        },
    ).json()["result"]
    found = {m["source_message_ids"][0]: m["content"] for m in result["memories"]}
    assert found["t1"] == "bob: Yes! Crossed the line in four hours."  # the message alone, not its context
    assert set(found) == {"t0", "t1", "t2"}  # the answer through its question; not the turns 3+ away
