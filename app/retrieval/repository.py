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
from app.db.tables import memories, profiles
from app.retrieval.filters import MEMORY_COLUMNS, MESSAGE_COLUMNS, VIEW_COLUMNS, Filter
from app.retrieval.legs import LEGS
from app.text.memory_text import ASSISTANT_SENDERS


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
    include_superseded: bool = False
    """Also memories a newer one superseded (by default only current ones; never deleted or expired ones)."""
    as_of: datetime | None = None
    """What was true at this time: memories said by then and not superseded by then (``alive`` in the SQL)."""
    caller: Filter | None = None
    """The caller's filter on scopes, time and metadata (app.retrieval.filters), inside every leg and count."""


@dataclass(frozen=True)
class SearchTuning:
    """How the statement searches; the service derives it from the settings and the request."""

    leg_limit: int
    ef_search: int
    max_scan_tuples: int
    rrf_k: int
    assistant_weight: float
    outdated_weight: float
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
    bm25_exact: bool | None = None,
    vector_exact: bool = False,
) -> dict[str, Any]:
    """The bind parameters of ``hybrid_search`` (also what ``explain`` prints). ``tenant`` is the transaction's:
    the statement names it for Citus's routing; row-level security holds the tenant anyway. ``bm25_exact``:
    ``search_scope``'s, for these filters; None lets the statement find it."""
    parameters = {
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
        **life_parameters(filters),
        "radius": radius,
        "leg_limit": tuning.leg_limit,
        "top_k": top_k,
        "rrf_k": tuning.rrf_k,
        "assistant_weight": tuning.assistant_weight,
        "outdated_weight": tuning.outdated_weight,
        "assistant_senders": list(ASSISTANT_SENDERS),
        "k1": tuning.k1,
        "b": tuning.b,
        "bm25_df_budget": tuning.bm25_df_budget,
        "bm25_max_candidates": tuning.bm25_max_candidates,
        "bm25_exact_max": tuning.bm25_exact_max,
        "bm25_exact": bm25_exact,
        "vector_exact": vector_exact,
        "vector_exact_max": vector_exact_max(filters),
        **caller_parameters(filters.caller),
    }
    # The ranking legs that run: rrf's score is the fused score over what all of them agreeing gives.
    parameters["legs"] = sum(leg.runs(parameters) for leg in LEGS)
    return parameters


FILTER_MARKS = (
    ("/* filter: m */ TRUE", MEMORY_COLUMNS, "fm"),
    ("/* filter: p */ TRUE", MESSAGE_COLUMNS, "fp"),
    ("/* filter: v */ TRUE", VIEW_COLUMNS, "fv"),
)
"""Where the statements of sql/retrieval.sql take the caller's filter: on memories (m), on pending messages (p), and
on ``tenant_memories`` (v)."""


def caller_parameters(caller: Filter | None) -> dict[str, Any]:
    """The caller's filter compiled for memories and for messages: its bind parameters, and under ``_filter_sql``
    the conditions written in for ``FILTER_MARKS`` (a key no statement binds; ``with_caller_filter`` reads it)."""
    if caller is None:
        return {"_filter_sql": None}
    compiled = [caller.sql(columns, prefix) for _, columns, prefix in FILTER_MARKS]
    return {
        "_filter_sql": tuple(sql for sql, _ in compiled),
        **{k: v for _, bound in compiled for k, v in bound.items()},
    }


def with_caller_filter(sql: str, filter_sql: tuple[str, ...] | None) -> str:
    """``sql`` with the caller's conditions (``caller_parameters``) in place of ``FILTER_MARKS``."""
    for (mark, _, _), condition in zip(FILTER_MARKS, filter_sql or (), strict=False):
        sql = sql.replace(mark, condition)
    return sql


@functools.lru_cache(maxsize=256)
def filtered_statement(name: str, filter_sql: tuple[str, ...] | None) -> TextClause:
    """The named statement with the caller's filter written in, made once per filter shape."""
    return statement(name) if filter_sql is None else text(with_caller_filter(query(name), filter_sql))


def life_parameters(filters: SearchFilters) -> dict[str, Any]:
    """The ``alive`` block's parameters: which statuses a search shows, and at what time."""
    return {"include_superseded": filters.include_superseded or filters.as_of is not None, "as_of": filters.as_of}


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


@dataclass(frozen=True)
class Scope:
    """``search_scope``'s answer."""

    crosses: bool
    bm25_exact: bool
    vector_exact: bool


def scope_parameters(
    tenant: str | None, filters: SearchFilters, language: str | None, *, count: bool, exact_max: int
) -> dict[str, Any]:
    """``search_scope``'s bind parameters: ``language``, the query's (None: whether the scope crosses languages is not
    asked); ``count``, whether to count the scope for BM25's exactness (an ``rrf`` search under a user or group filter:
    ``counts_scope``)."""
    return {
        "tenant_id": tenant,
        "memory_type": filters.memory_type,
        "user_id": filters.user_id,
        "group_id": filters.group_id,
        "query_language": language,
        "one_copy": filters.one_copy,
        "time_from": filters.time_from,
        "time_to": filters.time_to,
        "valid_on": filters.valid_on,
        **life_parameters(filters),
        "count_scope": count,
        "bm25_exact_max": exact_max,
        "vector_exact_max": vector_exact_max(filters),
        **caller_parameters(filters.caller),
    }


VECTOR_EXACT_MAX = 2000
"""A scope of at most this many memories (``search_scope``'s vector_exact) has every one's distance computed rather
than the graph walked: reading 2,000 rows costs a few milliseconds; a filtered walk of the graph that must pass over
most of it to find a small scope's memories cost 0.2 s at 100,000 (docs/benchmarks.md, "Filters at 100k memories")."""


def vector_exact_max(filters: SearchFilters) -> int:
    """``search_scope``'s bound for exact vector distances: ``VECTOR_EXACT_MAX`` under a caller's filter; none (-1)
    under a user or group filter alone, whose btree the planner sizes from its statistics."""
    return VECTOR_EXACT_MAX if filters.caller is not None else -1


def counts_scope(filters: SearchFilters, mode: str) -> bool:
    """Whether ``search_scope`` counts the scope, beside the query's embedding: for BM25's exactness, an ``rrf`` search
    (BM25's leg runs, and there is an embedding to count beside; a ``bm25`` search lets the statement count) under a
    user or a group filter; for the vector leg's, any search with a vector under a caller's filter (the planner cannot
    size one: ``VECTOR_EXACT_MAX``)."""
    scoped = filters.user_id is not None or filters.group_id is not None
    return (mode == "rrf" and scoped) or (mode != "bm25" and filters.caller is not None)


async def search_scope(conn: AsyncConnection, parameters: dict[str, Any]) -> Scope:
    """``search_scope`` (``scope_parameters``): whether the scope holds a memory of the searched type in another
    language than the query's, which only its cross-lingual vector ranks, and whether BM25 is exact within it.
    Planned for its values, as the search is (``plan_for_values``): a generic plan read 100,000 index entries in
    12 ms for one scope of that size."""
    await conn.exec_driver_sql(query("plan_for_values"))
    row = (await conn.execute(filtered_statement("search_scope", parameters["_filter_sql"]), parameters)).one()
    return Scope(crosses=bool(row.crosses), bm25_exact=bool(row.bm25_exact), vector_exact=bool(row.vector_exact))


def sections(parameters: dict[str, Any]) -> dict[str, bool]:
    """Which sections of ``hybrid_search`` can find anything: the vector leg with a query vector, BM25 with query
    tokens (``search_parameters``); within BM25, its exact part unless ``bm25_exact`` is false, its bounded part unless
    it is true (None: both, the statement decides)."""
    running = {leg.name: leg.runs(parameters) for leg in LEGS}
    bm25, exact = running["bm25"], parameters["bm25_exact"]
    graph = not parameters.get("vector_exact")
    return {
        **running,
        "exact_bm25": bm25 and exact is not False,
        "bounded_bm25": bm25 and exact is not True,
        "graph_order": graph,
        "xl_graph_order": graph,
    }


_SECTIONS = {
    kind: re.compile(rf"^-- {kind}: (\w+)\n.*?^-- end of {kind}: \1\n", re.MULTILINE | re.DOTALL)
    for kind in ("part", "leg")  # parts first: they lie within legs
}


def hybrid_sql(parameters: dict[str, Any]) -> str:
    """``hybrid_search`` as the service runs it for ``parameters``: a section that can find nothing (``sections``)
    replaced by its empty stand-in (``no_vector_leg``, ``no_bm25_leg``, ``no_exact_bm25_part``,
    ``no_bounded_bm25_part``), so that the statement is planned without it, and the vectors' size written in (the
    vector leg orders by the HNSW index's expression, ``embedding::halfvec(<size>)``, migration 0019; a type's size
    takes no bind parameter)."""
    return _hybrid_sql(*_shape(parameters))


@functools.lru_cache(maxsize=256)
def _hybrid_sql(dimensions: int, running: tuple[tuple[str, bool], ...], filter_sql: tuple[str, ...] | None) -> str:
    runs = dict(running)
    sql = query("hybrid_search")
    for kind, section in _SECTIONS.items():
        sql = section.sub(functools.partial(_kept_or_stand_in, runs, kind), sql)
    sql = with_caller_filter(sql, filter_sql)  # after the stand-ins, which carry marks too
    return re.sub(r":dimensions\b", str(dimensions), sql)


def _kept_or_stand_in(runs: dict[str, bool], kind: str, section: re.Match) -> str:
    name = section[1]
    return section[0] if runs[name] else query(f"no_{name}_{kind}") + "\n"


@functools.lru_cache(maxsize=256)
def _hybrid_statement(
    dimensions: int, running: tuple[tuple[str, bool], ...], filter_sql: tuple[str, ...] | None
) -> TextClause:
    return text(_hybrid_sql(dimensions, running, filter_sql))


def hybrid_statement(parameters: dict[str, Any]) -> TextClause:
    """``hybrid_sql`` as a ``text()`` clause, made once per shape (``named_sql.statement`` says why)."""
    return _hybrid_statement(*_shape(parameters))


def _shape(parameters: dict[str, Any]) -> tuple[int, tuple[tuple[str, bool], ...], tuple[str, ...] | None]:
    """What ``hybrid_sql``'s text depends on (the key of its caches): the vectors' size, the sections that run, and
    the caller's filter's conditions."""
    return int(parameters["dimensions"]), tuple(sorted(sections(parameters).items())), parameters.get("_filter_sql")


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


async def vectors(conn: AsyncConnection, tenant: str, ids: list[str]) -> dict[str, Any]:
    """The stored vectors of these memories (of the configured model or another), by id; messages not yet formed
    have none here."""
    found = select(memories.c.id, memories.c.embedding).where(
        memories.c.tenant_id == tenant, memories.c.id.in_(ids), memories.c.embedding.is_not(None)
    )
    return {str(row.id): row.embedding for row in await conn.execute(found)}


async def hidden_counts(
    conn: AsyncConnection, parameters: dict[str, Any], count_limit: int, others_limit: int
) -> dict[str, int]:
    """``hidden_counts``: memories of the searched type each filter left out (``search_parameters``' filters)."""
    bounds = {"count_limit": count_limit, "others_limit": others_limit}
    statement_ = filtered_statement("hidden_counts", parameters.get("_filter_sql"))
    result = await conn.execute(statement_, {**parameters, **bounds})
    return dict(result.mappings().one())
