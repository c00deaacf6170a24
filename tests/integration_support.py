"""What the integration tests share: a real ``memsys serve`` for a whole module, with a key per tenant, and the
raw HTTP the tests check an integration against.

A module imports the fixtures it uses (``from tests.integration_support import _empty_tables, keys, server``):
the keys are ``KEY_NAMES`` of the module (default acme, globex, docs), the server's extra environment its
``SERVER_ENV``. The keys live for the module, so the tables are emptied when the module ends, not after each test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.fake_llm import FakeLLM
from memsys import Memsys
from tests.conftest import ServerProcess, empty_tables, process_env
from tests.tenancy_support import bearer, create_key

ROOT = Path(__file__).resolve().parent.parent
V3 = "/api/v3/agentic"


@pytest.fixture(scope="module")
def keys(request: pytest.FixtureRequest, database_url: str) -> Iterator[dict[str, str]]:
    names = getattr(request.module, "KEY_NAMES", ("acme", "globex", "docs"))
    yield {name: create_key(database_url, name) for name in names}
    empty_tables(database_url)


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, database_url: str, keys: dict[str, str]) -> Iterator[ServerProcess]:
    process = ServerProcess({**process_env(database_url), **getattr(request.module, "SERVER_ENV", {})}, cwd=ROOT)
    process.start(timeout=120)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _empty_tables() -> Iterator[None]:
    """The keys live for the module; each test uses conversations of its own."""
    yield


@pytest.fixture
def acme(server: ServerProcess, keys: dict[str, str]) -> Iterator[Memsys]:
    with Memsys(server.base_url, api_key=keys["acme"]) as client:
        yield client


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def http(server: ServerProcess, key: str, method: str, path: str, **kwargs) -> dict:
    """A v3 call over plain HTTP with ``key``: its ``result`` (a 200 is asserted)."""
    answer = httpx.request(method, server.base_url + V3 + path, headers=bearer(key), timeout=60, **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def wait_for_vectors(server: ServerProcess, key: str, user_id: str, count: int) -> None:
    """Until the user's ``count`` messages have their vectors: memorize makes a message a keyword hit at once,
    and the intake worker gives it its vector a moment later (app/memorize/searchable.py)."""
    body = {"query": "anything", "user_id": user_id, "retrieval_mode": "embedding", "top_k": 100}
    deadline = time.monotonic() + 30
    while len(http(server, key, "POST", "/retrieve_lightweight", json=body)["memories"]) < count:
        assert time.monotonic() < deadline, f"{user_id}'s messages got no vectors"
        time.sleep(0.05)
