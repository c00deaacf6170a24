"""Issue 27: the agent's tools act only within the request's scope. The model's tool arguments are untrusted (a
memory it reads may carry a prompt injection): one naming another user than the request's is refused in the
tool's reply and never run; offloaded content is read back only by the chat and user that stored it; an
answer's tool calls are capped, and arguments nested past the depth limit are bad arguments, not a 500."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from litestar.testing import TestClient
from psycopg.types.json import Jsonb

from app.agent.service import TOOL_CALLS_PER_STEP
from app.http.app import create_app
from app.settings import Settings
from benchmarks.fake_llm import FakeLLM, tool_calls

URL = "/api/v3/agentic/agent"
QUESTION = [{"role": "user", "content": "What do you know about me?"}]


@pytest.fixture
def api(settings: Settings, fake_llm: FakeLLM, database_url: str) -> Iterator[TestClient]:
    update = {"llm_api_key": "server-key", "llm_base_url": fake_llm.base_url, "llm_model": "fake", "llm_max_retries": 0}
    with TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def profiles(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("SET memsys.tenant_id = 'default'")
        for user, group, facts in (
            ("u1", "g1", {"likes": "tea"}),
            ("u2", "g1", {"likes": "hiking in g1"}),
            ("u2", "g2", {"secret": "u2's salary in g2"}),
        ):
            conn.execute(
                "INSERT INTO profiles (user_id, group_id, version, profile, source) VALUES (%s, %s, 1, %s, 'llm')",
                (user, group, Jsonb(facts)),
            )


def run_agent(api: TestClient, **body) -> dict:
    response = api.post(URL, json={"messages": QUESTION, "context_manage_mode": "compact", **body})
    assert response.status_code == 200, response.text
    return response.json()["result"]


def tool_replies(result: dict) -> list[str]:
    return [m["content"] for m in result["messages"] if m["role"] == "tool"]


def test_read_profile_of_another_user_is_refused_to_the_model(api, fake_llm, profiles) -> None:
    fake_llm.queue(
        tool_calls(("read_profile", {"user_id": "u2"}), ("read_profile", {})),
        tool_calls(("read_profile", {"user_id": "u1"})),
        "You like tea.",
    )
    result = run_agent(api, user_id="u1", group_id="g1")
    refused, own, named_own = tool_replies(result)
    assert refused.startswith("Error: user 'u2' is outside this request's scope (user 'u1')")
    assert "hiking" not in refused and "salary" not in refused
    assert '"likes": "tea"' in own and '"likes": "tea"' in named_own
    assert [(c["name"], c["ok"]) for c in result["metadata"]["tool_calls"]] == [
        ("read_profile", False),
        ("read_profile", True),
        ("read_profile", True),
    ]
    # The model saw the refusal, not u2's profile, in every later call.
    later = "\n".join(fake_llm.prompts()[1:]) + str([r.body for r in fake_llm.chat_requests])
    assert "hiking" not in later and "salary" not in later


def test_a_personal_scope_refuses_other_users_too(api, fake_llm, profiles) -> None:
    fake_llm.queue(tool_calls(("read_profile", {"user_id": "u2"})), "no")
    result = run_agent(api, user_id="u1", memory_scope="personal")
    (refused,) = tool_replies(result)
    assert refused.startswith("Error: user 'u2' is outside this request's scope") and "salary" not in refused


def test_a_group_scope_reads_a_members_profile_in_that_group_only(api, fake_llm, profiles) -> None:
    # A group's searches span every member's memories: a member's profile in that group is in scope too.
    fake_llm.queue(tool_calls(("read_profile", {"user_id": "u2"})), "u2 hikes.")
    result = run_agent(api, group_id="g1", memory_scope="group")
    (reply,) = tool_replies(result)
    assert "hiking in g1" in reply and "salary" not in reply


def long_tool_history(secret: str) -> list[dict]:
    call = {"id": "t1", "type": "function", "function": {"name": "search_memories", "arguments": '{"query": "x"}'}}
    return [
        {"role": "user", "content": "Read my log"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "t1", "content": f"{secret} " * 300},
        {"role": "user", "content": "Thanks"},
    ]


def test_offloaded_content_is_read_back_only_by_its_chat_and_user(api, fake_llm) -> None:
    fake_llm.queue("ok")
    stored = run_agent(
        api, messages=long_tool_history("u2-private-notes"), max_tool_message_tokens=100, user_id="u2", chat_id="c2"
    )["metadata"]["offloaded"]
    assert len(stored) == 1 and stored[0].startswith("c2/")
    for who in ({"user_id": "u1", "chat_id": "c1"}, {"user_id": "u1", "chat_id": "c2"}, {"chat_id": "c2"}):
        fake_llm.queue(tool_calls(("read_offloaded", {"ref": stored[0]})), "nothing")
        (reply,) = tool_replies(run_agent(api, **who))
        assert reply.startswith("Error: nothing is stored under") and "private" not in reply, who
    fake_llm.queue(tool_calls(("read_offloaded", {"ref": stored[0]})), "found")
    (reply,) = tool_replies(run_agent(api, user_id="u2", chat_id="c2"))
    assert reply.startswith("u2-private-notes")


def test_an_answers_tool_calls_are_capped(api, fake_llm) -> None:
    flood = [("search_memories", {"query": f"q{n}"}) for n in range(5 * TOOL_CALLS_PER_STEP)]
    fake_llm.queue(tool_calls(*flood), "done")
    result = run_agent(api, user_id="u1")
    assert result["answer"] == "done"
    assert len(result["metadata"]["tool_calls"]) == TOOL_CALLS_PER_STEP
    assistant = result["messages"][1]
    assert len(assistant["tool_calls"]) == TOOL_CALLS_PER_STEP  # every call kept has its reply, in order
    assert [m["tool_call_id"] for m in result["messages"][2:-1]] == [c["id"] for c in assistant["tool_calls"]]
    sent_back = fake_llm.chat_requests[-1].body["messages"]
    assert sum(1 for m in sent_back if m["role"] == "tool") == TOOL_CALLS_PER_STEP


def test_deeply_nested_tool_arguments_are_bad_arguments_not_a_500(api, fake_llm) -> None:
    fake_llm.queue(tool_calls(("search_memories", "[" * 100_000 + "]" * 100_000)), "done")
    result = run_agent(api, user_id="u1")
    assert result["answer"] == "done"
    (reply,) = tool_replies(result)
    assert reply.startswith("Error: bad arguments for search_memories")
    assert result["metadata"]["tool_calls"][0]["ok"] is False
