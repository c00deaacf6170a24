"""The LlamaIndex integration (memsys.integrations.llamaindex) with the real ``llama-index-core`` from PyPI against a
real ``memsys serve``, with API keys of two tenants: the retriever returns memsys's hybrid retrieval as nodes
with scores and metadata; the memory block recalls into ``Memory`` and memorizes what ``Memory`` flushes; both
ways round (stored through LlamaIndex and found over plain HTTP, and the other way round); chat engines driven
by the scripted OpenAI-compatible model (benchmarks/fake_llm.py); sync and async; tenancy; errors; the docs page's
examples; and ``memsys`` importing without LlamaIndex."""

# ruff: noqa: F811  (test arguments name the fixtures imported from tests.integration_support)
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_index.core
import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.chat_engine import ContextChatEngine
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.memory import Memory
from llama_index.core.schema import MetadataMode
from openai import OpenAI

from memsys import AsyncMemsys, InvalidParameter, Memsys, Unauthorized
from memsys.integrations.llamaindex import MemsysMemoryBlock, MemsysRetriever
from tests.conftest import ServerProcess
from tests.integration_support import _empty_tables, acme, http, keys, llm, server, wait_for_vectors  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integrations  # pytest -m integrations (.ci/run); not in the default run

ROOT = Path(__file__).resolve().parent.parent
V3 = "/api/v3/agentic"


class ScriptedLLM(CustomLLM):
    """A LlamaIndex chat model that asks an OpenAI-compatible server (here benchmarks/fake_llm.py) through the
    ``openai`` package: llama-index-llms-openai cannot be installed beside the openai memsys tests with."""

    base_url: str

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=8000, num_output=256, is_chat_model=True, model_name="fake")

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        client = OpenAI(base_url=self.base_url, api_key="test", max_retries=0)
        sent = [{"role": m.role.value, "content": m.content or ""} for m in messages]
        answer = client.chat.completions.create(model="fake", messages=sent).choices[0].message.content
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=answer))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.chat([ChatMessage(role="user", content=prompt)]).message.content)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        yield self.complete(prompt)


def memorize(server: ServerProcess, key: str, group_id: str, *said: tuple[str, str]) -> None:
    for n, (sender, text) in enumerate(said):
        body = {
            "group_id": group_id,
            "message_id": f"{group_id}-{n}",
            "sender": sender,
            "content": text,
            "create_time": f"2025-03-01T12:0{n}:00Z",
        }
        http(server, key, "POST", "/memorize", json=body)


def keyword_search(server: ServerProcess, key: str, query: str, group_id: str) -> list[dict]:
    body = {"query": query, "group_id": group_id, "retrieval_mode": "bm25", "top_k": 50}
    return http(server, key, "POST", "/retrieve_lightweight", json=body)["memories"]


def test_the_retriever_returns_memsys_results_as_nodes(server, keys, acme):
    memorize(server, keys["acme"], "r1", ("carol", "I am vegetarian, and allergic to peanuts."))
    memorize(server, keys["acme"], "r1b", ("carol", "My favourite city is Lisbon."))
    http(server, keys["acme"], "POST", "/flush", json={"group_id": "r1"})
    wait_for_vectors(server, keys["acme"], "carol", 2)

    retriever = MemsysRetriever(client=acme, user_id="carol", data_source="event_log", top_k=5)
    hits = retriever.retrieve("Is Carol allergic to peanuts?")
    body = {"query": "Is Carol allergic to peanuts?", "user_id": "carol", "data_source": "event_log", "top_k": 5}
    over_http = http(server, keys["acme"], "POST", "/retrieve_lightweight", json=body)["memories"]
    assert [h.node.node_id for h in hits] == [m["id"] for m in over_http] and len(hits) > 1
    first = hits[0]
    assert "peanuts" in first.node.get_content() and first.score == over_http[0]["score"]
    assert first.node.metadata["memory_type"] == "event_log" and first.node.metadata["group_id"] == "r1"
    assert first.node.metadata["source_message_ids"] == ["r1-0"] and "content" not in first.node.metadata
    for_llm = first.node.get_content(metadata_mode=MetadataMode.LLM)
    assert for_llm.startswith(f"timestamp: {over_http[0]['timestamp']}") and "memcell_id" not in for_llm

    assert MemsysRetriever(client=acme, group_id="elsewhere").retrieve("peanuts") == []
    episodes = MemsysRetriever(client=acme, group_id="r1b", retrieval_mode="bm25").retrieve("Lisbon")
    assert [h.node.get_content() for h in episodes] == ["carol: My favourite city is Lisbon."]
    assert episodes[0].node.metadata["formed"] is False  # not formed yet: the message itself


def test_the_memory_block_stores_what_memory_flushes_and_recalls_it(server, keys, acme):
    block = MemsysMemoryBlock(client=acme, user_id="dave")
    memory = Memory.from_defaults(session_id="s1", token_limit=30, memory_blocks=[block])
    memory.put_messages(
        [
            ChatMessage(role="system", content="You are a cooking assistant."),
            ChatMessage(role="user", content="I am allergic to peanuts and to shellfish."),
            ChatMessage(role="assistant", content="Noted: no peanuts, no shellfish."),
            ChatMessage(role="user", content="Tomorrow I cook for my sister Ann and her two children."),
            ChatMessage(role="assistant", content="Lovely."),
        ]
    )
    # The flushed messages are in memsys, in the session's group, as dave's and the assistant's.
    stored = sorted(m["content"] for m in keyword_search(server, keys["acme"], "peanuts shellfish cooking", "s1"))
    assert stored == [
        "assistant: Noted: no peanuts, no shellfish.",
        "dave: I am allergic to peanuts and to shellfish.",
        "system: You are a cooking assistant.",
    ]
    assert len(memory.get_all()) == 5 and len(memory.get()) < 6  # short-term kept the newest turns only

    # Recalled for the new input, into the system message under the block's name.
    system = memory.get(input="What should I avoid with peanuts?")[0]
    assert system.role == MessageRole.SYSTEM and "<memsys>" in system.content
    assert "] dave: I am allergic to peanuts and to shellfish." in system.content

    # The other way round: memorized over HTTP in another session, recalled in a new Memory for dave.
    memorize(server, keys["acme"], "s-http", ("dave", "My bike is a red Peugeot"))
    fresh = Memory.from_defaults(session_id="s2", token_limit=4000, memory_blocks=[block])
    recalled = fresh.get(input="Which bike do I ride? Peugeot?")[0].content
    assert "dave: My bike is a red Peugeot" in recalled
    assert keyword_search(server, keys["acme"], "Peugeot", "s2") == []  # nothing flushed: nothing stored


def test_chat_engines(server, keys, acme, llm):
    memorize(server, keys["acme"], "c1", ("erin", "I am vegetarian and I live in Porto."))
    wait_for_vectors(server, keys["acme"], "erin", 1)
    llm.handler = lambda body: "Try a bean stew." if "vegetarian" in body["messages"][0]["content"] else "Hello."

    retriever = MemsysRetriever(client=acme, user_id="erin", top_k=3)
    memory = Memory.from_defaults(session_id="c2", token_limit=4000)
    engine = ContextChatEngine.from_defaults(retriever=retriever, memory=memory, llm=ScriptedLLM(base_url=llm.base_url))
    answer = engine.chat("What should I cook tonight?")
    assert str(answer) == "Try a bean stew." and answer.source_nodes[0].node.metadata["user_id"] == "erin"
    assert "erin: I am vegetarian and I live in Porto." in llm.chat_requests[0].body["messages"][0]["content"]

    # Storing each turn at once: a Memory that flushes all but the newest message, through the block.
    block = MemsysMemoryBlock(client=acme, user_id="erin")
    memory = Memory.from_defaults(session_id="c3", token_limit=40, memory_blocks=[block])
    engine = ContextChatEngine.from_defaults(retriever=retriever, memory=memory, llm=ScriptedLLM(base_url=llm.base_url))
    engine.chat("My partner is called Sam and loves chickpeas, but hates garlic and onions.")
    engine.chat("And what about dessert for the two of us?")
    hits = keyword_search(server, keys["acme"], "Sam chickpeas garlic", "c3")
    assert [m["content"] for m in hits] == [
        "erin: My partner is called Sam and loves chickpeas, but hates garlic and onions."
    ]


def test_async_retriever_and_block(server, keys):
    async def run() -> tuple:
        async with AsyncMemsys(server.base_url, api_key=keys["acme"]) as client:
            block = MemsysMemoryBlock(async_client=client, user_id="frank", group_id="a1")
            await block.aput(
                [ChatMessage(role="user", content="My car is a blue Volvo"), ChatMessage(role="assistant", content="")]
            )
            recalled = await block.aget([ChatMessage(role="user", content="Which car, the Volvo?")])
            hits = await MemsysRetriever(async_client=client, group_id="a1", retrieval_mode="bm25").aretrieve("Volvo")
            return recalled, hits

    recalled, hits = asyncio.run(run())
    assert recalled.endswith("] frank: My car is a blue Volvo") and recalled.startswith("- [")
    assert [h.node.get_content() for h in hits] == ["frank: My car is a blue Volvo"]  # the empty reply not stored
    with Memsys(server.base_url, api_key=keys["acme"]) as client:  # a sync client only: aretrieve in a thread
        threaded = asyncio.run(MemsysRetriever(client=client, group_id="a1", retrieval_mode="bm25").aretrieve("Volvo"))
        assert [h.node.node_id for h in threaded] == [h.node.node_id for h in hits]


def test_tenants_and_keys(server, keys, acme):
    memorize(server, keys["acme"], "t1", ("gina", "The vault code is 0815"))
    with Memsys(server.base_url, api_key=keys["globex"]) as globex:
        assert MemsysRetriever(client=globex, user_id="gina", retrieval_mode="bm25").retrieve("vault code") == []
        block = MemsysMemoryBlock(client=globex, user_id="gina")
        assert asyncio.run(block.aget([ChatMessage(role="user", content="vault code?")])) == ""
    assert len(MemsysRetriever(client=acme, user_id="gina", retrieval_mode="bm25").retrieve("vault code")) == 1
    with Memsys(server.base_url, api_key="", retries=0) as anonymous, pytest.raises(Unauthorized) as refused:
        MemsysRetriever(client=anonymous).retrieve("vault code")
    assert refused.value.status == 401 and refused.value.code == "UNAUTHORIZED"


def test_errors(acme):
    with pytest.raises(InvalidParameter) as refused:
        MemsysRetriever(client=acme, top_k=1000).retrieve("anything")
    assert refused.value.code == "INVALID_PARAMETER" and "top_k" in refused.value.message
    block = MemsysMemoryBlock(client=acme, user_id="hank")
    with pytest.raises(ValueError, match="give group_id"):  # called directly, without a Memory's session
        asyncio.run(block.aput([ChatMessage(role="user", content="hello")]))
    assert asyncio.run(block.aget([])) == ""  # nothing to query with: nothing recalled, no request


def test_the_docs_examples_run_as_written(server, keys, llm):
    page = (ROOT / "docs" / "integrations" / "llamaindex.md").read_text()
    env = {**os.environ, "MEMSYS_BASE_URL": server.base_url, "MEMSYS_API_KEY": keys["docs"]}

    def run(code: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    lines = run(re.search(r"<!-- example: llamaindex -->\n```python\n(.*?)```", page, re.S).group(1))
    assert lines[0] == "system True" and "event_log" in lines[1] and "peanuts" in lines[1]

    # The chat example, with the scripted model in place of the two OpenAI lines.
    chat = re.search(r"<!-- example: llamaindex-chat -->\n```python\n(.*?)```", page, re.S).group(1)
    openai_lines = (
        "from llama_index.llms.openai import OpenAI  # pip install llama-index-llms-openai\n"
        'llm = OpenAI(model="gpt-4o-mini")\n'
    )
    assert openai_lines in chat
    scripted = f"from tests.test_llamaindex import ScriptedLLM\nllm = ScriptedLLM(base_url={llm.base_url!r})\n"
    llm.handler = lambda body: "A peanut-free curry." if "peanuts" in body["messages"][0]["content"] else "Anything."
    assert run(chat.replace(openai_lines, scripted)) == ["A peanut-free curry."]


def test_memsys_imports_without_llamaindex():
    """Only the integration needs llama-index-core; without it, importing the integration says what to install."""
    code = (
        "import sys; sys.modules['llama_index'] = None\n"
        "import memsys, memsys.client\n"
        "try:\n    import memsys.integrations.llamaindex\nexcept ImportError as e:\n    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "pip install 'memsys-client[llamaindex]'" in run.stdout and llama_index.core.__version__ == "0.14.25"
