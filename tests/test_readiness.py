"""A readiness signal that is true: /health is not green before memsys can answer a search, and an answer that
could not see a message by meaning yet says so."""

from __future__ import annotations

import time
import uuid

import httpx

from benchmarks.fake_llm import EMBEDDINGS, FakeLLM, Reply
from tests.test_formation_concurrency import server_env

SEARCH = "/api/v3/agentic/retrieve_lightweight"


def test_health_is_not_ready_until_the_embedding_model_answers(server_process_factory, database_url, fake_llm):
    """The embedding service (here the fake's /v1/embeddings) refuses at start-up: the process is alive, /health
    says what it waits for with a 503; once the service answers, /health is 200."""
    fake_llm.force(Reply(status=503), path=EMBEDDINGS)
    server = server_process_factory(server_env(database_url, fake_llm, MEMSYS_WORKERS="0"))
    server.launch()
    deadline = time.monotonic() + 60
    while True:
        try:
            live = httpx.get(server.base_url + "/health/live", timeout=2)
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline and server.process.poll() is None, server.output()
            time.sleep(0.2)
    time.sleep(2)  # the embedding service has been asked and refused by now
    assert live.status_code == 200
    health = httpx.get(server.base_url + "/health", timeout=5)
    assert health.status_code == 503 and health.json()["code"] == "SERVICE_UNAVAILABLE"
    assert "Starting: waiting for the embedding model" in health.json()["message"]
    fake_llm.force(None, path=EMBEDDINGS)
    deadline = time.monotonic() + 15
    while (health := httpx.get(server.base_url + "/health", timeout=5)).status_code != 200:
        assert time.monotonic() < deadline, health.json()
        time.sleep(0.2)
    assert health.json()["result"]["embedding"] == "ok"


def test_an_answer_says_when_a_message_is_not_yet_searchable_by_meaning(
    server_process_factory, database_url, fake_llm: FakeLLM
):
    """No worker runs (``MEMSYS_WORKERS=0``): a stored message has no vector yet. A search by meaning cannot see
    it and says so; keyword search finds it already."""
    server = server_process_factory(server_env(database_url, fake_llm, MEMSYS_WORKERS="0"))
    server.start()
    message = {
        "message_id": "m1",
        "create_time": "2026-01-05T10:00:00Z",
        "sender": "alice",
        "content": "My dentist appointment moved to Thursday",
        "group_id": "g1",
    }
    assert httpx.post(server.base_url + "/api/v3/agentic/memorize", json=message, timeout=30).status_code == 200
    query = {"query": "when is the dentist", "group_id": "g1"}
    by_meaning = httpx.post(server.base_url + SEARCH, json={**query, "retrieval_mode": "embedding"}, timeout=30).json()
    assert by_meaning["result"]["count"] == 0
    assert by_meaning["result"]["metadata"]["hidden"]["not_yet_embedded"] == 1
    assert "1 messages of this scope are stored but not yet searchable by meaning" in by_meaning["message"]
    by_keyword = httpx.post(server.base_url + SEARCH, json={**query, "retrieval_mode": "bm25"}, timeout=30).json()
    (found,) = by_keyword["result"]["memories"]
    assert found["memory_type"] == "message" and found["formed"] is False
    assert found["content"] == f"alice: {message['content']}"
    # Its id is a uuid of its own (version 8, made from the stored message), never a memory's (version 4).
    assert uuid.UUID(found["id"]).version == 8
    assert httpx.get(f"{server.base_url}/api/v3/agentic/memories/{found['id']}", timeout=10).status_code == 404
