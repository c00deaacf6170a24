"""The LangChain integration (memsys.integrations.langchain) with the real ``langchain-core`` from PyPI against a
real ``memsys serve``, with API keys of two tenants: the chat history memorizes each message and reads the
session back, the retriever returns memsys's hybrid retrieval as documents with scores and metadata; both
ways round (stored through LangChain and found over plain HTTP, and the other way round), sync and async,
tenancy, errors, the docs page's example, and ``memsys`` importing without LangChain."""

# ruff: noqa: F811  (test arguments name the fixtures imported from tests.integration_support)
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import langchain_core
import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memsys import AsyncMemsys, InvalidParameter, Memsys, Unauthorized
from memsys.integrations.langchain import MemsysChatMessageHistory, MemsysRetriever
from tests.conftest import ServerProcess
from tests.integration_support import _empty_tables, acme, http, keys, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integrations  # pytest -m integrations (.ci/run); not in the default run

ROOT = Path(__file__).resolve().parent.parent
V3 = "/api/v3/agentic"


def keyword_search(server: ServerProcess, key: str, query: str, group_id: str) -> list[str]:
    body = {"query": query, "group_id": group_id, "retrieval_mode": "bm25", "top_k": 50}
    return [m["content"] for m in http(server, key, "POST", "/retrieve_lightweight", json=body)["memories"]]


def test_the_history_memorizes_each_message_and_reads_the_session_back(server, keys, acme):
    history = MemsysChatMessageHistory("s1", "alice", client=acme, user_name="Alice")
    history.add_messages([SystemMessage("You are a cooking assistant."), HumanMessage("I am allergic to peanuts.")])
    history.add_ai_message(AIMessage("Noted: no peanuts.", id="reply-1"))
    history.add_message(AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "call-1"}]))  # no words
    assert sorted(keyword_search(server, keys["acme"], "peanuts", "s1")) == [
        "Alice: I am allergic to peanuts.",
        "assistant: Noted: no peanuts.",
    ]

    # Stored over HTTP into the session: read back by the history, as the user's and the assistant's.
    for n, (sender, text) in enumerate([("alice", "And I love roast duck."), ("assistant", "Duck it is.")]):
        body = {
            "group_id": "s1",
            "message_id": f"h{n}",
            "sender": sender,
            "content": text,
            "create_time": f"2099-01-01T00:00:0{n}Z",
        }
        http(server, keys["acme"], "POST", "/memorize", json=body)
    messages = history.messages
    assert [(m.type, m.text) for m in messages] == [
        ("system", "You are a cooking assistant."),
        ("human", "I am allergic to peanuts."),
        ("ai", "Noted: no peanuts."),
        ("human", "And I love roast duck."),
        ("ai", "Duck it is."),
    ]
    assert messages[2].id == "reply-1" and messages[3].id == "h0"
    history.add_ai_message(AIMessage("Noted: no peanuts.", id="reply-1"))  # its id again: stored once
    assert len(history.messages) == 5

    history.clear()
    assert history.messages == [] and keyword_search(server, keys["acme"], "peanuts", "s1") == []
    assert MemsysChatMessageHistory("s1-other", "alice", client=acme).messages == []


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # still in langchain-core 1.x
def test_the_history_in_a_runnable_with_message_history(server, keys, acme):
    seen: list[int] = []

    def model(prompt: list) -> AIMessage:  # a stand-in model: says how many messages it was given
        seen.append(len(prompt))
        return AIMessage(f"I have {len(prompt)} messages of you")

    chain = RunnableWithMessageHistory(
        RunnableLambda(model), lambda session_id: MemsysChatMessageHistory(session_id, "bob", client=acme)
    )
    config = {"configurable": {"session_id": "s2"}}
    chain.invoke([HumanMessage("Hello, I am Bob")], config=config)
    chain.invoke([HumanMessage("My sister is called Ann")], config=config)
    assert seen == [1, 3]  # the second turn came with the first turn, read back from memsys
    assert keyword_search(server, keys["acme"], "sister Ann", "s2") == ["bob: My sister is called Ann"]


def test_the_retriever_returns_memsys_results_as_documents(server, keys, acme):
    for n, text in enumerate(["I am vegetarian, and allergic to peanuts.", "My favourite city is Lisbon."]):
        body = {
            "group_id": "r1",
            "message_id": f"r{n}",
            "sender": "carol",
            "content": text,
            "create_time": f"2025-03-01T12:0{n}:00Z",
        }
        http(server, keys["acme"], "POST", "/memorize", json=body)
    http(server, keys["acme"], "POST", "/flush", json={"group_id": "r1"})

    retriever = MemsysRetriever(client=acme, group_id="r1", data_source="event_log", top_k=5)
    documents = retriever.invoke("Is Carol allergic to peanuts?")
    over_http = http(
        server,
        keys["acme"],
        "POST",
        "/retrieve_lightweight",
        json={"query": "Is Carol allergic to peanuts?", "group_id": "r1", "data_source": "event_log", "top_k": 5},
    )["memories"]
    assert [d.id for d in documents] == [m["id"] for m in over_http] and len(documents) > 1
    first = documents[0]
    assert isinstance(first, Document) and "peanuts" in first.page_content
    assert first.metadata["score"] == over_http[0]["score"] and first.metadata["memory_type"] == "event_log"
    assert first.metadata["group_id"] == "r1" and first.metadata["source_message_ids"] == ["r0"]
    assert "content" not in first.metadata

    # A field changed for one query; an episode search through the default mode (RRF).
    assert retriever.invoke("peanuts", group_id="elsewhere") == []
    episodes = MemsysRetriever(client=acme, group_id="r1").invoke("Lisbon")
    assert episodes and episodes[0].metadata["memory_type"] == "episode"


def test_async_history_and_retriever(server, keys):
    async def run() -> tuple[list, list[Document]]:
        async with AsyncMemsys(server.base_url, api_key=keys["acme"]) as client:
            history = MemsysChatMessageHistory("s3", "dave", async_client=client)
            await history.aadd_messages([HumanMessage("My bike is a red Peugeot"), AIMessage("A fine bike.")])
            messages = await history.aget_messages()
            retriever = MemsysRetriever(async_client=client, group_id="s3", retrieval_mode="bm25")
            documents = await retriever.ainvoke("Peugeot bike")
            await history.aclear()
            return messages, documents

    messages, documents = asyncio.run(run())
    assert [(m.type, m.text) for m in messages] == [("human", "My bike is a red Peugeot"), ("ai", "A fine bike.")]
    assert documents[0].page_content == "dave: My bike is a red Peugeot" and documents[0].metadata["formed"] is False


def test_tenants_and_keys(server, keys, acme):
    MemsysChatMessageHistory("s4", "erin", client=acme).add_user_message("The vault code is 0815")
    with Memsys(server.base_url, api_key=keys["globex"]) as globex:
        assert MemsysChatMessageHistory("s4", "erin", client=globex).messages == []
        assert MemsysRetriever(client=globex, group_id="s4", retrieval_mode="bm25").invoke("vault code") == []
    assert len(MemsysRetriever(client=acme, group_id="s4", retrieval_mode="bm25").invoke("vault code")) == 1
    with Memsys(server.base_url, api_key="", retries=0) as anonymous, pytest.raises(Unauthorized) as refused:
        MemsysRetriever(client=anonymous).invoke("vault code")
    assert refused.value.status == 401 and refused.value.code == "UNAUTHORIZED"


def test_a_wrong_field_is_a_400_naming_it(acme):
    with pytest.raises(InvalidParameter) as refused:
        MemsysRetriever(client=acme, top_k=1000).invoke("anything")
    assert refused.value.code == "INVALID_PARAMETER" and "top_k" in refused.value.message


def test_the_docs_example_runs_as_written(server, keys):
    page = (ROOT / "docs" / "integrations" / "langchain.md").read_text()
    code = re.search(r"<!-- example: langchain -->\n```python\n(.*?)```", page, re.S).group(1)
    env = {**os.environ, "MEMSYS_BASE_URL": server.base_url, "MEMSYS_API_KEY": keys["docs"]}
    run = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "['human', 'ai']"
    assert "event_log" in lines[1] and "peanuts" in lines[1] and "peanuts" in run.stdout.split("\n", 2)[-1]


def test_memsys_imports_without_langchain():
    """Only the integration needs langchain-core; without it, importing the integration says what to install."""
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "import memsys, memsys.client\n"
        "try:\n    import memsys.integrations.langchain\nexcept ImportError as e:\n    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "pip install 'memsys-client[langchain]'" in run.stdout and langchain_core.__version__ == "1.8.3"
