"""A memory's life through HTTP: facts that change are superseded at formation, and every memory can be read,
corrected, deleted and restored, with its history kept (issue 54)."""

from __future__ import annotations

import concurrent.futures
import time
from datetime import datetime

import pytest
from litestar.testing import TestClient

from tests.formation_helpers import FLUSH, MEMORIZE, app_client, message, rows

pytestmark = pytest.mark.citus

SEARCH = "/api/v3/agentic/retrieve_lightweight"
MEMORIES = "/api/v3/agentic/memories"
JANUARY = datetime.fromisoformat("2026-01-10T09:00:00+00:00")
JUNE = datetime.fromisoformat("2026-06-12T18:00:00+00:00")
SESSIONS = [
    (
        JANUARY,
        "alice_jan",
        [
            "Hi! I live in Paris and work as a nurse, long shifts at the hospital.",
            "My cat Felix keeps me sane after work.",
        ],
    ),
    (
        JUNE,
        "alice_jun",
        [
            "Big news: I moved to Berlin last month and I now work as a software developer.",
            "Felix passed away in April, so I adopted a dog called Rex.",
        ],
    ),
]


def _tell(client: TestClient, sessions=SESSIONS) -> None:
    n = 0
    for start, group, lines in sessions:
        for line in lines:
            n += 1
            body = message(n, line, sender="alice", sender_name="Alice", group_id=group, at=start.replace(minute=n))
            assert client.post(MEMORIZE, json=body).status_code == 200
            reply = message(
                100 + n,
                "That's lovely to hear.",
                sender="assistant",
                group_id=group,
                at=start.replace(minute=n, second=30),
            )
            assert client.post(MEMORIZE, json=reply).status_code == 200
        assert client.post(FLUSH, json={"group_id": group}).status_code == 200


def _search(client: TestClient, query: str, **extra) -> dict:
    answer = client.post(SEARCH, json={"query": query, "user_id": "alice", **extra})
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def test_a_fact_that_changes_is_superseded_and_the_new_value_comes_first(client: TestClient, database_url: str):
    _tell(client)
    for query, new, old in (
        ("Where does Alice live?", "Berlin", "Paris"),
        ("What is Alice's job?", "software developer", "nurse"),
        ("What pet does Alice have?", "Rex", "Felix"),
    ):
        for source in ("episode", "event_log", "semantic_memory"):
            found = _search(client, query, data_source=source)
            assert found["memories"], (query, source)
            # The first memory that says either value says the new one, and none says only the old one.
            stating = [m["content"] for m in found["memories"] if new in m["content"] or old in m["content"]]
            assert stating and new in stating[0], (query, source, stating)
            assert all(new in text for text in stating), (query, source, stating)
            assert found["metadata"]["hidden"]["superseded"] >= 1, (query, source)

    # Superseded memories stay readable: asked for, they come back marked, pointing at what replaced them.
    found = _search(client, "Where does Alice live?", data_source="semantic_memory", include_superseded=True)
    paris = next(m for m in found["memories"] if "Paris" in m["content"])
    assert paris["status"] == "superseded" and paris["superseded_by"]
    assert paris["valid_to"] == "2026-06-12"
    newer = client.get(f"{MEMORIES}/{paris['superseded_by']}").json()["result"]["memory"]
    assert "Berlin" in newer["content"] and newer["status"] == "current"

    # as_of: what was true in March is Paris, and Berlin was not said yet.
    found = _search(client, "Where does Alice live?", data_source="semantic_memory", as_of="2026-03-01T00:00:00Z")
    said = [m["content"] for m in found["memories"]]
    assert said[0] == "Alice lives in Paris." and not any("Berlin" in text or "Rex" in text for text in said), said

    # The history says why, and the profile holds the current values with their sources.
    events = client.get(f"{MEMORIES}/{paris['id']}/history").json()["result"]["events"]
    assert [e["event"] for e in events] == ["formed", "superseded"]
    assert events[1]["details"]["old_value"] == "paris" and events[1]["details"]["new_value"] == "berlin"
    profile = _search(client, "", data_source="profile", group_id="alice_jun")["memories"][0]["profile"]
    assert profile["attributes"]["lives_in"]["value"] == "Berlin"
    assert profile["attributes"]["works_as"]["value"] == "software developer"
    assert [pet["value"] for pet in profile["attributes"]["pets"]] == ["dog Rex"]
    assert profile["attributes"]["lives_in"]["memory_id"] == newer["id"]

    # Restore undoes an automatic supersession.
    restored = client.post(f"{MEMORIES}/{paris['id']}/restore")
    assert restored.status_code == 200 and restored.json()["result"]["memory"]["status"] == "current"
    found = _search(client, "Where does Alice live?", data_source="semantic_memory")
    assert {"Alice lives in Paris.", "Alice lives in Berlin."} <= {m["content"] for m in found["memories"]}


def test_someone_elses_change_a_restatement_and_an_addition_supersede_nothing(client: TestClient, database_url: str):
    sessions = [
        (JANUARY, "bob_jan", ["I live in Lisbon and I'm allergic to shellfish.", "My cat Tom sleeps all day."]),
        (
            JUNE,
            "bob_jun",
            [
                "My sister moved to Berlin last week.",
                "I reminded the waiter of my shellfish allergy.",
                "I also adopted a dog called Rex, Tom loves him.",
            ],
        ),
    ]
    for k, (start, group, lines) in enumerate(sessions):
        for i, line in enumerate(lines):
            body = message(
                10 * k + i, line, sender="bob", sender_name="Bob", group_id=group, at=start.replace(minute=i)
            )
            assert client.post(MEMORIZE, json=body).status_code == 200
        assert client.post(FLUSH, json={"group_id": group}).status_code == 200
    statuses = rows(database_url, "SELECT status, count(*) AS n FROM memories GROUP BY status")
    assert {r["status"]: r["n"] for r in statuses} == {"current": sum(r["n"] for r in statuses)}
    # The allergy said again is one semantic memory with both sources, recorded as restated.
    allergy = rows(
        database_url,
        "SELECT id, source_message_ids FROM memories "
        "WHERE memory_type = 'semantic_memory' AND content LIKE '%allergic%'",
    )
    assert len(allergy) == 1 and len(allergy[0]["source_message_ids"]) == 2
    events = client.get(f"{MEMORIES}/{allergy[0]['id']}/history").json()["result"]["events"]
    assert [e["event"] for e in events] == ["formed", "restated"]


def test_a_memory_is_corrected_deleted_and_restored_with_its_history(client: TestClient, database_url: str):
    _tell(client, SESSIONS[:1])
    entry = rows(database_url, "SELECT id FROM memories WHERE memory_type = 'event_log' AND content LIKE '%Felix%'")[0][
        "id"
    ]
    url = f"{MEMORIES}/{entry}"
    got = client.get(url).json()["result"]
    assert got["memory"]["status"] == "current" and got["sources"]["message_ids"] == ["msg_002"]

    edited = client.patch(url, json={"content": "Alice: My cat Felix and my goldfish Bubbles keep me sane."})
    assert edited.status_code == 200, edited.text
    # Searchable by keyword at once; by meaning once the worker embedded it again.
    found = _search(client, "Bubbles goldfish", data_source="event_log", retrieval_mode="bm25")
    assert found["memories"][0]["id"] == str(entry)
    deadline = time.monotonic() + 20
    while (
        rows(database_url, "SELECT embedding_model FROM memories WHERE id = %s", entry)[0]["embedding_model"]
        == "edited"
    ):
        assert time.monotonic() < deadline, "the corrected memory was not embedded again"
        time.sleep(0.2)
    found = _search(client, "Bubbles goldfish", data_source="event_log", retrieval_mode="embedding")
    assert found["memories"][0]["id"] == str(entry)

    assert client.delete(url).status_code == 200
    found = _search(client, "Bubbles goldfish", data_source="event_log", retrieval_mode="bm25")
    assert str(entry) not in [m["id"] for m in found["memories"]]
    assert found["metadata"]["hidden"]["deleted"] == 1
    listed = client.get(MEMORIES, params={"user_id": "alice", "memory_type": "event_log"}).json()["result"]
    assert str(entry) not in [m["id"] for m in listed["memories"]]
    assert client.post(f"{url}/restore").status_code == 200
    found = _search(client, "Bubbles goldfish", data_source="event_log", retrieval_mode="bm25")
    assert found["memories"][0]["id"] == str(entry)

    events = client.get(f"{url}/history").json()["result"]["events"]
    assert [e["event"] for e in events] == ["formed", "edited", "reembedded", "deleted", "restored"]
    assert "goldfish" in events[1]["details"]["after"]["content"]
    assert "goldfish" not in events[1]["details"]["before"]["content"]
    assert events[1]["actor"] == "anonymous"


def test_bad_edits_are_400s_naming_the_field_and_unknown_ids_404s(client: TestClient, database_url: str):
    _tell(client, SESSIONS[:1])
    entry = rows(database_url, "SELECT id FROM memories WHERE memory_type = 'event_log' LIMIT 1")[0]["id"]
    url = f"{MEMORIES}/{entry}"
    for body, field in (
        ({"content": "   "}, "content"),
        ({"valid_from": "2026-05-01", "valid_to": "2026-04-01"}, "valid_to"),
        ({"status": "deleted"}, "status"),
        ({"colour": "red"}, "colour"),
        ({"valid_to": "yesterday"}, "valid_to"),
    ):
        answer = client.patch(url, json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert field in answer.json()["message"], (body, answer.json())
    for missing in ("00000000-0000-4000-8000-000000000000", "not-a-uuid"):
        for method, path in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/restore"), ("GET", "/history")):
            answer = client.request(
                method, f"{MEMORIES}/{missing}{path}", json={"content": "x"} if method == "PATCH" else None
            )
            assert answer.status_code == 404, (method, path, answer.text)


def test_concurrent_edits_each_keep_their_history_entry_in_order(client: TestClient, database_url: str):
    _tell(client, SESSIONS[:1])
    entry = rows(database_url, "SELECT id FROM memories WHERE memory_type = 'event_log' LIMIT 1")[0]["id"]
    url = f"{MEMORIES}/{entry}"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: client.patch(url, json={"content": f"Alice: version {i}"}), range(8)))
    assert [a.status_code for a in answers] == [200] * 8
    edits = [e for e in client.get(f"{url}/history").json()["result"]["events"] if e["event"] == "edited"]
    assert len(edits) == 8
    # Each edit's "before" is what the edit before it left: none was lost.
    for earlier, later in zip(edits, edits[1:], strict=False):
        assert later["details"]["before"]["content"] == earlier["details"]["after"]["content"]
    final = client.get(url).json()["result"]["memory"]["content"]
    assert final == edits[-1]["details"]["after"]["content"]


def test_suggest_mode_records_the_candidate_and_changes_nothing(settings, database_url: str):
    with app_client(settings, supersession="suggest") as client:
        _tell(client)
    assert rows(database_url, "SELECT DISTINCT status FROM memories") == [{"status": "current"}]
    events = rows(database_url, "SELECT event, count(*) AS n FROM memory_history GROUP BY event ORDER BY event")
    assert [e["event"] for e in events] == ["formed", "suggested"]
    assert rows(database_url, "SELECT count(*) AS n FROM memories WHERE metadata::text LIKE '%outdated_by%'") == [
        {"n": 0}
    ]


def test_expired_and_purged_memories_go_by_themselves(settings, database_url: str):
    with app_client(settings, deleted_retention_days=0) as client:
        _tell(client, SESSIONS[:1])
        entries = rows(database_url, "SELECT id FROM memories WHERE memory_type = 'event_log' ORDER BY timestamp")
        expiring, deleted = str(entries[0]["id"]), str(entries[1]["id"])
        assert client.patch(f"{MEMORIES}/{expiring}", json={"expires_at": "2026-01-01T00:00:00Z"}).status_code == 200
        # Hidden at once, before the sweep marks it.
        found = _search(client, "Paris nurse hospital", data_source="event_log", retrieval_mode="bm25")
        assert expiring not in [m["id"] for m in found["memories"]] and found["metadata"]["hidden"]["expired"] == 1
        assert client.delete(f"{MEMORIES}/{deleted}").status_code == 200
        deadline = time.monotonic() + 60
        while rows(database_url, "SELECT count(*) AS n FROM memories WHERE id = %s", deleted)[0]["n"]:
            assert time.monotonic() < deadline, "the sweep did not purge the deleted memory"
            time.sleep(0.5)
        assert rows(database_url, "SELECT status FROM memories WHERE id = %s", expiring) == [{"status": "expired"}]
        gone = client.post(f"{MEMORIES}/{deleted}/restore")
        assert gone.status_code == 404 and "purged" in gone.json()["message"]
        assert [e["event"] for e in client.get(f"{MEMORIES}/{deleted}/history").json()["result"]["events"]] == [
            "purged"
        ]
        events = client.get(f"{MEMORIES}/{expiring}/history").json()["result"]["events"]
        assert [e["event"] for e in events] == ["formed", "edited", "expired"]


def _llm_extraction(fact: str, source: str) -> dict:
    return {
        "title": "Work",
        "summary": "Alice talked about work.",
        "content": f"Alice said: {fact}",
        "personal_episodes": [],
        "event_log": [{"fact": fact, "user_id": "alice", "source_message_ids": [source]}],
        "semantic_memories": [],
    }


def _scripted_model(sessions: list[tuple[str, str, str, str]], answers: list[dict]):
    """The scripted model's replies: each session's one fact as its extraction, then ``answers`` to the reconciliation
    calls in order."""

    def route(body: dict) -> dict | None:
        prompt = "\n".join(str(m.get("content")) for m in body["messages"])
        if "NEW fact" in prompt:
            return answers.pop(0)
        if '"should_end"' in prompt:
            return {"should_end": False, "reasoning": "same", "topic_summary": "alice"}
        if '"event_log"' in prompt:
            when, source, _, fact = next(s for s in reversed(sessions) if s[2] in prompt)
            return _llm_extraction(fact, source)
        if '"profiles"' in prompt:
            return {"profiles": [{"user_id": "alice", "profile": {"name": "Alice"}}]}
        return None

    return route


def _each_session_formed(client, sessions: list[tuple[str, str, str, str]]) -> None:
    """Each session's message memorized in a group of its own and formed at once (flush)."""
    for when, source, text, _ in sessions:
        body = {"message_id": source, "create_time": when, "sender": "alice", "content": text, "group_id": source}
        assert client.post(MEMORIZE, json=body).status_code == 200
        assert client.post(FLUSH, json={"group_id": source}).json()["result"]["status_info"] == "extracted"


def test_with_an_llm_each_new_fact_is_reconciled_and_a_bad_answer_changes_nothing(settings, database_url, fake_llm):
    """The reconciliation call at the HTTP boundary: a scripted OpenAI-compatible model answers supersede for the
    new job, then names a memory that does not exist (recorded as rejected, nothing changed)."""
    sessions = [
        ("2026-01-10T09:00:00Z", "m1", "These days I'm at Acme, nursing.", "Alice works as a nurse at Acme."),
        ("2026-06-10T09:00:00Z", "m2", "Switched over to Globex last week.", "Alice now works at Globex."),
        ("2026-07-10T09:00:00Z", "m3", "Globex has a Berlin office, that's mine.", "Alice works at Globex in Berlin."),
    ]
    answers = [
        {"reasoning": "a new employer", "decision": "supersede", "memory": 1},
        {"reasoning": "?", "decision": "supersede", "memory": 9},
    ]

    fake_llm.handler = _scripted_model(sessions, answers)
    llm = {
        "llm_api_key": "test-key",
        "llm_base_url": fake_llm.base_url,
        "llm_model": "fake-model",
        "llm_max_retries": 0,
        "llm_retry_backoff_s": 0.01,
    }
    with app_client(settings, **llm) as client:
        _each_session_formed(client, sessions)
        facts = rows(
            database_url,
            "SELECT id, content, status, superseded_by FROM memories WHERE memory_type = 'event_log' "
            "AND metadata->>'extraction' = 'llm' ORDER BY timestamp",
        )
        assert [(f["content"], f["status"]) for f in facts] == [
            ("Alice works as a nurse at Acme.", "superseded"),
            ("Alice now works at Globex.", "current"),
            ("Alice works at Globex in Berlin.", "current"),
        ]
        assert facts[0]["superseded_by"] == facts[1]["id"]
        events = client.get(f"{MEMORIES}/{facts[0]['id']}/history").json()["result"]["events"]
        assert [e["event"] for e in events] == ["formed", "superseded"]
        assert events[1]["details"]["rule"] == "llm" and events[1]["details"]["reasoning"] == "a new employer"
        rejected = client.get(f"{MEMORIES}/{facts[2]['id']}/history").json()["result"]["events"]
        assert [e["event"] for e in rejected] == ["formed", "rejected"]
        assert "names none" in rejected[1]["details"]["error"]
        assert answers == []
        # One call per new fact that had an earlier memory alike: the second and the third session's.
        assert sum("NEW fact" in r.prompt for r in fake_llm.chat_requests) == 2


def test_a_supersede_the_model_answers_for_someone_elses_change_or_a_restatement_is_checked(
    settings, database_url, fake_llm
):
    """A small model answers supersede for nearly anything (tests/test_real_llm.py): a fact about the person's sister
    supersedes nothing (recorded as rejected), and the same value said again is a restatement of the earlier
    memory (it gains the source), not a newer value."""
    sessions = [
        ("2026-01-10T09:00:00Z", "m1", "I live in Paris, near the canal.", "Alice lives in Paris near the canal."),
        ("2026-06-10T09:00:00Z", "m2", "My sister moved to Berlin.", "Alice's sister moved to Berlin, near the canal."),
        ("2026-07-10T09:00:00Z", "m3", "Still in Paris by the canal!", "Alice still lives in Paris near the canal."),
    ]
    answers = [
        {"reasoning": "moved", "decision": "supersede", "memory": 1},
        {"reasoning": "lives", "decision": "supersede", "memory": 1},
    ]

    fake_llm.handler = _scripted_model(sessions, answers)
    llm = {"llm_api_key": "k", "llm_base_url": fake_llm.base_url, "llm_model": "m", "llm_max_retries": 0}
    with app_client(settings, **llm) as client:
        _each_session_formed(client, sessions)
        facts = rows(
            database_url,
            "SELECT id, status, source_message_ids FROM memories WHERE memory_type = 'event_log' "
            "AND metadata->>'extraction' = 'llm' ORDER BY timestamp",
        )
        # The restatement is not stored again: the Paris memory gains its source.
        assert answers == [] and [f["status"] for f in facts] == ["current", "current"]
        assert [f["source_message_ids"] for f in facts] == [["m1", "m3"], ["m2"]]
        paris, sister = (str(f["id"]) for f in facts)
        rejected = client.get(f"{MEMORIES}/{sister}/history").json()["result"]["events"]
        assert [e["event"] for e in rejected] == ["formed", "rejected"]
        assert "someone of the person's circle" in rejected[1]["details"]["error"]
        events = client.get(f"{MEMORIES}/{paris}/history").json()["result"]["events"]
        assert [e["event"] for e in events] == ["formed", "restated"]
        assert "said again" in events[1]["details"]["overruled"] and events[1]["details"]["new_sources"] == ["m3"]
