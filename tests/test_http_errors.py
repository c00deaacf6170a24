"""Every kind of bad request gets the seed's error envelope with the right code, never a 422."""

from __future__ import annotations

from litestar.testing import TestClient

MEMORIZE = "/api/v3/agentic/memorize"
META = "/api/v3/agentic/conversation-meta"

GOOD_MESSAGE = {
    "group_id": "g1",
    "message_id": "m1",
    "create_time": "2025-01-15T10:00:00+08:00",
    "sender": "u1",
    "content": "hello",
}


def assert_envelope(response, status: int, code: str, path: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"status", "code", "message", "timestamp", "path", "request_id"}, body
    assert body["status"] == "failed"
    assert body["code"] == code
    assert body["path"] == path
    assert body["timestamp"].endswith("+00:00")
    assert body["request_id"] == response.headers["x-request-id"]
    return body


def test_missing_field_is_named(client: TestClient) -> None:
    for field in ("message_id", "create_time", "sender", "content"):
        payload = {k: v for k, v in GOOD_MESSAGE.items() if k != field}
        body = assert_envelope(client.post(MEMORIZE, json=payload), 400, "INVALID_PARAMETER", MEMORIZE)
        assert body["message"] == f"Missing required field: {field}"


def test_wrongly_typed_fields_are_named(client: TestClient) -> None:
    cases = {
        "message_id": 12,
        "create_time": "yesterday at noon",
        "refer_list": "msg_000",
        "sender": None,
        "content": ["a"],
    }
    for field, value in cases.items():
        body = assert_envelope(
            client.post(MEMORIZE, json={**GOOD_MESSAGE, field: value}), 400, "INVALID_PARAMETER", MEMORIZE
        )
        assert field in body["message"], body
    body = assert_envelope(
        client.post(MEMORIZE, json={**GOOD_MESSAGE, "refer_list": ["a", 3]}), 400, "INVALID_PARAMETER", MEMORIZE
    )
    assert "refer_list" in body["message"]


def test_malformed_json_and_non_object_bodies(client: TestClient) -> None:
    for raw in (b"{bad", b"", b"[1, 2]", b'"text"', b"null"):
        response = client.post(MEMORIZE, content=raw, headers={"content-type": "application/json"})
        assert_envelope(response, 400, "INVALID_PARAMETER", MEMORIZE)


def test_unknown_route_and_wrong_method(client: TestClient) -> None:
    assert_envelope(client.get("/api/v3/agentic/nothing"), 404, "NOT_FOUND", "/api/v3/agentic/nothing")
    assert_envelope(client.get(MEMORIZE), 405, "METHOD_NOT_ALLOWED", MEMORIZE)
    assert_envelope(client.delete(META), 405, "METHOD_NOT_ALLOWED", META)


def test_oversized_content_and_body(client: TestClient, settings) -> None:
    big = "x" * (settings.max_content_bytes + 1)
    body = assert_envelope(
        client.post(MEMORIZE, json={**GOOD_MESSAGE, "content": big}), 413, "PAYLOAD_TOO_LARGE", MEMORIZE
    )
    assert "content" in body["message"]
    huge = "x" * (settings.max_body_bytes + 10)
    assert_envelope(client.post(MEMORIZE, json={**GOOD_MESSAGE, "content": huge}), 413, "PAYLOAD_TOO_LARGE", MEMORIZE)
    # Nothing of either was stored: the same message_id is still free.
    ok = client.post(MEMORIZE, json=GOOD_MESSAGE).json()
    assert ok["result"]["status_info"] != "duplicate"


def test_conversation_meta_validation(client: TestClient) -> None:
    body = assert_envelope(client.post(META, json={}), 400, "INVALID_PARAMETER", META)
    assert body["message"].startswith("Missing required field: ")
    bad_details = {
        "version": "1.0",
        "scene": "group_chat",
        "scene_desc": "d",
        "name": "n",
        "description": "d",
        "group_id": "g",
        "created_at": "2025-01-15T10:00:00+08:00",
        "default_timezone": "Asia/Shanghai",
        "user_details": {"u1": {"role": "dev"}},
    }
    body = assert_envelope(client.post(META, json=bad_details), 400, "INVALID_PARAMETER", META)
    assert body["message"] == "Missing required field: user_details.u1.full_name"
    body = assert_envelope(
        client.post(META, json={**bad_details, "user_details": {}, "default_timezone": "Mars/Olympus"}),
        400,
        "INVALID_PARAMETER",
        META,
    )
    assert "default_timezone" in body["message"]
    body = assert_envelope(
        client.post(META, json={**bad_details, "user_details": {}, "scene": ""}), 400, "INVALID_PARAMETER", META
    )
    assert "scene" in body["message"]
    body = assert_envelope(client.get(META), 400, "INVALID_PARAMETER", META)
    assert "group_id" in body["message"]
    assert_envelope(client.get(META, params={"group_id": "unknown"}), 404, "NOT_FOUND", META)


def test_openapi_document_and_docs_page_are_served(client: TestClient) -> None:
    spec = client.get("/docs/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert "/api/v3/agentic/memorize" in paths and "/api/v3/agentic/conversation-meta" in paths
    page = client.get("/docs")
    assert page.status_code == 200 and "<html" in page.text.lower()
