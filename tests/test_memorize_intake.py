"""memorize intake: validation, durable storage, idempotency, defaults (formation aside)."""

from __future__ import annotations

from datetime import UTC

import psycopg
import pytest
from litestar.testing import TestClient

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

MEMORIZE = "/api/v3/agentic/memorize"

SEED_MESSAGE = {
    "group_id": "group_123",
    "group_name": "Project Discussion Group",
    "message_id": "msg_001",
    "create_time": "2025-01-15T10:00:00+08:00",
    "sender": "user_001",
    "sender_name": "Zhang San",
    "content": "Let's discuss the technical approach for the new feature today",
    "refer_list": ["msg_000"],
}


def _rows(database_url: str, sql: str) -> list[tuple]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(sql).fetchall()


def test_seed_message_is_stored_before_the_answer(client: TestClient, database_url: str) -> None:
    response = client.post(MEMORIZE, json=SEED_MESSAGE)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["result"]["status_info"] in ("accumulated", "extracted")
    rows = _rows(
        database_url,
        "SELECT stream_kind, stream_id, group_id, message_id, create_time AT TIME ZONE 'UTC', sender, "
        "sender_name, refer_list, status FROM messages",
    )
    assert len(rows) == 1
    kind, stream, group, message_id, utc_time, sender, name, refer, status = rows[0]
    assert (kind, stream, group, message_id, sender, name) == (
        "group",
        "group_123",
        "group_123",
        "msg_001",
        "user_001",
        "Zhang San",
    )
    assert utc_time.isoformat() == "2025-01-15T02:00:00"
    assert refer == ["msg_000"]


def test_same_message_again_is_a_duplicate(client: TestClient, database_url: str) -> None:
    client.post(MEMORIZE, json=SEED_MESSAGE)
    again = client.post(MEMORIZE, json={**SEED_MESSAGE, "content": "different text"})
    assert again.status_code == 200
    assert again.json()["result"]["status_info"] == "duplicate"
    assert again.json()["result"]["saved_memories"] == []
    assert _rows(database_url, "SELECT count(*), min(content) FROM messages")[0] == (1, SEED_MESSAGE["content"])
    # The same message_id in another group is another message.
    other = client.post(MEMORIZE, json={**SEED_MESSAGE, "group_id": "group_456"})
    assert other.json()["result"]["status_info"] != "duplicate"


def test_defaults_naive_time_and_personal_stream(client: TestClient, database_url: str) -> None:
    payload = {"message_id": "n1", "create_time": "2025-01-15T10:00:00", "sender": "alice", "content": "note"}
    assert client.post(MEMORIZE, json=payload).status_code == 200
    rows = _rows(
        database_url,
        "SELECT stream_kind, stream_id, group_id, sender_name, refer_list, create_time AT TIME ZONE 'UTC' "
        "FROM messages",
    )
    kind, stream, group, name, refer, utc_time = rows[0]
    assert (kind, stream, group, name, refer) == ("personal", "alice", None, "alice", [])
    assert utc_time.isoformat() == "2025-01-15T10:00:00"


def test_create_time_keeps_its_offset_and_a_naive_one_is_in_the_conversations_zone(client, database_url):
    from tests.formation_helpers import MEMORIZE, META, META_BODY, message, rows

    assert client.post(META, json=META_BODY).status_code == 200  # group_123: Asia/Shanghai
    sent = [
        message(1, "with an offset", at=None) | {"create_time": "2025-01-15T10:00:00-05:00"},
        message(2, "naive in a group with a zone") | {"create_time": "2025-01-15T10:00:00"},
        message(3, "naive, personal", group_id=None) | {"create_time": "2025-01-15T10:00:00"},
        message(4, "naive, group without meta", group_id="no_meta") | {"create_time": "2025-01-15T10:00:00"},
    ]
    for body in sent:
        assert client.post(MEMORIZE, json=body).status_code == 200
    stored = rows(database_url, "SELECT content, create_time FROM messages ORDER BY message_id")
    assert [(r["content"], r["create_time"].astimezone(UTC).isoformat()) for r in stored] == [
        ("with an offset", "2025-01-15T15:00:00+00:00"),
        ("naive in a group with a zone", "2025-01-15T02:00:00+00:00"),
        ("naive, personal", "2025-01-15T10:00:00+00:00"),
        ("naive, group without meta", "2025-01-15T10:00:00+00:00"),
    ]


def test_the_intake_worker_skips_what_formation_holds_and_never_waits(settings, database_url: str) -> None:
    """Formation and the intake worker both write messages: the intake worker takes only the rows it can lock
    at once (a deadlock between the two once failed CI), and says how many it left for later."""
    import asyncio

    from app.memorize import searchable
    from app.providers.embeddings import create_embedder
    from app.runtime import Runtime
    from tests.retrieval_support import tenant_engine

    with psycopg.connect(database_url, autocommit=True) as conn:
        for n in (1, 2):
            conn.execute(
                "INSERT INTO messages (tenant_id, stream_kind, stream_id, group_id, message_id, create_time, sender, "
                "sender_name, content) VALUES ('default', 'group', 'g', 'g', %s, now(), 'u1', 'Ann', %s)",
                (f"m{n}", f"Ann booked the dentist for Tuesday ({n})"),
            )

    async def index() -> tuple[int, int]:
        runtime = Runtime(settings, tenant_engine(database_url), database_url, embedder=create_embedder(settings))
        try:
            return await asyncio.wait_for(searchable.index_pending(runtime.for_tenant("default")), 120)
        finally:
            await runtime.close()

    with psycopg.connect(database_url) as formation:  # holds m1 as a forming transaction does
        formation.execute("SELECT id FROM messages WHERE tenant_id = 'default' AND message_id = 'm1' FOR UPDATE")
        assert asyncio.run(index()) == (1, 1)
    assert asyncio.run(index()) == (1, 0)
    rows = _rows(database_url, "SELECT message_id, embedding IS NOT NULL, search_tokens FROM messages ORDER BY 1")
    assert [(m, has_vector) for m, has_vector, _ in rows] == [("m1", True), ("m2", True)]
    assert all("dentist" in tokens and "tuesday" in tokens for _, _, tokens in rows)  # made where memorize had not


def test_the_intake_worker_takes_the_newest_messages_first(settings, database_url: str) -> None:
    """The message just sent is made searchable first, and in a burst the intake worker works from the other end
    than formation (which takes each stream's oldest)."""
    import asyncio

    from app.memorize import repository
    from app.providers.embeddings import embedder_name
    from tests.retrieval_support import tenant_engine

    with psycopg.connect(database_url, autocommit=True) as conn:
        for n in (1, 2, 3):
            conn.execute(
                "INSERT INTO messages (tenant_id, stream_kind, stream_id, group_id, message_id, create_time, sender, "
                "sender_name, content) VALUES ('default', 'group', 'g', 'g', %s, now(), 'u1', 'Ann', 'hello')",
                (f"m{n}",),
            )

    async def batches() -> list[list[str]]:
        engine = tenant_engine(database_url)
        ids = dict(_rows(database_url, "SELECT id, message_id FROM messages"))
        try:
            async with engine.connect() as conn:
                model = embedder_name(settings)
                first = await repository.unindexed_pending(conn, "default", model, 2)
                rest = await repository.unindexed_pending(conn, "default", model, 2, below_id=first[-1]["id"])
            return [[ids[row["id"]] for row in batch] for batch in (first, rest)]
        finally:
            await engine.dispose()

    assert asyncio.run(batches()) == [["m3", "m2"], ["m1"]]


def test_formation_keeps_the_intake_vector_of_an_entry_made_from_the_same_text(
    settings, database_url: str, fake_llm
) -> None:
    """The intake worker embeds a pending message with the pending turn before it, the text of its event-log entry:
    formation keeps that vector rather than embed the text again, and embeds an entry whose turn before changed
    (a message that arrived late with an earlier time) from its own text. Seen at the embedding service."""
    import json
    from datetime import timedelta

    from app.text.memory_text import embedding_text, entry_text, message_text
    from benchmarks.fake_llm import EMBEDDINGS, fake_vector
    from tests.formation_helpers import FLUSH, START, app_client, conversation, message, rows, wait_for

    def embedded() -> list[str]:
        return [text for r in fake_llm.requests if r.path == EMBEDDINGS for text in r.body["input"]]

    turns = conversation()
    late = message(9, "Before that: the login page is broken again", sender="user_002", sender_name="Li Si")
    late["create_time"] = (START + timedelta(minutes=2, seconds=30)).isoformat()  # between the 2nd and the 3rd
    own = {t["message_id"]: message_text(t["sender_name"], t["content"]) for t in [*turns, late]}
    order = ["msg_001", "msg_002", "msg_009", "msg_003", "msg_004", "msg_005"]
    count_vectors = "SELECT count(*) FROM messages WHERE embedding IS NOT NULL"
    with app_client(
        settings, embedding_provider="openai", embedding_base_url=fake_llm.base_url, cross_lingual="off"
    ) as client:
        for turn in turns:
            assert client.post(MEMORIZE, json=turn).status_code == 200
        wait_for(database_url, count_vectors, 5)
        assert client.post(MEMORIZE, json=late).status_code == 200
        wait_for(database_url, count_vectors, 6)
        at_intake = embedded()
        assert client.post(FLUSH, json={"group_id": "group_123"}).status_code == 200
        wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'processed'", 6)

    # intake: each message after the pending one before it when it was indexed (the late one came after the 3rd's)
    assert entry_text(own["msg_003"], own["msg_002"]) in at_intake
    assert entry_text(own["msg_009"], own["msg_002"]) in at_intake
    formed = embedded()[len(at_intake) :]
    episode = rows(database_url, "SELECT title, content FROM memories WHERE memory_type = 'episode' LIMIT 1")[0]
    # formation: the episode, and the one entry whose turn before is not the one it was indexed with
    assert sorted(formed) == sorted(
        [embedding_text(episode["title"], episode["content"], []), entry_text(own["msg_003"], own["msg_009"])]
    )
    entries = rows(
        database_url,
        "SELECT source_message_ids[1] AS message_id, embedding::text AS vector FROM memories "
        "WHERE memory_type = 'event_log'",
    )
    before = dict(zip(order[1:], order, strict=False))
    for entry in entries:
        text = entry_text(own[entry["message_id"]], own.get(before.get(entry["message_id"], "")))
        assert json.loads(entry["vector"]) == pytest.approx(fake_vector(text), abs=1e-6)
    assert len(entries) == 6
