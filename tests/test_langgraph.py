"""The LangGraph integration (memsys.integrations.langgraph) with the real ``langgraph`` from PyPI against a real
``memsys serve``, with API keys of two tenants: ``MemsysStore`` puts, gets, searches and deletes items held in
memsys; both ways round (stored through the store and found over plain HTTP, and memsys's own forget and
export reaching the store's items); a graph whose chat node recalls and stores each turn, driven by the scripted
OpenAI-compatible model (benchmarks/fake_llm.py); sync and async; tenancy; errors; the docs page's example; and
``memsys`` importing without LangGraph."""

# ruff: noqa: F811  (test arguments name the fixtures imported from tests.integration_support)
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import langgraph.version
import pytest
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item
from openai import OpenAI

from benchmarks.fake_llm import FakeLLM
from memsys import AsyncMemsys, InvalidParameter, Memsys, Unauthorized
from memsys.integrations.langgraph import MemsysStore, item_group, item_of_group
from tests.conftest import ServerProcess
from tests.integration_support import _empty_tables, acme, http, keys, llm, server, wait_for_vectors  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integrations  # pytest -m integrations (.ci/run); not in the default run

ROOT = Path(__file__).resolve().parent.parent
V3 = "/api/v3/agentic"


def keyword_search(server: ServerProcess, key: str, query: str, user_id: str) -> list[dict]:
    body = {"query": query, "user_id": user_id, "retrieval_mode": "bm25", "top_k": 50}
    return http(server, key, "POST", "/retrieve_lightweight", json=body)["memories"]


def test_items_round_trip_through_memsys(server, keys, acme):
    store = MemsysStore(client=acme)
    notes = ("alice", "notes")
    value = {"text": "Alice is allergic to peanuts", "tags": ["food", "health"], "meta": {"level": 3, "ok": True}}
    store.put(notes, "allergy", value)
    store.put(notes, "city", {"text": "Alice lives in Lisbon, near the river"})
    store.put(("alice", "prefs"), "tea", {"text": "Alice drinks green tea", "kind": "drink"}, index=["text"])
    store.put(("bob", "notes"), "allergy", {"text": "Bob is allergic to cats"})
    wait_for_vectors(server, keys["acme"], "alice", 3)

    item = store.get(notes, "allergy")
    assert isinstance(item, Item) and item.value == value and item.namespace == notes and item.key == "allergy"
    assert item.created_at == item.updated_at and item.created_at.tzinfo is not None
    assert store.get(notes, "nothing") is None and store.get(("bob", "notes"), "city") is None

    # Found over plain HTTP: the item's text is alice's message in the item's group.
    hits = keyword_search(server, keys["acme"], "peanuts", "alice")
    assert [(h["group_id"], h["content"]) for h in hits] == [
        ("langgraph/alice/notes/allergy", "alice: Alice is allergic to peanuts\nfood\nhealth")
    ]
    assert item_of_group(hits[0]["group_id"]) == (notes, "allergy")

    # Semantic search: memsys's retrieval, each item once, under the prefix, with memsys's score.
    found = store.search(("alice",), query="Which food is dangerous for Alice?", limit=2)
    assert found[0].key == "allergy" and found[0].value == value and 0 < found[0].score <= 1
    assert len(found) == 2 and len({(i.namespace, i.key) for i in found}) == 2
    assert [i.key for i in store.search(("alice", "prefs"), query="tea")] == ["tea"]
    assert [i.key for i in store.search(("alice", "prefs"), query="peanuts")] == ["tea"]  # the vector leg's only one
    assert [i.key for i in store.search(("alice",), query="drink", filter={"kind": "drink"})] == ["tea"]
    assert store.search(("alice",), query="allergic", filter={"meta": {"level": {"$gt": 2}}})[0].key == "allergy"

    # Without a query: the user's items under the prefix, newest first, from the export.
    listed = store.search(("alice",))
    assert [i.key for i in listed] == ["tea", "city", "allergy"] and listed[2].value == value
    assert [i.key for i in store.search(("alice", "notes"), limit=1, offset=1)] == ["allergy"]
    assert store.list_namespaces(prefix=("alice",)) == [("alice", "notes"), ("alice", "prefs")]
    assert store.list_namespaces(prefix=("alice",), max_depth=1) == [("alice",)]

    # Replaced: the old text no longer found, the creation time kept.
    store.put(notes, "allergy", {"text": "Alice is allergic to shellfish"})
    replaced = store.get(notes, "allergy")
    assert replaced.value == {"text": "Alice is allergic to shellfish"} and replaced.created_at == item.created_at
    assert replaced.updated_at > item.updated_at
    assert keyword_search(server, keys["acme"], "peanuts", "alice") == []
    assert [h["content"] for h in keyword_search(server, keys["acme"], "shellfish", "alice")] == [
        "alice: Alice is allergic to shellfish"
    ]

    # Deleted: gone from the store and from memsys.
    store.delete(notes, "allergy")
    assert store.get(notes, "allergy") is None and keyword_search(server, keys["acme"], "shellfish", "alice") == []
    assert [i.key for i in store.search(("alice", "notes"))] == ["city"]

    # Not indexed: read back by key and listed, never a search hit.
    store.put(notes, "secret", {"text": "the hidden marmalade"}, index=False)
    assert store.get(notes, "secret").value == {"text": "the hidden marmalade"}
    assert keyword_search(server, keys["acme"], "marmalade", "alice") == []
    assert "secret" in [i.key for i in store.search(notes)]


def test_memsys_reaches_the_store_items(server, keys, acme):
    """The other way round: an item written over plain HTTP in the documented shape is read by the store, and
    memsys's export and forget of the user take the store's items with them."""
    group_id = item_group(("carol", "facts"), "bike")
    assert group_id == "langgraph/carol/facts/bike"
    http(
        server,
        keys["acme"],
        "POST",
        "/memorize",
        json={
            "group_id": group_id,
            "message_id": "m1",
            "sender": "carol",
            "content": "Carol rides a red Peugeot bike",
            "create_time": "2025-03-01T12:00:00Z",
        },
    )
    stored = {"value": {"text": "Carol rides a red Peugeot bike"}}
    stored |= {"created_at": "2025-03-01T12:00:00+00:00", "updated_at": "2025-03-01T12:00:00+00:00"}
    meta = {
        "version": "1",
        "scene": "assistant",
        "scene_desc": "a LangGraph store item",
        "name": "bike",
        "description": "",
        "group_id": group_id,
        "created_at": "2025-03-01T12:00:00Z",
        "default_timezone": "UTC",
        "user_details": {"carol": {"full_name": "carol", "role": "user", "extra": stored}},
    }
    http(server, keys["acme"], "POST", "/conversation-meta", json=meta)

    store = MemsysStore(client=acme)
    assert store.get(("carol", "facts"), "bike").value == {"text": "Carol rides a red Peugeot bike"}
    assert [(i.key, i.value) for i in store.search(("carol",), query="Peugeot")] == [("bike", stored["value"])]

    store.put(("carol", "facts"), "pet", {"text": "Carol has a tabby cat called Miso"})
    export = http(server, keys["acme"], "GET", "/export", params={"user_id": "carol"})
    assert {m["group_id"] for m in export["messages"]} == {group_id, "langgraph/carol/facts/pet"}

    forgotten = http(server, keys["acme"], "DELETE", "/users", params={"user_id": "carol"})
    assert forgotten["user_id"] == "carol"
    assert store.get(("carol", "facts"), "pet") is None and store.search(("carol",)) == []
    assert store.search(("carol",), query="Miso the cat") == []


@dataclass
class Context:
    user_id: str


def chat_graph(store: BaseStore, llm: FakeLLM):
    """A chat node that recalls what the store holds about the user before answering, then stores the turn."""
    model = OpenAI(base_url=llm.base_url, api_key="test", max_retries=0)

    def chat(state: MessagesState, runtime: Runtime[Context]) -> dict:
        namespace = (runtime.context.user_id, "turns")
        question = state["messages"][-1].text
        recalled = runtime.store.search(namespace, query=question, limit=3)
        notes = "\n".join(f"- {item.value['user']}" for item in recalled)
        answer = model.chat.completions.create(
            model="fake",
            messages=[
                {"role": "system", "content": f"What you remember of the user:\n{notes}"},
                {"role": "user", "content": question},
            ],
        )
        text = answer.choices[0].message.content
        runtime.store.put(namespace, uuid.uuid4().hex, {"user": question, "assistant": text}, index=["user"])
        return {"messages": [{"role": "assistant", "content": text}]}

    builder = StateGraph(MessagesState, context_schema=Context)
    builder.add_node(chat)
    builder.add_edge(START, "chat")
    return builder.compile(store=store)


def test_a_graph_recalls_and_stores_each_turn(server, keys, acme, llm):
    llm.handler = lambda body: "Then avoid peanuts." if "peanuts" in body["messages"][0]["content"] else "Noted."
    graph = chat_graph(MemsysStore(client=acme), llm)
    dave = Context(user_id="dave")
    first = graph.invoke({"messages": [{"role": "user", "content": "I am allergic to peanuts."}]}, context=dave)
    assert first["messages"][-1].content == "Noted."
    wait_for_vectors(server, keys["acme"], "dave", 1)
    second = graph.invoke({"messages": [{"role": "user", "content": "What must I never eat?"}]}, context=dave)
    assert second["messages"][-1].content == "Then avoid peanuts."
    assert "- I am allergic to peanuts." in llm.chat_requests[1].body["messages"][0]["content"]

    # Both turns are in memsys as dave's, only the user's words indexed; another user recalls nothing.
    hits = keyword_search(server, keys["acme"], "peanuts allergic eat", "dave")
    assert sorted(h["content"] for h in hits) == ["dave: I am allergic to peanuts.", "dave: What must I never eat?"]
    graph.invoke({"messages": [{"role": "user", "content": "Hello, what about peanuts?"}]}, context=Context("erin"))
    assert llm.chat_requests[2].body["messages"][0]["content"] == "What you remember of the user:\n"


def test_async_store(server, keys):
    async def run() -> tuple:
        async with AsyncMemsys(server.base_url, api_key=keys["acme"]) as client:
            store = MemsysStore(async_client=client)
            await store.aput(("frank", "notes"), "car", {"text": "Frank drives a blue Volvo"})
            item = await store.aget(("frank", "notes"), "car")
            found = await store.asearch(("frank",), query="Volvo car")
            listed = await store.alist_namespaces(prefix=("frank",))
            await store.adelete(("frank", "notes"), "car")
            return item, found, listed, await store.aget(("frank", "notes"), "car")

    item, found, listed, after = asyncio.run(run())
    assert item.value == {"text": "Frank drives a blue Volvo"} and [i.key for i in found] == ["car"]
    assert listed == [("frank", "notes")] and after is None
    with pytest.raises(ValueError, match="only an async_client"):
        MemsysStore(async_client=AsyncMemsys(server.base_url)).get(("frank", "notes"), "car")

    # A sync client only: the a-methods run it in a thread.
    with Memsys(server.base_url, api_key=keys["acme"]) as client:
        store = MemsysStore(client=client)
        asyncio.run(store.aput(("frank", "notes"), "bike", {"text": "Frank's bike is green"}))
        assert store.get(("frank", "notes"), "bike").value == {"text": "Frank's bike is green"}


def test_tenants_and_keys(server, keys, acme):
    MemsysStore(client=acme).put(("gina", "notes"), "vault", {"text": "The vault code is 0815"})
    with Memsys(server.base_url, api_key=keys["globex"]) as globex:
        other = MemsysStore(client=globex)
        assert other.get(("gina", "notes"), "vault") is None
        assert other.search(("gina",), query="vault code") == [] and other.search(("gina",)) == []
    assert MemsysStore(client=acme).get(("gina", "notes"), "vault").value == {"text": "The vault code is 0815"}
    with Memsys(server.base_url, api_key="", retries=0) as anonymous, pytest.raises(Unauthorized) as refused:
        MemsysStore(client=anonymous).get(("gina", "notes"), "vault")
    assert refused.value.status == 401 and refused.value.code == "UNAUTHORIZED"


def test_errors(acme):
    store = MemsysStore(client=acme, user_position=1)
    with pytest.raises(ValueError, match="user_position 1"):
        store.put(("only-one-label",), "k", {"text": "x"})
    with pytest.raises(ValueError, match="user_position 1"):
        store.search(("memories",), query="x")
    with pytest.raises(ValueError, match="needs a prefix that names the user"):
        store.list_namespaces()
    with pytest.raises(InvalidNamespaceError):
        store.put(("memories", "a.b"), "k", {"text": "x"})
    with pytest.raises(NotImplementedError):  # no TTLs
        store.put(("memories", "hank"), "k", {"text": "x"}, ttl=5)
    with pytest.raises(InvalidParameter) as refused:  # a group id is at most 256 characters
        store.put(("memories", "hank"), "k" * 300, {"text": "x"})
    assert refused.value.code == "INVALID_PARAMETER" and "group_id" in refused.value.message
    store.put(("memories", "hank"), "k", {"text": "Hank's item"})  # user_position 1: hank's
    assert [i.key for i in store.search(("memories", "hank"))] == ["k"]


def test_the_docs_example_runs_as_written(server, keys, llm):
    llm.handler = lambda body: "Avoid peanuts." if "peanuts" in body["messages"][0]["content"] else "Noted."
    page = (ROOT / "docs" / "integrations" / "langgraph.md").read_text()
    code = re.search(r"<!-- example: langgraph -->\n```python\n(.*?)```", page, re.S).group(1)
    env = {
        **os.environ,
        "MEMSYS_BASE_URL": server.base_url,
        "MEMSYS_API_KEY": keys["docs"],
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test",
    }
    run = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Avoid peanuts." and "I am allergic to peanuts." in lines[1]
    assert "I am allergic to peanuts." in llm.chat_requests[1].body["messages"][0]["content"]


def test_memsys_imports_without_langgraph():
    """Only the integration needs langgraph; without it, importing the integration says what to install."""
    code = (
        "import sys; sys.modules['langgraph'] = None\n"
        "import memsys, memsys.client\n"
        "try:\n    import memsys.integrations.langgraph\nexcept ImportError as e:\n    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "pip install 'memsys-client[langgraph]'" in run.stdout and langgraph.version.__version__ == "1.2.24"
