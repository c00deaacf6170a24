"""How deep each leg of the hybrid statement searches."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import psycopg
from sqlalchemy import text

from app.db.named_sql import _included, queries
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
    """named_sql: "-- include: a" stands for block a's SQL without its leading comments, indented as the line; no
    statement is left with an include line (psql would read it as a comment)."""
    assert _included("SELECT\n    -- include: a\n  AS b", {"a": "-- what a is\n(SELECT 1\n\n FROM t)"}) == (
        "SELECT\n    (SELECT 1\n\n     FROM t)\n  AS b"
    )
    assert not [name for name, sql in queries().items() if re.search(r"^\s*--\s*include:", sql, re.MULTILINE)]


def _planned_ctes(plan: object) -> set[str]:
    """The CTEs PostgreSQL plans for a statement (``EXPLAIN (FORMAT JSON)``): what it will run, whatever the text."""
    if isinstance(plan, dict):
        own = {plan["CTE Name"]} if "CTE Name" in plan else set()
        return own | {name for value in plan.values() for name in _planned_ctes(value)}
    if isinstance(plan, list):
        return {name for item in plan for name in _planned_ctes(item)}
    return set()


def test_a_section_that_can_find_nothing_is_left_out_of_the_statement(database_url) -> None:
    """hybrid_sql: a search without query tokens (embedding) is planned without the BM25 leg, one without a query
    vector (bm25) without the vector leg, rrf with both; each answers exactly as the whole statement does, and the
    leg left out brings no candidate even when its input is given. With BM25's exactness given (search_scope's
    bm25_exact, as the service passes it), only its exact part or only its bounded part is planned; search_scope
    finds it exact while the scope holds at most bm25_exact_max memories, and the statement with the exact part alone
    answers as the whole statement, which counts the scope itself."""
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

    async def run(mode: str, statement: str, given: dict) -> tuple[list[tuple], set[str]]:
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                await repository.configure_search(conn, tuning_for(settings, mode, 4), "episode")
                rows = await conn.execute(text(statement), given)
                found = [(str(row.id), round(row.score, 9), row.emb_count, row.bm25_count) for row in rows]
                plan = (await conn.execute(text("EXPLAIN (FORMAT JSON) " + statement), given)).scalar_one()
                return found, _planned_ctes(plan)
        finally:
            await engine.dispose()

    def answers(mode: str, statement: str, given: dict | None = None) -> list[tuple]:
        return asyncio.run(run(mode, statement, given or parameters(mode)))[0]

    def planned(mode: str, statement: str, given: dict | None = None) -> set[str]:
        return asyncio.run(run(mode, statement, given or parameters(mode)))[1]

    for mode, legs in (
        ("embedding", {"vector_hits"}),
        ("bm25", {"bm25_candidates"}),
        ("rrf", {"vector_hits", "bm25_candidates"}),
    ):
        statement = repository.hybrid_sql(parameters(mode))
        assert planned(mode, statement) & {"vector_hits", "bm25_candidates"} == legs, mode
        found = answers(mode, statement)
        assert found and found == answers(mode, repository.hybrid_sql(whole)), mode
    # The leg left out brings nothing even when its input is given: the tokens to an embedding statement, the
    # query vector to a bm25 statement.
    given_tokens = {**parameters("embedding"), "query_tokens": search_tokens("budget")}
    assert {row[3] for row in answers("embedding", repository.hybrid_sql(parameters("embedding")), given_tokens)} == {0}
    given_vector = {**parameters("bm25"), "embedding": parameters("embedding")["embedding"]}
    assert {row[2] for row in answers("bm25", repository.hybrid_sql(parameters("bm25")), given_vector)} == {0}
    nothing = {**parameters("bm25"), "query_tokens": ""}  # a query of no word: neither leg can find anything
    statement = repository.hybrid_sql(nothing)
    assert planned("bm25", statement, nothing) & {"vector_hits", "bm25_candidates", "bm25_scope"} == set()
    assert answers("bm25", statement, nothing) == []

    async def exact_within(bound: int) -> bool:
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                looked_up = repository.scope_parameters("default", filters, None, count=True, exact_max=bound)
                return (await repository.search_scope(conn, looked_up)).bm25_exact
        finally:
            await engine.dispose()

    assert (asyncio.run(exact_within(6)), asyncio.run(exact_within(5))) == (True, False)  # u1 holds six
    whole_answers = answers("rrf", repository.hybrid_sql(whole))
    exact = {**parameters("rrf"), "bm25_exact": True}
    statement = repository.hybrid_sql(exact)
    assert planned("rrf", statement, exact) & {"bm25_scope", "bm25_candidates"} == {"bm25_scope"}
    assert answers("rrf", statement, exact) == whole_answers
    bounded = {**parameters("rrf"), "bm25_exact": False}
    statement = repository.hybrid_sql(bounded)
    assert planned("rrf", statement, bounded) & {"bm25_scope", "bm25_candidates"} == {"bm25_candidates"}
    assert [row[3] for row in answers("rrf", statement, bounded)] == [2] * 4  # two budget memories
