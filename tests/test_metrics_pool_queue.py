"""GET /metrics shows the service's database pool (size, in use, idle, overflow, requests that waited in vain) and
the queues' jobs by status, through a real ``memsys serve`` and through the app with every connection held."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.http.app import create_app
from app.settings import Settings
from tests.conftest import ServerProcess, every_connection_held, process_env
from tests.test_formation_concurrency import body

MEMORIZE = "/api/v3/agentic/memorize"
TOKEN = "scrape-token"


def parsed(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def pool(found: dict, state: str) -> float:
    return found[("memsys_db_pool_connections", (("state", state),))]


def jobs(found: dict, queue: str, status: str) -> float:
    return found[("memsys_queue_jobs", (("queue", queue), ("status", status)))]


@pytest.fixture
def server(database_url: str) -> Iterator[ServerProcess]:
    env = {
        **process_env(database_url),
        "MEMSYS_WORKERS": "0",  # the jobs memorize defers stay waiting
        "MEMSYS_DB_POOL_SIZE": "3",
        "MEMSYS_METRICS_REFRESH_SECONDS": "0",
    }
    process = ServerProcess(env, cwd=Path(__file__).resolve().parent.parent)
    process.start(timeout=120)
    yield process
    process.stop()


def test_a_real_servers_scrape_shows_its_pool_and_the_jobs_by_status(server: ServerProcess, database_url: str) -> None:
    scrape = lambda: parsed(httpx.get(server.base_url + "/metrics", timeout=10).text)  # noqa: E731
    before = scrape()
    assert pool(before, "size") == 3
    assert pool(before, "checked_out") == 0  # the scrape's own query is done by the time the pool is read
    assert pool(before, "idle") >= 1 and pool(before, "overflow") == 0
    assert all(jobs(before, queue, status) == 0 for queue in ("formation", "intake") for status in ("todo", "doing"))

    for i in range(3):
        assert httpx.post(server.base_url + MEMORIZE, json=body(i), timeout=30).status_code == 200
    with psycopg.connect(database_url, autocommit=True) as owner:
        owner.execute(
            "INSERT INTO procrastinate_jobs (queue_name, task_name, status) "
            "VALUES ('formation', 'form_stream', 'failed')"
        )
        waiting = owner.execute(
            "SELECT queue_name, count(*) FROM procrastinate_jobs WHERE status = 'todo' GROUP BY 1"
        ).fetchall()
    after = scrape()
    assert waiting and all(jobs(after, queue, "todo") == count for queue, count in waiting), (waiting, after)
    assert jobs(after, "formation", "failed") == jobs(before, "formation", "failed") + 1
    assert ("memsys_db_pool_timeouts_total", ()) in after


def test_a_request_that_waits_for_the_pool_in_vain_is_counted(settings: Settings) -> None:
    app = create_app(
        settings.model_copy(
            update={
                "db_pool_size": 1,
                "db_pool_timeout_seconds": 0.3,
                "workers": 0,
                "metrics_token": TOKEN,
                "metrics_refresh_seconds": 3600,
            }
        )
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        scrape = lambda: parsed(client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text)  # noqa: E731
        timeouts_before = scrape()[("memsys_db_pool_timeouts_total", ())]
        with every_connection_held(client):
            assert client.post(MEMORIZE, json=body(1)).status_code == 503
            found = scrape()  # the gauges read from the database were read by the first scrape: no connection needed
    assert pool(found, "checked_out") == 2 and pool(found, "overflow") == 1 and pool(found, "idle") == 0
    assert found[("memsys_db_pool_timeouts_total", ())] == timeouts_before + 1
