"""POST /api/v3/agentic/context (seed 002): the order of the sections, the budgets, the trimming order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.text.tokens import count_message_tokens
from tests.retrieval_support import memory, write

URL = "/api/v3/agentic/context"
NOW = datetime(2025, 1, 15, 12, tzinfo=UTC)


@pytest.fixture
def stored(client, database_url):
    embedder = client.app.state.runtime.embedder
    rows = [
        ("event_log", "Alice loves Beijing roast duck", 3),
        ("semantic_memory", "Alice plans to visit Beijing for roast duck in March", 2),
        ("event_log", "Bob fixed the printer in the office", 1),
        ("episode", "On 10 Jan 2025 Alice told the team that her favourite food is Beijing roast duck. " * 20, 5),
        ("episode", "On 12 Jan 2025 Alice and Bob talked about the duck restaurant near the office.", 3),
    ]
    written = write(
        database_url,
        [
            memory(text, embedder.embed_sync([text])[0], memory_type=kind, timestamp=NOW - timedelta(days=days))
            for kind, text, days in rows
        ],
    )
    return {row["content"]: row for row in written}


def assemble(client, **body):
    response = client.post(URL, json={"current_time": "2025-01-15", **body})
    assert response.status_code == 200, response.text
    return response.json()["result"]


HISTORY = [
    {"role": "user", "content": "Hi, what should I cook tonight?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "food"}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "Alice likes duck."},
    {"role": "assistant", "content": "Maybe duck?"},
    {"role": "user", "content": "Sounds good. Any restaurant?"},
    {"role": "assistant", "content": "The one near the office."},
]


def test_the_seeds_order_and_format(client, stored):
    result = assemble(
        client,
        query="What food does Alice love?",
        system_prompt="You are a helpful assistant.",
        history=HISTORY,
        semantic={"min_score": 0.3},
    )
    messages = result["messages"]
    assert messages[0] == {"role": "system", "content": "You are a helpful assistant."}
    knowledge = messages[1]["content"]
    assert knowledge.startswith("[Retrieved Knowledge]\nSource: ") and "\n---\n" in knowledge
    assert "Alice loves Beijing roast duck" in knowledge and "printer" not in knowledge  # under min_score
    assert messages[2]["role"] == "system" and messages[2]["content"].startswith("[Episode Snippets]\n")
    assert messages[3:-1] == HISTORY
    assert messages[-1] == {"role": "user", "content": "What food does Alice love?"}
    sections = result["sections"]
    assert {s["memory_type"] for s in sections["knowledge"]["sources"]} <= {"event_log", "semantic_memory"}
    assert all(s["score"] >= 0.3 for s in sections["knowledge"]["sources"])
    assert sections["history"]["messages"] == 6 and sections["history"]["dropped"] == 0
    assert result["total_tokens"] == sum(s["tokens"] for s in sections.values())
    assert result["total_tokens"] == sum(count_message_tokens(m) for m in messages)


def test_the_default_min_score_is_the_cut_off_calibrated_for_the_model(client, stored):
    sources = assemble(client, query="What food does Alice love?")["sections"]["knowledge"]["sources"]
    assert sources and all(s["score"] >= 0.34 for s in sources)  # all-MiniLM-L6-v2's (app.retrieval.cutoff)
    stricter = assemble(client, query="What food does Alice love?", semantic={"min_score": 0.7})
    assert all(s["score"] >= 0.7 for s in stricter["sections"]["knowledge"]["sources"])
    assert len(stricter["sections"]["knowledge"]["sources"]) < len(sources)


def test_knowledge_is_ranked_by_hybrid_search_within_the_cosine_floor(client, database_url):
    """The fact that names the question's words comes first, though another is closer by cosine alone (0.55
    against 0.51 with all-MiniLM-L6-v2); the source line leaves out the requested group and the memory's id
    (they are in ``sections``), and every record still passes ``min_score`` by cosine."""
    embedder = client.app.state.runtime.embedder
    texts = [
        "Caroline: Researching adoption agencies, it's been a dream to have a family.",
        "Her studies were about the history of science.",
    ]
    written = write(
        database_url,
        [
            memory(t, embedder.embed_sync([t])[0], memory_type="event_log", group_id="g-rank", timestamp=NOW)
            for t in texts
        ],
    )
    ids = {row["content"]: str(row["id"]) for row in written}
    query = "What did Caroline research?"
    closest = assemble(client, query=query, group_id="g-rank", semantic={"top_k": 2}, episodes={"enabled": False})
    sources = closest["sections"]["knowledge"]["sources"]
    assert [s["id"] for s in sources] == [ids[texts[0]], ids[texts[1]]]
    assert sources[1]["score"] > sources[0]["score"] >= 0.34  # the cosines: ranked by more than cosine
    one = assemble(client, query=query, group_id="g-rank", semantic={"top_k": 1}, episodes={"enabled": False})
    assert [s["id"] for s in one["sections"]["knowledge"]["sources"]] == [ids[texts[0]]]
    text = one["messages"][0]["content"]
    assert text == f"[Retrieved Knowledge]\nSource: event_log · {NOW:%Y-%m-%d} · user u1\n{texts[0]}\n---\n"
    floor = assemble(client, query=query, group_id="g-rank", semantic={"min_score": 0.53}, episodes={"enabled": False})
    assert [s["id"] for s in floor["sections"]["knowledge"]["sources"]] == [ids[texts[1]]]


def test_every_section_within_its_budget(client, stored):
    result = assemble(
        client,
        query="What food does Alice love?",
        history=HISTORY,
        semantic={"min_score": 0.2, "max_tokens": 80},
        episodes={"max_tokens": 120},
        history_max_tokens=30,
    )
    sections = result["sections"]
    assert 0 < sections["knowledge"]["tokens"] <= 80
    assert 0 < sections["episodes"]["tokens"] <= 120
    assert any(s["truncated"] for s in sections["episodes"]["sources"])  # the long episode, cut to fit
    # History keeps the latest whole turn only: the older turn (with its tool call and reply) goes whole.
    assert result["messages"][-3:-1] == HISTORY[4:]
    assert sections["history"]["dropped"] == 4 and sections["history"]["tokens"] <= 30


def test_the_total_is_trimmed_episodes_then_history_then_knowledge(client, stored):
    base = {"query": "What food does Alice love?", "history": HISTORY, "semantic": {"min_score": 0.2}}
    full = assemble(client, **base)
    sections = full["sections"]
    fixed = sections["system"]["tokens"] + sections["user"]["tokens"]
    # Room for knowledge and history but not the episodes: the episodes go first.
    room = sections["knowledge"]["tokens"] + sections["history"]["tokens"]
    trimmed = assemble(client, **base, context_max_tokens=fixed + room)
    assert trimmed["sections"]["episodes"]["tokens"] == 0
    assert trimmed["sections"]["history"]["tokens"] == sections["history"]["tokens"]
    assert trimmed["total_tokens"] <= fixed + room
    # Less room: then the oldest history turns.
    tighter = assemble(client, **base, context_max_tokens=fixed + sections["knowledge"]["tokens"] + 10)
    assert tighter["sections"]["history"]["messages"] < 6
    assert tighter["sections"]["knowledge"]["tokens"] == sections["knowledge"]["tokens"]
    # Only the user's message fits: everything else goes.
    bare = assemble(client, **base, context_max_tokens=fixed)
    assert bare["messages"] == [{"role": "user", "content": "What food does Alice love?"}]


def test_system_prompt_and_message_over_the_limit_is_a_400(client, stored):
    response = client.post(URL, json={"query": "x " * 50, "system_prompt": "y " * 50, "context_max_tokens": 20})
    assert response.status_code == 400
    assert "context_max_tokens" in response.json()["message"]


def test_disabled_sections_and_bad_fields(client, stored):
    result = assemble(client, query="duck", semantic={"enabled": False}, episodes={"enabled": False})
    assert [m["role"] for m in result["messages"]] == ["user"]
    for body, field in (
        ({"query": ""}, "query"),
        ({"query": "x", "semantic": {"min_score": 1.5}}, "min_score"),
        ({"query": "x", "history": [{"role": "robot", "content": "x"}]}, "role"),
        ({"query": "x", "memory_scope": "personal"}, "user_id"),
    ):
        response = client.post(URL, json=body)
        assert response.status_code == 400 and field in response.json()["message"], (body, response.text)
