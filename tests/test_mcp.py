"""memsys's own MCP server, driven by the real ``mcp`` client: over stdio (``memsys mcp`` as an agent's MCP
config launches it) and over streamable HTTP at ``/mcp`` of a running ``memsys serve``, behind its keys."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import process_env
from tests.tenancy_support import bearer, create_key

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"add_memory", "search_memories", "get_profile", "get_memory", "correct_memory", "forget_user"}
CONVERSATION = [
    ("alice", "I just moved to Lisbon and I am learning Portuguese every morning."),
    ("bob", "Nice! Lisbon has great custard tarts, try the ones in Belém."),
    ("alice", "I love custard tarts, pastel de nata is my favourite dessert."),
]


def _result(called) -> dict:
    assert not called.is_error, called.content
    return json.loads(called.content[0].text)


async def _round_trip(client: Client, group: str) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= TOOLS
    assert all(len(tools[name].description) > 80 for name in TOOLS)  # enough for an agent to choose
    assert {"content", "user_id"} <= set(tools["add_memory"].input_schema["required"])

    for sender, content in CONVERSATION[:-1]:
        stored = _result(
            await client.call_tool(
                "add_memory",
                {"content": content, "user_id": sender, "group_id": group, "metadata": {"channel": "chat"}},
            )
        )
        assert stored["stored"] is True and stored["status"] == "accumulated"
    sender, content = CONVERSATION[-1]
    flushed = _result(
        await client.call_tool(
            "add_memory",
            {"content": content, "user_id": sender, "group_id": group, "metadata": {"channel": "chat"}, "flush": True},
        )
    )
    assert flushed["status"] == "extracted" and flushed["memories"]
    assert any("Lisbon" in memory["content"] for memory in flushed["memories"])

    found = _result(await client.call_tool("search_memories", {"query": "Where does Alice live?", "user_id": "alice"}))
    assert found["count"] >= 1 and "Lisbon" in found["memories"][0]["content"]
    assert all(memory["user_id"] in ("alice", None) for memory in found["memories"])

    # The caller's metadata, carried to the memories, filters the search.
    question = {"query": "Where does Alice live?", "memory_type": "event_log"}
    by_channel = _result(await client.call_tool("search_memories", {**question, "filters": {"channel": "chat"}}))
    assert by_channel["count"] >= 1 and "Lisbon" in by_channel["memories"][0]["content"]
    other = _result(await client.call_tool("search_memories", {**question, "filters": {"channel": {"in": ["email"]}}}))
    assert other["count"] == 0
    refused = await client.call_tool("search_memories", {**question, "filters": {"channel": {"like": "c%"}}})
    assert refused.is_error and "filters.channel.like" in refused.content[0].text

    profile = _result(await client.call_tool("get_profile", {"user_id": "alice"}))
    assert profile["user_id"] == "alice" and [p["group_id"] for p in profile["profiles"]] == [group]

    # One memory read, corrected, deleted and restored, its history kept.
    memory_id = found["memories"][0]["id"]
    corrected = _result(
        await client.call_tool("correct_memory", {"memory_id": memory_id, "content": "Alice lives in Porto."})
    )
    assert corrected["memory"]["content"] == "Alice lives in Porto."
    deleted = _result(await client.call_tool("correct_memory", {"memory_id": memory_id, "delete": True}))
    assert deleted["status"] == "deleted"
    hidden = _result(await client.call_tool("search_memories", {"query": "Porto", "user_id": "alice"}))
    assert memory_id not in [memory["id"] for memory in hidden["memories"]]
    _result(await client.call_tool("correct_memory", {"memory_id": memory_id, "restore": True}))
    read = _result(await client.call_tool("get_memory", {"memory_id": memory_id, "history": True}))
    assert read["memory"]["status"] == "current"
    assert [event["event"] for event in read["history"] if event["event"] != "reembedded"] == [
        "formed",
        "edited",
        "deleted",
        "restored",
    ]
    assert all(event["actor"] == "mcp" for event in read["history"][1:] if event["event"] != "reembedded")
    refused = await client.call_tool("correct_memory", {"memory_id": memory_id})
    assert refused.is_error and "content" in refused.content[0].text
    missing = await client.call_tool("get_memory", {"memory_id": "00000000-0000-4000-8000-000000000000"})
    assert missing.is_error and "No memory" in missing.content[0].text

    refused = await client.call_tool("search_memories", {"query": "x", "user_id": " "})
    assert refused.is_error and "user_id" in refused.content[0].text
    refused = await client.call_tool("add_memory", {"content": "hi", "user_id": "alice", "sender": "bob"})
    assert refused.is_error and "group_id" in refused.content[0].text

    forgotten = _result(await client.call_tool("forget_user", {"user_id": "alice"}))
    assert forgotten["user_id"] == "alice" and forgotten["deleted"]["messages"] == 2
    after = _result(await client.call_tool("search_memories", {"query": "Lisbon custard tarts", "user_id": "alice"}))
    assert after["count"] == 0


def test_memsys_mcp_over_stdio(database_url: str) -> None:
    env = {**os.environ, **process_env(database_url), "MEMSYS_WORKERS": "1"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=env, cwd=str(ROOT))

    async def run() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await _round_trip(client, "stdio_group")

    anyio.run(run)


def test_mcp_over_streamable_http_behind_keys(database_url: str, server_process_factory) -> None:
    key = create_key(database_url, "acme")
    server = server_process_factory(process_env(database_url))
    server.start()
    url = server.base_url + "/mcp"

    async def run() -> None:
        async with create_mcp_http_client(headers=bearer(key)) as http:
            async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client:
                await _round_trip(client, "http_group")
        # Without a key (a key exists, so anonymous access is closed): the envelope's 401, no MCP at all.
        async with httpx2.AsyncClient() as http:
            response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert response.status_code == 401 and response.json()["code"] == "UNAUTHORIZED"

    anyio.run(run)

    # The tools wrote in the key's tenant only.
    import psycopg

    with psycopg.connect(database_url) as conn:
        tenants = conn.execute("SELECT DISTINCT tenant_id FROM messages").fetchall()
    assert tenants == [("acme",)]
