"""Concurrency and durability of memory formation against the real ``memsys serve`` process.

Real concurrency (an async HTTP client firing at a real socket), a real SIGKILL in the middle of an LLM
extraction, and a restart. Embeddings come from the fake server's /v1/embeddings (so the processes
start fast); the LLM, when there is one, is the fake server too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import httpx
import pytest

from tests.fake_llm import FakeLLM, Reply
from tests.formation_helpers import START, assert_each_message_in_one_memcell, rows
from tests.test_formation_llm import EXTRACTED, PROFILES, SAME_EPISODE

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
    assert all(r["status_info"] in ("accumulated", "extracted") for r in results)

    flushed = httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=60)
    assert flushed.status_code == 200 and flushed.json()["result"]["warning"] is None

    ids = {b["message_id"] for b in bodies}
    assert_each_message_in_one_memcell(database_url, ids)
    cells = rows(database_url, "SELECT message_ids, boundary_reason FROM memcells")
    assert all(len(c["message_ids"]) <= 5 for c in cells)
    assert sum(len(c["message_ids"]) for c in cells) == 20
    # Every memory the clients were told about is in the database, and none twice.
    told = [m["id"] for r in results for m in r["saved_memories"]] + [
        m["id"] for m in flushed.json()["result"]["saved_memories"]
    ]
    stored = rows(database_url, "SELECT id::text FROM memories")
    assert sorted(told) == sorted(r["id"] for r in stored)
    if mode == "offline":
        events = rows(database_url, "SELECT source_message_ids[1] AS mid FROM memories WHERE memory_type='event_log'")
        assert sorted(e["mid"] for e in events) == sorted(ids), "each message extracted exactly once"
    else:
        assert rows(database_url, "SELECT DISTINCT extraction_mode FROM memcells") == [{"extraction_mode": "llm"}]
        assert len(fake_llm.prompts()) > 0


def test_kill_during_llm_extraction_loses_nothing(server_process_factory, database_url: str, fake_llm: FakeLLM):
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', Reply(content=EXTRACTED, delay=30))
    fake_llm.on('"profiles"', PROFILES)
    env = {**server_env(database_url, fake_llm), **llm_env(fake_llm)}
    server = server_process_factory(env)
    server.start()
    bodies = [body(i, sender=f"user_00{1 + i % 2}") for i in range(1, 6)]
    for b in bodies:
        assert httpx.post(server.base_url + "/api/v3/agentic/memorize", json=b, timeout=30).status_code == 200

    def flush_and_die() -> None:
        try:
            httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=60)
        except httpx.HTTPError:
            pass  # the server is killed under it

    flusher = threading.Thread(target=flush_and_die)
    flusher.start()
    deadline = time.monotonic() + 20
    while not [p for p in fake_llm.prompts() if '"event_log"' in p]:
        assert time.monotonic() < deadline, "the extraction never reached the LLM"
        time.sleep(0.05)
    server.kill()
    flusher.join(timeout=30)

    # Nothing was committed, and the stream's lock died with the process.
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 0
    assert rows(database_url, "SELECT DISTINCT status FROM messages") == [{"status": "pending"}]
    advisory = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'"
    deadline = time.monotonic() + 10
    while rows(database_url, advisory)[0]["n"]:  # the backend notices the dead socket
        assert time.monotonic() < deadline, "the advisory lock outlived the killed process"
        time.sleep(0.1)

    fake_llm.reset()
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', EXTRACTED).on('"profiles"', PROFILES)
    server.start()
    again = httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=60).json()
    assert again["result"]["status_info"] == "extracted"
    assert_each_message_in_one_memcell(database_url, {b["message_id"] for b in bodies})
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 1
    # Extracted once: one group episode, one personal episode per participant.
    episodes = rows(database_url, "SELECT count(*) AS n FROM memories WHERE memory_type = 'episode'")
    assert episodes[0]["n"] == 3
    server.stop()
