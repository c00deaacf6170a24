"""POST /api/v3/agentic/retrieve_agentic against a real PostgreSQL and an OpenAI-compatible test server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from litestar.testing import TestClient

from app.http.app import create_app
from app.settings import Settings
from benchmarks.fake_llm import Reply
from tests.retrieval_support import memory, write

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

URL = "/api/v3/agentic/retrieve_agentic"
TODAY = datetime(2025, 1, 15, 12, tzinfo=UTC)  # a Wednesday

SUFFICIENT = {"is_sufficient": True, "reasoning": "The memories say what Alice eats", "refined_queries": []}
INSUFFICIENT = {
    "is_sufficient": False,
    "reasoning": "Need Bob's hobbies too",
    "missing_information": "what Bob does on weekends",
    "refined_queries": ["Bob weekend hobbies", "mountain hiking trips", "Bob weekend hobbies"],
}


def agentic_settings(settings: Settings, **overrides) -> Settings:
    """Fast LLM failures; the fake LLM server listens on 127.0.0.1, so client URLs may be private here."""
    return settings.model_copy(
        update={
            "llm_timeout_s": 1.0,
            "llm_max_retries": 0,
            "llm_retry_backoff_s": 0.01,
            "llm_allow_private_urls": True,
            **overrides,
        }
    )


@pytest.fixture(scope="module")
def agentic_app(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(agentic_settings(settings)), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def api(agentic_app: TestClient, database_url: str) -> TestClient:
    return agentic_app


@pytest.fixture
def corpus(api: TestClient, database_url: str) -> dict[str, dict]:
    embedder = api.app.state.runtime.embedder
    rows = [
        ("u1", "Alice loves Beijing roast duck and went to Beijing for the food", 40),
        ("u1", "Alice ate spicy hot pot with colleagues", 9),  # last week (6-12 Jan)
        ("u2", "Bob goes hiking in the mountains every weekend", 30),
        ("u2", "Bob booked flights for the spring festival", 20),
        ("u1", "爱丽丝喜欢吃北京烤鸭", 2),
    ]
    written = write(
        database_url,
        [
            memory(
                text,
                embedder.embed_sync([text])[0],
                user_id=user,
                group_id="g1",
                timestamp=TODAY - timedelta(days=days),
            )
            for user, text, days in rows
        ],
    )
    return {row["content"]: row for row in written}


def ask(api: TestClient, fake, **body) -> dict:
    body.setdefault("llm_config", {"api_key": "test-key", "base_url": fake.base_url, "model": "test-model"})
    body.setdefault("group_id", "g1")
    body.setdefault("current_time", "2025-01-15")
    return api.post(URL, json=body)


def test_without_any_key_is_400_saying_where_to_put_one(api, corpus) -> None:
    response = api.post(URL, json={"query": "What does Alice eat?", "group_id": "g1"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "INVALID_PARAMETER" and "llm_config.api_key" in body["message"]


def test_missing_query_is_400(api, fake_llm) -> None:
    response = ask(api, fake_llm, query="")
    assert response.status_code == 400 and "query" in response.json()["message"]
    response = api.post(URL, json={"group_id": "g1"})
    assert response.status_code == 400 and response.json()["message"] == "Missing required field: query"


def test_scope_rules_and_blank_ids_are_400_as_in_lightweight(api, fake_llm) -> None:
    response = ask(api, fake_llm, query="What does Alice eat?", memory_scope="personal")
    assert response.status_code == 400 and response.json()["message"] == "memory_scope=personal needs user_id"
    response = ask(api, fake_llm, query="What does Alice eat?", user_id=" ")
    assert response.status_code == 400 and "user_id" in response.json()["message"]
    response = ask(api, fake_llm, query="What does Alice eat?", data_source="profile")
    assert response.status_code == 400 and "data_source" in response.json()["message"]
    assert fake_llm.chat_requests == []  # refused before any LLM call


def test_sufficient_path_returns_round_one(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    response = ask(api, fake_llm, query="What does Alice like to eat?", top_k=3)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok"
    result = body["result"]
    meta = result["metadata"]
    assert meta["retrieval_mode"] == "agentic" and meta["is_multi_round"] is False
    assert meta["is_sufficient"] is True and meta["refined_queries"] == [] and meta["round2_count"] == 0
    assert meta["round1_count"] == 5 and meta["final_count"] == result["count"] == 3
    assert meta["reasoning"] == SUFFICIENT["reasoning"] and meta["reranker"] == "none"
    assert set(meta["timings_ms"]) >= {"round1_search", "llm_judge", "total"}
    assert "Alice" in result["memories"][0]["content"] or "爱丽丝" in result["memories"][0]["content"]
    # The judge saw the query and the round-1 memories, in English.
    prompt = fake_llm.prompts()[-1]
    assert "What does Alice like to eat?" in prompt and "Retrieved memories" in prompt


def test_insufficient_path_runs_refined_queries_and_dedupes(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", INSUFFICIENT)
    response = ask(api, fake_llm, query="What do Alice and Bob do?", top_k=10)
    result = response.json()["result"]
    meta = result["metadata"]
    assert meta["is_multi_round"] is True and meta["is_sufficient"] is False
    assert meta["refined_queries"] == ["Bob weekend hobbies", "mountain hiking trips"]  # duplicates dropped
    assert meta["missing_information"] == "what Bob does on weekends"
    assert meta["round2_count"] == 10  # each refined query found all 5 memories
    ids = [m["id"] for m in result["memories"]]
    assert len(ids) == len(set(ids)) == 5  # the union, once each
    assert len(fake_llm.chat_requests) == 1  # one LLM call judged and refined


def test_top_k_bounds_the_answer(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", INSUFFICIENT)
    result = ask(api, fake_llm, query="What do Alice and Bob do?", top_k=2).json()["result"]
    assert result["count"] == 2 and len(result["memories"]) == 2


def test_time_window_boosts_memories_in_it(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    result = ask(api, fake_llm, query="What did Alice eat last week?").json()["result"]
    window = result["metadata"]["time_window"]
    assert window == {"start": "2025-01-06", "end": "2025-01-12", "expression": "last week", "mode": "boost"}
    first = result["memories"][0]
    assert first["content"] == "Alice ate spicy hot pot with colleagues" and first["weight"] == 1.0
    assert result["count"] == 5  # boosting keeps the others


def test_time_window_filters_when_asked_plainly(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    result = ask(api, fake_llm, query="Only last week: what did Alice eat?").json()["result"]
    assert result["metadata"]["time_window"]["mode"] == "filter"
    assert [m["content"] for m in result["memories"]] == ["Alice ate spicy hot pot with colleagues"]


def test_a_named_window_reaches_past_the_default_range(api, database_url, fake_llm) -> None:
    embedder = api.app.state.runtime.embedder
    text = "Alice moved to Shanghai"
    write(
        database_url,
        [memory(text, embedder.embed_sync([text])[0], group_id="g1", timestamp=TODAY - timedelta(days=700))],
    )
    fake_llm.on("is_sufficient", SUFFICIENT)
    result = ask(api, fake_llm, query="Where did Alice move in 2023?").json()["result"]
    assert [m["content"] for m in result["memories"]] == [text]
    # With an explicit time_range_days, the caller's range is kept.
    result = ask(api, fake_llm, query="Where did Alice move in 2023?", time_range_days=30).json()["result"]
    assert result["memories"] == []


def test_chinese_query_gets_the_chinese_prompt(api, corpus, fake_llm) -> None:
    fake_llm.on(
        "is_sufficient", {"is_sufficient": False, "reasoning": "需要更多信息", "refined_queries": ["爱丽丝 烤鸭"]}
    )
    result = ask(api, fake_llm, query="爱丽丝喜欢吃什么？").json()["result"]
    assert "问题：爱丽丝喜欢吃什么？" in fake_llm.prompts()[-1]
    assert result["metadata"]["reasoning"] == "需要更多信息"
    assert result["metadata"]["refined_queries"] == ["爱丽丝 烤鸭"]
    assert result["memories"][0]["content"] == "爱丽丝喜欢吃北京烤鸭"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("this is not json at all", "not valid JSON"),
        ({"verdict": "maybe"}, "no is_sufficient"),
        (Reply(status=500), "HTTP 500"),
        (Reply(status=503), "HTTP 503"),
        (Reply(delay=3, content=SUFFICIENT), "did not answer within"),
    ],
)
def test_llm_failures_fall_back_to_round_one(api, corpus, fake_llm, reply, reason) -> None:
    fake_llm.on("is_sufficient", reply)
    response = ask(api, fake_llm, query="What does Alice like to eat?", top_k=4)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    meta = body["result"]["metadata"]
    assert meta["retrieval_mode"] == "agentic_fallback"
    assert reason in meta["fallback_reason"]
    assert body["result"]["count"] == 4  # the best results so far


def test_rejected_key_is_400(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", Reply(status=401))
    response = ask(api, fake_llm, query="What does Alice like to eat?")
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID_PARAMETER" and "rejected the API key" in response.json()["message"]


def test_request_key_is_sent_only_to_its_endpoint(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    ask(
        api,
        fake_llm,
        query="What does Alice like to eat?",
        llm_config={"api_key": "secret-123", "base_url": fake_llm.base_url, "model": "m1"},
    )
    request = fake_llm.chat_requests[-1]
    assert (
        request.headers.get("authorization") == "Bearer secret-123"
        or request.headers.get("Authorization") == "Bearer secret-123"
    )
    assert request.body["model"] == "m1"


def score_lines_mentioning(word: str):
    """An LLM ranker's answer: 0.9 for the listed memories that mention ``word``, 0.1 for the others."""
    import re

    def handler(body: dict) -> dict | None:
        prompt = "\n".join(m["content"] for m in body["messages"])
        if "Rate how relevant" not in prompt:
            return None
        lines = re.findall(r"^\[(\d+)\] (.*)$", prompt, flags=re.MULTILINE)
        return {"scores": [{"index": int(n), "score": 0.9 if word in text else 0.1} for n, text in lines]}

    return handler


def test_http_and_llm_rerankers(settings, database_url, fake_llm) -> None:
    for provider, expected in (("http", "http:test-reranker"), ("llm", "llm")):
        custom = agentic_settings(
            settings, rerank_provider=provider, rerank_base_url=fake_llm.base_url, rerank_model="test-reranker"
        )
        with TestClient(create_app(custom), raise_server_exceptions=False) as api:
            embedder = api.app.state.runtime.embedder
            texts = ["Alice loves Beijing roast duck", "Bob goes hiking every weekend", "The weather was cold"]
            write(database_url, [memory(t, embedder.embed_sync([t])[0], group_id="g1", timestamp=TODAY) for t in texts])
            fake_llm.reset()
            fake_llm.on("is_sufficient", SUFFICIENT)
            fake_llm.handler = score_lines_mentioning("hiking")
            result = ask(api, fake_llm, query="hiking weekend").json()["result"]
            assert result["metadata"]["reranker"] == expected
            assert result["memories"][0]["content"] == "Bob goes hiking every weekend"
            assert 0 <= result["memories"][-1]["score"] <= result["memories"][0]["score"] <= 1
            from psycopg import connect

            with connect(database_url, autocommit=True) as conn:
                conn.execute("TRUNCATE memories, memcells CASCADE")


def test_explain_shows_the_legs_and_the_type_and_time_weights(api, corpus, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    result = ask(api, fake_llm, query="What did Alice eat last week?", explain=True).json()["result"]
    for item in result["memories"]:
        explained = item["explain"]
        assert explained["mode"] == "agentic" and explained["vector"]["rank"] >= 1
        assert explained["weights"]["type"] == 0.5  # episodes, seed 004's "conversation" weight
        assert explained["weights"]["product"] == pytest.approx(item["weight"])
        assert explained["order_key"] == pytest.approx(item["score"] * item["weight"])
        assert "weights" not in item and "retrieval_score" not in item
    boosted = [item for item in result["memories"] if item["explain"]["weights"]["time"] == 2.0]
    assert [item["content"] for item in boosted] == ["Alice ate spicy hot pot with colleagues"]
    plain = ask(api, fake_llm, query="What did Alice eat last week?").json()["result"]["memories"]
    assert all("explain" not in item and "weights" not in item for item in plain)


def test_a_question_about_now_puts_the_newer_count_first(api, database_url, fake_llm) -> None:
    """As lightweight retrieval does: asked how many now, the later count comes first where the earlier stood; with
    time_aware false the search's order stands (the earlier count, closer in words, first)."""
    embedder = api.app.state.runtime.embedder
    said = [
        ("I have tried three Korean restaurants in my city.", 160),
        ("Update on the food front: four different Korean places tried in town so far.", 20),
    ]
    earlier, later = (
        row["id"]
        for row in write(
            database_url,
            [memory(t, embedder.embed_sync([t])[0], user_id="u9", group_id="g9", timestamp=TODAY - timedelta(days=d))
             for t, d in said],
        )
    )  # fmt: skip
    fake_llm.on("is_sufficient", SUFFICIENT)
    query = "How many Korean restaurants have I tried in my city?"
    plain = ask(api, fake_llm, query=query, group_id="g9", time_aware=False).json()["result"]["memories"]
    assert [m["id"] for m in plain] == [earlier, later]
    aware = ask(api, fake_llm, query=query, group_id="g9").json()["result"]["memories"]
    assert [m["id"] for m in aware] == [later, earlier]
