"""Memory formation with an LLM: the fake OpenAI-compatible server answers, scripted per test."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from app.settings import Settings
from benchmarks.fake_llm import FakeLLM, Reply
from tests.formation_helpers import (
    CONVERSATION,
    FLUSH,
    MEMORIZE,
    META,
    META_BODY,
    app_client,
    assert_each_message_in_one_memcell,
    conversation,
    message,
    rows,
    wait_for,
)

SAME_EPISODE = {"should_end": False, "reasoning": "same topic", "topic_summary": "search feature"}

EXTRACTED = {
    "title": "Search feature kick-off",
    "summary": "Zhang San and Li Si planned the search feature.",
    "content": "On 15 Jan 2025 Zhang San proposed discussing the search feature; Li Si will share mockups on "
    "16 Jan 2025 and the release is planned for 24 Jan 2025.",
    "personal_episodes": [
        {"user_id": "user_001", "title": "Zhang San plans", "summary": "s", "content": "Zhang San led the talk."},
        {"user_id": "user_002", "title": "Li Si designs", "summary": "s", "content": "Li Si owns the mockups."},
        {"user_id": "stranger", "content": "ignored: not a participant"},
    ],
    "event_log": [
        {
            "time": "2025-01-15T10:03:00+08:00",
            "fact": "The backend will use PostgreSQL full-text search.",
            "user_id": "user_001",
            "source_message_ids": ["msg_003"],
        },
        {"time": "2025-01-16", "fact": "Li Si will share the search page mockups.", "source_message_ids": ["msg_004"]},
    ],
    "semantic_memories": [
        {
            "content": "The search feature release is planned for 24 Jan 2025.",
            "valid_from": "2025-01-15",
            "valid_to": "2025-01-24",
            "source_message_ids": ["msg_005", "msg_999"],
        }
    ],
}

PROFILES = {
    "profiles": [
        {"user_id": "user_001", "profile": {"name": "Zhang San", "skills": ["PostgreSQL"], "summary": "backend lead"}},
        {"user_id": "user_002", "profile": {"name": "Li Si", "responsibilities": ["search page design"]}},
    ]
}


SCRIPT = [('"should_end"', SAME_EPISODE), ('"event_log"', EXTRACTED), ('"profiles"', PROFILES)]


def script_success(fake: FakeLLM) -> None:
    for marker, reply in SCRIPT:
        fake.on(marker, reply)


def requests_for(fake: FakeLLM, marker: str) -> list[str]:
    return [p for p in fake.prompts() if marker in p]


@pytest.fixture
def llm_settings(settings: Settings, fake_llm: FakeLLM) -> Settings:
    return settings.model_copy(
        update={
            "llm_api_key": "test-key",
            "llm_base_url": fake_llm.base_url,
            "llm_model": "fake-model",
            "llm_timeout_s": 0.5,
            "llm_max_retries": 1,
            "llm_retry_backoff_s": 0.01,
            "llm_fallback_after": 3,
        }
    )


@pytest.fixture
def llm_client(llm_settings: Settings, database_url: str) -> Iterator[TestClient]:
    with app_client(llm_settings) as client:
        yield client


def test_all_four_kinds_with_provenance(llm_client: TestClient, fake_llm: FakeLLM, database_url: str):
    script_success(fake_llm)
    llm_client.post(META, json=META_BODY)
    sent = conversation()
    for body in sent:
        assert llm_client.post(MEMORIZE, json=body).json()["result"]["status_info"] == "accumulated"
    # The worker's judge saw messages 2..5 once each, with the time gap in words.
    wait_for(database_url, "SELECT count(*) AS n FROM messages WHERE boundary_checked", 4)
    judged = requests_for(fake_llm, '"should_end"')
    assert len(judged) == 4 and "1 minute" in judged[0]

    answer = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()
    assert answer["result"]["status_info"] == "extracted" and answer["result"]["warning"] is None
    assert len(requests_for(fake_llm, '"should_end"')) == 4, "a negative judgement is never asked again"
    extraction_prompt = requests_for(fake_llm, '"event_log"')[0]
    assert "[msg_003] 2025-01-15 10:03 Zhang San: Agreed." in extraction_prompt
    assert "user_002: Li Si (designer)" in extraction_prompt and "Write every text in English" in extraction_prompt
    assert "skills" in requests_for(fake_llm, '"profiles"')[0]  # group_chat scene: work-oriented fields

    memories = rows(
        database_url,
        "SELECT memory_type, user_id, title, content, source_message_ids, timestamp, valid_from, valid_to, "
        "memcell_id, metadata FROM memories WHERE metadata ->> 'extraction' = 'llm' "
        "ORDER BY memory_type, user_id NULLS FIRST, timestamp",
    )
    kinds = [(m["memory_type"], m["user_id"]) for m in memories]
    assert kinds == [
        ("episode", None),
        ("episode", "user_001"),
        ("episode", "user_002"),
        ("event_log", "user_001"),
        ("event_log", "user_002"),  # no user_id given: the sender of its only source message
        ("semantic_memory", None),
    ]
    cell = rows(database_url, "SELECT * FROM memcells")[0]
    assert (cell["extraction_mode"], cell["boundary_reason"]) == ("llm", "flush")
    assert cell["topic_summary"] == EXTRACTED["summary"]
    assert {m["memcell_id"] for m in memories} == {cell["id"]}
    group_episode, zhang_episode = memories[0], memories[1]
    assert group_episode["content"].startswith("On 15 Jan 2025 Zhang San")
    assert group_episode["source_message_ids"] == [b["message_id"] for b in sent]
    assert zhang_episode["content"] == "Zhang San led the talk."
    fact = memories[3]
    assert fact["source_message_ids"] == ["msg_003"]
    assert fact["timestamp"].isoformat() == "2025-01-15T02:03:00+00:00"
    assert memories[4]["timestamp"].isoformat() == "2025-01-15T16:00:00+00:00"  # 16 Jan, Asia/Shanghai midnight
    semantic = memories[5]
    assert (str(semantic["valid_from"]), str(semantic["valid_to"])) == ("2025-01-15", "2025-01-24")
    assert semantic["source_message_ids"] == ["msg_005"]  # unknown ids dropped
    # Beside the model's facts, each message's own entry (the offline path's): nothing said is lost.
    kept = rows(
        database_url,
        "SELECT content, user_id, source_message_ids, memcell_id FROM memories "
        "WHERE memory_type = 'event_log' AND metadata ->> 'extraction' = 'offline' ORDER BY timestamp",
    )
    assert [k["content"] for k in kept] == [f"{name}: {text}" for _, name, text in CONVERSATION]
    assert [k["source_message_ids"] for k in kept] == [[b["message_id"]] for b in sent]
    assert [k["user_id"] for k in kept] == [b["sender"] for b in sent]
    assert {k["memcell_id"] for k in kept} == {cell["id"]}

    profiles = rows(database_url, "SELECT user_id, version, source, profile FROM profiles ORDER BY user_id")
    assert [(p["user_id"], p["version"], p["source"]) for p in profiles] == [
        ("user_001", 1, "llm"),
        ("user_002", 1, "llm"),
    ]
    zhang = profiles[0]["profile"]
    assert zhang["skills"] == ["PostgreSQL"] and zhang["message_count"] == 3 and zhang["role"] == "developer"
    assert zhang["derived"] is False and zhang["scene"] == "group_chat"

    # The next MemCell's profile prompt carries the previous version, and a new version is written.
    llm_client.post(MEMORIZE, json=message(9, "Mockups are done", sender="user_002"))
    llm_client.post(FLUSH, json={"group_id": "group_123"})
    assert "search page design" in requests_for(fake_llm, '"profiles"')[-1]
    versions = rows(database_url, "SELECT version FROM profiles WHERE user_id = 'user_002' ORDER BY version")
    assert [v["version"] for v in versions] == [1, 2]


def test_only_the_models_facts_when_messages_are_not_kept(llm_settings: Settings, fake_llm: FakeLLM, database_url: str):
    script_success(fake_llm)
    with app_client(llm_settings.model_copy(update={"llm_keep_messages": False})) as client:
        for body in conversation():
            client.post(MEMORIZE, json=body)
        assert client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["status_info"] == "extracted"
    facts = rows(
        database_url,
        "SELECT content, metadata ->> 'extraction' AS extraction FROM memories "
        "WHERE memory_type = 'event_log' ORDER BY timestamp",
    )
    assert facts == [{"content": f["fact"], "extraction": "llm"} for f in EXTRACTED["event_log"]]


def test_judge_should_end_closes_the_episode(llm_client: TestClient, fake_llm: FakeLLM, database_url: str):
    def judge(body: dict) -> dict | None:
        prompt = "\n".join(m["content"] for m in body["messages"])
        if '"should_end"' not in prompt:
            return None
        new = prompt.split("NEW message:")[-1]
        return {"should_end": "lunch" in new, "reasoning": "topic", "topic_summary": "the search feature"}

    fake_llm.handler = judge
    fake_llm.on('"event_log"', EXTRACTED).on('"profiles"', PROFILES)
    for body in conversation()[:3]:
        llm_client.post(MEMORIZE, json=body)
    answer = llm_client.post(MEMORIZE, json=message(4, "Anyone up for lunch?", sender="user_002")).json()
    assert answer["result"]["status_info"] == "accumulated"
    wait_for(database_url, "SELECT count(*) FROM memcells", 1)
    cell = rows(database_url, "SELECT message_ids, boundary_reason, topic_summary FROM memcells")
    assert cell == [
        {
            "message_ids": ["msg_001", "msg_002", "msg_003"],
            "boundary_reason": "llm",
            "topic_summary": "the search feature",
        }
    ]
    assert rows(database_url, "SELECT message_id FROM messages WHERE status = 'pending'") == [{"message_id": "msg_004"}]


def test_chinese_conversation_gets_chinese_prompts_and_memories(
    llm_client: TestClient, fake_llm: FakeLLM, database_url: str
):
    chinese = {
        "title": "新功能讨论",
        "summary": "张三和李四讨论了搜索功能。",
        "content": "2025年1月15日，张三提出讨论新功能的技术方案，李四认为搜索页面需要重新设计。",
        "personal_episodes": [],
        "event_log": [{"time": "2025-01-15T10:01:00+08:00", "fact": "张三提出讨论新功能的技术方案。"}],
        "semantic_memories": [
            {"content": "搜索页面将被重新设计。", "valid_from": "2025-01-15", "valid_to": "2025-02-15"}
        ],
    }
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', chinese).on('"profiles"', {"profiles": []})
    own = {"user_id": "u1", "title": "技术方案", "content": "张三从自己的角度：他提出了新功能的技术方案。"}
    fake_llm.on("从其本人的角度", {"personal_episodes": [own, {"user_id": "u2", "content": ""}]})
    llm_client.post(MEMORIZE, json=message(1, "我们今天讨论一下新功能的技术方案", sender="u1", sender_name="张三"))
    llm_client.post(MEMORIZE, json=message(2, "我觉得搜索页面需要重新设计", sender="u2", sender_name="李四"))
    saved = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["saved_memories"]

    assert "距上一条消息的时间：1分钟" in requests_for(fake_llm, '"should_end"')[0]
    assert "所有文字都用中文书写" in requests_for(fake_llm, '"event_log"')[0]
    assert "值用中文书写" in requests_for(fake_llm, '"profiles"')[0]
    assert {m["memory_type"] for m in saved} == {"episode", "event_log", "semantic_memory"}
    contents = rows(database_url, "SELECT content FROM memories WHERE memory_type = 'episode' AND user_id IS NULL")
    assert contents[0]["content"].startswith("2025年1月15日，张三")
    # No personal episode came back: they were asked for once more; u1's came, u2 gets the group narrative.
    asked = requests_for(fake_llm, "从其本人的角度")
    assert len(asked) == 1 and "u1, u2" in asked[0]
    personal = rows(
        database_url,
        "SELECT user_id, content, metadata->>'personal_episode' AS written_for FROM memories "
        "WHERE memory_type = 'episode' AND user_id IS NOT NULL ORDER BY user_id",
    )
    assert personal == [
        {"user_id": "u1", "content": "张三从自己的角度：他提出了新功能的技术方案。", "written_for": None},
        {"user_id": "u2", "content": chinese["content"], "written_for": "group"},
    ]


FAILURES = {
    "malformed_json": Reply(content='Sure! Here is the JSON: {"title": "x", "content": '),
    "http_500": Reply(status=500),
    "timeout": Reply(delay=2.0, content=EXTRACTED),
    "http_401": Reply(status=401),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_an_llm_that_keeps_failing_falls_back_to_the_offline_path(
    failure: str, llm_client: TestClient, fake_llm: FakeLLM, database_url: str
):
    """Malformed answers, 500s, timeouts and a refused key: the worker tries ``llm_fallback_after`` (3)
    times, then forms the MemCell offline and records why; the stream is never stuck."""
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', FAILURES[failure]).on('"profiles"', PROFILES)
    for body in conversation()[:2]:
        llm_client.post(MEMORIZE, json=body)

    answer = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()
    result = answer["result"]
    assert result["status_info"] == "extracted" and result["count"] > 0
    assert result["warning"] == "Formed without the LLM after 3 failed LLM extractions."
    assert "test-key" not in answer["message"]
    assert rows(database_url, "SELECT extraction_mode, message_ids FROM memcells") == [
        {"extraction_mode": "offline", "message_ids": ["msg_001", "msg_002"]}
    ]
    assert rows(database_url, "SELECT DISTINCT status, extract_attempts FROM messages") == [
        {"status": "processed", "extract_attempts": 3}
    ]
    why = rows(database_url, "SELECT DISTINCT metadata->>'llm_fallback' AS why FROM memories")
    assert why == [{"why": "3 failed LLM extractions"}]
    assert rows(database_url, "SELECT DISTINCT source FROM profiles") == [{"source": "derived"}]
    # 401 is not retried by the client; the others are retried once (llm_max_retries = 1).
    assert len(requests_for(fake_llm, '"event_log"')) == 3 * (1 if failure == "http_401" else 2)

    # The LLM is back: the next MemCell is formed by it.
    fake_llm.reset()
    script_success(fake_llm)
    llm_client.post(MEMORIZE, json=message(9, "Mockups are done", sender="user_002"))
    again = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]
    assert again["status_info"] == "extracted" and again["warning"] is None
    modes = rows(database_url, "SELECT extraction_mode FROM memcells ORDER BY start_time")
    assert modes == [{"extraction_mode": "offline"}, {"extraction_mode": "llm"}]


GARBAGE = [
    "I'm sorry, I can't help with summarising this conversation.",  # prose
    '{"title": "Search feature", "summ',  # truncated before the episode
    '["a list", "not an object"]',  # the wrong shape
    {"title": "no content at all"},  # an object without the episode
    Reply(
        json_body={
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}],
        }
    ),  # empty message
    Reply(json_body={"id": "x", "object": "chat.completion", "choices": []}),  # no choices
]


def test_garbage_answers_then_a_good_one_every_message_forms_once(
    llm_settings: Settings, fake_llm: FakeLLM, database_url: str
):
    """An OpenAI-compatible server answering prose, truncated JSON, wrong shapes and empty messages: every
    message still forms, exactly once, and the stream moves on; what was repaired is used."""
    answers = iter(GARBAGE)

    def extraction(body: dict) -> Any:
        prompt = "\n".join(m["content"] for m in body["messages"])
        if '"event_log"' not in prompt:
            return None
        return next(answers, EXTRACTED)

    fake_llm.handler = extraction
    fake_llm.on('"should_end"', SAME_EPISODE).on('"profiles"', PROFILES)
    with app_client(llm_settings, llm_fallback_after=10, llm_max_retries=0) as client:
        for body in conversation():
            client.post(MEMORIZE, json=body)
        result = client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]
        assert result["status_info"] == "extracted" and result["warning"] is None
    assert rows(database_url, "SELECT extraction_mode FROM memcells") == [{"extraction_mode": "llm"}]
    assert len(requests_for(fake_llm, '"event_log"')) == len(GARBAGE) + 1
    assert_each_message_in_one_memcell(database_url, {b["message_id"] for b in conversation()})
    assert rows(database_url, "SELECT DISTINCT extract_attempts FROM messages") == [{"extract_attempts": len(GARBAGE)}]


def test_a_truncated_answer_is_repaired(llm_client: TestClient, fake_llm: FakeLLM, database_url: str):
    """JSON cut off after the episode (a model out of tokens) is repaired and used, not thrown away."""
    truncated = json.dumps(EXTRACTED)[:-40]
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', truncated).on('"profiles"', PROFILES)
    for body in conversation()[:2]:
        llm_client.post(MEMORIZE, json=body)
    result = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]
    assert result["status_info"] == "extracted" and result["warning"] is None
    assert rows(database_url, "SELECT extraction_mode FROM memcells") == [{"extraction_mode": "llm"}]
    assert len(requests_for(fake_llm, '"event_log"')) == 1


def test_judge_failure_falls_back_to_the_rules(llm_client: TestClient, fake_llm: FakeLLM, database_url: str):
    fake_llm.on('"should_end"', Reply(status=500))
    llm_client.post(MEMORIZE, json=message(1, "first"))
    llm_client.post(MEMORIZE, json=message(2, "second"))
    # Not asked again for that message: the rules decided (and kept it in the open MemCell).
    wait_for(database_url, "SELECT string_agg(message_id, ',') FROM messages WHERE boundary_checked", "msg_002")
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 0


def test_the_worker_retries_a_failing_embedder(llm_settings: Settings, fake_llm: FakeLLM, database_url: str):
    """The embedding service is the fake's /v1/embeddings; two 500s outlast the client's one retry, and the
    worker tries again at once. A longer outage: flush answers ``pending`` after its timeout, and the
    worker forms the stream ``formation_retry_seconds`` later, without anyone asking again."""
    embedding = {"embedding_provider": "openai", "embedding_base_url": fake_llm.base_url, "llm_api_key": None}
    with app_client(llm_settings, flush_timeout_seconds=3, formation_retry_seconds=1, **embedding) as client:
        for body in conversation()[:2]:
            client.post(MEMORIZE, json=body)
        fake_llm.queue(Reply(status=500), Reply(status=500), path="/v1/embeddings")
        first = client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]
        assert first["status_info"] == "extracted"
        assert rows(database_url, "SELECT DISTINCT status FROM messages") == [{"status": "processed"}]

        client.post(MEMORIZE, json=message(3, "third"))
        fake_llm.queue(*[Reply(status=500)] * 200, path="/v1/embeddings")
        waited = client.post(FLUSH, json={"group_id": "group_123"}).json()
        assert waited["result"]["status_info"] == "pending", waited
        assert waited["message"] == "Formation still running after 3s; the memories appear when it finishes"
        fake_llm.reset()
        wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0)
    assert rows(database_url, "SELECT count(*) AS n FROM memcells")[0]["n"] == 2


def test_a_backlog_is_formed_in_order(llm_settings: Settings, fake_llm: FakeLLM, database_url: str):
    """While the embedder is down a backlog builds up; once it is back, the worker forms it in conversation
    order without a flush, and a flush forms the rest."""
    embedding = {"embedding_provider": "openai", "embedding_base_url": fake_llm.base_url, "llm_api_key": None}
    with app_client(llm_settings, boundary_max_messages=3, formation_retry_seconds=1, **embedding) as client:
        fake_llm.queue(*[Reply(status=500)] * 40, path="/v1/embeddings")
        for i in range(1, 12):
            answer = client.post(MEMORIZE, json=message(i, f"backlog message {i}")).json()["result"]
            assert answer["status_info"] == "accumulated"
        wait_for(database_url, "SELECT count(*) FROM memcells", 3)
        cells = rows(database_url, "SELECT message_ids FROM memcells ORDER BY start_time")
        assert [c["message_ids"] for c in cells] == [
            ["msg_001", "msg_002", "msg_003"],
            ["msg_004", "msg_005", "msg_006"],
            ["msg_007", "msg_008", "msg_009"],
        ]
        client.post(FLUSH, json={"group_id": "group_123"})
    cells = rows(database_url, "SELECT message_ids FROM memcells ORDER BY start_time")
    assert [len(c["message_ids"]) for c in cells] == [3, 3, 3, 2]
    assert_each_message_in_one_memcell(database_url, {f"msg_{i:03d}" for i in range(1, 12)})


def test_a_thin_extraction_is_noticed_and_the_offline_memories_are_kept(
    llm_client: TestClient, fake_llm: FakeLLM, database_url: str
):
    """A weak model's extraction in the right shape but empty (no facts; facts of a name or a date) forms the
    MemCell by the offline path at once, each memory saying why; no profile call is spent on it."""
    before = REGISTRY.get_sample_value("memsys_llm_fallbacks_total", {"reason": "no_facts"}) or 0.0
    thin = {**EXTRACTED, "event_log": [{"fact": "Zhang San"}, {"fact": "15 Jan"}], "semantic_memories": []}
    fake_llm.on('"should_end"', SAME_EPISODE).on('"event_log"', thin).on('"profiles"', PROFILES)
    sent = conversation()
    for body in sent:
        llm_client.post(MEMORIZE, json=body)
    answer = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()
    assert answer["result"]["status_info"] == "extracted"
    assert len(requests_for(fake_llm, '"event_log"')) == 1, "asked once: a thin answer is not retried"
    assert requests_for(fake_llm, '"profiles"') == []
    memories = rows(database_url, "SELECT memory_type, content, metadata FROM memories ORDER BY timestamp")
    facts = [m for m in memories if m["memory_type"] == "event_log"]
    assert [f["content"] for f in facts] == [f"{name}: {text}" for _, name, text in CONVERSATION]
    assert {m["metadata"]["extraction"] for m in memories} == {"offline"}
    assert {m["metadata"]["llm_fallback"] for m in memories} == {
        "the LLM extracted no facts from 5 substantive messages"
    }
    assert_each_message_in_one_memcell(database_url, {b["message_id"] for b in sent})
    assert REGISTRY.get_sample_value("memsys_llm_fallbacks_total", {"reason": "no_facts"}) == before + 1


def test_a_judge_that_ends_the_episode_at_every_message_is_distrusted(
    llm_client: TestClient, fake_llm: FakeLLM, database_url: str
):
    """A model that says "end" to everything would make a MemCell of each message: at its third "end" in a
    row (counting the single-message MemCells it closed before) its answers are dropped and the rules cut."""
    distrusted = REGISTRY.get_sample_value("memsys_llm_boundary_distrusted_total") or 0.0
    fake_llm.on('"should_end"', {"should_end": True, "reasoning": "new topic"})
    fake_llm.on('"event_log"', EXTRACTED).on('"profiles"', PROFILES)
    sent = conversation(n=8)
    for body in sent:
        llm_client.post(MEMORIZE, json=body)
    deadline = time.monotonic() + 20
    while (REGISTRY.get_sample_value("memsys_llm_boundary_distrusted_total") or 0.0) == distrusted:
        assert time.monotonic() < deadline, "the judge was never distrusted"
        time.sleep(0.1)
    answer = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()
    assert answer["result"]["status_info"] == "extracted"
    cells = rows(database_url, "SELECT boundary_reason, cardinality(message_ids) AS n FROM memcells ORDER BY end_time")
    assert [c["boundary_reason"] for c in cells[:-1]] == ["llm"] * (len(cells) - 1)
    assert len(cells) <= 3 and cells[-1]["boundary_reason"] == "flush" and cells[-1]["n"] >= 6
    assert_each_message_in_one_memcell(database_url, {b["message_id"] for b in sent})
    judged = [p.rsplit("\n", 3)[-3:] for p in requests_for(fake_llm, '"should_end"')]
    assert 3 <= len(judged) <= 7 and len({str(j) for j in judged}) == len(judged), "no message judged twice"


def test_every_structured_prompt_sends_its_schema_and_an_endpoint_refusing_it_gets_json_mode(
    llm_client: TestClient, fake_llm: FakeLLM, database_url: str
):
    """The judge, the extraction and the profiles ask for their JSON schema in ``response_format``; an
    endpoint that answers the first such call with 400 is asked again at once in JSON mode (the schema in
    llama-cpp-python's ``schema`` field), and every later call of the process goes straight to that."""

    def refuse_schemas(body: dict) -> Reply | dict:
        if body.get("response_format", {}).get("type") == "json_schema":
            return Reply(status=400)
        prompt = "\n".join(str(m.get("content")) for m in body["messages"])
        return next(reply for marker, reply in SCRIPT if marker in prompt)

    fake_llm.force(refuse_schemas)
    sent = conversation()
    for body in sent:
        llm_client.post(MEMORIZE, json=body)
    answer = llm_client.post(FLUSH, json={"group_id": "group_123"}).json()
    assert answer["result"]["status_info"] == "extracted" and answer["result"]["warning"] is None
    formats = [r.body.get("response_format") for r in fake_llm.chat_requests]
    assert formats[0]["type"] == "json_schema" and formats[0]["json_schema"]["name"] == "Judgement"
    assert formats[0]["json_schema"]["schema"]["properties"]["should_end"] == {"type": "boolean"}
    assert all(f["type"] == "json_object" and f["schema"]["type"] == "object" for f in formats[1:])
    schemas = {json.dumps(f["schema"]["required"]) for f in formats[1:]}
    assert '["title", "summary", "content", "personal_episodes", "event_log", "semantic_memories"]' in schemas
    assert '["profiles"]' in schemas
