"""POST /api/v3/agentic/retrieve_lightweight on real PostgreSQL: fields, defaults, errors, scopes, filters."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from tests.retrieval_support import NOW, URL, memory, retrieve, write

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus


@pytest.fixture
def embed(client):
    """A memory's vector as formation makes it, or with ``query=True`` a query's (each role has its runtime)."""
    embedder = client.app.state.runtime.embedder
    return lambda text, query=False: embedder.embed_sync([text], query=query)[0]


@pytest.fixture
def corpus(client, database_url, embed):
    """A small corpus over two users and two groups, plus a group-level memory."""
    texts = [
        ("u1", "g1", "Alice loves Beijing roast duck and travelled to Beijing for food"),
        ("u1", "g2", "Alice is planning the project release date for March"),
        ("u2", "g1", "Bob prefers hiking in the mountains on weekends"),
        ("u2", "g2", "Bob booked flights to Beijing for the spring festival"),
        (None, "g1", "The group agreed to meet every Friday for a food tasting"),
    ]
    rows = write(database_url, [memory(text, embed(text), user_id=u, group_id=g) for u, g, text in texts])
    return {row["content"]: row for row in rows}


def test_defaults_and_response_shape(client, corpus):
    body = client.post(URL, json={"query": "Beijing food"}).json()
    assert body["status"] == "ok"
    result = body["result"]
    meta = result["metadata"]
    assert meta["retrieval_mode"] == "rrf"
    assert meta["data_source"] == "episode"
    assert meta["memory_scope"] == "all"
    assert meta["time_range_days"] is None  # all time
    assert meta["final_count"] == result["count"] == len(result["memories"]) == 5
    assert meta["emb_count"] == 5 and meta["bm25_count"] >= 2
    assert meta["total_latency_ms"] > 0 and meta["query_embedding_ms"] > 0
    top = result["memories"][0]
    assert "Beijing" in top["content"]
    expected_keys = {
        "id", "memory_type", "content", "title", "summary", "score", "timestamp", "user_id", "group_id",
        "memcell_id", "source_message_ids", "valid_from", "valid_to",
    }  # fmt: skip
    assert expected_keys <= set(top)
    assert top["episode"] == top["content"] and top["subject"] == top["title"]  # upstream's names
    scores = [m["score"] for m in result["memories"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0 <= s <= 1 for s in scores)
    assert len({m["id"] for m in result["memories"]}) == len(result["memories"])  # found by both legs: once


def _ids(result) -> set[str]:
    return {m["content"] for m in result["memories"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 101}, "top_k"),
        ({"query": "x", "top_k": "many"}, "top_k"),
        ({"query": "x", "retrieval_mode": "hybrid"}, "retrieval_mode"),
        ({"query": "x", "retrieval_mode": "lightweight"}, "retrieval_mode"),
        ({"query": "x", "data_source": "messages"}, "data_source"),
        ({"query": "x", "memory_scope": "everyone"}, "memory_scope"),
        ({"query": "x", "memory_scope": "personal"}, "user_id"),
        ({"query": "x", "memory_scope": "personal", "group_id": "g1"}, "user_id"),
        ({"query": "x", "memory_scope": "group"}, "group_id"),
        ({"query": "x", "memory_scope": "group", "user_id": "u1"}, "group_id"),
        ({"query": "x", "time_range_days": 0}, "time_range_days"),
        ({"query": "x", "time_range_days": -3}, "time_range_days"),
        ({"query": "x", "current_time": "2025/01/15"}, "current_time"),
        ({"query": "x", "current_time": "2025-02-30"}, "current_time"),
        ({"query": "x", "current_time": "2025-01-15T10:00:00"}, "current_time"),
        ({"query": "x", "radius": 1.5}, "radius"),
        ({"query": "x", "radius": -1.01}, "radius"),
        ({"query": "x", "radius": "close"}, "radius"),
        ({"query": "x", "user_id": ""}, "user_id"),
        ({"query": "x", "group_id": " "}, "group_id"),
        ({"data_source": "profile"}, "user_id"),
        ({"data_source": "profile", "group_id": "g1"}, "user_id"),
    ],
)
def test_invalid_requests_are_400_naming_the_field(client, body, field):
    response = client.post(URL, json=body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["status"] == "failed"
    assert error["code"] == "INVALID_PARAMETER"
    assert field in error["message"]
    assert error["path"] == URL


def test_missing_query_message_matches_the_seed(client):
    assert client.post(URL, json={"user_id": "u1"}).json()["message"] == "Missing required parameter: query"


def test_top_k_limits_the_answer(client, corpus):
    result = retrieve(client, query="Beijing", top_k=2)
    assert result["count"] == 2 and result["metadata"]["final_count"] == 2
    assert retrieve(client, query="Beijing", top_k=100)["count"] == 5


def test_embedding_mode_runs_the_vector_leg_only_and_scores_cosine(client, corpus, embed):
    result = retrieve(client, query="roast duck in Beijing", retrieval_mode="embedding")
    meta = result["metadata"]
    assert meta["retrieval_mode"] == "embedding" and meta["bm25_count"] == 0 and meta["emb_count"] == 5
    query_vector = embed("roast duck in Beijing", query=True)
    for item in result["memories"]:
        vector = embed(item["content"])
        cosine = sum(a * b for a, b in zip(query_vector, vector, strict=True))
        assert item["score"] == pytest.approx(max(cosine, 0.0), abs=1e-4)
    assert result["memories"][0]["content"].startswith("Alice loves Beijing roast duck")


def test_bm25_mode_runs_the_keyword_leg_only(client, corpus):
    result = retrieve(client, query="hiking mountains", retrieval_mode="bm25")
    meta = result["metadata"]
    assert meta["emb_count"] == 0 and meta["query_embedding_ms"] == 0
    assert _ids(result) == {"Bob prefers hiking in the mountains on weekends"}
    assert 0 < result["memories"][0]["score"] < 1
    assert retrieve(client, query="the of and", retrieval_mode="bm25")["count"] == 0  # stop words only


def test_rrf_score_is_one_for_a_memory_first_in_both_legs(client, corpus):
    result = retrieve(client, query="Bob hiking mountains weekends")
    top = result["memories"][0]
    assert top["content"].startswith("Bob prefers hiking")
    assert top["score"] == pytest.approx(1.0)


def test_rrf_score_is_scaled_by_the_legs_that_run(client, corpus):
    """A query of no searchable word runs the vector leg alone: its first memory scores 1, as one first in both legs
    does when both run, and explain's best possible is one leg's."""
    result = retrieve(client, query="What is it?", explain=True)
    assert result["metadata"]["bm25_count"] == 0 and result["metadata"]["emb_count"] > 0
    top = result["memories"][0]
    assert top["score"] == pytest.approx(1.0) and top["explain"]["bm25"] is None
    assert top["explain"]["rrf"]["best_possible"] == pytest.approx(1 / 61) == top["explain"]["rrf"]["sum"]
    both = retrieve(client, query="Bob hiking mountains weekends", explain=True)["memories"][0]["explain"]
    assert both["rrf"]["best_possible"] == pytest.approx(2 / 61)


def test_data_source_selects_the_memory_type_and_memcell_is_episode(client, database_url, embed, corpus):
    text = "Alice's release date for the project is March 3"
    write(database_url, [memory(text, embed(text), memory_type="event_log")])
    result = retrieve(client, query="project release date", data_source="event_log")
    assert _ids(result) == {text}
    assert result["memories"][0]["memory_type"] == "event_log"
    aliased = retrieve(client, query="project release date", data_source="memcell")
    assert aliased["metadata"]["data_source"] == "episode"
    assert text not in _ids(aliased) and len(aliased["memories"]) == 5


def test_scope_all_filters_by_each_id_given(client, corpus):
    assert _ids(retrieve(client, query="Beijing", user_id="u1", group_id="g1")) == {
        "Alice loves Beijing roast duck and travelled to Beijing for food"
    }
    assert _ids(retrieve(client, query="Beijing", user_id="u1")) == {
        "Alice loves Beijing roast duck and travelled to Beijing for food",
        "Alice is planning the project release date for March",
    }
    assert len(_ids(retrieve(client, query="Beijing", group_id="g1"))) == 3


def test_scope_personal_uses_user_id_only_across_groups(client, corpus):
    result = retrieve(client, query="Beijing", user_id="u2", group_id="g1", memory_scope="personal")
    assert {m["user_id"] for m in result["memories"]} == {"u2"}
    assert {m["group_id"] for m in result["memories"]} == {"g1", "g2"}


def test_scope_group_uses_group_id_only_all_members(client, corpus):
    result = retrieve(client, query="food", user_id="u2", group_id="g1", memory_scope="group")
    assert {m["group_id"] for m in result["memories"]} == {"g1"}
    assert {m["user_id"] for m in result["memories"]} == {"u1", "u2", None}


def test_radius_keeps_only_memories_at_least_that_similar(client, corpus):
    everything = retrieve(client, query="roast duck", retrieval_mode="embedding")
    cosines = sorted(m["score"] for m in everything["memories"])
    cut = (cosines[-1] + cosines[-2]) / 2
    close = retrieve(client, query="roast duck", retrieval_mode="embedding", radius=cut)
    assert close["count"] == 1 and close["memories"][0]["score"] >= cut
    assert retrieve(client, query="roast duck", retrieval_mode="embedding", radius=-1)["count"] == 5
    # In rrf the radius trims the vector leg; the keyword leg still contributes.
    fused = retrieve(client, query="roast duck", radius=0.99)
    assert fused["metadata"]["emb_count"] == 0
    assert _ids(fused) == {"Alice loves Beijing roast duck and travelled to Beijing for food"}


def test_time_range_days_counts_back_from_now_or_current_time(client, database_url, embed):
    recent, old = "Budget review meeting held recently", "Budget review meeting held long ago"
    write(database_url, [memory(recent, embed(recent), days_ago=10), memory(old, embed(old), days_ago=400)])
    assert _ids(retrieve(client, query="budget review")) == {recent, old}  # default: all time
    assert _ids(retrieve(client, query="budget review", time_range_days=365)) == {recent}
    assert _ids(retrieve(client, query="budget review", time_range_days=500)) == {recent, old}
    assert _ids(retrieve(client, query="budget review", time_range_days=5)) == set()
    then = (NOW - timedelta(days=395)).date().isoformat()
    assert _ids(retrieve(client, query="budget review", current_time=then, time_range_days=30)) == {old}


def test_current_time_keeps_semantic_memories_valid_that_day(client, database_url, embed):
    rows = [
        ("Alice works at Acme", date(2024, 1, 1), date(2024, 12, 31)),
        ("Alice works at Globex", date(2025, 1, 1), None),
        ("Alice works at Initech", None, date(2023, 12, 31)),
        ("Alice works remotely", None, None),
    ]
    write(
        database_url,
        [
            memory(text, embed(text), memory_type="semantic_memory", valid_from=start, valid_to=end, days_ago=30)
            for text, start, end in rows
        ],
    )
    today = NOW.date().isoformat()
    found = retrieve(client, query="where does Alice work", data_source="semantic_memory", current_time=today)
    assert _ids(found) == {"Alice works at Globex", "Alice works remotely"}
    assert all(m["valid_from"] is None or m["valid_from"] <= today for m in found["memories"])
    assert len(_ids(retrieve(client, query="where does Alice work", data_source="semantic_memory"))) == 4
    # On an episode current_time only moves the time window (episodes have no validity).
    assert retrieve(client, query="Alice work", current_time=today)["count"] == 0


def test_profile_returns_the_latest_version(client, database_url):
    import psycopg
    from psycopg.types.json import Jsonb

    assert retrieve(client, data_source="profile", user_id="u1", group_id="g1")["count"] == 0
    with psycopg.connect(database_url) as conn:
        conn.execute("SET memsys.tenant_id = 'default'")  # new rows take the setting as their tenant
        for version in (1, 2):
            conn.execute(
                "INSERT INTO profiles (user_id, group_id, version, profile, source) VALUES (%s, %s, %s, %s, 'llm')",
                ("u1", "g1", version, Jsonb({"version_seen": version, "hobbies": ["hiking"]})),
            )
        conn.execute(
            "INSERT INTO profiles (user_id, group_id, version, profile, source) VALUES ('u2', 'g1', 7, '{}', 'llm')"
        )
    result = retrieve(client, data_source="profile", user_id="u1", group_id="g1", query="")
    assert result["count"] == 1
    item = result["memories"][0]
    assert item["memory_type"] == "profile" and item["profile"]["version_seen"] == 2
    assert item["user_id"] == "u1" and item["group_id"] == "g1" and item["score"] == 1.0
    assert '"hobbies"' in item["content"]
    assert result["metadata"]["data_source"] == "profile"

    # Without group_id: the user's latest profile in every group and in their personal stream.
    with psycopg.connect(database_url) as conn:
        conn.execute("SET memsys.tenant_id = 'default'")
        conn.execute(
            "INSERT INTO profiles (user_id, group_id, version, profile, source) VALUES "
            "('u1', 'g2', 1, '{\"in\": \"g2\"}', 'derived'), ('u1', NULL, 3, '{\"in\": \"notes\"}', 'derived')"
        )
    every = retrieve(client, data_source="profile", user_id="u1")
    assert sorted((m["group_id"] or "", m["profile"].get("in"), m["title"]) for m in every["memories"]) == [
        ("", "notes", "Profile of u1 in personal notes (version 3)"),
        ("g1", None, "Profile of u1 in g1 (version 2)"),
        ("g2", "g2", "Profile of u1 in g2 (version 1)"),
    ]


def test_explain_gives_each_legs_rank_score_and_rrf_contribution(client, corpus, embed):
    query = "Bob hiking mountains weekends"
    result = retrieve(client, query=query, explain=True)
    by_rank = result["memories"]
    top = by_rank[0]["explain"]
    assert top["mode"] == "rrf" and top["rrf"]["k"] == 60
    assert top["vector"]["rank"] == 1 and top["bm25"]["rank"] == 1
    assert top["vector"]["rrf_contribution"] == pytest.approx(1 / 61) == top["bm25"]["rrf_contribution"]
    assert top["rrf"]["sum"] == pytest.approx(2 / 61) and top["retrieval_score"] == pytest.approx(1.0)
    vector = embed(query, query=True)
    for item in by_rank:
        explained = item["explain"]
        cosine = sum(a * b for a, b in zip(vector, embed(item["content"]), strict=True))
        assert explained["vector"]["cosine"] == pytest.approx(cosine, abs=1e-4)
        assert explained["vector"]["distance"] == pytest.approx(1 - cosine, abs=1e-4)
        legs = [explained[leg]["rrf_contribution"] for leg in ("vector", "bm25") if explained[leg]]
        assert explained["rrf"]["sum"] == pytest.approx(sum(legs))
        assert item["score"] == pytest.approx(explained["rrf"]["sum"] / explained["rrf"]["best_possible"], abs=1e-5)
        assert explained["weights"] == {"time": 1.0, "type": 1.0, "product": 1.0}
    # A memory without any query term is not in the BM25 leg: its contribution is null, not 0 with a rank.
    assert any(item["explain"]["bm25"] is None for item in by_rank)
    assert all(item["explain"]["bm25"]["score"] > 0 for item in by_rank if item["explain"]["bm25"])
    assert retrieve(client, query=query)["memories"][0]["explain"] is None  # only when asked


def test_explain_in_bm25_mode_and_with_a_time_boost(client, corpus):
    result = retrieve(client, query="hiking mountains", retrieval_mode="bm25", explain=True)
    explained = result["memories"][0]["explain"]
    assert explained["vector"] is None and explained["bm25"]["rank"] == 1 and explained["bm25"]["score"] > 0
    result = retrieve(client, query="what did Alice do in the last 3 days", time_aware=True, explain=True)
    weights = {item["content"]: item["explain"]["weights"] for item in result["memories"]}
    assert all(w["time"] == 2.0 for w in weights.values())  # every memory is from yesterday: all boosted
    assert all(item["explain"]["order_key"] == pytest.approx(item["score"] * 2.0) for item in result["memories"])


def test_a_short_answer_counts_other_scopes_up_to_a_bound(client, database_url, embed):
    """``hidden`` counts what the filters left out of a short answer without reading the tenant's type: the scope's
    own memories (outside the time range here), and other scopes' only when the scope holds none (a wrong id,
    likely: other groups' memories are no news otherwise), up to ``OTHER_SCOPES_LIMIT``, which the advice calls "at
    least" (reading the type's first 10,000 memories took 5 ms of every short answer in a group at 1M memories)."""
    from app.retrieval.service import OTHER_SCOPES_LIMIT

    vector = embed("Alice met the vendor about the contract")
    others = [memory(f"note {i} about the vendor contract", vector, group_id=f"g{i + 2}") for i in range(150)]
    old = [memory("Alice met the vendor about the contract", vector, group_id="g1", days_ago=90) for _ in range(2)]
    write(database_url, [*others, *old, memory("Alice signed the vendor contract", vector, group_id="g1")])
    request = {"query": "vendor contract", "group_id": "g1", "memory_scope": "group", "time_range_days": 30}
    body = client.post(URL, json=request).json()
    assert body["result"]["count"] == 1
    hidden = body["result"]["metadata"]["hidden"]
    assert hidden == {"outside_time_range": 2, "other_scopes": 0, "not_yet_embedded": 0, "below_radius": 0}
    assert "other users or groups" not in body["message"]
    empty = client.post(URL, json={**request, "group_id": "g0"}).json()
    assert empty["result"]["count"] == 0
    assert empty["result"]["metadata"]["hidden"]["other_scopes"] == OTHER_SCOPES_LIMIT
    assert f"at least {OTHER_SCOPES_LIMIT} are of other users or groups" in empty["message"]
    assert "2 episode memories of this scope are outside the time range" in body["message"]
