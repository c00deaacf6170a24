"""The typed Python client (memsys.client) against a real ``memsys serve`` on a real socket, with API keys of two
tenants: round trips both ways (stored through the client and found over plain HTTP, and the other way round),
every v3 operation, the batch helper, the async client, tenancy and typed errors. The LLM of the agent and of
agentic retrieval is the scripted OpenAI-compatible server, named by each request's ``llm_config``."""

# ruff: noqa: F811  (test arguments name the fixtures imported from tests.integration_support)
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pydantic
import pytest

from benchmarks.fake_llm import FakeLLM, tool_calls
from memsys import AsyncMemsys, InvalidParameter, Memsys, NotFound, Unauthorized
from memsys.models import ConversationMeta, MemorizeResult, RetrievedMemory
from tests.conftest import ServerProcess
from tests.integration_support import _empty_tables, acme, http, keys, server  # noqa: F401  (fixtures)
from tests.tenancy_support import create_key

V3 = "/api/v3/agentic"
SUFFICIENT = {"is_sufficient": True, "reasoning": "The memories say what Alice eats", "refined_queries": []}
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


KEY_NAMES = ("acme", "globex")
SERVER_ENV = {"MEMSYS_LLM_ALLOW_PRIVATE_URLS": "true"}  # llm_config may name the scripted LLM


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def message(n: int, group: str, sender: str, content: str) -> dict:
    return {
        "group_id": group,
        "message_id": f"{group}-m{n}",
        "create_time": START + timedelta(minutes=n),
        "sender": sender,
        "content": content,
    }


def test_stored_by_the_client_found_over_http_and_back(server, keys, acme):
    stored = acme.memorize(**message(1, "dinner", "alice", "I am vegetarian, and allergic to peanuts."))
    assert isinstance(stored, MemorizeResult) and stored.status_info == "accumulated"
    found = http(server, keys["acme"], "POST", "/retrieve_lightweight", json={"query": "peanuts", "group_id": "dinner"})
    assert [m["content"] for m in found["memories"]] == ["alice: I am vegetarian, and allergic to peanuts."]

    body = {**message(2, "dinner", "bob", "Then the Thai place on Friday at 7pm?"), "create_time": "2025-03-01T12:02Z"}
    http(server, keys["acme"], "POST", "/memorize", json=body)
    result = acme.retrieve_lightweight(query="Thai place Friday", group_id="dinner", retrieval_mode="bm25")
    first = result.memories[0]
    assert isinstance(first, RetrievedMemory) and first.memory_type == "message" and first.formed is False
    assert first.content == "bob: Then the Thai place on Friday at 7pm?" and 0 < first.score <= 1
    assert result.metadata.retrieval_mode == "bm25" and result.count == len(result.memories)

    # The same message_id again is stored once: what makes memorize safe to retry.
    again = acme.memorize(**message(1, "dinner", "alice", "I am vegetarian, and allergic to peanuts."))
    assert again.status_info == "duplicate"

    flushed = acme.flush(group_id="dinner")
    assert flushed.status_info == "extracted" and flushed.count == len(flushed.saved_memories) > 0
    facts = acme.retrieve_lightweight(query="What can Alice not eat?", group_id="dinner", data_source="event_log")
    assert "peanuts" in facts.memories[0].content and facts.memories[0].memory_type == "event_log"
    over_http = http(server, keys["acme"], "GET", "/memories", params={"group_id": "dinner"})
    listed = acme.list_memories(group_id="dinner")
    assert {m["id"] for m in listed.memories} == {m["id"] for m in over_http["memories"]}
    assert {m.id for m in flushed.saved_memories} <= {m["id"] for m in listed.memories}
    one_by_one = list(acme.iter_memories(group_id="dinner", memory_type="event_log", limit=1))
    assert len(one_by_one) == len([m for m in listed.memories if m["memory_type"] == "event_log"]) > 1

    context = acme.context(query="Suggest a dish for Alice", group_id="dinner", system_prompt="You plan dinners.")
    assert context.messages[0] == {"role": "system", "content": "You plan dinners."}
    assert "peanuts" in context.messages[1]["content"] and context.total_tokens <= context.context_max_tokens
    assert context.sections["knowledge"].sources


def test_conversation_meta_round_trip_and_not_found(server, keys, acme):
    meta = {
        "version": "1.0",
        "scene": "group_chat",
        "scene_desc": {"description": "planning"},
        "name": "Trip",
        "description": "Planning the trip",
        "group_id": "trip",
        "created_at": "2025-01-15T10:00:00+08:00",
        "default_timezone": "Asia/Shanghai",
        "user_details": {"alice": {"full_name": "Alice", "role": "user"}},
    }
    saved = acme.save_conversation_meta(meta)
    assert saved.group_id == "trip" and saved.name == "Trip"
    read = acme.get_conversation_meta("trip")
    assert isinstance(read, ConversationMeta) and read.user_details["alice"].full_name == "Alice"
    assert read.model_dump() == {**http(server, keys["acme"], "GET", "/conversation-meta", params={"group_id": "trip"})}
    with pytest.raises(NotFound) as refused:
        acme.get_conversation_meta("no-such-group")
    assert refused.value.status == 404 and refused.value.code == "NOT_FOUND"


def test_forget_and_export_any_id_through_the_query_routes(server, keys, acme):
    user = "team/carol"  # a "/" only the query-parameter routes carry
    acme.memorize(message_id="c1", sender=user, content="My locker code is 4711", create_time=START)
    exported = acme.export_user(user)
    assert exported["format"] == "memsys.user-export" and [m["content"] for m in exported["messages"]] == [
        "My locker code is 4711"
    ]
    assert http(server, keys["acme"], "GET", "/export", params={"user_id": user})["messages"] == exported["messages"]
    forgotten = acme.forget_user(user)
    assert forgotten and acme.export_user(user)["messages"] == []

    acme.memorize(**message(1, "ops/night", "dave", "The backup runs at 2am"))
    assert acme.list_memories(group_id="ops/night").count == 0  # not formed yet, but stored:
    assert acme.retrieve_lightweight(query="backup", group_id="ops/night", retrieval_mode="bm25").count == 1
    acme.forget_group("ops/night")
    assert acme.retrieve_lightweight(query="backup", group_id="ops/night", retrieval_mode="bm25").count == 0


def test_agent_and_agentic_retrieval_with_a_scripted_llm(server, acme, llm):
    acme.memorize(**message(1, "lunch", "alice", "I love Beijing roast duck"))
    acme.flush(group_id="lunch")
    config = {"base_url": llm.base_url, "api_key": "test", "model": "fake"}
    llm.on("is_sufficient", SUFFICIENT)
    agentic = acme.retrieve_agentic(query="What food does Alice love?", group_id="lunch", llm_config=config)
    assert agentic.metadata.retrieval_mode == "agentic" and agentic.metadata.is_sufficient is True
    assert any("duck" in memory["content"] for memory in agentic.memories)

    llm.queue(tool_calls(("search_memories", {"query": "Alice favourite food"})), "Alice loves roast duck.")
    answer = acme.agent(
        group_id="lunch",
        context_manage_mode="auto",
        messages=[{"role": "user", "content": "What food does Alice love?"}],
        llm_config=config,
    )
    assert answer.success and answer.answer == "Alice loves roast duck."
    assert answer.metadata.stop_reason == "answered" and answer.metadata.tool_calls[0].name == "search_memories"
    assert "duck" in [m for m in answer.messages if m["role"] == "tool"][0]["content"]


def test_memorize_conversation_in_order_with_a_progress_bar(server, keys, acme, capfd):
    messages = [message(n, "standup", f"dev{n % 3}", f"Update number {n}: the build is green") for n in range(30)]
    results = acme.memorize_conversation(messages, concurrency=8)
    assert [r.status_info for r in results] == ["accumulated"] * 30
    bar = capfd.readouterr().err
    assert "memorize: 100%" in bar and "30/30" in bar
    again = acme.memorize_conversation(messages, concurrency=8, progress=False)
    assert [r.status_info for r in again] == ["duplicate"] * 30
    stored = http(
        server,
        keys["acme"],
        "POST",
        "/retrieve_lightweight",
        json={"query": "Update number 17", "group_id": "standup", "retrieval_mode": "bm25", "top_k": 100},
    )
    assert stored["count"] == 30


def test_the_async_client(server, keys):
    async def run() -> tuple[list[MemorizeResult], int, list[str]]:
        async with AsyncMemsys(server.base_url, api_key=keys["acme"]) as client:
            batch = [message(n, "async", "erin", f"Async note {n} about the garden") for n in range(12)]
            results = await client.memorize_conversation(batch, concurrency=4, progress=False)
            found = await client.retrieve_lightweight(query="garden", group_id="async", retrieval_mode="bm25", top_k=50)
            await client.flush(group_id="async")
            listed = [m["memory_type"] async for m in client.iter_memories(group_id="async", limit=2)]
            return results, found.count, listed

    results, count, listed = asyncio.run(run())
    assert [r.status_info for r in results] == ["accumulated"] * 12 and count == 12
    assert listed and "episode" in listed


def test_a_tenant_sees_only_its_own_memories(server, keys, acme):
    acme.memorize(**message(1, "secret", "frank", "The merger closes in May"))
    with Memsys(server.base_url, api_key=keys["globex"]) as globex:
        assert globex.retrieve_lightweight(query="merger", group_id="secret", retrieval_mode="bm25").count == 0
        assert globex.export_user("frank")["messages"] == []
        globex.forget_group("secret")  # forgets nothing of acme's
    assert acme.retrieve_lightweight(query="merger", group_id="secret", retrieval_mode="bm25").count == 1


def test_the_key_comes_from_the_environment(server, keys, monkeypatch):
    monkeypatch.setenv("MEMSYS_API_KEY", keys["globex"])
    monkeypatch.setenv("MEMSYS_BASE_URL", server.base_url)
    with Memsys() as client:
        client.memorize(message_id="env1", sender="gina", content="Set by the environment", create_time=START)
        assert client.export_user("gina")["tenant"] == "globex"


def test_refusals_are_typed_errors_with_the_envelope(server, keys, acme):
    with pytest.raises(InvalidParameter) as refused:
        acme.retrieve_lightweight(query="x", top_k=1000)
    assert refused.value.status == 400 and refused.value.code == "INVALID_PARAMETER"
    assert "top_k" in refused.value.message and refused.value.path == f"{V3}/retrieve_lightweight"
    assert refused.value.request_id and refused.value.request_id == refused.value.body["request_id"]

    for key in ("", "msk_not_a_key"):  # no key on a server that has keys, and a wrong key
        with Memsys(server.base_url, api_key=key, retries=0) as client, pytest.raises(Unauthorized) as refused:
            client.list_memories()
        assert refused.value.status == 401 and refused.value.code == "UNAUTHORIZED" and refused.value.message

    with pytest.raises(pydantic.ValidationError):  # a typo fails before anything is sent
        acme.memorize(message_id="t", sender="a", content="c", create_time=START, grup_id="g")


def docs_example(page: str, name: str) -> str:
    text = (Path(__file__).resolve().parent.parent / "docs" / "integrations" / page).read_text()
    return re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.S).group(1)


def run_example(code: str, server: ServerProcess, key: str) -> str:
    """A docs page's example run as a user runs it: its own Python process, the server and key from the
    environment."""
    env = {**os.environ, "MEMSYS_BASE_URL": server.base_url, "MEMSYS_API_KEY": key}
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_docs_example_runs_as_written(server, keys, database_url):
    """Run as by a user who has just done the README's walk-through with the same key: its messages m1-m3 of the
    conversation "dinner" are stored already, and the example's own are stored too, not answered duplicate."""
    key = create_key(database_url, "docs")
    with Memsys(server.base_url, api_key=key) as client:
        for n, (sender, content) in enumerate(
            [
                ("alice", "I am vegetarian, and allergic to peanuts."),
                ("bob", "Noted! Then dinner at the Thai place on Friday at 7pm?"),
                ("alice", "Yes, Friday at 7pm works for me."),
            ]
        ):
            walkthrough = {"group_id": "dinner", "message_id": f"m{n + 1}", "sender": sender, "content": content}
            client.memorize(**walkthrough, create_time=START + timedelta(minutes=n))
    output = run_example(docs_example("python-client.md", "python-client"), server, key).splitlines()
    assert output[0] == "['accumulated', 'accumulated']"
    assert any("allergic to peanuts" in line for line in output[1:4])
    assert any(line.startswith("[Retrieved Knowledge]") for line in output) and "peanuts" in "".join(output)
    assert output[-1].startswith("404 NOT_FOUND ")
