"""The client's retries against a real ``memsys serve``: a key over its share of the server (429 with
Retry-After) is tried again after the second the server names, a server not yet listening is waited for, and a
server that never answers is a ``ConnectionFailed``. The server gives a key one request slot at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from memsys import ConnectionFailed, Memsys, MemsysError, RateLimited, RetryPolicy
from tests.conftest import ServerProcess, empty_tables, free_port, process_env
from tests.tenancy_support import create_key, refused_for_share

ROOT = Path(__file__).resolve().parent.parent
ONE_SLOT_PER_KEY = {"MEMSYS_MAX_CONCURRENT_REQUESTS": "8", "MEMSYS_TENANT_SHARE": "0.125"}
HEAVY = {"query": "what did we decide about the launch", "top_k": 100, "explain": True}


@pytest.fixture(scope="module")
def key(database_url: str) -> Iterator[str]:
    yield create_key(database_url, "busy")
    empty_tables(database_url)


@pytest.fixture(scope="module")
def server(database_url: str, key: str) -> Iterator[ServerProcess]:
    process = ServerProcess({**process_env(database_url), **ONE_SLOT_PER_KEY}, cwd=ROOT)
    process.start(timeout=120)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _empty_tables() -> Iterator[None]:
    yield


def all_at_once(count: int, call) -> list[object]:
    """``call()`` from ``count`` threads released together; each one's result or error."""
    start = threading.Barrier(count)

    def one() -> object:
        start.wait()
        try:
            return call()
        except MemsysError as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        return [future.result() for future in [pool.submit(one) for _ in range(count)]]


def test_a_key_over_its_share_is_refused_then_retried_after_retry_after(server, key):
    with Memsys(server.base_url, api_key=key, retries=0) as impatient:
        outcomes = all_at_once(8, lambda: impatient.retrieve_lightweight(**HEAVY))
    refusals = [o for o in outcomes if isinstance(o, RateLimited)]
    assert refusals and all(not isinstance(o, MemsysError) or isinstance(o, RateLimited) for o in outcomes)
    assert refusals[0].status == 429 and refusals[0].code == "TOO_MANY_REQUESTS" and refusals[0].retry_after == 2
    assert "MEMSYS_TENANT_SHARE" in refusals[0].message

    before = refused_for_share(server.base_url)
    started = time.monotonic()
    with Memsys(server.base_url, api_key=key, retries=RetryPolicy(max_retries=15)) as patient:
        outcomes = all_at_once(6, lambda: patient.retrieve_lightweight(**HEAVY))
    assert not [o for o in outcomes if isinstance(o, MemsysError)], outcomes
    assert refused_for_share(server.base_url) > before  # they were refused, and retried until served
    assert time.monotonic() - started >= 1  # after the Retry-After second, not at once


def test_a_server_not_yet_listening_is_waited_for(database_url, key):
    later = ServerProcess({**process_env(database_url), **ONE_SLOT_PER_KEY}, cwd=ROOT)
    client = Memsys(later.base_url, api_key=key, retries=RetryPolicy(max_retries=60, backoff_s=0.2, max_backoff_s=1))
    now = datetime.now(UTC)
    with client, ThreadPoolExecutor(1) as pool:
        stored = pool.submit(client.memorize, message_id="w1", sender="early", content="Sent first", create_time=now)
        time.sleep(1)  # the client is already retrying: nothing listens on the port yet
        try:
            later.start(timeout=120)
            assert stored.result(timeout=60).status_info == "accumulated"
        finally:
            later.stop()


def test_no_server_is_a_connection_failure():
    started = time.monotonic()
    with Memsys(f"http://127.0.0.1:{free_port()}", retries=RetryPolicy(max_retries=2, backoff_s=0.05)) as client:
        with pytest.raises(ConnectionFailed) as failed:
            client.list_memories()
    assert failed.value.code == "CONNECTION_FAILED" and failed.value.status is None
    assert isinstance(failed.value.__cause__, httpx.ConnectError) and time.monotonic() - started < 5
