"""Tenant isolation with many users sharing terms and vectors, and a selective filter over the HNSW
index still filling top_k."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from sqlalchemy import text

from app.retrieval import repository, service
from tests.retrieval_support import MODEL, memory, retrieve, search, tenant_engine, window, write

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

TEXTS = [
    "Quarterly budget review with the finance team",
    "Trip to Beijing for roast duck",
    "Release date moved to March",
]


def _unit(vector: np.ndarray) -> list[float]:
    return (vector / np.linalg.norm(vector)).tolist()


@pytest.fixture
def shared(database_url):
    """60 users in 6 groups, each with the same three memories and almost the same vectors."""
    rng = np.random.default_rng(7)
    base = [rng.normal(size=384) for _ in TEXTS]
    new = []
    for user in range(60):
        for index, content in enumerate(TEXTS):
            vector = _unit(base[index] + rng.normal(scale=0.01, size=384))
            new.append(memory(content, vector, user_id=f"user{user}", group_id=f"group{user % 6}"))
    write(database_url, new)
    return base


@pytest.mark.parametrize("mode", ["rrf", "embedding", "bm25"])
@pytest.mark.parametrize("scope", ["all", "personal"])
def test_a_user_filter_never_returns_another_users_memory(client, shared, mode, scope):
    for user in random.Random(1).sample(range(60), 12):
        result = retrieve(
            client, query="budget review Beijing release", user_id=f"user{user}", memory_scope=scope,
            retrieval_mode=mode, top_k=100,
        )  # fmt: skip
        assert {m["user_id"] for m in result["memories"]} == {f"user{user}"}
        assert result["count"] == 3


@pytest.mark.parametrize("mode", ["rrf", "embedding", "bm25"])
def test_a_group_filter_never_returns_another_groups_memory(client, shared, mode):
    result = retrieve(
        client, query="budget Beijing", group_id="group4", memory_scope="group", retrieval_mode=mode, top_k=100
    )
    assert {m["group_id"] for m in result["memories"]} == {"group4"}
    assert result["count"] == (30 if mode != "bm25" else 20)
    both = retrieve(client, query="budget Beijing", user_id="user4", group_id="group5", retrieval_mode=mode)
    assert both["count"] == 0  # user4 is in group4


def test_selective_filter_over_hnsw_still_returns_top_k(settings, database_url):
    """2000 memories, 25 of them in group 'rare'. The plan is pinned to the HNSW index (sorts priced out);
    with iterative scans the leg still returns top_k = 20, equal to exact search; without, it comes up short: its
    candidate list (hnsw.ef_search, 800 while the new graph has no size estimate) holds about 10 of the group's.
    2000 rather than more: each insert walks the graph (m 48, ef_construction 200); 8000 took two minutes."""
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(2000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rare = set(rng.choice(2000, size=25, replace=False).tolist())
    new = [
        memory(f"note {i}", vectors[i].tolist(), user_id=f"u{i % 500}", group_id="rare" if i in rare else f"g{i % 97}")
        for i in range(2000)
    ]
    rows = write(database_url, new)
    query_vector = _unit(rng.normal(size=384))
    filters = window(group_id="rare")
    parameters = repository.search_parameters(
        tenant="default", mode="embedding", query_vector=query_vector, embedding_model=MODEL, query_tokens="",
        filters=filters, top_k=20, radius=None,
        tuning=service.tuning_for(settings, "embedding", 20),
    )  # fmt: skip
    rare_ids = [rows[i]["id"] for i in sorted(rare)]
    exact = sorted(rare_ids, key=lambda mid: -float(np.dot(vectors[[r["id"] for r in rows].index(mid)], query_vector)))

    async def run(iterative: bool):
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                await repository.configure_search(
                    conn, service.tuning_for(settings, "embedding", 20), filters.memory_type
                )
                await conn.execute(text("SET LOCAL enable_sort = off"))
                if not iterative:
                    await conn.execute(text("SET LOCAL hnsw.iterative_scan = off"))
                explain = text("EXPLAIN " + repository.hybrid_sql(parameters))
                plan = "\n".join(r[0] for r in await conn.execute(explain, parameters))
                return plan, await repository.hybrid_search(conn, parameters)
        finally:
            await engine.dispose()

    plan, found = asyncio.run(run(iterative=True))
    assert "ix_memories_embedding_hnsw_episode" in plan
    assert [str(r["id"]) for r in found] == exact[:20]
    _, short = asyncio.run(run(iterative=False))
    assert len(short) < 20
    # And through the service with the planner free to choose.
    result = search(
        settings, database_url, query="", filters=filters, top_k=20, mode="embedding", query_vector=query_vector
    )
    assert [m["id"] for m in result.memories] == exact[:20]
