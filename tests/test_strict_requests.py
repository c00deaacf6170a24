"""v3 requests are strict, through HTTP: an unknown field is a 400 naming it and the field meant (a misspelt
``group_id`` must not store a message in the sender's personal stream), a string is no number or boolean, every
wrong field is named in one answer, and dates still come as ISO strings. The OpenAPI document says so too, for
every v3 request model, so that a new endpoint cannot forget it. The EverMemOS routes keep their leniency where
their clients need it (docs/api.md, "Strict requests")."""

from __future__ import annotations

import uuid
from typing import Any

from litestar.testing import TestClient

from tests.formation_helpers import rows

V3 = "/api/v3/agentic"
MEMORIZE = f"{V3}/memorize"
LIGHT = f"{V3}/retrieve_lightweight"
MESSAGE = {
    "group_id": "dinner",
    "message_id": "m1",
    "create_time": "2025-01-15T19:00:00+08:00",
    "sender": "ann",
    "content": "Shall we book the noodle place for Friday?",
}


def refused(response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["status"] == "failed" and body["code"] == "INVALID_PARAMETER", body
    return body["message"]


def test_a_misspelt_group_id_is_refused_naming_the_field_and_stores_nothing(client: TestClient, database_url):
    typo = {"groupId" if key == "group_id" else key: value for key, value in MESSAGE.items()}
    message = refused(client.post(MEMORIZE, json=typo))
    assert message == "Unknown field 'groupId' (did you mean 'group_id'?)"
    assert rows(database_url, "SELECT count(*) AS n FROM messages")[0]["n"] == 0
    # Spelt right, the same message goes to the group's stream.
    assert client.post(MEMORIZE, json=MESSAGE).status_code == 200
    stored = rows(database_url, "SELECT group_id, stream_kind, message_id FROM messages")
    assert [(row["group_id"], row["message_id"]) for row in stored] == [("dinner", "m1")]


def test_the_nearest_field_is_found_by_case_underscores_and_spelling(client: TestClient) -> None:
    message = refused(client.post(MEMORIZE, json={**MESSAGE, "Sender_Name": "Ann", "gruop_name": "Dinner"}))
    assert "Unknown field 'Sender_Name' (did you mean 'sender_name'?)" in message
    assert "Unknown field 'gruop_name' (did you mean 'group_name'?)" in message
    # Nothing near: the known fields are listed.
    message = refused(client.post(f"{V3}/flush", json={"group_id": "dinner", "wait": True}))
    assert message == "Unknown field 'wait' (known fields: group_id, sender)"


def test_an_unknown_field_inside_a_nested_object_is_named_with_its_path(client: TestClient) -> None:
    body = {"query": "dinner", "semantic": {"topk": 3}, "history": [{"role": "user", "contnet": "hi"}]}
    message = refused(client.post(f"{V3}/context", json=body))
    assert "Unknown field 'semantic.topk' (did you mean 'top_k'?)" in message
    assert "Unknown field 'history.0.contnet' (did you mean 'content'?)" in message


def test_a_string_is_no_number_and_no_boolean(client: TestClient) -> None:
    assert refused(client.post(LIGHT, json={"query": "dinner", "top_k": "5"})).startswith("Invalid field top_k: ")
    assert refused(client.post(LIGHT, json={"query": "dinner", "explain": "true"})).startswith("Invalid field explain:")
    assert "Invalid field top_k: " in refused(client.post(LIGHT, json={"query": "dinner", "top_k": True}))
    assert "Invalid field group_id: " in refused(client.post(MEMORIZE, json={**MESSAGE, "group_id": 123}))
    # An integer where a float belongs is a number all the same.
    found = client.post(LIGHT, json={"query": "dinner", "top_k": 5, "radius": 0})
    assert found.status_code == 200, found.text


def test_every_missing_and_invalid_field_is_named_in_one_answer(client: TestClient) -> None:
    body = {"group_id": "dinner", "create_time": "2025-01-15T19:00:00+08:00", "refer_list": "m0", "groupId": "x"}
    message = refused(client.post(MEMORIZE, json=body))
    for clause in (
        "Missing required field: message_id",
        "Missing required field: sender",
        "Missing required field: content",
        "Invalid field refer_list: ",
        "Unknown field 'groupId' (did you mean 'group_id'?)",
    ):
        assert clause in message, message


def test_dates_and_times_still_come_as_iso_strings(client: TestClient, database_url) -> None:
    assert client.post(MEMORIZE, json={**MESSAGE, "create_time": "2025-01-15T11:00:00Z"}).status_code == 200
    assert rows(database_url, "SELECT create_time FROM messages")[0]["create_time"].isoformat().startswith("2025-01-15")
    search = {
        "query": "noodle",
        "group_id": "dinner",
        "as_of": "2025-06-01T00:00:00+00:00",
        "current_time": "2025-06-01",
    }
    assert client.post(LIGHT, json=search).status_code == 200
    listed = client.get(f"{V3}/memories", params={"start_time": "2025-01-01T00:00:00Z", "limit": 5})
    assert listed.status_code == 200, listed.text
    assert "Invalid field create_time: " in refused(client.post(MEMORIZE, json={**MESSAGE, "create_time": 1736938800}))


def test_an_unknown_query_parameter_of_the_listing_is_refused(client: TestClient) -> None:
    message = refused(client.get(f"{V3}/memories", params={"groupId": "dinner"}))
    assert message == "Unknown field 'groupId' (did you mean 'group_id'?)"


def test_every_v3_body_refuses_an_unknown_field(client: TestClient) -> None:
    """Sent to each v3 operation that takes a body: the answer names the field, before anything else runs."""
    sent = 0
    for path, methods in client.get("/docs/openapi.json").json()["paths"].items():
        if not path.startswith(V3):
            continue
        for verb, operation in methods.items():
            if "requestBody" not in operation:
                continue
            url = path.replace("{memory_id}", str(uuid.uuid4()))
            response = client.request(verb.upper(), url, json={"zz_not_a_field": 1})
            assert "Unknown field 'zz_not_a_field'" in refused(response), (verb, path)
            sent += 1
    assert sent >= 8


def _closed(schema: dict[str, Any], components: dict[str, Any], path: str, seen: set[str]) -> list[str]:
    """Where under ``schema`` an object with named properties takes other keys too."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        seen.add(name)
        return _closed(components[name], components, name, seen)
    open_ = []
    if schema.get("properties") and schema.get("additionalProperties") is not False:
        open_.append(path)
    children = [
        *schema.get("properties", {}).items(),
        ("[]", schema.get("items")),
        ("{}", schema.get("additionalProperties")),
    ]
    children += [
        (f"|{number}", option)
        for key in ("oneOf", "anyOf", "allOf")
        for number, option in enumerate(schema.get(key, []))
    ]
    for name, child in children:
        if isinstance(child, dict):
            open_ += _closed(child, components, f"{path}.{name}", seen)
    return open_


def test_the_openapi_document_closes_every_v3_request_schema(client: TestClient) -> None:
    document = client.get("/docs/openapi.json").json()
    components = document["components"]["schemas"]
    seen: set[str] = set()
    open_: list[str] = []
    for path, methods in document["paths"].items():
        if not path.startswith(V3):
            continue
        for verb, operation in methods.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                open_ += _closed(body, components, f"{verb.upper()} {path}", seen)
    assert not open_, f"v3 request schemas that do not say additionalProperties: false: {open_}"
    # It walked the nested models too (the context's sections and history, the agent's llm_config, user_details).
    assert {"MemorizeRequest", "ContextRequest", "SemanticSection", "ChatMessage", "LLMConfigIn", "UserDetail"} <= seen


def test_the_walk_finds_an_open_schema() -> None:
    components = {"Open": {"type": "object", "properties": {"a": {"type": "string"}}}}
    closed = {
        "type": "object",
        "properties": {"inner": {"$ref": "#/components/schemas/Open"}},
        "additionalProperties": False,
    }
    assert _closed(closed, components, "Body", set()) == ["Open"]


def test_the_evermemos_routes_keep_the_leniency_their_clients_need(client: TestClient, database_url) -> None:
    # evermemos-mcp's v1 add sends async_mode, which memsys does not read: ignored, as upstream ignores it.
    item = {"sender_id": "ann", "timestamp": 1736938800000, "content": "Friday, noodles", "message_id": "v1-1"}
    added = client.post("/api/v1/memories/group", json={"group_id": "dinner", "messages": [item], "async_mode": True})
    assert added.status_code == 200, added.text
    # v0's add is memorize: strict like it.
    typo = {"groupId" if key == "group_id" else key: value for key, value in MESSAGE.items()}
    assert "did you mean 'group_id'?" in refused(client.post("/api/v0/memories", json=typo))
    assert [row["message_id"] for row in rows(database_url, "SELECT message_id FROM messages")] == ["v1-1"]


def test_a_chat_message_as_an_openai_sdk_returns_it_is_accepted(client: TestClient) -> None:
    """An assistant message dumped from the OpenAI SDK carries refusal, annotations, audio and function_call: taken
    and dropped; a misspelt key is still refused."""
    answer = {"role": "assistant", "content": "Noodles.", "refusal": None, "annotations": [], "audio": None}
    history = [{"role": "user", "content": "What is for dinner?"}, {**answer, "function_call": None}]
    taken = client.post(f"{V3}/context", json={"query": "dinner", "history": history})
    assert taken.status_code == 200, taken.text
    assert all(set(m) <= {"role", "content"} for m in taken.json()["result"]["messages"])
    misspelt = {"query": "dinner", "history": [{"role": "user", "contnet": "hi"}]}
    assert "did you mean 'content'?" in refused(client.post(f"{V3}/context", json=misspelt))
