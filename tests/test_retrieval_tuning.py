"""How deep each leg of the hybrid statement searches."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import psycopg
from sqlalchemy import text

from app.db.named_sql import _included, queries, query
from app.retrieval import repository
from app.retrieval.service import tuning_for
from app.settings import Settings
from tests.retrieval_support import memory, tenant_engine, write


def test_rrf_legs_bring_at_least_twice_top_k() -> None:
    settings = Settings(rrf_candidates=100, hnsw_ef_search=100)
    assert tuning_for(settings, "rrf", 20).leg_limit == 100
    deep = tuning_for(settings, "rrf", 100)
    assert deep.leg_limit == 200 and deep.ef_search == 200  # the HNSW candidate list follows the LIMIT
    # One leg too: a pool of its own, whatever top_k (the vector leg ranks main and cross-lingual candidates by
    # their standing among it).
    assert tuning_for(settings, "embedding", 1).leg_limit == 100 and tuning_for(settings, "bm25", 7).leg_limit == 100
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


def test_a_block_two_statements_share_is_written_once_and_included_in_both() -> None:
    """named_sql: "-- include: scope_counted" stands for that block's SQL (with the in_scope block it includes), without
    its leading comments, indented as the line; search_scope and hybrid_search both hold it, and no statement is left
    with an include line."""
    assert _included("SELECT\n    -- include: a\n  AS b", {"a": "-- what a is\n(SELECT 1\n\n FROM t)"}) == (
        "SELECT\n    (SELECT 1\n\n     FROM t)\n  AS b"
    )
    counted = query("scope_counted")
    sql_lines = [line for line in counted.splitlines() if not line.startswith("--")]
    assert sql_lines[0] == "(SELECT count(*) FROM (" and "LIMIT :bm25_exact_max + 1" in counted
    limit_lines = [name for name, sql in queries().items() if "LIMIT :bm25_exact_max + 1" in sql]
    assert sorted(limit_lines) == ["hybrid_search", "scope_counted", "search_scope"]
    assert not [name for name, sql in queries().items() if re.search(r"^\s*--\s*include:", sql, re.MULTILINE)]


def test_a_section_that_can_find_nothing_is_left_out_of_the_statement(database_url) -> None:
    """hybrid_sql: a search without query tokens (embedding) runs the statement without the BM25 leg's CTEs, one
    without a query vector (bm25) without the vector leg's, each leg's empty stand-in in its place, so that neither
    is planned; rrf runs the whole statement. Each answers exactly as the whole statement does. With BM25's
    exactness given (search_scope's bm25_exact, as the service passes it), only its exact part or only its bounded
    part is planned; search_scope finds it exact while the scope holds at most bm25_exact_max memories, and the
    statement with the exact part alone answers as the whole statement, which counts the scope itself."""
    from datetime import UTC, datetime, timedelta

    from app.providers.embeddings import embedder_name
    from app.retrieval.repository import SearchFilters
    from app.text.tokenize import search_tokens

    rng = np.random.default_rng(11)
    vectors = [(v / np.linalg.norm(v)).tolist() for v in rng.normal(size=(6, 384))]
    texts = ["budget review on Friday", "Beijing roast duck", "the budget of the trip", "a quiet week", "duck", "x"]
    write(database_url, [memory(t, v) for t, v in zip(texts, vectors, strict=True)])
    settings = Settings()
    now = datetime.now(UTC)
    filters = SearchFilters(memory_type="episode", time_from=now - timedelta(days=30), time_to=now, user_id="u1")
    whole = {"dimensions": 384, "embedding": "given", "query_tokens": "given", "bm25_exact": None}

    def parameters(mode: str) -> dict:
        tokens = search_tokens("budget") if mode != "embedding" else ""
        return repository.search_parameters(
            tenant="default", mode=mode, query_vector=vectors[2] if mode != "bm25" else None,
            embedding_model=embedder_name(settings), query_tokens=tokens,
            filters=filters, top_k=4, radius=None, tuning=tuning_for(settings, mode, 4),
        )  # fmt: skip

    async def answers(mode: str, statement: str, given: dict | None = None) -> list[tuple]:
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                await repository.configure_search(conn, tuning_for(settings, mode, 4), "episode")
                rows = await conn.execute(text(statement), given or parameters(mode))
                return [(str(row.id), round(row.score, 9), row.emb_count, row.bm25_count) for row in rows]
        finally:
            await engine.dispose()

    for mode, kept, left_out in (
        ("embedding", "vector_hits", "bm25_exactness"),
        ("bm25", "bm25_exactness", "vector_hits"),
        ("rrf", "bm25_exactness", None),
    ):
        statement = repository.hybrid_sql(parameters(mode))
        assert kept in statement and (left_out is None or left_out not in statement)
        assert (statement == repository.hybrid_sql(whole)) == (mode == "rrf")
        found = asyncio.run(answers(mode, statement))
        assert found == asyncio.run(answers(mode, repository.hybrid_sql(whole))) and found, mode
    nothing = {**parameters("bm25"), "query_tokens": ""}  # a query of no word: neither leg can find anything
    statement = repository.hybrid_sql(nothing)
    assert "vector_hits" not in statement and "bm25_exactness" not in statement
    assert asyncio.run(answers("bm25", statement, nothing)) == []

    async def exact_within(bound: int) -> bool:
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                looked_up = repository.scope_parameters("default", filters, None, count=True, exact_max=bound)
                return (await repository.search_scope(conn, looked_up)).bm25_exact
        finally:
            await engine.dispose()

    assert (asyncio.run(exact_within(6)), asyncio.run(exact_within(5))) == (True, False)  # u1 holds six
    whole_answers = asyncio.run(answers("rrf", repository.hybrid_sql(whole)))
    exact = {**parameters("rrf"), "bm25_exact": True}
    statement = repository.hybrid_sql(exact)
    assert "bm25_scope AS MATERIALIZED" in statement and "bm25_candidates AS MATERIALIZED" not in statement
    assert asyncio.run(answers("rrf", statement, exact)) == whole_answers
    bounded = {**parameters("rrf"), "bm25_exact": False}
    statement = repository.hybrid_sql(bounded)
    assert "bm25_candidates AS MATERIALIZED" in statement and "bm25_scope AS MATERIALIZED" not in statement
    assert [row[3] for row in asyncio.run(answers("rrf", statement, bounded))] == [2] * 4  # two budget memories
