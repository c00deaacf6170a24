"""The one token counter (o200k BPE, offline) and the context budgets with multilingual text."""

from __future__ import annotations

import pytest

from app.context.schemas import ChatMessage, ContextRequest
from app.context.service import _fill, _latest_turns
from app.text.tokens import count_message_tokens, count_tokens, truncate_tokens

CHINESE = "我最喜欢吃北京烤鸭，每次去北京都要去全聚德，还会带朋友一起去尝尝地道的味道。" * 12


def test_a_real_bpe_counts_chinese_as_more_than_one_token_per_two_characters():
    assert len(CHINESE[:400]) == 400 and count_tokens(CHINESE[:400]) > 200
    assert 8 <= count_tokens("What food do I love the most, and where?") <= 12
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special-token text from a user is ordinary text


@pytest.mark.parametrize("text", [CHINESE, "mixed 中英文 text with emoji 🦆🦆 and numbers 12345 " * 20])
@pytest.mark.parametrize("limit", [0, 1, 7, 50, 10_000])
def test_truncation_stays_within_the_limit_and_keeps_whole_characters(text, limit):
    cut = truncate_tokens(text, limit)
    assert count_tokens(cut) <= limit and text.startswith(cut)
    assert "\ufffd" not in cut
    if count_tokens(text) <= limit:
        assert cut == text


def test_history_keeps_the_latest_whole_turns_in_any_language():
    history = [
        ChatMessage(role="user", content=CHINESE[:100]),
        ChatMessage(
            role="assistant",
            content="好的。",
            tool_calls=[{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        ),
        ChatMessage(role="tool", tool_call_id="c", content=CHINESE[:200]),
        ChatMessage(role="user", content="And in English?"),
        ChatMessage(role="assistant", content="Roast duck."),
    ]
    last_turn = sum(count_message_tokens(m.as_openai()) for m in history[3:])
    whole = sum(count_message_tokens(m.as_openai()) for m in history)
    assert [len(t) for t, _ in _latest_turns(history, whole)] == [3, 2]
    assert [len(t) for t, _ in _latest_turns(history, whole - 1)] == [2]  # never half a tool pair
    assert [len(t) for t, _ in _latest_turns(history, last_turn - 1)] == []


def test_sections_and_total_within_budgets_with_chinese_records():
    memories = [
        {
            "id": f"m{i}",
            "memory_type": "event_log",
            "score": 0.9 - i / 100,
            "timestamp": "2025-01-15T00:00:00+00:00",
            "content": CHINESE[: 40 + 20 * i],
            "title": None,
        }
        for i in range(6)
    ]
    episodes = [dict(m, memory_type="episode", content=CHINESE) for m in memories[:2]]
    request = ContextRequest(
        query="北京烤鸭",
        semantic={"max_tokens": 300},
        episodes={"max_tokens": 200},
        history=[ChatMessage(role="user", content=CHINESE[:150]), ChatMessage(role="assistant", content="好")],
        history_max_tokens=1000,
    )
    for room in (10_000, 600, 250, 0):
        knowledge, snippets, turns = _fill(request, memories, episodes, room)
        history_tokens = sum(count_message_tokens(m) for t in turns for m in t)
        assert knowledge.tokens() <= 300 and snippets.tokens() <= 200
        assert knowledge.tokens() + snippets.tokens() + history_tokens <= room
    knowledge, snippets, turns = _fill(request, memories, episodes, 10_000)
    assert snippets.records and snippets.records[0][2]  # the long episode, cut to fit its budget
    assert knowledge.records and turns
