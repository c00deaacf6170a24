"""POST /api/v3/agentic/agent (seed 003): the ReAct loop with memory tools, against a scripted
OpenAI-compatible server; compaction, compression, and how it stops."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from app.http.app import create_app
from app.settings import Settings
from benchmarks.fake_llm import FakeLLM, Reply, tool_calls
from tests.formation_helpers import rows
from tests.retrieval_support import memory, write

URL = "/api/v3/agentic/agent"
QUESTION = [{"role": "user", "content": "What food does Alice love?"}]


@pytest.fixture
def api(settings: Settings, fake_llm: FakeLLM, database_url: str) -> Iterator[TestClient]:
    update = {
        "llm_api_key": "server-key",
        "llm_base_url": fake_llm.base_url,
        "llm_model": "fake",
        "llm_timeout_s": 2.0,
        "llm_max_retries": 0,
        "llm_retry_backoff_s": 0.01,
    }
    with TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False) as client:
        embedder = client.app.state.runtime.embedder
        texts = ["Alice loves Beijing roast duck", "Bob fixed the printer in the office"]
        write(database_url, [memory(t, embedder.embed_sync([t])[0], memory_type="event_log") for t in texts])
        yield client


def ask(api: TestClient, **body) -> dict:
    response = api.post(URL, json={"messages": QUESTION, "context_manage_mode": "auto", **body})
    assert response.status_code == 200, response.text
    return response.json()["result"]


def test_tools_then_an_answer_and_an_unknown_tool_gets_a_reply_listing_the_tools(api, fake_llm):
    fake_llm.queue(
        tool_calls(("search_memories", {"query": "Alice favourite food"}), ("grep_files", {"pattern": "duck"})),
        tool_calls(("search_memories", "{not json")),
        "Alice loves Beijing roast duck.",
    )
    result = ask(api, user_id="u1")
    assert result["success"] is True and result["answer"] == "Alice loves Beijing roast duck."
    metadata = result["metadata"]
    assert metadata["stop_reason"] == "answered" and metadata["steps"] == 3
    assert [(c["name"], c["ok"]) for c in metadata["tool_calls"]] == [
        ("search_memories", True),
        ("grep_files", False),
        ("search_memories", False),
    ]
    messages = result["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    # Every tool call is followed by its reply.
    assert [m["tool_call_id"] for m in messages[2:4]] == [c["id"] for c in messages[1]["tool_calls"]]
    assert "roast duck" in messages[2]["content"] and "printer" in messages[2]["content"]
    assert "no tool 'grep_files'" in messages[3]["content"] and "search_memories" in messages[3]["content"]
    assert "bad arguments for search_memories" in messages[5]["content"]
    # The LLM was offered the tools and saw the tool replies.
    first, last = fake_llm.chat_requests[0].body, fake_llm.chat_requests[-1].body
    assert {t["function"]["name"] for t in first["tools"]} == {"search_memories", "read_profile", "read_offloaded"}
    assert any("roast duck" in (m.get("content") or "") for m in last["messages"] if m["role"] == "tool")
    assert metadata["usage"]["total_tokens"] == 2 * 15 + 2
    # memsys's own time is the whole but the LLM's, and holds the tool calls' (one of them a real search).
    timings = metadata["timings_ms"]
    assert timings["overhead"] == pytest.approx(timings["total"] - timings["llm"], abs=0.02)
    assert timings["overhead"] >= timings["tools"] > 0


def test_compact_offloads_a_long_tool_reply_and_read_offloaded_gives_it_back(api, fake_llm, database_url):
    long_reply = "Alice's travel log: " + "Beijing, roast duck, the Great Wall, hutongs. " * 120
    history = [
        {"role": "user", "content": "Show me Alice's travel log"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "search_memories", "arguments": '{"query": "travel"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": long_reply},
        {"role": "assistant", "content": "Here it is."},
        {"role": "user", "content": "Where did she eat duck?"},
    ]
    captured = {}

    def answer(body):
        tool_texts = [m.get("content") or "" for m in body["messages"] if m["role"] == "tool"]
        if "ref" not in captured:
            captured["ref"] = tool_texts[0].split("ref ")[1].split(";")[0]
            return tool_calls(("read_offloaded", {"ref": captured["ref"]}))
        return "In Beijing."

    fake_llm.handler = answer
    result = ask(api, messages=history, context_manage_mode="compact", max_tool_message_tokens=100, chat_id="s1")
    assert result["success"] is True and result["answer"] == "In Beijing."
    metadata = result["metadata"]
    assert metadata["compacted"] == 1 and metadata["offloaded"] == [captured["ref"]]
    assert captured["ref"].startswith("s1/tool_message/")
    compacted = result["messages"][2]["content"]
    assert compacted.startswith("[Offloaded: ") and len(compacted) < len(long_reply) / 3
    # read_offloaded gave the content back, in a window of at most max_tool_message_tokens.
    read_back = result["messages"][-2]["content"]
    assert read_back.startswith("Alice's travel log: Beijing") and "tokens more: read_offloaded offset" in read_back
    stored = rows(database_url, "SELECT tenant_id, chat_id, kind, content FROM agent_offloads")
    assert stored == [{"tenant_id": "default", "chat_id": "s1", "kind": "tool_message", "content": long_reply}]


def test_compress_summarises_older_messages_and_keeps_system_messages(api, fake_llm):
    history = [{"role": "system", "content": "Be brief."}]
    for i in range(6):
        history += [
            {"role": "user", "content": f"Question {i} about Alice's trips and meals, with details. " * 8},
            {"role": "assistant", "content": f"Answer {i}: she went to Beijing and ate duck. " * 8},
        ]
    history.append({"role": "user", "content": "So what does she love to eat?"})
    fake_llm.on("long-term memories", "Roast duck.")  # the agent's own instructions
    fake_llm.on("state snapshot", "Alice travelled to Beijing several times and always ate roast duck.")
    result = ask(api, messages=history, context_manage_mode="compress", max_total_tokens=200, keep_recent_count=2)
    assert result["success"] is True and result["answer"] == "Roast duck."
    messages = result["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["content"].startswith("[State snapshot of 11 earlier messages, ref ")
    assert "roast duck" in messages[1]["content"]
    assert messages[2:4] == history[-2:] and messages[-1]["content"] == "Roast duck."
    assert result["metadata"]["compressed"] == 11 and len(result["metadata"]["offloaded"]) == 1
    summarised = [r for r in fake_llm.chat_requests if "state snapshot" in r.prompt]
    assert len(summarised) == 1 and "Question 0" in summarised[0].prompt


def test_group_token_threshold_makes_several_snapshots(api, fake_llm):
    history = [{"role": "user", "content": f"Message {i}: " + "words " * 60} for i in range(6)]
    fake_llm.on("long-term memories", "Done.").on("state snapshot", "snapshot")
    result = ask(
        api, messages=history, context_manage_mode="compress", max_total_tokens=100, keep_recent_count=1,
        group_token_threshold=150,
    )  # fmt: skip
    snapshots = [m["content"] for m in result["messages"] if m["content"].startswith("[State snapshot")]
    # Two steps (the model answered before searching: memsys searched, then asked again), each compressing.
    assert len(snapshots) >= 2 and result["metadata"]["tool_calls"][0]["made_by"] == "memsys"
    assert {s.split("ref ")[1].split("]")[0] for s in snapshots} <= set(result["metadata"]["offloaded"])


def test_max_steps_and_llm_errors_end_without_success(api, fake_llm):
    fake_llm.on("long-term memories", tool_calls(("search_memories", {"query": "duck"})))
    looping = ask(api, max_steps=2)
    assert looping["success"] is False and looping["metadata"]["stop_reason"] == "max_steps"
    assert [m["role"] for m in looping["messages"]] == ["user", "assistant", "tool", "assistant", "tool"]
    fake_llm.reset()
    fake_llm.queue(Reply(status=500))
    failed = ask(api)
    assert failed["success"] is False and failed["metadata"]["stop_reason"] == "llm_error"
    assert "HTTP 500" in failed["metadata"]["error"] and "server-key" not in failed["metadata"]["error"]


def test_without_any_llm_key_or_with_bad_fields_it_is_a_400(settings, fake_llm, database_url):
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        response = client.post(URL, json={"messages": QUESTION, "context_manage_mode": "auto"})
        assert response.status_code == 400 and "llm_config.api_key" in response.json()["message"]
        for body, field in (
            ({"messages": [], "context_manage_mode": "auto"}, "messages"),
            ({"messages": QUESTION}, "context_manage_mode"),
            ({"messages": QUESTION, "context_manage_mode": "shrink"}, "context_manage_mode"),
            ({"messages": QUESTION, "context_manage_mode": "auto", "max_steps": 0}, "max_steps"),
        ):
            response = client.post(URL, json=body)
            assert response.status_code == 400 and field in response.json()["message"], (body, response.text)


def test_offloaded_content_stays_in_its_tenant(api, fake_llm, database_url):
    from tests.tenancy_support import bearer, create_key

    mine, theirs = bearer(create_key(database_url, "acme")), bearer(create_key(database_url, "other"))
    history = [
        {"role": "user", "content": "Read the log"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "read_profile", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "secret acme figures " * 300},
        {"role": "user", "content": "Thanks"},
    ]
    fake_llm.queue("ok")
    body = {"messages": history, "context_manage_mode": "compact", "max_tool_message_tokens": 100}
    stored = api.post(URL, json=body, headers=mine).json()["result"]["metadata"]["offloaded"]
    assert len(stored) == 1
    fake_llm.queue(tool_calls(("read_offloaded", {"ref": stored[0]})), "nothing")
    other = api.post(URL, json={"messages": QUESTION, "context_manage_mode": "auto"}, headers=theirs).json()["result"]
    reply = other["messages"][2]["content"]
    assert reply.startswith("Error: nothing is stored under") and "secret" not in reply
    assert rows(database_url, "SELECT tenant_id FROM agent_offloads") == [{"tenant_id": "acme"}]


def test_a_model_that_answers_without_searching_gets_a_search_made_for_it(api, fake_llm):
    """The first call forces search_memories (tool_choice); a model that answers anyway has that answer set
    aside: memsys searches with the question, and the model answers from what it found."""
    fake_llm.queue("July 15th.", "Alice loves Beijing roast duck.")
    result = ask(api, user_id="u1")
    assert result["success"] is True and result["answer"] == "Alice loves Beijing roast duck."
    first, second = (r.body for r in fake_llm.chat_requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "search_memories"}}
    assert "tool_choice" not in second
    (call,) = result["metadata"]["tool_calls"]
    assert (call["name"], call["made_by"], call["ok"]) == ("search_memories", "memsys", True)
    assert call["arguments"] == {"query": "What food does Alice love?"}
    assert "July 15th" not in str(result["messages"])
    assert "roast duck" in result["messages"][2]["content"]


def test_a_tool_call_written_in_the_answer_text_is_run(api, fake_llm):
    """A local server without a function-calling chat format returns the model's call as text (fenced JSON,
    or Qwen's <tool_call> tags): it is run as a call, not given to the user as the answer."""
    fenced = '```json\n{"name": "search_memories", "arguments": {"query": "Alice food", "top_k": 3}}\n```'
    tagged = '<tool_call>\n{"name": "read_profile", "arguments": {}}\n</tool_call>'
    fake_llm.queue(fenced, tagged, "Roast duck.")
    result = ask(api, user_id="u1")
    assert result["answer"] == "Roast duck." and result["metadata"]["steps"] == 3
    calls = result["metadata"]["tool_calls"]
    assert [(c["name"], c["made_by"], c["ok"]) for c in calls] == [
        ("search_memories", "model", True),
        ("read_profile", "model", True),
    ]
    assert calls[0]["arguments"] == {"query": "Alice food", "top_k": 3}
    assert "roast duck" in result["messages"][2]["content"]


def test_an_endpoint_refusing_tool_choice_is_asked_without_it_and_memsys_searches(api, fake_llm):
    replies = iter(["July 15th.", "Alice loves Beijing roast duck."])
    fake_llm.force(lambda body: Reply(status=400) if "tool_choice" in body else next(replies))
    result = ask(api, user_id="u1")
    assert result["success"] is True and result["answer"] == "Alice loves Beijing roast duck."
    assert ["tool_choice" in r.body for r in fake_llm.chat_requests] == [True, False, False]
    assert [c["made_by"] for c in result["metadata"]["tool_calls"]] == ["memsys"]


def test_a_window_the_model_chose_that_holds_nothing_is_searched_again_over_the_requests(api, fake_llm, database_url):
    """A weak model fills optional arguments at random ("the last 30 days" of a conversation held a year ago):
    the search widens to the request's window and says so, rather than reading as "no memory"."""
    embedder = api.app.state.runtime.embedder
    text = "Carol moved to Lisbon for her new job"
    vector = embedder.embed_sync([text])[0]
    write(database_url, [memory(text, vector, memory_type="event_log", days_ago=400, user_id="u9", group_id="g9")])
    fake_llm.queue(tool_calls(("search_memories", {"query": "Carol Lisbon", "time_range_days": 30})), "Lisbon.")
    result = ask(api, group_id="g9")
    reply = result["messages"][2]["content"]
    assert reply.startswith(
        "(Found no event_log memories in the last 30 days; these are event_log memories from all time.)"
    )
    assert "Carol moved" in reply


def test_a_memory_type_the_model_chose_that_holds_nothing_is_searched_again_in_the_event_log(
    api, fake_llm, database_url
):
    """Found with the real model: it asked for semantic memories of a conversation whose facts are event logs,
    found none and answered "No semantic_memory memories found". The search falls back to the event log."""
    embedder = api.app.state.runtime.embedder
    text = "Melanie goes running and does pottery to destress"
    vector = embedder.embed_sync([text])[0]
    write(database_url, [memory(text, vector, memory_type="event_log", user_id="u9", group_id="g9")])
    call = ("search_memories", {"query": "Melanie destress", "memory_type": "semantic_memory"})
    fake_llm.queue(tool_calls(call), "Running and pottery.")
    result = ask(api, group_id="g9")
    reply = result["messages"][2]["content"]
    assert reply.startswith("(Found no semantic_memory memories; these are event_log memories from all time.)")
    assert "running and does pottery" in reply
