"""The batch helper (``memorize_conversation``) against a real ``memsys serve`` with an API key and the default share
of the server (64 request slots, 8 for one key): by default it stays inside the share, and asked for twice the share
it narrows its window on the server's 429s, waits their Retry-After, and stores every message; the progress bar
counts the retries. What the server answered is read from its own metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from memsys import AsyncMemsys, Memsys
from tests.conftest import ServerProcess, empty_tables, process_env
from tests.tenancy_support import create_key

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MESSAGES = 419  # the conversation of the report: 8 of its requests were refused at the old default of 8


@pytest.fixture(scope="module")
def key(database_url: str) -> Iterator[str]:
    yield create_key(database_url, "batch")
    empty_tables(database_url)


@pytest.fixture(scope="module")
def server(database_url: str, key: str) -> Iterator[ServerProcess]:
    process = ServerProcess(process_env(database_url), cwd=ROOT)  # the default share: 64 slots x 0.125
    process.start(timeout=120)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _empty_tables() -> Iterator[None]:
    yield


def refused_for_share(server: ServerProcess) -> int:
    """The 429s the server has answered because a key was over its share."""
    for line in httpx.get(server.base_url + "/metrics", timeout=30).text.splitlines():
        if line.startswith('memsys_requests_rejected_total{reason="tenant_share"}'):
            return int(float(line.split()[-1]))
    return 0


def conversation(group: str, count: int = MESSAGES) -> list[dict]:
    return [
        {
            "group_id": group,
            "message_id": f"{group}-{n}",
            "create_time": START + timedelta(seconds=n),
            "sender": f"speaker{n % 4}",
            "content": f"Message {n} of the planning thread: the venue, the menu and who brings what",
        }
        for n in range(count)
    ]


def test_by_default_the_batch_stays_inside_its_keys_share(server, key):
    before = refused_for_share(server)
    with Memsys(server.base_url, api_key=key) as client:
        results = client.memorize_conversation(conversation("default"), progress=False)
    assert [r.status_info for r in results] == ["accumulated"] * MESSAGES
    assert refused_for_share(server) == before


def test_asked_for_twice_its_share_it_slows_down_on_429s_and_stores_every_message(server, key, capfd):
    before = refused_for_share(server)
    with Memsys(server.base_url, api_key=key) as client:
        results = client.memorize_conversation(conversation("greedy"), concurrency=16)
    refused = refused_for_share(server) - before
    assert [r.status_info for r in results] == ["accumulated"] * MESSAGES  # no 429 reached the caller
    # The first burst is refused beyond the share (8); after that, a narrowed window is refused rarely. Without
    # the window every round would send 8 requests over the share: hundreds of 429s.
    assert 8 <= refused < MESSAGES / 10, refused
    bar = capfd.readouterr().err
    assert f"{MESSAGES}/{MESSAGES}" in bar and "retried" in bar


def test_the_async_batch_too(server, key):
    async def run() -> list[str]:
        async with AsyncMemsys(server.base_url, api_key=key) as client:
            results = await client.memorize_conversation(conversation("async", 120), concurrency=16, progress=False)
            return [r.status_info for r in results]

    before = refused_for_share(server)
    assert asyncio.run(run()) == ["accumulated"] * 120
    assert 8 <= refused_for_share(server) - before < 30
