"""Database reads of retrieval: the hybrid statement of ``sql/retrieval.sql`` and the latest profile."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import TextClause, select, text
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.named_sql import query, statement
from app.db.tables import profiles
from app.formation.memcell import ASSISTANT_SENDERS


@dataclass(frozen=True)
class SearchFilters:
    """What a memory must satisfy to be a candidate of either leg. ``None`` means no filter."""

    memory_type: str
    time_from: datetime
    time_to: datetime
    user_id: str | None = None
    group_id: str | None = None
    valid_on: date | None = None
    """Semantic memories only: valid_from <= valid_on <= valid_to (an open end always matches)."""
    one_copy: bool = False
    """Of a group episode, only the group's copy (not each participant's): the default without a user filter."""
    include_pending: bool = False
    """Also messages stored but not yet formed (``memory_type`` 'message'), searched beside the memories."""


@dataclass(frozen=True)
class SearchTuning:
    """How the statement searches; the service derives it from the settings and the request."""

    leg_limit: int
    ef_search: int
    max_scan_tuples: int
    rrf_k: int
    assistant_weight: float
    k1: float
    b: float
    bm25_df_budget: int
    bm25_max_candidates: int
    bm25_exact_max: int
    small_graph_ef_search: int
    """hnsw.ef_search where the searched type's graph holds at most ``small_graph`` vectors (``configure_search``)."""
    small_graph: int


def vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(f"{x:.8g}" for x in vector) + "]"


def search_parameters(
    *,
    tenant: str,
    mode: str,
    query_vector: list[float] | None,
    embedding_model: str,
    query_tokens: str,
    filters: SearchFilters,
    top_k: int,
    radius: float | None,
    tuning: SearchTuning,
    xl_vector: list[float] | None = None,
    query_language: str = "en",
    xl_scale: float = 1.0,
) -> dict[str, Any]:
    """The bind parameters of ``hybrid_search`` (also what ``explain`` prints). ``tenant`` is the transaction's:
    the statement names it for Citus's routing; row-level security holds the tenant anyway."""
    return {
        "tenant_id": tenant,
        "retrieval_mode": mode,
        "embedding": vector_literal(query_vector) if query_vector is not None else None,
        # The size of the vectors the leg orders by (``hybrid_sql``); with no query vector the leg does not run.
        "dimensions": len(query_vector) if query_vector is not None else 1,
        "embedding_model": embedding_model,
        "embedding_xl": vector_literal(xl_vector) if xl_vector is not None and query_vector is not None else None,
        "query_language": query_language,
        "xl_scale": xl_scale,
        "query_tokens": query_tokens,
        "memory_type": filters.memory_type,
        "user_id": filters.user_id,
        "group_id": filters.group_id,
        "time_from": filters.time_from,
        "time_to": filters.time_to,
        "valid_on": filters.valid_on,
        "one_copy": filters.one_copy,
        "include_pending": filters.include_pending,
        "radius": radius,
        "leg_limit": tuning.leg_limit,
        "top_k": top_k,
        "rrf_k": tuning.rrf_k,
        "assistant_weight": tuning.assistant_weight,
        "assistant_senders": list(ASSISTANT_SENDERS),
        "k1": tuning.k1,
        "b": tuning.b,
        "bm25_df_budget": tuning.bm25_df_budget,
        "bm25_max_candidates": tuning.bm25_max_candidates,
        "bm25_exact_max": tuning.bm25_exact_max,
    }


def search_settings(tuning: SearchTuning, memory_type: str) -> str:
    """The ``plan_for_values`` and ``configure_search`` statements, the tuning's numbers and the searched memory type
    written in (SET takes no bind parameters; several statements in one trip take none either)."""
    values = {
        "ef_search": str(int(tuning.ef_search)),
        "max_scan_tuples": str(int(tuning.max_scan_tuples)),
        "small_graph_ef_search": str(int(tuning.small_graph_ef_search)),
        "small_graph": str(int(tuning.small_graph)),
        "memory_type": "'" + memory_type.replace("'", "''") + "'",
    }
    names = "|".join(values)
    hnsw = re.sub(rf":({names})\b", lambda match: values[match[1]], query("configure_search"))
    return query("plan_for_values") + "\n" + hnsw


async def configure_search(conn: AsyncConnection, tuning: SearchTuning, memory_type: str) -> None:
    """SET LOCAL the HNSW and planner settings for the rest of this transaction, for a search of ``memory_type``."""
    await conn.exec_driver_sql(search_settings(tuning, memory_type))


async def crosses_language(conn: AsyncConnection, tenant: str | None, filters: SearchFilters, language: str) -> bool:
    """``crosses_language``: whether the filters' scope holds a memory of their type in another language than
    ``language`` (the query's), which only its cross-lingual vector ranks. Planned for its values, as the search is
    (``plan_for_values``): a generic plan read 100,000 index entries in 12 ms for one scope of that size."""
    await conn.exec_driver_sql(query("plan_for_values"))
    parameters = {
        "tenant_id": tenant,
        "memory_type": filters.memory_type,
        "user_id": filters.user_id,
        "group_id": filters.group_id,
        "query_language": language,
    }
    return bool((await conn.execute(statement("crosses_language"), parameters)).scalar())


def legs(parameters: dict[str, Any]) -> dict[str, bool]:
    """Which legs of ``hybrid_search`` can find anything: the vector leg with a query vector, BM25 with query
    tokens (``search_parameters``)."""
    return {"vector": parameters["embedding"] is not None, "bm25": bool(parameters["query_tokens"])}


_LEG = re.compile(r"^-- leg: (\w+)\n.*?^-- end of leg: \1\n", re.MULTILINE | re.DOTALL)


def hybrid_sql(parameters: dict[str, Any]) -> str:
    """``hybrid_search`` as the service runs it for ``parameters``: a leg that can find nothing (``legs``) replaced
    by its empty stand-in (``no_vector_leg``, ``no_bm25_leg``), so that the statement is planned without it, and the
    vectors' size written in (the vector leg orders by the HNSW index's expression, ``embedding::halfvec(<size>)``,
    migration 0019; a type's size takes no bind parameter)."""
    return _hybrid_sql(int(parameters["dimensions"]), **legs(parameters))


@functools.cache
def _hybrid_sql(dimensions: int, vector: bool, bm25: bool) -> str:
    running = {"vector": vector, "bm25": bm25}
    sql = _LEG.sub(lambda leg: leg[0] if running[leg[1]] else query(f"no_{leg[1]}_leg") + "\n", query("hybrid_search"))
    return re.sub(r":dimensions\b", str(dimensions), sql)


@functools.cache
def _hybrid_statement(dimensions: int, vector: bool, bm25: bool) -> TextClause:
    return text(_hybrid_sql(dimensions, vector, bm25))


def hybrid_statement(parameters: dict[str, Any]) -> TextClause:
    """``hybrid_sql`` as a ``text()`` clause, made once per shape (``named_sql.statement`` says why)."""
    return _hybrid_statement(int(parameters["dimensions"]), **legs(parameters))


async def hybrid_search(conn: AsyncConnection, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``hybrid_search`` (``search_parameters``); call ``configure_search`` first in the same transaction."""
    result = await conn.execute(hybrid_statement(parameters), parameters)
    return [dict(row) for row in result.mappings()]


async def latest_profiles(conn: AsyncConnection, user_id: str, group_id: str | None) -> list[dict[str, Any]]:
    """The user's latest profile version in ``group_id``; without one, in each group and in their personal
    stream (newest first)."""
    latest = (
        select(profiles)
        .where(profiles.c.user_id == user_id, *([profiles.c.group_id == group_id] if group_id else []))
        .ext(distinct_on(profiles.c.group_id))
        .order_by(profiles.c.group_id, profiles.c.version.desc())
        .subquery()
    )
    statement = select(latest).order_by(latest.c.created_at.desc())
    return [dict(row) for row in (await conn.execute(statement)).mappings()]


async def hidden_counts(
    conn: AsyncConnection, parameters: dict[str, Any], count_limit: int, others_limit: int
) -> dict[str, int]:
    """``hidden_counts``: memories of the searched type each filter left out (``search_parameters``' filters)."""
    bounds = {"count_limit": count_limit, "others_limit": others_limit}
    result = await conn.execute(statement("hidden_counts"), {**parameters, **bounds})
    return dict(result.mappings().one())
