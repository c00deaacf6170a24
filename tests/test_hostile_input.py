"""Hostile input through HTTP: each case is a request and the exact answer it must get (never a 500).

The list is the record: every case names the status and, for a 400, the field the message must name.
Bodies are sent as bytes, JSON-encoded with ASCII escapes, so a lone surrogate travels as ``\\ud800``.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from litestar.testing import TestClient

from app.http.json_body import MAX_JSON_DEPTH
from app.validation import MAX_IDENTIFIER_CHARS

MEMORIZE = "/api/v3/agentic/memorize"
FLUSH = "/api/v3/agentic/flush"
LIGHT = "/api/v3/agentic/retrieve_lightweight"
AGENTIC = "/api/v3/agentic/retrieve_agentic"
META = "/api/v3/agentic/conversation-meta"

MESSAGE = {
    "group_id": "g1",
    "message_id": "m1",
    "create_time": "2025-01-15T10:00:00+08:00",
    "sender": "u1",
    "content": "hello",
}
QUERY = {"query": "what did we decide", "group_id": "g1"}
AGENTIC_QUERY = {**QUERY, "llm_config": {"api_key": "k", "base_url": "https://llm.example.com/v1", "model": "m"}}
META_BODY = {
    "version": "1.0",
    "scene": "group_chat",
    "scene_desc": "team",
    "name": "Team",
    "description": "d",
    "group_id": "g1",
    "created_at": "2025-01-15T10:00:00+08:00",
    "default_timezone": "Asia/Shanghai",
    "user_details": {"u1": {"full_name": "Ann", "role": "dev", "extra": {"team": {"note": "ok"}}}},
    "tags": ["work"],
}
NUL, SURROGATE = "\u0000", "\ud800"


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: dict | list | bytes
    status: int
    field: str | None = None
    """For a 400: the field the message must name (``Invalid field <field>`` or ``... field: <field>``)."""
    says: str | None = None
    """For a 400 without a field: words the message must contain."""
    method: str = "POST"


def with_(base: dict, **changes) -> dict:
    return {**base, **changes}


def nested(levels: int) -> dict:
    """An object nested ``levels`` deep: {"a": {"a": ... {}}}."""
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


CASES = [
    Case("NUL in content", MEMORIZE, with_(MESSAGE, content=f"a{NUL}b"), 400, "content"),
    Case("NUL in sender", MEMORIZE, with_(MESSAGE, sender=f"u{NUL}"), 400, "sender"),
    Case("lone surrogate in message_id", MEMORIZE, with_(MESSAGE, message_id=f"m{SURROGATE}"), 400, "message_id"),
    Case("NUL in a refer_list item", MEMORIZE, with_(MESSAGE, refer_list=["ok", NUL]), 400, "refer_list.1"),
    Case("lone surrogate in query", LIGHT, with_(QUERY, query=f"q{SURROGATE}"), 400, "query"),
    Case("lone surrogate in agentic query", AGENTIC, with_(AGENTIC_QUERY, query=SURROGATE), 400, "query"),
    Case(
        "NUL deep in user_details.extra",
        META,
        with_(META_BODY, user_details={"u1": {"full_name": "Ann", "role": "dev", "extra": {"team": {"note": NUL}}}}),
        400,
        "user_details.u1.extra.team.note",
    ),
    Case("lone surrogate in a tag", META, with_(META_BODY, tags=[SURROGATE]), 400, "tags.0"),
    Case(
        "NUL in llm_config.model",
        AGENTIC,
        with_(AGENTIC_QUERY, llm_config={**AGENTIC_QUERY["llm_config"], "model": NUL}),
        400,
        "llm_config.model",
    ),
    Case("NUL in group_id as a query parameter", f"{META}?group_id=g%00", {}, 400, "group_id", method="GET"),
    Case("current_time 9999-12-31", LIGHT, with_(QUERY, current_time="9999-12-31"), 200),
    Case("current_time 0001-01-01", LIGHT, with_(QUERY, current_time="0001-01-01"), 200),
    Case(
        "current_time 9999-12-31, time_aware 'this week'",
        LIGHT,
        with_(QUERY, query="what happened this week", current_time="9999-12-31", time_aware=True),
        200,
    ),
    Case(
        "current_time 0001-01-01, time_aware 'two years ago'",
        LIGHT,
        with_(QUERY, query="what happened two years ago", current_time="0001-01-01", time_aware=True),
        200,
    ),
    Case(
        "current_time 0001-01-01, time_aware '三天前', time_range_days 100000",
        LIGHT,
        with_(QUERY, query="三天前说了什么", current_time="0001-01-01", time_aware=True, time_range_days=100000),
        200,
    ),
    Case("current_time 10000-01-01", LIGHT, with_(QUERY, current_time="10000-01-01"), 400, "current_time"),
    Case(
        "create_time 9999-12-31T23:59:59+23:59", MEMORIZE, with_(MESSAGE, create_time="9999-12-31T23:59:59+23:59"), 200
    ),
    Case(
        "create_time 0001-01-01T00:00:00-23:59", MEMORIZE, with_(MESSAGE, create_time="0001-01-01T00:00:00-23:59"), 200
    ),
    Case(
        "create_time 9999-12-31T23:59:59-23:59 (after 9999 in UTC)",
        MEMORIZE,
        with_(MESSAGE, create_time="9999-12-31T23:59:59-23:59"),
        400,
        "create_time",
    ),
    Case(
        "create_time 0001-01-01T00:00:00+23:59 (before year 1 in UTC)",
        MEMORIZE,
        with_(MESSAGE, create_time="0001-01-01T00:00:00+23:59"),
        400,
        "create_time",
    ),
    Case(
        "conversation-meta created_at 9999-12-31T23:59:59-05:00 (after 9999 in UTC)",
        META,
        with_(META_BODY, created_at="9999-12-31T23:59:59-05:00"),
        400,
        "created_at",
    ),
    Case("time_range_days 100000 (all time)", LIGHT, with_(QUERY, time_range_days=100000), 200),
    Case("time_range_days 10**30 (all time)", LIGHT, with_(QUERY, time_range_days=10**30), 200),
    Case(
        "time_range_days 100000 with current_time 0001-01-01",
        LIGHT,
        with_(QUERY, time_range_days=100000, current_time="0001-01-01"),
        200,
    ),
    Case("time_range_days 0", LIGHT, with_(QUERY, time_range_days=0), 400, "time_range_days"),
    Case("300,000-character query", LIGHT, with_(QUERY, query="x" * 300_000), 400, "query"),
    Case("300,000-character agentic query", AGENTIC, with_(AGENTIC_QUERY, query="x" * 300_000), 400, "query"),
    Case("10,000-character user_id", LIGHT, with_(QUERY, user_id="u" * 10_000), 400, "user_id"),
    Case(
        "257-character message_id",
        MEMORIZE,
        with_(MESSAGE, message_id="m" * (MAX_IDENTIFIER_CHARS + 1)),
        400,
        "message_id",
    ),
    Case(
        "256-character default_timezone (a file name too long for zoneinfo; found by schemathesis)",
        META,
        with_(META_BODY, default_timezone="0" * 256),
        400,
        "default_timezone",
    ),
    Case("10,000-character group_id in flush", FLUSH, {"group_id": "g" * 10_000}, 400, "group_id"),
    Case(
        "10,000-character user_details key",
        META,
        with_(META_BODY, user_details={"u" * 10_000: {"full_name": "Ann", "role": "dev"}}),
        400,
        "user_details",
        says="a key is invalid",
    ),
    Case("10,000-deep nested JSON", MEMORIZE, b"[" * 10_000 + b"]" * 10_000, 400, says="nested"),
    Case(
        "40 brackets, then a string that never closes (the depth scan was quadratic: 80 KB took 25 s)",
        MEMORIZE,
        b"[" * 40 + b'"' + b'\\"' * 200_000,
        400,
        says="nested",
    ),
    Case(
        "32-deep nested JSON (the limit)",
        META,
        with_(META_BODY, user_details={"u1": {"full_name": "Ann", "role": "dev", "extra": nested(MAX_JSON_DEPTH - 3)}}),
        200,
    ),
    Case(
        "33-deep nested JSON in a valid field",
        META,
        with_(META_BODY, user_details={"u1": {"full_name": "Ann", "role": "dev", "extra": nested(MAX_JSON_DEPTH - 2)}}),
        400,
        says="nested",
    ),
    Case(
        "base_url \\u0016",
        AGENTIC,
        with_(AGENTIC_QUERY, llm_config={"api_key": "k", "base_url": "\u0016"}),
        400,
        "llm_config.base_url",
    ),
    Case(
        "base_url not http",
        AGENTIC,
        with_(AGENTIC_QUERY, llm_config={"api_key": "k", "base_url": "file:///etc/passwd"}),
        400,
        "llm_config.base_url",
    ),
    Case(
        "base_url without api_key",
        AGENTIC,
        with_(AGENTIC_QUERY, llm_config={"base_url": "https://llm.example.com/v1"}),
        400,
        "llm_config.api_key",
    ),
    Case(
        "header injection in llm_config.api_key",
        AGENTIC,
        with_(AGENTIC_QUERY, llm_config={**AGENTIC_QUERY["llm_config"], "api_key": "k\r\nX-Injected: 1"}),
        400,
        "llm_config.api_key",
    ),
    Case("non-object body", MEMORIZE, [1, 2], 400, says="JSON object"),
    Case("a string body with NUL", MEMORIZE, NUL, 400, "body"),
    Case("invalid UTF-8 body", MEMORIZE, b'{"content": "\xff"}', 400, says="Malformed JSON"),
    Case(
        "CESU-8 surrogate bytes in sender",
        MEMORIZE,
        json.dumps(MESSAGE).replace('"u1"', '"u\\ud800"').encode().replace(b"\\ud800", b"\xed\xa0\x80"),
        400,
        "sender",
    ),
]


def send(client: TestClient, case: Case):
    if case.method == "GET":
        return client.get(case.path)
    body = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    return client.post(case.path, content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input_gets_the_expected_answer(client: TestClient, case: Case) -> None:
    response = send(client, case)
    assert response.status_code == case.status, response.text
    body = response.json()
    if case.status == 200:
        assert body["status"] == "ok"
        return
    assert body["status"] == "failed" and body["code"] == "INVALID_PARAMETER", body
    message = body["message"]
    if case.field:
        assert f"field {case.field}:" in message or f"field: {case.field}" in message, message
    if case.says:
        assert case.says in message, message


def test_extreme_create_times_go_through_formation_and_retrieval(client: TestClient) -> None:
    """Messages at both ends of the calendar, in a conversation 14 hours ahead of UTC, form memories."""
    meta = with_(META_BODY, group_id="edge", default_timezone="Pacific/Kiritimati")
    assert client.post(META, json=meta).status_code == 200
    for number, moment in enumerate(("0001-01-01T00:00:00-23:59", "9999-12-31T23:59:59+23:59")):
        message = with_(MESSAGE, group_id="edge", message_id=f"e{number}", create_time=moment, content=f"edge {moment}")
        assert client.post(MEMORIZE, json=message).status_code == 200
    flushed = client.post(FLUSH, json={"group_id": "edge"})
    assert flushed.status_code == 200 and flushed.json()["result"]["count"] > 0, flushed.text
    found = client.post(
        LIGHT, json={"query": "edge", "group_id": "edge", "data_source": "event_log", "time_range_days": 100000}
    )
    # No lower bound, and the range ends now: the year-1 message is found, the year-9999 one is ahead.
    assert found.status_code == 200 and found.json()["result"]["count"] == 1, found.text
    both = client.post(
        LIGHT,
        json={
            "query": "edge",
            "group_id": "edge",
            "data_source": "event_log",
            "time_range_days": 100000,
            "current_time": "9999-12-31",
        },
    )
    assert both.status_code == 200 and both.json()["result"]["count"] == 2, both.text
    assert datetime.fromisoformat(both.json()["result"]["memories"][0]["timestamp"]).astimezone(UTC).year in (1, 9999)


HOSTILE_QUERIES = [
    "一二三四五六七八九十" * 800,
    "十" * 8000,
    "三天前" * 2666,
    "年" + "1" * 7999,
]


def test_health_answers_while_hostile_queries_run(server_process_factory, database_url: str) -> None:
    """Hostile queries (time expressions, tokenisation of 8,000 CJK characters) must not hold the server: through
    a real socket, /health keeps answering while 8 such queries keep running.

    Each such query costs ~15 ms of parsing once jieba is loaded (it runs in app/text/cpu.py's thread), so what this
    catches is a query whose parsing stalls (a backtracking pattern, an unbounded loop), not 15 ms on the loop.
    The bound is on the median, not on single answers: on a loaded 2-core CI machine a few /health answers take
    0.5 s whatever the server does (seen: 0.52 and 0.56 s with a median of 0.07 s)."""
    server = server_process_factory(
        {"MEMSYS_DATABASE_URL": database_url, "MEMSYS_MIGRATE_ON_START": "false", "MEMSYS_LOG_LEVEL": "WARNING"}
    )
    server.start()
    stop = threading.Event()
    statuses: list[int] = []

    def keep_asking(query: str) -> None:
        with httpx.Client(base_url=server.base_url, timeout=120) as http:
            while not stop.is_set():
                body = {"query": query, "time_aware": True, "current_time": "2025-01-15", "group_id": "g1"}
                statuses.append(http.post(LIGHT, json=body).status_code)

    askers = [threading.Thread(target=keep_asking, args=(query,)) for query in HOSTILE_QUERIES * 2]
    latencies: list[float] = []
    try:
        for asker in askers:
            asker.start()
        time.sleep(1.0)
        with httpx.Client(base_url=server.base_url, timeout=30) as http:
            for _ in range(30):
                started = time.perf_counter()
                assert http.get("/health").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.1)
    finally:
        stop.set()
        for asker in askers:
            asker.join()
    assert statuses and set(statuses) == {200}, statuses
    # A stalled server would hold most /health answers; a few slow ones on a loaded 2-core machine are not that.
    shown = " ".join(f"{x:.3f}" for x in latencies)
    assert statistics.median(latencies) < 0.25 and max(latencies) < 2.0, shown
