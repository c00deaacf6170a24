"""EverOS's v2 memory API served by memsys, driven by EverOS's own client (``everos-cloud`` 1.0.0, unchanged) against
a running ``memsys serve`` with memsys keys: add, flush, search, get and delete round-trip; v2's writes are found
through v3 and v3's through v2; scopes and tenants hold; errors arrive as the client's exceptions."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import pytest
from everos_cloud import EverOS, EverOSAPIError
from everos_cloud.models import FilterNode
from mcp import Client, StdioServerParameters

from tests.conftest import process_env
from tests.formation_helpers import START
from tests.tenancy_support import create_key
from tests.test_compat import MCP_VENV

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
# Clients run unchanged against memsys serve: pytest -m integrations (.ci/run), kept out of the README's run.
pytestmark = [pytest.mark.citus, pytest.mark.integrations]


def ms(minutes: int) -> int:
    return int((START + timedelta(minutes=minutes)).timestamp() * 1000)


CONVERSATION = [
    ("alice", "user", "I am moving from Paris to Berlin next month for a new job."),
    ("helper_bot", "assistant", "Congratulations! Do you need help finding a flat in Berlin?"),
    ("alice", "user", "Yes, somewhere near Kreuzberg, with a budget of 1500 euros."),
]


@pytest.fixture
def served(database_url: str, server_process_factory):
    keys = create_key(database_url, "acme"), create_key(database_url, "other")
    server = server_process_factory(process_env(database_url))
    server.start()
    return server, keys


def client(server, key: str, **scope: str) -> EverOS:
    return EverOS(api_key=key, host=server.base_url, timeout=60, **scope)


def add_conversation(everos: EverOS, session: str, **kwargs) -> None:
    messages = [
        {"sender_id": sender, "role": role, "content": text, "timestamp": ms(i)}
        for i, (sender, role, text) in enumerate(CONVERSATION)
    ]
    added = everos.add(session, messages, **kwargs)
    assert added.message_count == 3 and added.status == "queued"
    assert everos.flush(session).status == "extracted"


def test_the_everos_client_round_trips_and_v3_sees_the_same_rows(served) -> None:
    server, (key, _) = served
    everos = client(server, key)
    add_conversation(everos, "move_session")

    found = everos.search("where is alice moving", user_id="alice", method="hybrid")
    assert found.episodes, found
    episode = found.episodes[0]
    assert (episode.app_id, episode.project_id, episode.session_id, episode.user_id) == (
        "default",
        "default",
        "move_session",
        "alice",
    )
    assert "Berlin" in episode.episode and episode.score > 0
    for method in ("keyword", "vector", "agentic"):
        assert everos.search("Berlin Kreuzberg flat", user_id="alice", method=method).episodes, method

    listed = everos.get("episode", user_id="alice", page_size=5)
    assert listed.total_count >= 1 and {e.session_id for e in listed.episodes} == {"move_session"}

    # The same rows through v3: the session is the group.
    headers = {"Authorization": f"Bearer {key}"}
    v3 = httpx.post(
        server.base_url + "/api/v3/agentic/retrieve_lightweight",
        json={"query": "Berlin", "group_id": "move_session", "user_id": "alice"},
        headers=headers,
        timeout=30,
    ).json()["result"]["memories"]
    assert episode.id in {m["id"] for m in v3}

    # And v3's writes through v2 (app and project 'default').
    for i, text in enumerate(["Bob adopted a grey cat called Miso.", "Miso sleeps on the piano all day."]):
        body = {
            "group_id": "pets",
            "message_id": f"p{i}",
            "create_time": (START + timedelta(hours=1, minutes=i)).isoformat(),
            "sender": "bob",
            "content": text,
        }
        assert httpx.post(server.base_url + "/api/v3/agentic/memorize", json=body, headers=headers).status_code == 200
    assert everos.flush("pets").status == "extracted"
    assert {e.session_id for e in everos.search("cat on the piano", user_id="bob").episodes} == {"pets"}


def test_scopes_tenants_and_pending_messages(served) -> None:
    server, (key, other_key) = served
    shop = client(server, key, app_id="shop", project_id="eu")
    add_conversation(shop, "shop_session")
    agent = shop.search("flat in Berlin", agent_id="helper_bot")
    assert agent.episodes and {e.app_id for e in agent.episodes} == {"shop"}
    assert not client(server, key).search("flat in Berlin", user_id="alice").episodes  # app 'default'
    assert not shop.search("flat in Berlin", agent_id="another_bot").episodes
    assert not client(server, other_key, app_id="shop", project_id="eu").search("flat in Berlin").episodes
    # Field conditions survive the client only in a FilterNode made by from_dict (a plain dict loses them in
    # everos-cloud 1.0.0's model: memsys then receives {}).
    narrowed = shop.search(
        "flat", user_id="alice", filters=FilterNode.from_dict({"session_id": {"in": ["shop_session"]}})
    )
    assert narrowed.episodes
    elsewhere = FilterNode.from_dict({"OR": [{"session_id": "elsewhere"}, {"agent_id": "another_bot"}]})
    assert not shop.search("flat", user_id="alice", filters=elsewhere).episodes

    # A message stored and not formed yet is found at once, as an unprocessed message.
    later = {"sender_id": "alice", "role": "user", "content": "My new address is Oranienstrasse 12", "timestamp": ms(9)}
    assert shop.add("shop_session", [later], async_mode=False).status == "accumulated"
    pending = shop.search("Oranienstrasse address", user_id="alice", method="keyword").unprocessed_messages
    assert [m.content.actual_instance for m in pending] == ["My new address is Oranienstrasse 12"]

    deleted = shop.delete(session_id="shop_session")
    assert deleted.count > 0 and deleted.filters == ["session_id"]
    assert not shop.search("flat in Berlin", agent_id="helper_bot").episodes


def test_errors_arrive_as_the_clients_exceptions(served) -> None:
    server, (key, _) = served
    everos = client(server, key)
    with pytest.raises(EverOSAPIError) as refused:
        everos.search("x", filters=FilterNode.from_dict({"plan": {"like": "p%"}}))
    assert refused.value.status == 422 and "filters.plan.like" in refused.value.body
    with pytest.raises(EverOSAPIError) as unauthorized:
        client(server, "not-a-key").search("x")
    assert unauthorized.value.status == 401
    with pytest.raises(EverOSAPIError) as no_scope:
        everos.delete()
    assert no_scope.value.status == 422 and "user_id, agent_id or session_id" in no_scope.value.body
    with pytest.raises(EverOSAPIError) as not_served:
        everos.presign([{"file_id": "f", "file_name": "cat.png", "file_type": "image"}])
    assert not_served.value.status == 501 and "stores no objects" in not_served.value.body
    blank = {"sender_id": "alice", "role": "user", "content": [{"type": "image", "name": "cat.png"}], "timestamp": 1}
    assert everos.add("s", [blank]).status == "queued"  # a reference is remembered by its name
    with pytest.raises(EverOSAPIError) as empty:
        everos.add("s", [{"sender_id": "alice", "role": "user", "content": "   ", "timestamp": 1}])
    assert empty.value.status == 422 and "messages[0].content" in empty.value.body


def trajectory(task: str, minute: int) -> list[dict]:
    call = {"id": f"c{minute}", "type": "function", "function": {"name": "search_docs", "arguments": '{"q": "x"}'}}
    run = {"id": f"r{minute}", "type": "function", "function": {"name": "run_query", "arguments": '{"sql": "y"}'}}
    return [
        {"sender_id": "dev", "role": "user", "content": task, "timestamp": ms(minute)},
        {
            "sender_id": "coder_bot",
            "role": "assistant",
            "content": "",
            "tool_calls": [call],
            "timestamp": ms(minute + 1),
        },
        {
            "sender_id": "coder_bot",
            "role": "tool",
            "tool_call_id": call["id"],
            "content": "docs",
            "timestamp": ms(minute + 2),
        },
        {
            "sender_id": "coder_bot",
            "role": "assistant",
            "content": "",
            "tool_calls": [run],
            "timestamp": ms(minute + 3),
        },
        {
            "sender_id": "coder_bot",
            "role": "tool",
            "tool_call_id": run["id"],
            "content": "42 rows",
            "timestamp": ms(minute + 4),
        },
        {
            "sender_id": "coder_bot",
            "role": "assistant",
            "content": "There are 42 late invoices.",
            "timestamp": ms(minute + 5),
        },
    ]


def test_an_agents_trajectories_become_cases_and_a_skill(served) -> None:
    server, (key, _) = served
    everos = client(server, key)
    tasks = ["Count the late invoices in the billing database", "Find how many invoices are overdue this month"]
    for number, task in enumerate(tasks):
        everos.add(f"task_{number}", trajectory(task, 10 * number), mode="agent", async_mode=False)
        assert everos.flush(f"task_{number}").status == "extracted"
        found = everos.search("late invoices count", agent_id="coder_bot")
        assert len(found.agent_cases) == number + 1, found.agent_cases
        assert len(found.agent_skills) == number, found.agent_skills  # a skill needs two cases
    case = found.agent_cases[0]
    assert case.agent_id == "coder_bot" and case.task_intent in tasks
    assert case.approach == "Called search_docs → run_query, then answered."
    assert (
        case.key_insight == "There are 42 late invoices." and case.quality_score == 0.8
    )  # 0.2 + an answer 0.4 + two rounds 0.2
    skill = found.agent_skills[0]
    assert skill.name == "Use search_docs then run_query" and skill.maturity_score == 0.4
    assert set(skill.source_case_ids) == {c.id for c in found.agent_cases}
    listed = everos.get("agent_case", agent_id="coder_bot")
    assert listed.total_count == 2 and {c.session_id for c in listed.agent_cases} == {"task_0", "task_1"}

    everos.add("task_2", trajectory("How many invoices are late?", 30), async_mode=False)
    everos.flush("task_2")
    skills = everos.get("agent_skill", agent_id="coder_bot").agent_skills
    assert len(skills) == 1 and skills[0].maturity_score == 0.6 and len(skills[0].source_case_ids) == 3
    assert not everos.search("late invoices", agent_id="another_bot").agent_cases
    assert everos.delete(agent_id="coder_bot").count >= 3
    assert not everos.search("late invoices count", agent_id="coder_bot").agent_cases


EVEROS_MCP_VENV = MCP_VENV.parent / "everos-mcp-0.1.1"


@pytest.fixture(scope="session")
def everos_mcp() -> Path:
    """``everos-mcp`` 0.1.1 in a virtual environment of its own: it needs ``mcp<2``, memsys ``mcp>=2``."""
    script = EVEROS_MCP_VENV / "bin" / "everos-mcp"
    if not script.exists():
        subprocess.run([sys.executable, "-m", "venv", str(EVEROS_MCP_VENV)], check=True)
        pip = [str(EVEROS_MCP_VENV / "bin" / "pip"), "install", "-q", "everos-mcp==0.1.1", "mcp<2"]
        subprocess.run(pip, check=True, timeout=600)
    return script


def test_everos_mcp_answers_its_tools_against_memsys(served, everos_mcp: Path, tmp_path: Path) -> None:
    server, (key, _) = served
    params = StdioServerParameters(
        command=str(everos_mcp),
        env={
            "PATH": os.environ["PATH"],
            "EVEROS_BASE_URL": server.base_url,
            "EVEROS_API_KEY": key,
            "EVEROS_USER_ID": "alice",
            "EVEROS_SESSION_ID": "mcp_session",
        },
        cwd=str(tmp_path),
    )
    steps = [
        ("add_memory", {"user_message": "I moved from Paris to Berlin for a job at a bakery.", "wait": True}),
        ("search_memory", {"query": "Berlin bakery job"}),
        ("list_memories", {}),
        ("record_trajectory", {"messages": [
            {"role": "user", "content": "Count the late invoices"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "run_query", "arguments": "{}"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42 rows"},
            {"role": "assistant", "content": "There are 42 late invoices."},
        ]}),
    ]  # fmt: skip

    async def run() -> dict[str, str]:
        answers = {}
        async with Client(params, read_timeout_seconds=120) as mcp:
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            assert {"search_memory", "add_memory", "record_trajectory", "recall_agent_experience"} <= tools
            for name, arguments in steps:
                answers[name] = (await mcp.call_tool(name, arguments)).content[0].text
            for _ in range(60):  # the trajectory is stored in the background
                answers["recall"] = (
                    (await mcp.call_tool("recall_agent_experience", {"task": "late invoices"})).content[0].text
                )
                if "Past cases" in answers["recall"]:
                    break
                await anyio.sleep(0.5)
            answers["forget"] = (await mcp.call_tool("forget_session", {})).content[0].text
            answers["after"] = (await mcp.call_tool("search_memory", {"query": "Berlin bakery job"})).content[0].text
        return answers

    answers = anyio.run(run)
    assert answers["add_memory"].startswith("Stored and extracted"), answers["add_memory"]
    assert "Berlin" in answers["search_memory"] and "Relevant memories" in answers["search_memory"]
    assert "Berlin" in answers["list_memories"]
    assert "task: Count the late invoices" in answers["recall"] and "run_query" in answers["recall"], answers["recall"]
    assert "No relevant memories" in answers["after"], answers
