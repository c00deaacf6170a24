"""How deep each leg of the hybrid statement searches."""

from __future__ import annotations

import asyncio

import numpy as np
import psycopg
from sqlalchemy import text

from app.retrieval import repository
from app.retrieval.service import tuning_for
from app.settings import Settings
from tests.retrieval_support import memory, tenant_engine, write


def test_rrf_legs_bring_at_least_twice_top_k() -> None:
    settings = Settings(rrf_candidates=100, hnsw_ef_search=100)
    assert tuning_for(settings, "rrf", 20).leg_limit == 100
    deep = tuning_for(settings, "rrf", 100)
    assert deep.leg_limit == 200 and deep.ef_search == 200  # the HNSW candidate list follows the LIMIT
    assert tuning_for(settings, "embedding", 100).leg_limit == 100  # one leg: no fusion to feed
    assert tuning_for(settings, "bm25", 7).leg_limit == 7
    assert tuning_for(Settings(rrf_candidates=1500), "rrf", 100).ef_search == 1000  # pgvector's upper bound


def test_a_small_graph_is_searched_with_the_shorter_candidate_list(database_url) -> None:
    """configure_search: hnsw.ef_search is hnsw_small_graph_ef_search where the searched type's graph holds 1 to
    hnsw_small_graph vectors (its index's estimate, kept by ANALYZE), hnsw_ef_search where it holds more or none."""
    rng = np.random.default_rng(5)
    write(
        database_url,
        [memory(f"note {i}", (v / np.linalg.norm(v)).tolist()) for i, v in enumerate(rng.normal(size=(3, 384)))],
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE memories")

    async def ef_search(settings: Settings, memory_type: str) -> str:
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                await repository.configure_search(conn, tuning_for(settings, "embedding", 10), memory_type)
                return (await conn.execute(text("SHOW hnsw.ef_search"))).scalar_one()
        finally:
            await engine.dispose()

    assert asyncio.run(ef_search(Settings(), "episode")) == "400"  # three episodes
    assert asyncio.run(ef_search(Settings(hnsw_small_graph=2), "episode")) == "800"  # more than the bound
    assert asyncio.run(ef_search(Settings(), "semantic_memory")) == "800"  # no semantic memory: unknown
