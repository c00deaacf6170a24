"""The client's models (memsys.models, kept by hand) against the server's OpenAPI document: every v3 operation
has a client method, and every model has the server's fields, with the same types and the same required ones.
A field added, renamed or retyped on either side fails here, naming it."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from pydantic import BaseModel

from app.http.app import create_app
from app.settings import Settings
from memsys import models, operations
from memsys.client import AsyncMemsys, Memsys

V3 = "/api/v3/agentic"
BASES = {"Request", "Result", "ScopedSearchRequest"}  # the client's own base classes, not server shapes


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    # Building the document needs no database: the app is not started.
    settings = Settings(database_url="postgresql://memsys@127.0.0.1:1/none", migrate_on_start=False)
    return create_app(settings).openapi_schema.to_schema()


def client_models() -> dict[str, type[BaseModel]]:
    return {
        name: value
        for name, value in vars(models).items()
        if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == models.__name__
    }


def shape(schema: dict[str, Any]) -> str:
    """A type in one comparable form, whoever wrote the schema (Litestar's oneOf, pydantic's anyOf, $defs)."""
    if "$ref" in schema:
        return "ref:" + schema["$ref"].rsplit("/", 1)[-1]
    for union in ("oneOf", "anyOf"):
        if union in schema:
            members = {part for option in schema[union] for part in shape(option).split("|")}
            return "|".join(sorted(members))
    if "enum" in schema or "const" in schema:
        return "enum:" + ",".join(sorted(map(str, schema.get("enum", [schema.get("const")]))))
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(sorted(shape({**schema, "type": one}) for one in kind))
    if kind == "array":
        return f"array[{shape(schema.get('items', {}))}]"
    if kind == "object":
        values = schema.get("additionalProperties")
        return "object" if values in (None, True, {}) else f"object[{shape(values)}]"
    if kind == "string" and schema.get("format") in ("date", "date-time"):
        return f"string:{schema['format']}"
    return kind or "any"


def differences(model: type[BaseModel], server: dict[str, Any]) -> list[str]:
    """How ``model`` differs from the server's component ``server``: one line per field."""
    ours = model.model_json_schema()
    mine, theirs = ours.get("properties", {}), server.get("properties", {})
    found = [f"{name}: missing in the client" for name in theirs.keys() - mine.keys()]
    found += [f"{name}: not on the server" for name in mine.keys() - theirs.keys()]
    for name in mine.keys() & theirs.keys():
        if shape(mine[name]) != shape(theirs[name]):
            found.append(f"{name}: client {shape(mine[name])}, server {shape(theirs[name])}")
    required_mine, required_theirs = set(ours.get("required", [])), set(server.get("required", []))
    found += [f"{name}: required on the server only" for name in required_theirs - required_mine]
    found += [f"{name}: required in the client only" for name in required_mine - required_theirs]
    return sorted(found)


def test_every_client_model_matches_the_server_schema(openapi):
    components = openapi["components"]["schemas"]
    drift = {}
    for name, model in client_models().items():
        if name in BASES:
            continue
        assert name in components, f"memsys.models.{name} has no schema of that name on the server"
        if found := differences(model, components[name]):
            drift[name] = found
    assert not drift, f"the client's models drifted from the server's OpenAPI: {drift}"


def test_every_v3_operation_has_a_client_method_with_the_server_shapes(openapi):
    components = openapi["components"]["schemas"]
    ours = client_models()
    for path, methods in openapi["paths"].items():
        if not path.startswith(V3):
            continue
        for verb, operation in methods.items():
            operation_id = operation["operationId"]
            method = operations.OPERATION_IDS.get(operation_id)
            assert method, f"{verb.upper()} {path} ({operation_id}) has no client method"
            assert callable(getattr(Memsys, method)) and inspect.iscoroutinefunction(getattr(AsyncMemsys, method))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                assert shape(body).removeprefix("ref:") in ours, f"{operation_id}: its request body has no model"
            answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
            result = components[shape(answer).removeprefix("ref:")]["properties"]["result"]
            assert shape(result) == "object" or shape(result).removeprefix("ref:") in ours, (operation_id, result)


def test_list_memories_takes_the_servers_query_parameters(openapi):
    parameters = {p["name"]: p for p in openapi["paths"][f"{V3}/memories"]["get"]["parameters"]}
    signature = inspect.signature(operations.list_memories).parameters
    assert set(signature) == set(parameters)
    assert signature["limit"].default == parameters["limit"]["schema"]["default"]


def test_the_comparison_catches_a_renamed_and_a_retyped_field(openapi):
    server = openapi["components"]["schemas"]["MemorizeRequest"]

    class Renamed(models.Request):  # message_id renamed, content an int, refer_list as required
        group_id: str | None = None
        group_name: str | None = None
        msg_id: str
        create_time: str
        sender: str
        sender_name: str | None = None
        content: int
        refer_list: list[str]
        metadata: dict = {}
        app_id: str = "default"
        project_id: str = "default"
        agent_id: str | None = None
        session_id: str | None = None

    assert differences(Renamed, server) == [
        "content: client integer, server string",
        "create_time: client string, server string:date-time",
        "message_id: missing in the client",
        "message_id: required on the server only",
        "msg_id: not on the server",
        "msg_id: required in the client only",
        "refer_list: required in the client only",
    ]
