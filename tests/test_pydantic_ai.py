"""The pydantic-ai integration (memsys.integrations.pydantic_ai) with the real ``pydantic-ai-slim`` from PyPI: an
agent on a scripted OpenAI-compatible model (benchmarks/fake_llm.py, chat completions with tool calls) calls the
memsys tools against a real ``memsys serve`` with API keys of two tenants. What the agent remembers is found
over plain HTTP and what was stored over HTTP reaches the model through search; tenancy; memsys's refusals come
back to the model as tool results; memsys's own MCP server through pydantic-ai's MCP client; the docs page's
example; and ``memsys`` importing without pydantic-ai."""

# ruff: noqa: F811  (test arguments name the fixtures imported from tests.integration_support)
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pydantic_ai
import pytest
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from benchmarks.fake_llm import FakeLLM, tool_calls
from memsys import AsyncMemsys, Memsys, Unauthorized
from memsys.integrations.pydantic_ai import INSTRUCTIONS, MemsysToolset
from tests.conftest import ServerProcess
from tests.integration_support import _empty_tables, http, keys, server  # noqa: F401  (fixtures)
from tests.tenancy_support import bearer

pytestmark = pytest.mark.integrations  # pytest -m integrations (.ci/run); not in the default run

ROOT = Path(__file__).resolve().parent.parent
V3 = "/api/v3/agentic"
EXAMPLE = ROOT / "examples" / "pydantic_ai_memory.py"


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def model(model_server: FakeLLM) -> Iterator[FakeLLM]:
    """The scripted model: each test queues its tool calls; a turn after a tool result echoes that result."""
    model_server.reset()
    model_server.handler = echo_tool_result
    yield model_server


def echo_tool_result(body: dict) -> str | None:
    last = body["messages"][-1]
    return "memory: " + last["content"] if last["role"] == "tool" else None


def agent_on(fake: FakeLLM) -> Agent:
    return Agent(OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=fake.base_url, api_key="unused")))


def tool_result(output: str) -> object:
    assert output.startswith("memory: "), output
    return json.loads(output.removeprefix("memory: "))


async def run_with(server: ServerProcess, key: str, fake: FakeLLM, prompt: str, **toolset: object) -> str:
    async with AsyncMemsys(server.base_url, api_key=key, retries=0) as client:
        result = await agent_on(fake).run(prompt, toolsets=[MemsysToolset(client, **toolset)])
        return result.output


def keyword_search(server: ServerProcess, key: str, query: str, user_id: str) -> list[str]:
    body = {"query": query, "user_id": user_id, "retrieval_mode": "bm25", "top_k": 50}
    return [m["content"] for m in http(server, key, "POST", "/retrieve_lightweight", json=body)["memories"]]


def test_what_the_agent_remembers_is_in_memsys(server, keys, model):
    model.queue(tool_calls(("remember", {"content": "My sister Ann lives in Porto."})))
    output = asyncio.run(
        run_with(server, keys["acme"], model, "My sister Ann lives in Porto.", user_id="alice", group_id="chat-1")
    )
    assert tool_result(output)["stored"] is True

    first = model.chat_requests[0].body
    assert first["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
    tools = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(tools) == {"search_memories", "remember"}
    assert set(tools["remember"]["parameters"]["properties"]) == {"content"}  # whose memory is not the model's say
    assert "user_id" not in tools["search_memories"]["parameters"]["properties"]

    assert keyword_search(server, keys["acme"], "sister Porto", "alice") == ["alice: My sister Ann lives in Porto."]
    stored = http(server, keys["acme"], "GET", "/export", params={"user_id": "alice"})["messages"]
    assert [(m["group_id"], m["sender"]) for m in stored] == [("chat-1", "alice")]


def test_what_was_stored_over_http_reaches_the_model(server, keys, model):
    for n, text in enumerate(["I moved to Lisbon last spring.", "I play the cello in an orchestra."]):
        body = {"group_id": "g2", "message_id": f"c{n}", "sender": "carol", "content": text}
        http(server, keys["acme"], "POST", "/memorize", json={**body, "create_time": f"2025-03-01T12:0{n}:00Z"})
    http(server, keys["acme"], "POST", "/flush", json={"group_id": "g2"})

    query = {"query": "Where does Carol live?", "memory_type": "event_log"}
    model.queue(tool_calls(("search_memories", query)))
    found = tool_result(asyncio.run(run_with(server, keys["acme"], model, "Where do I live?", user_id="carol")))
    assert found["count"] == len(found["memories"])
    found = found["memories"]
    over_http = http(
        server,
        keys["acme"],
        "POST",
        "/retrieve_lightweight",
        json={"query": "Where does Carol live?", "user_id": "carol", "data_source": "event_log", "top_k": 5},
    )["memories"]
    assert [m["content"] for m in found] == [m["content"] for m in over_http] and len(found) > 1
    assert any("Lisbon" in m["content"] for m in found) and {m["memory_type"] for m in found} == {"event_log"}
    assert found[0]["score"] == over_http[0]["score"] and "source_message_ids" not in found[0]


def test_the_sync_client_and_run_sync(server, keys, model):
    with Memsys(server.base_url, api_key=keys["acme"]) as client:
        memory = MemsysToolset(client, user_id="dave", retrieval_mode="bm25")  # no group: dave's personal notes
        agent = agent_on(model)
        model.queue(tool_calls(("remember", {"content": "I collect vintage postcards"})))
        assert tool_result(agent.run_sync("I collect vintage postcards", toolsets=[memory]).output)["stored"]
        model.queue(tool_calls(("search_memories", {"query": "postcards"})))
        found = tool_result(agent.run_sync("What do I collect?", toolsets=[memory]).output)["memories"]
    assert found == [
        {
            "memory_type": "message",
            "content": "dave: I collect vintage postcards",
            "timestamp": found[0]["timestamp"],
            "score": found[0]["score"],
            "formed": False,  # stored, not yet formed into memories: found all the same
        }
    ]


def test_tenants_and_users(server, keys, model):
    model.queue(tool_calls(("remember", {"content": "The vault code is 0815"})))
    asyncio.run(run_with(server, keys["acme"], model, "Remember the vault code 0815", user_id="erin", group_id="v"))

    def search(key: str, user_id: str) -> list[str]:
        model.queue(tool_calls(("search_memories", {"query": "vault code"})))
        found = tool_result(asyncio.run(run_with(server, key, model, "vault code?", user_id=user_id)))
        return [m["content"] for m in found["memories"]]

    assert search(keys["acme"], "erin") == ["erin: The vault code is 0815"]
    assert search(keys["acme"], "frank") == []  # another user of the same tenant
    assert search(keys["globex"], "erin") == []  # the same user id in another tenant


def test_a_refusal_reaches_the_model_as_a_tool_result(server, keys, model):
    model.queue(tool_calls(("remember", {"content": "   "})))
    output = asyncio.run(run_with(server, keys["acme"], model, "...", user_id="alice"))
    assert tool_result(output) == {
        "error": "memsys refused: 400 INVALID_PARAMETER: Invalid field content: must not be empty"
    }
    assert model.chat_requests[-1].body["messages"][-1]["role"] == "tool"

    async def unreachable() -> str:
        async with AsyncMemsys("http://127.0.0.1:9", retries=0) as client:  # nothing listens on port 9
            model.queue(tool_calls(("search_memories", {"query": "anything"})))
            return (await agent_on(model).run("hi", toolsets=[MemsysToolset(client, user_id="alice")])).output

    assert tool_result(asyncio.run(unreachable()))["error"].startswith("memsys refused: CONNECTION_FAILED: ")


def test_a_wrong_key_fails_the_run(server, model):
    model.queue(tool_calls(("search_memories", {"query": "anything"})))
    with pytest.raises(Unauthorized) as refused:
        asyncio.run(run_with(server, "msk_wrong", model, "hi", user_id="alice"))
    assert refused.value.status == 401 and refused.value.code == "UNAUTHORIZED"


def test_memsys_mcp_server_as_a_pydantic_ai_toolset(server, keys, model):
    arguments = {"content": "I am training for the Berlin marathon", "user_id": "gina", "group_id": "m1"}
    search = {"query": "marathon", "user_id": "gina", "group_id": "m1"}
    mcp = MCPToolset(server.base_url + "/mcp", headers=bearer(keys["acme"]), tool_error_behavior="failed")

    async def run() -> tuple[str, str]:
        agent = agent_on(model)
        async with mcp:
            model.queue(tool_calls(("add_memory", arguments)))
            stored = await agent.run("I am training for the Berlin marathon", toolsets=[mcp])
            model.queue(tool_calls(("search_memories", search)))
            found = await agent.run("What am I training for?", toolsets=[mcp])
        return stored.output, found.output

    stored, found = asyncio.run(run())
    assert tool_result(stored)["stored"] is True
    assert [m["content"] for m in tool_result(found)["memories"]] == ["gina: I am training for the Berlin marathon"]
    assert keyword_search(server, keys["acme"], "Berlin marathon", "gina") == [
        "gina: I am training for the Berlin marathon"
    ]
    offered = {tool["function"]["name"] for tool in model.chat_requests[0].body["tools"]}
    assert offered == {"add_memory", "search_memories", "get_profile", "get_memory", "correct_memory", "forget_user"}


def test_the_docs_example_runs_as_written(server, keys, model):
    page = (ROOT / "docs" / "integrations" / "pydantic-ai.md").read_text()
    block = re.search(r"<!-- example: pydantic-ai -->\n```python\n(.*?)```", page, re.S).group(1)
    assert block == EXAMPLE.read_text()

    model.queue(tool_calls(("remember", {"content": "I am vegetarian and allergic to peanuts."})), "Noted!")
    model.queue(tool_calls(("search_memories", {"query": "diet and allergies", "memory_type": "episode"})))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MEMSYS_BASE_URL": server.base_url,
        "MEMSYS_API_KEY": keys["docs"],
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "unused",
    }
    run = subprocess.run([sys.executable, str(EXAMPLE)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "1: Noted!"
    assert lines[1].startswith("2: memory: ") and "allergic to peanuts" in lines[1]
    assert lines[2] == "tools called: ['search_memories']"
    second_run = model.chat_requests[2].body["messages"]  # began with no history: Alice's words are not in it
    assert [m["role"] for m in second_run][-1] == "user" and "peanuts" not in json.dumps(second_run)


def test_memsys_imports_without_pydantic_ai():
    """Only the integration needs pydantic-ai; without it, importing the integration says what to install."""
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "import memsys, memsys.client\n"
        "try:\n    import memsys.integrations.pydantic_ai\nexcept ImportError as e:\n    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "pip install 'memsys-client[pydantic-ai]'" in run.stdout and pydantic_ai.__version__ == "2.68.0"
