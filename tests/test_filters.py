"""The caller's filter language (app.retrieval.filters): compiled SQL on real PostgreSQL agrees with the same filter
evaluated in Python on generated filters (hypothesis), bad filters are 400s naming the node, and a filter reaches
every leg of a v3 search, pending messages included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from sqlalchemy import Connection, create_engine, text

from app.errors import InvalidParameter
from app.retrieval import filters
from tests.formation_helpers import FLUSH, MEMORIZE, START, wait_for

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

SEARCH = "/api/v3/agentic/retrieve_lightweight"
PLANS = ["free", "pro", "team"]
TAGS = ["a", "b", "c"]


def rows_metadata() -> list[dict[str, Any]]:
    """Twelve memories' scopes and metadata: missing keys, nulls, arrays, numbers, nested objects."""
    out = []
    for i in range(12):
        meta: dict[str, Any] = {}
        if i % 4:
            meta["plan"] = PLANS[i % 3]
        if i % 3 == 0:
            meta["seats"] = i * 2
        if i % 5 == 1:
            meta["tags"] = TAGS[: i % 3 + 1]
        if i == 7:
            meta["plan"] = None
        if i % 2:
            meta["org"] = {"region": "eu" if i % 4 == 1 else "us"}
        out.append(
            {
                "n": i,
                "app_id": "shop" if i % 2 else "default",
                "agent_id": f"agent_{i % 3}" if i % 3 else None,
                "session_id": f"s{i % 4}",
                "timestamp": START + timedelta(days=i),
                "custom_metadata": meta,
            }
        )
    return out


ROWS = rows_metadata()


def _lookup(row: dict[str, Any], target: tuple[str, ...]) -> tuple[bool, Any]:
    if target[0] == "scope":
        value = row.get(target[1])
        return value is not None, value
    if target[0] == "timestamp":
        return True, row["timestamp"]
    node: Any = row["custom_metadata"]
    for key in target[1:]:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "time"
    return "array" if isinstance(value, list) else "object"


def _same(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b


def holds(tree: dict[str, Any], row: dict[str, Any]) -> bool:
    """The filter evaluated in Python, as docs/filters.md defines it."""
    for target, operators in tree.get("fields", []):
        present, value = _lookup(row, target)
        for op, operand in operators.items():
            if not _operator(op, operand, present, value, target[0] == "metadata"):
                return False
    if "AND" in tree and not all(holds(child, row) for child in tree["AND"]):
        return False
    if "OR" in tree and not any(holds(child, row) for child in tree["OR"]):
        return False
    return not ("NOT" in tree and holds(tree["NOT"], row))


def _operator(op: str, operand: Any, present: bool, value: Any, metadata: bool) -> bool:
    equal = (lambda a, b: _same(a, b)) if metadata else (lambda a, b: a == b)
    match op:
        case "exists":
            return present == operand
        case "eq":
            return present and equal(value, operand)
        case "ne":
            return not (present and equal(value, operand))
        case "in":
            return present and any(equal(value, item) for item in operand)
        case "nin":
            return not (present and any(equal(value, item) for item in operand))
        case "contains":
            if isinstance(value, list):
                return any(_same(item, operand) for item in value)
            return isinstance(value, str) and isinstance(operand, str) and operand in value
    if not present or _kind(value) != _kind(operand):
        return False
    return {"gt": value > operand, "gte": value >= operand, "lt": value < operand, "lte": value <= operand}[op]


FIELDS = st.sampled_from(["plan", "seats", "tags", "org.region", "metadata.plan", "app_id", "agent_id", "timestamp"])
SCALARS = st.one_of(
    st.sampled_from(PLANS + TAGS + ["eu", "us", "shop", "default", "agent_1", "agent_2"]),
    st.integers(-2, 24),
    st.booleans(),
    st.none(),
)


def _value_for(field: str) -> st.SearchStrategy:
    if field == "timestamp":
        return st.integers(0, 12).map(lambda d: (START + timedelta(days=d, hours=12)).isoformat())
    if field in ("app_id", "agent_id"):
        return st.sampled_from(["shop", "default", "agent_1", "agent_2", "x"])
    return SCALARS


@st.composite
def conditions(draw) -> dict[str, Any]:
    field = draw(FIELDS)
    op = draw(st.sampled_from(filters.OPERATORS))
    if op == "exists":
        operand: Any = draw(st.booleans())
    elif op in ("in", "nin"):
        operand = draw(st.lists(_value_for(field), min_size=1, max_size=3))
    else:
        operand = draw(_value_for(field))
    return {field: {op: operand}}


def _nodes(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda xs: {"AND": xs}),
        st.lists(children, min_size=1, max_size=3).map(lambda xs: {"OR": xs}),
        children.map(lambda x: {"NOT": x}),
    )


FILTERS = st.recursive(conditions(), _nodes, max_leaves=6)


@pytest.fixture(scope="module")
def metadata_rows(database_url: str) -> Iterator[Connection]:
    """The rows in a temporary table (the same columns and types as memories'), on a connection of the module's."""
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        conn.execute(
            text(
                "CREATE TEMPORARY TABLE filter_rows (n int, user_id text, group_id text, app_id text, project_id text,"
                " agent_id text, session_id text, timestamp timestamptz, custom_metadata jsonb)"
            )
        )
        insert = text(
            "INSERT INTO filter_rows VALUES (:n, NULL, NULL, :app_id, 'default', :agent_id, :session_id, :timestamp,"
            " CAST(:custom_metadata AS jsonb))"
        )
        conn.execute(insert, [{**row, "custom_metadata": json.dumps(row["custom_metadata"])} for row in ROWS])
        yield conn
    engine.dispose()


def matching(conn: Connection, flt: filters.Filter) -> list[int]:
    sql, parameters = flt.sql(filters.MEMORY_COLUMNS)
    return sorted(row[0] for row in conn.execute(text("SELECT n FROM filter_rows m WHERE " + sql), parameters))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=FILTERS)
def test_compiled_filters_agree_with_python(metadata_rows, raw: dict[str, Any]) -> None:
    try:
        flt = filters.parse(raw)
    except InvalidParameter:
        return  # refused before any SQL (e.g. gt on null): test_bad_filters_name_their_node covers refusals
    expected = sorted(row["n"] for row in ROWS if holds(flt.tree, row))
    assert matching(metadata_rows, flt) == expected, raw


def test_a_few_filters_by_hand(metadata_rows) -> None:
    def found(raw: dict[str, Any]) -> list[int]:
        return matching(metadata_rows, filters.parse(raw))

    assert found({"plan": "pro"}) == [1, 10]
    assert found({"OR": [{"plan": "team"}, {"seats": {"gte": 18}}]}) == [2, 5, 9, 11]
    assert found({"NOT": {"plan": {"exists": True}}}) == [0, 4, 8]  # 7's plan is there, null
    assert found({"tags": {"contains": "b"}}) == [1, 11]
    assert found({"org.region": "eu", "app_id": "shop"}) == [1, 5, 9]
    assert found({"timestamp": {"lt": int((START + timedelta(days=2)).timestamp() * 1000)}}) == [0, 1]
    assert found({"agent_id": {"nin": ["agent_1"]}}) == [0, 2, 3, 5, 6, 8, 9, 11]


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([{"plan": "pro"}], "filters"),
        ({"AND": {"plan": "pro"}}, "filters.AND"),
        ({"OR": [{"plan": "pro"}, "pro"]}, "filters.OR[1]"),
        ({"OR": [{"plan": {"between": [1, 2]}}]}, "filters.OR[0].plan.between"),
        ({"plan": {"in": []}}, "filters.plan.in"),
        ({"seats": {"gt": None}}, "filters.seats.gt"),
        ({"bad key!": 1}, "filters.bad key!"),
        ({"plan": {"eq": {"nested": 1}}}, "filters.plan.eq"),
        ({"timestamp": {"gte": "yesterday"}}, "filters.timestamp.gte"),
        ({"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"NOT": {"plan": "pro"}}}}}}}, "filters.NOT.NOT.NOT.NOT.NOT"),
        ({"OR": [{"plan": {"in": list(range(100))}}, {"seats": {"in": list(range(100))}}, {"x": 1}] * 12}, "filters"),
    ],
)
def test_bad_filters_name_their_node(raw: Any, named: str) -> None:
    with pytest.raises(InvalidParameter) as refused:
        filters.parse(raw)
    assert str(refused.value).startswith(f"Invalid field {named}"), str(refused.value)


def _memorize(client: TestClient, group: str, i: int, content: str, **extra: Any) -> None:
    body = {
        "group_id": group,
        "message_id": f"{group}_{i}",
        "create_time": (START + timedelta(minutes=i)).isoformat(),
        "sender": "user_001",
        "content": content,
        **extra,
    }
    response = client.post(MEMORIZE, json=body)
    assert response.status_code == 200, response.text


def test_a_filter_reaches_every_leg_and_pending_messages(client: TestClient, database_url: str) -> None:
    for group, meta, app in (("g_pro", {"plan": "pro", "seats": 12}, "shop"), ("g_free", {"plan": "free"}, "default")):
        for i, content in enumerate(["The invoice export to CSV is broken", "Customers want the invoice export fixed"]):
            _memorize(client, group, i, content, metadata=meta, app_id=app)
        assert client.post(FLUSH, json={"group_id": group}).json()["result"]["status_info"] == "extracted"
    _memorize(client, "g_later", 0, "The invoice export also times out", metadata={"plan": "pro"})
    # Its vector comes from the intake worker within seconds (keyword search finds it at once).
    wait_for(database_url, "SELECT count(*) FROM messages WHERE embedding IS NOT NULL AND group_id = 'g_later'", 1)

    def groups(mode: str, flt: dict[str, Any], data_source: str = "episode") -> set[str]:
        response = client.post(
            SEARCH,
            json={"query": "invoice export", "retrieval_mode": mode, "data_source": data_source, "filters": flt},
        )
        assert response.status_code == 200, response.text
        return {m["group_id"] for m in response.json()["result"]["memories"]}

    for mode in ("rrf", "embedding", "bm25"):
        assert groups(mode, {"plan": "pro"}) == {"g_pro", "g_later"}, mode  # g_later: a pending message
        assert groups(mode, {"plan": "pro", "seats": {"gte": 10}}) == {"g_pro"}, mode
        assert groups(mode, {"app_id": "shop"}) == {"g_pro"}, mode
        assert groups(mode, {"OR": [{"plan": "free"}, {"seats": 12}]}) == {"g_pro", "g_free"}, mode
        assert groups(mode, {"plan": "pro"}, "event_log") == {"g_pro", "g_later"}, mode
    listed = client.get("/api/v3/agentic/memories", params={"filters": json.dumps({"app_id": "shop"})})
    assert {m["group_id"] for m in listed.json()["result"]["memories"]} == {"g_pro"}, listed.text
    assert all(m["custom_metadata"]["plan"] == "pro" for m in listed.json()["result"]["memories"])
    bad = client.get("/api/v3/agentic/memories", params={"filters": "{not json"})
    assert bad.status_code == 400 and bad.json()["message"].startswith("Invalid field filters"), bad.text
    # EverMemOS's v1 search takes the language too (its OR was refused before), with v1's names.
    for flt, expected in [
        ({"OR": [{"group_id": "g_pro"}, {"session_id": "g_free"}]}, {"g_pro", "g_free"}),
        ({"AND": [{"sender_id": "user_001"}, {"OR": [{"plan": "free"}, {"seats": {"gt": 100}}]}]}, {"g_free"}),
    ]:
        v1 = client.post(
            "/api/v1/memories/search",
            json={"query": "invoice export", "filters": flt, "memory_types": ["episodic_memory"]},
        )
        assert v1.status_code == 200, v1.text
        assert {m["group_id"] for m in v1.json()["data"]["episodes"]} == expected, flt
    refused = client.post(SEARCH, json={"query": "invoice", "filters": {"plan": {"like": "p%"}}})
    assert refused.status_code == 400
    assert refused.json()["message"].startswith("Invalid field filters.plan.like: unknown operator"), refused.json()


def test_a_fact_carries_its_own_messages_metadata_and_an_episode_all_of_theirs(client: TestClient) -> None:
    said = [("support", "My invoice for March was charged twice"), ("sales", "I want a quote for forty seats")]
    for i, (channel, content) in enumerate(said):
        _memorize(client, "g_channels", i, content, metadata={"channel": channel, f"from_{channel}": True})
    assert client.post(FLUSH, json={"group_id": "g_channels"}).json()["result"]["status_info"] == "extracted"
    listed = client.get("/api/v3/agentic/memories", params={"group_id": "g_channels", "limit": 100}).json()["result"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for memory in listed["memories"]:
        by_type.setdefault(memory["memory_type"], []).append(memory)
    facts = by_type["event_log"]
    assert {fact["custom_metadata"]["channel"] for fact in facts} == {"support", "sales"}
    for fact in facts:
        channel = "support" if "invoice" in fact["content"] else "sales"
        assert fact["custom_metadata"] == {"channel": channel, f"from_{channel}": True}, fact
    # The group's episode and its participant's copy: every message's metadata, the later channel winning.
    assert by_type["episode"]
    for episode in by_type["episode"]:
        assert episode["custom_metadata"] == {"channel": "sales", "from_support": True, "from_sales": True}

    def found(flt: dict[str, Any]) -> list[str]:
        response = client.post(
            SEARCH,
            json={"query": "invoice quote", "data_source": "event_log", "group_id": "g_channels", "filters": flt},
        )
        assert response.status_code == 200, response.text
        return [m["content"] for m in response.json()["result"]["memories"]]

    assert found({"channel": "support"}) and all("invoice" in content for content in found({"channel": "support"}))
    assert found({"channel": "sales"}) and all("quote" in content for content in found({"channel": "sales"}))


def test_metadata_is_bounded_on_memorize(client: TestClient) -> None:
    body = {"group_id": "g", "message_id": "m1", "create_time": START.isoformat(), "sender": "u", "content": "hi"}
    too_big = client.post(MEMORIZE, json={**body, "metadata": {"blob": "x" * 9000}})
    assert too_big.status_code == 400 and "metadata" in too_big.json()["message"], too_big.text
    too_deep = client.post(MEMORIZE, json={**body, "metadata": {"a": {"b": {"c": {"d": {"e": 1}}}}}})
    assert too_deep.status_code == 400 and "metadata" in too_deep.json()["message"], too_deep.text
    not_object = client.post(MEMORIZE, json={**body, "metadata": ["a"]})
    assert not_object.status_code == 400 and "metadata" in not_object.json()["message"], not_object.text
    assert client.post(MEMORIZE, json={**body, "metadata": {"k": [1, 2]}}).status_code == 200
