"""Helpers of the retrieval tests: write memories (with a MemCell for the foreign key) through the
shared repository, and call the endpoint."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from app.db.embedded import sqlalchemy_url
from app.db.tables import memcells
from app.memories.repository import NewMemory, insert_memories

URL = "/api/v3/agentic/retrieve_lightweight"
MODEL = "local:all-MiniLM-L6-v2"  # the suite's embedder (app.providers.embeddings.embedder_name)
NOW = datetime.now(UTC)


def memory(
    content: str,
    embedding: list[float],
    *,
    memory_type: str = "episode",
    user_id: str | None = "u1",
    group_id: str | None = "g1",
    days_ago: float = 1.0,
    timestamp: datetime | None = None,
    valid_from: date | None = None,
    valid_to: date | None = None,
    title: str | None = None,
    embedding_model: str = MODEL,
) -> NewMemory:
    return NewMemory(
        memory_type=memory_type,
        content=content,
        timestamp=timestamp or NOW - timedelta(days=days_ago),
        memcell_id=uuid.UUID(int=0),
        source_message_ids=["m1"],
        embedding=embedding,
        embedding_model=embedding_model,
        user_id=user_id,
        group_id=group_id,
        title=title,
        valid_from=valid_from,
        valid_to=valid_to,
    )


MEMCELL = {
    "stream_kind": "group",
    "stream_id": "g1",
    "group_id": "g1",
    "start_time": NOW,
    "end_time": NOW,
    "message_ids": ["m1"],
    "participants": ["u1"],
    "boundary_reason": "test",
    "extraction_mode": "offline",
}
"""A MemCell's row for the memories a test writes (the foreign key wants one)."""


def tenant_engine(database_url: str, tenant: str = "default"):
    """An engine of the service's role (row-level security holds) whose transactions belong to ``tenant``."""
    from app.db.engine import service_database_url
    from app.settings import Settings
    from app.tenancy import scope

    url = service_database_url(Settings(database_url=database_url), database_url)
    return scope.scoped(scope.install(create_async_engine(sqlalchemy_url(url))), tenant)


def write(database_url: str, new: list[NewMemory], batch: int = 2000, tenant: str = "default") -> list[dict[str, Any]]:
    """Insert the memories (each in a MemCell of its own) in ``tenant``; returns their API-shaped rows in order."""

    async def run() -> list[dict[str, Any]]:
        engine = tenant_engine(database_url, tenant)
        try:
            async with engine.begin() as conn:
                # A MemCell of its own per memory: each is a separate episode (one MemCell holding a group copy
                # would make every other memory of it a participant's copy, which searches leave out).
                cells = (
                    (
                        await conn.execute(
                            memcells.insert().returning(memcells.c.id, sort_by_parameter_order=True),
                            [MEMCELL for _ in new],
                        )
                    )
                    .scalars()
                    .all()
                )
                for item, cell in zip(new, cells, strict=True):
                    item.memcell_id = cell
                rows: list[dict[str, Any]] = []
                for start in range(0, len(new), batch):
                    rows += await insert_memories(conn, new[start : start + batch])
                return rows
        finally:
            await engine.dispose()

    return asyncio.run(run())


def retrieve(client, **body: Any) -> dict[str, Any]:
    response = client.post(URL, json=body)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def search(settings, database_url: str, **kwargs: Any):
    """``app.retrieval.service.search`` with a runtime of its own (no embedder: give ``query_vector``
    or use mode bm25)."""
    from app.retrieval import service
    from app.runtime import Runtime

    async def run():
        engine = tenant_engine(database_url)
        runtime = Runtime(settings, engine, database_url, embedder=None, tenant="default")
        try:
            return await service.search(runtime, **kwargs)
        finally:
            await runtime.close()

    return asyncio.run(run())


def window(**kwargs: Any):
    from app.retrieval.repository import SearchFilters

    kwargs.setdefault("memory_type", "episode")
    return SearchFilters(time_from=NOW - timedelta(days=365), time_to=NOW + timedelta(days=1), **kwargs)


def explain_analyze(
    settings,
    database_url: str,
    *,
    query: str,
    filters,
    mode: str = "bm25",
    top_k: int = 10,
    query_vector: list[float] | None = None,
    xl_vector: list[float] | None = None,
) -> str:
    """EXPLAIN ANALYZE of ``hybrid_search`` as the service runs it, its plan's text: the query's vectors as given
    (none: the BM25 leg alone), its language detected as the service detects it."""
    from sqlalchemy import text

    from app.formation.language import detect_language
    from app.providers.embeddings import embedder_name
    from app.retrieval import repository, service
    from app.text.tokenize import search_tokens

    tuning = service.tuning_for(settings, mode, top_k, query)
    parameters = repository.search_parameters(
        tenant="default", mode=mode, query_vector=query_vector, embedding_model=embedder_name(settings),
        query_tokens=search_tokens(query), filters=filters, top_k=top_k, radius=None, tuning=tuning,
        xl_vector=xl_vector, query_language=detect_language([query]),
    )  # fmt: skip

    async def run() -> str:
        engine = tenant_engine(database_url)
        try:
            async with engine.begin() as conn:
                await repository.configure_search(conn, tuning, filters.memory_type)
                statement = text("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + repository.hybrid_sql(parameters))
                return "\n".join(row[0] for row in await conn.execute(statement, parameters))
        finally:
            await engine.dispose()

    return asyncio.run(run())


def insert_notes(conn, memcell_id, count: int) -> None:
    """``count`` episodes 'note <i>' whose BM25 text is 'note word<i>' (a word each of its own) in the transaction's
    tenant, with one vector for all: enough rows for PostgreSQL to choose an index for a rare word."""
    conn.execute(
        "INSERT INTO memories (memory_type, memcell_id, source_message_ids, content, timestamp, search_tokens, "
        "embedding, embedding_model) SELECT 'episode', %s, '{}', 'note ' || i, now(), 'note word' || i, "
        "array_fill(0.1, ARRAY[384])::vector, 'm' FROM generate_series(1, %s) AS i",
        (memcell_id, count),
    )
