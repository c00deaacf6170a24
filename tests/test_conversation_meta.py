"""POST/GET /api/v3/agentic/conversation-meta as seed 000 describes it."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

META = "/api/v3/agentic/conversation-meta"

SEED_EXAMPLE = {
    "version": "1.0",
    "scene": "group_chat",
    "scene_desc": "Project team discussion",
    "name": "Project Discussion Group",
    "description": "Technical discussion for new feature development",
    "group_id": "group_123",
    "created_at": "2025-01-15T10:00:00+08:00",
    "default_timezone": "Asia/Shanghai",
    "user_details": {
        "user_001": {"full_name": "Zhang San", "role": "developer", "extra": {"department": "Engineering"}},
        "user_002": {"full_name": "Li Si", "role": "designer", "extra": {"department": "Design"}},
    },
    "tags": ["work", "technical"],
}


def test_seed_example_gets_the_documented_shape(client: TestClient) -> None:
    response = client.post(META, json=SEED_EXAMPLE)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["message"] == "Conversation metadata saved successfully"
    result = body["result"]
    assert set(result) == {"id", "group_id", "scene", "name", "version", "created_at", "updated_at"}
    assert result["group_id"] == "group_123"
    assert result["scene"] == "group_chat"
    assert result["created_at"] == "2025-01-15T10:00:00+08:00"


def test_upsert_replaces_the_record_and_keeps_the_first_created_at(client: TestClient) -> None:
    first = client.post(META, json=SEED_EXAMPLE).json()["result"]
    changed = {
        **SEED_EXAMPLE,
        "scene": "companion",
        "name": "Renamed",
        "version": "2.0",
        "created_at": "2026-03-01T00:00:00Z",
        "user_details": {"user_003": {"full_name": "Wang Wu", "role": "pm"}},
    }
    changed.pop("tags")
    second = client.post(META, json=changed).json()["result"]
    assert second["id"] == first["id"]
    assert second["created_at"] == first["created_at"]
    assert second["updated_at"] >= first["updated_at"]
    stored = client.get(META, params={"group_id": "group_123"}).json()["result"]
    assert stored["scene"] == "companion" and stored["name"] == "Renamed" and stored["version"] == "2.0"
    assert stored["user_details"] == {"user_003": {"full_name": "Wang Wu", "role": "pm", "extra": None}}
    assert stored["tags"] == []  # the whole record was replaced, tags included


def test_any_scene_string_and_naive_created_at(client: TestClient) -> None:
    payload = {
        **SEED_EXAMPLE,
        "group_id": "g2",
        "scene": "assistant",
        "created_at": "2025-01-15T10:00:00",
        "default_timezone": "UTC",
    }
    result = client.post(META, json=payload).json()["result"]
    assert result["created_at"] == "2025-01-15T10:00:00+00:00"
    assert client.get(META, params={"group_id": "g2"}).json()["result"]["scene"] == "assistant"


def test_scene_desc_may_be_an_object_as_upstream_demos_send_it(client: TestClient) -> None:
    scene_desc = {"description": "Project team discussion", "extra": {"channel": "#release"}}
    response = client.post(META, json={**SEED_EXAMPLE, "scene_desc": scene_desc})
    assert response.status_code == 200, response.text
    assert client.get(META, params={"group_id": "group_123"}).json()["result"]["scene_desc"] == scene_desc
    client.post(META, json=SEED_EXAMPLE)  # and a string stays a string
    assert (
        client.get(META, params={"group_id": "group_123"}).json()["result"]["scene_desc"] == "Project team discussion"
    )
    response = client.post(META, json={**SEED_EXAMPLE, "scene_desc": ["a", "list"]})
    assert response.status_code == 400 and "scene_desc" in response.json()["message"]
