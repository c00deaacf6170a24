"""Every answer carries ``X-Request-Id`` (the client's, when it is a short token, or a new one), error envelopes say it
as ``request_id``, and every log line written while the request is handled names it; ``MEMSYS_LOG_FORMAT=json``
writes one JSON object per line. Through a real ``memsys serve`` and through the app in-process."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from app import logs
from app.http.app import create_app
from app.settings import Settings
from tests.conftest import ServerProcess, every_connection_held, process_env

MEMORIES = "/api/v3/agentic/memories"
NEW_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(scope="module")
def server(database_url: str) -> Iterator[ServerProcess]:
    env = {**process_env(database_url), "MEMSYS_LOG_FORMAT": "json", "MEMSYS_ACCESS_LOG": "true", "MEMSYS_WORKERS": "0"}
    env["MEMSYS_LOG_LEVEL"] = "INFO"  # the access log and the start line are INFO
    process = ServerProcess(env, cwd=Path(__file__).resolve().parent.parent)
    process.start(timeout=120)
    yield process
    process.stop()


def test_a_token_the_client_sends_is_its_id_and_anything_else_gets_a_new_one(server: ServerProcess) -> None:
    given = httpx.get(server.base_url + "/health", headers={"X-Request-Id": "trace-42.a_b"}, timeout=10)
    assert given.headers["x-request-id"] == "trace-42.a_b"
    for unfit in ("two words", "x" * 129, 'quote"d', ""):
        made = httpx.get(server.base_url + "/health", headers={"X-Request-Id": unfit}, timeout=10)
        assert NEW_ID.fullmatch(made.headers["x-request-id"]), made.headers
    first, second = (httpx.get(server.base_url + "/health/live", timeout=10) for _ in range(2))
    assert NEW_ID.fullmatch(first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


def test_an_error_envelope_says_the_id_it_was_sent_with(server: ServerProcess) -> None:
    unknown = httpx.get(server.base_url + "/api/v3/nowhere", headers={"X-Request-Id": "lost-1"}, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["request_id"] == "lost-1" == unknown.headers["x-request-id"]
    invalid = httpx.post(server.base_url + "/api/v3/agentic/retrieve_agentic", json={"group_id": "g"}, timeout=10)
    assert invalid.status_code == 400
    assert invalid.json()["request_id"] == invalid.headers["x-request-id"]
    assert NEW_ID.fullmatch(invalid.json()["request_id"])


def test_json_logs_are_one_object_a_line_with_the_request_id(server: ServerProcess) -> None:
    httpx.get(server.base_url + "/api/v3/nowhere", headers={"X-Request-Id": "logged-7"}, timeout=10)
    deadline = time.monotonic() + 10
    while '"logged-7"' not in server.output() and time.monotonic() < deadline:
        time.sleep(0.1)  # the access line may be written just after the answer is sent
    lines = [line for line in server.output().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records), records
    access = [record for record in records if record["logger"] == "uvicorn.access" and "/nowhere" in record["message"]]
    assert access and access[-1]["request_id"] == "logged-7", records
    assert any(record["logger"] == "app.http.app" and "memsys serving" in record["message"] for record in records)
    assert all("request_id" not in record for record in records if record["logger"] == "app.http.app")


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    """Logging as ``memsys`` configures it, into a buffer; pytest's handlers are put back after."""
    root = logging.getLogger()
    kept_handlers, kept_level = root.handlers[:], root.level
    written = io.StringIO()
    try:
        yield written
    finally:
        root.handlers[:] = kept_handlers
        root.setLevel(kept_level)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_line_the_service_writes_while_handling_a_request_names_it(
    settings: Settings, logged: io.StringIO, log_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pooled connection is held: the request waits for the pool, is answered 503, and memsys logs a warning
    while handling it."""
    monkeypatch.setattr("sys.stderr", logged)
    logs.configure("WARNING", log_format=log_format)
    app = create_app(settings.model_copy(update={"db_pool_size": 1, "db_pool_timeout_seconds": 0.3, "workers": 0}))
    with TestClient(app, raise_server_exceptions=False) as client:
        with every_connection_held(client):
            response = client.get(MEMORIES, params={"user_id": "u"}, headers={"X-Request-Id": "pool-9"})
    assert response.status_code == 503 and response.json()["request_id"] == "pool-9", response.text
    lines = [line for line in logged.getvalue().splitlines() if "unavailable" in line]
    assert lines, logged.getvalue()
    if log_format == "json":
        record = json.loads(lines[0])
        assert record["request_id"] == "pool-9" and record["level"] == "WARNING", record
        assert record["logger"] == "app.http.errors"
    else:
        assert " WARNING app.http.errors [pool-9]: " in lines[0], lines[0]
