"""The clients EverMemOS users run, unchanged, against a running memsys: the ``evermemos`` 0.3.13 SDK (its
eight /api/v0 methods) and the ``evermemos-mcp`` 0.5.7 MCP server (remember, recall, briefing over /api/v1,
driven over stdio by an MCP client). Both send memsys keys as their API keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from evermemos import AuthenticationError, EverMemOS
from mcp import Client, StdioServerParameters

from tests.conftest import process_env
from tests.tenancy_support import create_key

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
# Clients run unchanged against memsys serve: pytest -m integrations (.ci/run), kept out of the README's run.
pytestmark = [pytest.mark.citus, pytest.mark.integrations]

MCP_VENV = Path(os.environ.get("MEMSYS_TEST_CACHE", Path.home() / ".cache" / "memsys-tests")) / "evermemos-mcp-0.5.7"
START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def evermemos_mcp() -> Path:
    """``evermemos-mcp`` 0.5.7 in a virtual environment of its own: it needs ``mcp<2``, memsys ``mcp>=2``."""
    script = MCP_VENV / "bin" / "evermemos-mcp"
    if not script.exists():
        subprocess.run([sys.executable, "-m", "venv", str(MCP_VENV)], check=True)
        subprocess.run(
            [str(MCP_VENV / "bin" / "pip"), "install", "-q", "evermemos-mcp==0.5.7", "mcp<2"], check=True, timeout=600
        )
    return script


@pytest.fixture
def served(database_url: str, server_process_factory):
    key = create_key(database_url, "acme")
    server = server_process_factory(process_env(database_url))
    server.start()
    return server, key


def test_the_evermemos_sdk_round_trip_on_v0(served, database_url: str) -> None:
    server, key = served
    client = EverMemOS(api_key=key, base_url=server.base_url, max_retries=0, timeout=60)
    group = "group_sdk"

    meta = client.v0.memories.conversation_meta.create(
        created_at=START.isoformat(),
        scene="group_chat",
        scene_desc={"description": "Billing service design review"},
        user_details={"user_001": {"full_name": "Alice", "role": "engineer"}, "user_002": {"full_name": "Bob"}},
        extra_body={"group_id": group, "name": "Billing team"},
    )
    assert meta.status == "ok" and meta.result.id and meta.result.scene == "group_chat"

    lines = [
        ("user_001", "We chose PostgreSQL over MongoDB for the billing service."),
        ("user_002", "Good, PostgreSQL gives us transactions for the invoices."),
        ("user_001", "I will write the migration plan by Friday."),
    ]
    for number, (sender, content) in enumerate(lines):
        added = client.v0.memories.add(
            content=content,
            create_time=(START + timedelta(minutes=number)).isoformat(),
            message_id=f"sdk_{number}",
            sender=sender,
            group_id=group,
            role="user",
            flush=number == len(lines) - 1,
        )
        assert added.status == "ok" and added.request_id
    assert added.to_dict()["result"]["status_info"] == "extracted"

    status = client.v0.status.request.get(request_id=added.request_id)
    assert status.success is True and status.found is True and status.data["status"] == "success"
    unknown = client.v0.status.request.get(request_id="req_unknown")
    assert unknown.success is True and unknown.found is False and unknown.data is None

    found = client.v0.memories.search(
        extra_query={
            "query": "Which database did we choose for billing?",
            "user_id": "user_001",
            "group_ids": [group],
            "retrieve_method": "hybrid",
            "memory_types": ["episodic_memory", "profile"],
            "top_k": 10,
        }
    )
    assert found.status == "ok" and found.result.memories
    top = found.result.memories[0]
    assert "PostgreSQL" in top.episode and top.subject and top.user_id == "user_001" and top.score > 0
    assert found.result.profiles and "name: Alice" in found.result.profiles[0].description

    got = client.v0.memories.get(
        extra_query={"user_id": "user_001", "group_ids": [group], "memory_type": "episodic_memory", "page_size": 20}
    )
    assert got.status == "ok" and got.result.total_count == got.result.count >= 1
    episode = got.result.memories[0]
    assert type(episode).__name__ == "ResultMemoryEpisodicMemoryModel" and episode.episode_id == episode.id
    facts = client.v0.memories.get(extra_query={"group_ids": [group], "memory_type": "event_log"})
    assert any("migration plan" in fact.atomic_fact for fact in facts.result.memories)

    read = client.v0.memories.conversation_meta.get(extra_query={"group_id": group})
    assert read.result.scene_desc == {"description": "Billing service design review"}
    updated = client.v0.memories.conversation_meta.update(
        description="Billing service, year two", extra_body={"group_id": group}
    )
    assert updated.result.updated_fields == ["description"]
    assert client.v0.memories.conversation_meta.get(extra_query={"group_id": group}).result.description == (
        "Billing service, year two"
    )

    deleted = client.v0.memories.delete(memory_id=episode.id)
    assert deleted.result.count == 1
    again = client.v0.memories.get(
        extra_query={"user_id": "user_001", "group_ids": [group], "memory_type": "episodic_memory"}
    )
    assert again.result.total_count == got.result.total_count - 1

    # Another tenant's key sees none of it; a wrong key is refused.
    other = EverMemOS(api_key=create_key(database_url, "other"), base_url=server.base_url, max_retries=0)
    nothing = other.v0.memories.search(extra_query={"query": "PostgreSQL", "group_ids": [group]})
    assert nothing.result.memories == [] and nothing.result.total_count == 0
    with pytest.raises(AuthenticationError):
        EverMemOS(api_key="msk_wrong", base_url=server.base_url, max_retries=0).v0.memories.get(
            extra_query={"group_ids": [group]}
        )


def test_evermemos_mcp_remember_recall_briefing_on_v1(served, evermemos_mcp: Path, tmp_path: Path) -> None:
    server, key = served
    params = StdioServerParameters(
        command=str(evermemos_mcp),
        env={
            "PATH": os.environ["PATH"],
            "EVERMEMOS_BASE_URL": server.base_url,
            "EVERMEMOS_API_KEY": key,
            "EVERMEMOS_API_VERSION": "v1",
            "EVERMEMOS_USER_ID": "mcp-user",
            "EVERMEMOS_DEFAULT_SPACE": "coding:billing",
        },
        cwd=str(tmp_path),
    )

    async def run() -> dict[str, dict]:
        answers = {}
        async with Client(params, read_timeout_seconds=120) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"remember", "recall", "briefing"} <= tools
            for name, arguments in [
                ("remember", {"content": "We chose PostgreSQL over MongoDB for the billing service",
                              "space_id": "coding:billing", "description": "Billing service", "include_status": True}),
                ("remember", {"content": "Invoices are kept for ten years", "space_id": "coding:billing"}),
                ("recall", {"query": "Which database did we choose?", "space_id": "coding:billing", "top_k": 5}),
                ("briefing", {"space_id": "coding:billing"}),
            ]:  # fmt: skip
                called = await client.call_tool(name, arguments)
                answers.setdefault(name, json.loads(called.content[0].text))
                answers[f"{name}:last"] = json.loads(called.content[0].text)
        return answers

    answers = anyio.run(run)
    remembered = answers["remember"]
    assert remembered["ok"] is True and remembered["request_id"], remembered
    assert remembered["request_status"]["status"] == "success", remembered  # flushed: formed before the answer
    assert answers["remember:last"]["ok"] is True
    recalled = answers["recall"]
    assert recalled["ok"] is True, recalled
    assert "PostgreSQL" in recalled["results"][0]["snippet"]
    assert all(result["space_id"] == "coding:billing" for result in recalled["results"])
    briefing = answers["briefing"]
    assert briefing["ok"] is True and briefing["highlights"], briefing
    assert any("Invoices" in item["snippet"] or "PostgreSQL" in item["snippet"] for item in briefing["highlights"])
