"""memsys through the faults of production, one at a time: its embedded PostgreSQL dying, SIGTERM with work in
hand, more requests than it has slots, a full connection pool. (benchmarks/soak.py puts them all together
under load; tests/test_soak.py runs its short version.)"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from litestar.testing import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db.embedded import postmaster_pid, stop_embedded
from app.db.engine import PING_AFTER_IDLE_S, create_engine
from app.http.app import create_app
from app.settings import Settings
from benchmarks.fake_llm import FakeLLM, Reply
from tests.conftest import every_connection_held
from tests.formation_helpers import rows, wait_for
from tests.test_formation_concurrency import GROUP, body, llm_env, server_env
from tests.test_formation_llm import EXTRACTED, PROFILES, SAME_EPISODE

# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = pytest.mark.processes

MEMORIZE = "/api/v3/agentic/memorize"


def is_envelope_503(response: httpx.Response) -> bool:
    return response.status_code == 503 and response.json()["code"] == "SERVICE_UNAVAILABLE"


def test_the_embedded_server_is_started_again_when_it_dies(
    server_process_factory, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Killed under them (``kill -9`` of the postmaster, the hardest: its orphaned backends must exit before it
    can start), the embedded PostgreSQL is started again by memsys itself (a server and a worker on it), without
    memsys being restarted; meanwhile memorize answers 503 with the envelope, the client's retry of the same
    message_id is stored once, and the worker goes on forming. (Fast and immediate shutdowns: tests/test_soak.py.)"""
    data_dir = tmp_path / "memsys-data"
    env = {
        "MEMSYS_DATA_DIR": str(data_dir),
        "MEMSYS_DATABASE_URL": "",
        "MEMSYS_LOG_LEVEL": "WARNING",
        "MEMSYS_EMBEDDED_WATCH_SECONDS": "0.5",
        "MEMSYS_FLUSH_TIMEOUT_SECONDS": "1",
        "MEMSYS_EMBEDDING_PROVIDER": "openai",  # the test servers' embeddings: no model to load in two processes
        "MEMSYS_EMBEDDING_BASE_URL": fake_llm.base_url,
    }
    server = server_process_factory({**env, "MEMSYS_WORKERS": "0"})
    worker = server_process_factory(env, command="worker")
    try:
        server.start()
        worker.start()
        owner = subprocess.run(
            [sys.executable, "-m", "app.cli", "db-url"], env={**os.environ, **env}, capture_output=True, text=True
        ).stdout.strip()
        # The fault is for a running worker: wait for its queue's LISTEN connection (one still starting up would
        # meet the dead database in its migration and exit, which a supervisor, not memsys, answers).
        wait_for(owner, "SELECT count(*) > 0 FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'", True, timeout=60)
        first = postmaster_pid(data_dir)
        assert first is not None
        message = {**body(1), "message_id": "before"}
        assert httpx.post(server.base_url + MEMORIZE, json=message, timeout=30).status_code == 200

        os.kill(first, signal.SIGKILL)
        retried = {**body(2), "message_id": "during"}
        answers: list[int] = []
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, f"memsys did not recover: {answers[-5:]}"
            try:
                response = httpx.post(server.base_url + MEMORIZE, json=retried, timeout=30)
            except httpx.TransportError:
                pytest.fail("the server stopped answering HTTP while its database was away")
            answers.append(response.status_code)
            if response.status_code == 200:
                break
            assert is_envelope_503(response), response.text
            time.sleep(0.2)
        assert server.process.poll() is None  # the same memsys process, never restarted
        second = postmaster_pid(data_dir)
        assert second is not None and second != first
        health = httpx.get(server.base_url + "/health", timeout=10)
        assert health.status_code == 200
        again = httpx.post(server.base_url + MEMORIZE, json=retried, timeout=30).json()["result"]
        assert again["status_info"] == "duplicate"
        # The worker lost its connections too; it is still there and forms both messages (flush asks for it; a
        # flush that times out answers "pending", the next one may find the stream formed meanwhile).
        httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=30)
        formed = "SELECT count(*) FROM messages WHERE status = 'processed' AND memcell_id IS NOT NULL"
        try:
            wait_for(owner, formed, 2, timeout=60)
        except AssertionError as failed:  # what the worker did, for a failure that does not repeat
            jobs = rows(owner, "SELECT task_name, status, attempts, scheduled_at FROM procrastinate_jobs ORDER BY id")
            raise AssertionError(f"{failed}\njobs: {jobs}\nworker:\n{worker.output()[-6000:]}") from failed
        assert rows(owner, "SELECT count(*) AS n FROM memcells")[0]["n"] == 1
        assert worker.process.poll() is None
    finally:
        worker.stop()
        server.stop()
        stop_embedded(data_dir)


def test_sigterm_lets_a_request_in_flight_finish(server_process_factory, database_url: str, fake_llm: FakeLLM):
    """SIGTERM during a request whose embedding takes 2 s: the request gets its 200, then the process ends."""
    env = server_env(database_url, fake_llm, MEMSYS_WORKERS="0")
    server = server_process_factory(env)
    server.start()
    assert httpx.post(server.base_url + MEMORIZE, json=body(1), timeout=30).status_code == 200
    fake_llm.queue(Reply(delay=2, json_body=fake_llm._embeddings({"input": ["slow"]})), path="/v1/embeddings")
    answer: dict[str, httpx.Response] = {}

    def retrieve() -> None:
        answer["response"] = httpx.post(
            server.base_url + "/api/v3/agentic/retrieve_lightweight",
            json={"query": "rollout plan", "group_id": GROUP},
            timeout=30,
        )

    embedded = lambda: len([r for r in fake_llm.requests if r.path == "/v1/embeddings"])  # noqa: E731
    before = embedded()
    request = threading.Thread(target=retrieve)
    request.start()
    deadline = time.monotonic() + 10
    while embedded() == before:
        assert time.monotonic() < deadline, "the retrieval never reached the embedder"
        time.sleep(0.02)
    server.process.send_signal(signal.SIGTERM)
    request.join(timeout=30)
    assert answer["response"].status_code == 200, answer["response"].text
    server.process.wait(timeout=30)
    assert server.process.returncode in (0, -signal.SIGTERM)  # uvicorn ends by re-raising the signal


def test_sigterm_gives_a_workers_job_back_to_the_queue(server_process_factory, database_url: str, fake_llm: FakeLLM):
    """A ``memsys worker`` told to stop in the middle of an LLM extraction waits its grace time, then gives the
    stream back to the queue (a job waiting, not a job lost until the stream goes idle); the next worker forms it
    once."""
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', Reply(content=EXTRACTED, delay=60))
    fake_llm.on('"profiles"', PROFILES)
    env = {**server_env(database_url, fake_llm), **llm_env(fake_llm, timeout_s=90)}
    server = server_process_factory({**env, "MEMSYS_WORKERS": "0", "MEMSYS_FLUSH_TIMEOUT_SECONDS": "0.5"})
    server.start()
    bodies = [body(i) for i in range(1, 4)]
    for b in bodies:
        assert httpx.post(server.base_url + MEMORIZE, json=b, timeout=30).status_code == 200
    httpx.post(server.base_url + "/api/v3/agentic/flush", json={"group_id": GROUP}, timeout=30)

    worker = server_process_factory(env, command="worker")
    worker.start()
    fake_llm.wait_for_prompt('"event_log"')  # the extraction reached the LLM
    worker.process.send_signal(signal.SIGTERM)
    worker.process.wait(timeout=40)
    waiting = rows(
        database_url,
        "SELECT count(*) AS n FROM procrastinate_jobs WHERE task_name = 'form_stream' AND status = 'todo'",
    )
    assert waiting[0]["n"] == 1
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 0

    fake_llm.reset()
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', EXTRACTED).on('"profiles"', PROFILES)
    worker.start()
    wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0, timeout=60)
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 1


def test_requests_beyond_the_slots_get_503_busy_after_the_wait(
    server_process_factory, database_url: str, fake_llm: FakeLLM
):
    """One request slot, a 0.3 s wait for it: while a slow retrieval holds the slot, the next API request is a
    503 envelope after about 0.3 s; health, outside the bound, still answers."""
    env = server_env(
        database_url,
        fake_llm,
        MEMSYS_WORKERS="0",
        MEMSYS_MAX_CONCURRENT_REQUESTS="1",
        MEMSYS_REQUEST_QUEUE_SECONDS="0.3",
    )
    server = server_process_factory(env)
    server.start()
    embedded = lambda: len([r for r in fake_llm.requests if r.path == "/v1/embeddings"])  # noqa: E731
    before = embedded()  # the readiness probe's, at start-up
    fake_llm.queue(Reply(delay=3, json_body=fake_llm._embeddings({"input": ["slow"]})), path="/v1/embeddings")
    slow = threading.Thread(
        target=httpx.post,
        args=(server.base_url + "/api/v3/agentic/retrieve_lightweight",),
        kwargs={"json": {"query": "rollout plan", "group_id": GROUP}, "timeout": 30},
    )
    slow.start()
    deadline = time.monotonic() + 10
    while embedded() == before:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    started = time.monotonic()
    busy = httpx.post(server.base_url + MEMORIZE, json=body(1), timeout=30)
    waited = time.monotonic() - started
    assert is_envelope_503(busy) and "busy" in busy.json()["message"], busy.text
    assert 0.25 < waited < 2.5
    assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200
    slow.join(timeout=30)
    assert httpx.post(server.base_url + MEMORIZE, json=body(1), timeout=30).status_code == 200


def test_a_full_pool_answers_503_after_the_pool_timeout(settings: Settings) -> None:
    """Every connection of the pool held elsewhere: a request waits ``MEMSYS_DB_POOL_TIMEOUT_SECONDS`` and gets
    the 503 envelope rather than hanging."""
    app = create_app(settings.model_copy(update={"db_pool_size": 1, "db_pool_timeout_seconds": 0.5, "workers": 0}))
    with TestClient(app, raise_server_exceptions=False) as client:
        with every_connection_held(client):
            started = time.monotonic()
            response = client.post(MEMORIZE, json=body(1))
            assert is_envelope_503(response), response.text
            assert 0.4 < time.monotonic() - started < 5
        assert client.post(MEMORIZE, json=body(1)).status_code == 200


def test_a_pooled_connection_the_database_dropped_is_replaced_once_it_has_waited(
    settings: Settings, database_url: str
) -> None:
    """A connection the database dropped while it sat in the pool: taken again within ``PING_AFTER_IDLE_S`` it is used
    unchecked (no round trip added to a busy pool's transactions), so its statement fails and the pool replaces it;
    taken after waiting longer it is pinged first and replaced before the statement, which runs."""

    def drop(pid: int) -> None:
        with psycopg.connect(database_url, autocommit=True) as owner:
            assert owner.execute("SELECT pg_terminate_backend(%s, 10000)", [pid]).fetchone()[0]

    async def backend(engine) -> int:
        async with engine.connect() as conn:
            return (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()

    async def scenario() -> None:
        engine = create_engine(database_url, settings.model_copy(update={"db_pool_size": 1}))
        try:
            first = await backend(engine)
            drop(first)
            with pytest.raises(DBAPIError) as failed:
                await backend(engine)
            assert failed.value.connection_invalidated
            second = await backend(engine)
            assert second != first
            drop(second)
            await asyncio.sleep(PING_AFTER_IDLE_S + 0.2)
            assert await backend(engine) not in (first, second)
        finally:
            await engine.dispose()

    asyncio.run(scenario())
