"""Concurrency and durability of memory formation against the real ``memsys serve`` and ``memsys worker``
processes.

Real concurrency (an async HTTP client firing at a real socket), a real SIGKILL of a worker in the middle of
an LLM extraction, and another worker taking over. Embeddings come from the fake server's /v1/embeddings (so
the processes start fast); the LLM, when there is one, is the fake server too.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from benchmarks.fake_llm import FakeLLM, Reply
from tests.formation_helpers import START, assert_each_message_in_one_memcell, rows, wait_for
from tests.test_formation_llm import EXTRACTED, PROFILES, SAME_EPISODE

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = [pytest.mark.citus, pytest.mark.processes]

GROUP = "group_concurrent"


def server_env(database_url: str, fake: FakeLLM, **extra: str) -> dict[str, str]:
    return {
        "MEMSYS_DATABASE_URL": database_url,
        "MEMSYS_MIGRATE_ON_START": "false",
        "MEMSYS_LOG_LEVEL": "WARNING",
        "MEMSYS_EMBEDDING_PROVIDER": "openai",
        "MEMSYS_EMBEDDING_BASE_URL": fake.base_url,
        "MEMSYS_LLM_API_KEY": "",
        **extra,
    }


def llm_env(fake: FakeLLM, timeout_s: float = 30.0) -> dict[str, str]:
    return {
        "MEMSYS_LLM_API_KEY": "test-key",
        "MEMSYS_LLM_BASE_URL": fake.base_url,
        "MEMSYS_LLM_TIMEOUT_S": str(timeout_s),
        "MEMSYS_LLM_MAX_RETRIES": "0",
    }


def body(i: int, sender: str = "user_001") -> dict:
    return {
        "group_id": GROUP,
        "message_id": f"c{i:03d}",
        "create_time": (START + timedelta(seconds=i)).isoformat(),
        "sender": sender,
        "content": f"Concurrent message {i} about the rollout plan",
    }


async def memorize_all(base_url: str, bodies: list[dict]) -> list[dict]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        responses = await asyncio.gather(*(client.post("/api/v3/agentic/memorize", json=b) for b in bodies))
    assert [r.status_code for r in responses] == [200] * len(bodies)
    return [r.json()["result"] for r in responses]


@pytest.mark.parametrize("mode", ["offline", "llm"])
def test_twenty_concurrent_memorize_calls_for_one_group(
    mode: str, server_process_factory, database_url: str, fake_llm: FakeLLM
) -> None:
    env = server_env(database_url, fake_llm, MEMSYS_BOUNDARY_MAX_MESSAGES="5")
    if mode == "llm":
        env.update(llm_env(fake_llm))
        slow_extraction = Reply(content=EXTRACTED, delay=0.2)  # so that calls overlap an extraction
        fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', slow_extraction).on('"profiles"', PROFILES)
    server = server_process_factory(env)
    server.start()
    bodies = [body(i, sender=f"user_00{1 + i % 2}") for i in range(20)]
    results = asyncio.run(memorize_all(server.base_url, bodies))
    assert all(r["status_info"] == "accumulated" for r in results)

    flushed = httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=60)
    assert flushed.status_code == 200 and flushed.json()["result"]["warning"] is None

    ids = {b["message_id"] for b in bodies}
    assert_each_message_in_one_memcell(database_url, ids)
    cells = rows(database_url, "SELECT message_ids, boundary_reason FROM memcells")
    assert all(len(c["message_ids"]) <= 5 for c in cells)
    assert sum(len(c["message_ids"]) for c in cells) == 20
    # Every memory the flush told about is in the database (the worker formed the others before it).
    told = {m["id"] for m in flushed.json()["result"]["saved_memories"]}
    assert told and told <= {r["id"] for r in rows(database_url, "SELECT id::text FROM memories")}
    if mode == "offline":
        events = rows(database_url, "SELECT source_message_ids[1] AS mid FROM memories WHERE memory_type='event_log'")
        assert sorted(e["mid"] for e in events) == sorted(ids), "each message extracted exactly once"
    else:
        assert rows(database_url, "SELECT DISTINCT extraction_mode FROM memcells") == [{"extraction_mode": "llm"}]
        assert len(fake_llm.prompts()) > 0


def test_kill_9_of_a_worker_during_llm_extraction_loses_nothing_and_repeats_nothing(
    server_process_factory, database_url: str, fake_llm: FakeLLM
):
    """``memsys serve`` runs no worker; a ``memsys worker`` is killed with SIGKILL in the middle of an LLM
    extraction; the job is noticed as stalled and another worker forms the stream once."""
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', Reply(content=EXTRACTED, delay=60))
    fake_llm.on('"profiles"', PROFILES)
    quick = {"MEMSYS_WORKER_HEARTBEAT_SECONDS": "0.5", "MEMSYS_WORKER_STALLED_SECONDS": "2"}
    env = {**server_env(database_url, fake_llm), **llm_env(fake_llm), **quick}
    server = server_process_factory({**env, "MEMSYS_WORKERS": "0", "MEMSYS_FLUSH_TIMEOUT_SECONDS": "1"})
    server.start()
    bodies = [body(i, sender=f"user_00{1 + i % 2}") for i in range(1, 6)]
    for b in bodies:
        assert httpx.post(server.base_url + "/api/v3/agentic/memorize", json=b, timeout=30).status_code == 200
    # No worker: nothing forms, and flush says so after its timeout.
    flushed = httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=30).json()
    assert flushed["result"]["status_info"] == "pending"
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 0

    worker = server_process_factory(env, command="worker")
    worker.start()
    fake_llm.wait_for_prompt('"event_log"')  # the extraction reached the LLM
    worker.kill()

    # Nothing was committed, and the stream's lock died with the process.
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 0
    assert rows(database_url, "SELECT DISTINCT status FROM messages") == [{"status": "pending"}]
    advisory = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'"
    wait_for(database_url, advisory, 0, timeout=10)  # the backend notices the dead socket

    fake_llm.reset()
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', EXTRACTED).on('"profiles"', PROFILES)
    worker.start()  # a new worker; nobody calls flush again
    wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0, timeout=60)
    assert_each_message_in_one_memcell(database_url, {b["message_id"] for b in bodies})
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 1
    # Formed once: one group episode, one personal episode per participant.
    episodes = rows(database_url, "SELECT count(*) AS n FROM memories WHERE memory_type = 'episode'")
    assert episodes[0]["n"] == 3
    health = httpx.get(server.base_url + "/health", timeout=10).json()["result"]["formation"]
    assert health["pending"] == 0 and health["running"] == 0, health
    worker.stop()
    server.stop()
