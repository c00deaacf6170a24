"""GET /metrics: Prometheus text with memsys_… series, from real requests."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.formation_helpers import FLUSH, MEMORIZE, conversation

TOKEN = "scrape-token"


@pytest.fixture
def client(settings):
    """The app with a metrics token: the in-process test client is no loopback address, as a remote scraper."""
    from litestar.testing import TestClient

    from app.http.app import create_app

    with TestClient(
        create_app(settings.model_copy(update={"metrics_token": TOKEN})), raise_server_exceptions=False
    ) as client:
        yield client


def test_metrics_needs_the_token_or_a_loopback_client(client):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_without_a_token_metrics_answers_loopback_clients_only(settings):
    from litestar.testing import TestClient

    from app.http.app import create_app

    with TestClient(create_app(settings), raise_server_exceptions=False) as remote:  # client "testclient"
        answer = remote.get("/metrics")
    assert answer.status_code == 403 and "MEMSYS_METRICS_TOKEN" in answer.json()["message"]


def samples(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_a_scrape_shows_requests_retrieval_embedding_backlog_and_memories(client):
    for body in conversation()[:3]:
        assert client.post(MEMORIZE, json=body).status_code == 200
    assert client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["status_info"] == "extracted"
    query = {"query": "search page design", "group_id": "group_123", "time_range_days": 100000}
    assert client.post("/api/v3/agentic/retrieve_lightweight", json=query).status_code == 200
    found = samples(client)
    names = {name for name, _ in found}
    assert all(name.startswith("memsys_") for name in names if not name.startswith(("python_", "process_")))
    memorized = [v for (n, labels), v in found.items() if n == "memsys_requests_total" and ("path", MEMORIZE) in labels]
    assert memorized and sum(memorized) >= 3
    assert found[("memsys_retrieval_duration_seconds_count", (("mode", "rrf"),))] >= 1
    assert any(n == "memsys_embedding_duration_seconds_count" and v >= 1 for (n, _), v in found.items())
    assert found[("memsys_formation_jobs", (("state", "failed"),))] == 0
    assert found[("memsys_memories", (("memory_type", "event_log"),))] == 3
    assert found[("memsys_memories", (("memory_type", "episode"),))] == 3  # the group's and two participants'
