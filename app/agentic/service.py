"""Agentic retrieval: RRF round 1, rerank, LLM sufficiency check, refined queries in parallel, rerank of the
union, time and type weighting (seeds 000/001/004).

One LLM call both judges sufficiency and, when the memories fall short, writes the refined queries: the
two are one judgement, and a second sequential call would add the LLM's whole latency again. Independent
LLM calls (the time-expression fallback and round 1; rerank batches; round-2 searches) run concurrently.

Failure is graceful: an LLM timeout, 5xx or unparsable answer returns the best results found so far with
``retrieval_mode: "agentic_fallback"`` and ``fallback_reason``. A key the provider rejects is the
caller's mistake: 400.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from datetime import date, timedelta
from typing import Any

from app.agentic import prompts
from app.agentic.schemas import AgenticMetadata, AgenticRequest, AgenticResult, LLMConfigIn
from app.agentic.weighting import apply_weights
from app.errors import InvalidParameter
from app.providers.llm import LLMAuthError, LLMBadOutput, LLMClient, LLMConfig, LLMError, LLMNotConfigured
from app.providers.llm_urls import pin_client_url
from app.providers.rerank import HttpReranker, LLMReranker, NoReranker, Reranker, RerankError
from app.retrieval import service as retrieval
from app.retrieval.explain import explanation
from app.retrieval.time_aware import fit_filters, now_first, orders_now, reference_day, rule_window
from app.runtime import Runtime
from app.settings import Settings
from app.text.time_expressions import TimeWindow, has_time_hint

log = logging.getLogger(__name__)

JUDGE_CONTEXT = 10
"""How many of the reranked round-1 memories the LLM sees when judging sufficiency."""
REFINED_QUERIES = 3
"""Refined queries searched at most (each one more search and embedding), whatever the LLM wrote."""
REFINED_QUERY_CHARS = 500
"""A refined query is cut to this many characters (the LLM's answer is untrusted and reaches the search)."""
JUDGEMENT_TEXT_CHARS = 2000
"""``reasoning`` and ``missing_information`` are cut to this many characters in the response."""


class _Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def since(self, name: str, start: float) -> None:
        self.timings[name] = round(self.timings.get(name, 0.0) + (time.perf_counter() - start) * 1000, 2)


def make_reranker(runtime: Runtime, llm: LLMClient, config: LLMConfig) -> Reranker:
    settings = runtime.settings
    if settings.rerank_provider == "http" and settings.rerank_base_url:
        return HttpReranker(settings.rerank_base_url, settings.rerank_model, settings.rerank_api_key)
    if settings.rerank_provider == "llm":
        return LLMReranker(llm, config)
    return NoReranker()


async def retrieve_agentic(runtime: Runtime, request: AgenticRequest) -> tuple[str, AgenticResult]:
    started = time.perf_counter()
    retrieval.validate(request, runtime.settings)
    timer = _Timer()
    llm = runtime.llm or LLMClient.from_settings(runtime.settings)
    config = await client_llm_config(request.llm_config, runtime.settings)
    if not config.over(llm.default).api_key:
        raise LLMNotConfigured(
            "No LLM API key: pass llm_config.api_key in the request, or set MEMSYS_LLM_API_KEY "
            "(or OPENROUTER_API_KEY / OPENAI_API_KEY) on the server"
        )
    language = prompts.language_of(request.query)
    today, zone = await reference_day(runtime, request.group_id, request.current_time)
    reranker = make_reranker(runtime, llm, config)
    limit = runtime.settings.agentic_round1_candidates

    window = await rule_window(request.query, today, zone) if request.time_aware else None
    ask_llm_for_time = request.time_aware and window is None and has_time_hint(request.query)
    explicit_range = "time_range_days" in request.model_fields_set
    filters = fit_filters(retrieval.filters_for(request), window, explicit_range)

    hidden: dict[str, dict[str, int] | None] = {}

    async def search(query: str, vector: list[float] | None = None) -> list[dict]:
        found = await retrieval.search(
            runtime, query=query, filters=filters, top_k=limit, mode="rrf", query_vector=vector
        )
        hidden.setdefault("first", found.hidden)  # the request's own query: what its scope hides by their life
        return found.memories

    t = time.perf_counter()
    round1_task = _timed(timer, "round1_search", search(request.query))
    time_task = (
        _timed(timer, "llm_time", _llm_time_window(llm, config, request.query, today, language))
        if ask_llm_for_time
        else _none()
    )
    round1, llm_window = await asyncio.gather(round1_task, time_task)
    timer.since("round1_total", t)
    if window is None and llm_window is not None:
        window = dataclasses.replace(llm_window, zone=zone)
        filters = fit_filters(filters, window, explicit_range)

    state: dict[str, Any] = {
        "is_sufficient": None,
        "reasoning": "",
        "missing_information": "",
        "refined_queries": [],
        "round2_count": 0,
        "fallback_reason": None,
    }
    best = round1
    try:
        t = time.perf_counter()
        best = await _rerank(reranker, request.query, round1)
        timer.since("rerank", t)

        t = time.perf_counter()
        judgement = await llm.complete_json(
            prompts.sufficiency_messages(request.query, best[:JUDGE_CONTEXT], language),
            config=config,
            json_schema=prompts.SUFFICIENCY_SCHEMA,
        )
        timer.since("llm_judge", t)
        verdict = _parse_judgement(judgement, request.query)
        state.update(verdict)

        if not verdict["is_sufficient"] and verdict["refined_queries"]:
            t = time.perf_counter()
            # One forward pass embeds every refined query; their searches then run concurrently.
            vectors = await runtime.embedder.embed(verdict["refined_queries"], query=True)
            rounds = await asyncio.gather(
                *(search(q, v) for q, v in zip(verdict["refined_queries"], vectors, strict=True))
            )
            timer.since("round2_search", t)
            state["round2_count"] = sum(len(found) for found in rounds)
            union = _dedupe([*best, *(memory for found in rounds for memory in found)])
            t = time.perf_counter()
            best = await _rerank(reranker, request.query, union)
            timer.since("rerank", t)
    except LLMAuthError as exc:
        raise _rejected_key() from exc
    except (LLMError, RerankError) as exc:
        log.warning("agentic retrieval fell back: %s", exc)
        state["fallback_reason"] = str(exc)

    ranked = await _ordered(runtime, apply_weights(best, window, runtime.settings), request, window)
    rrf_k = runtime.settings.rrf_k
    final = [_public(memory, request.explain, rrf_k, reranker.name) for memory in ranked[: request.top_k]]
    total_ms = round((time.perf_counter() - started) * 1000, 2)
    timer.timings["total"] = total_ms
    metadata = AgenticMetadata(
        retrieval_mode="agentic_fallback" if state["fallback_reason"] else "agentic",
        is_multi_round=bool(state["refined_queries"]) and state["fallback_reason"] is None,
        round1_count=len(round1),
        is_sufficient=state["is_sufficient"],
        reasoning=state["reasoning"],
        refined_queries=state["refined_queries"],
        round2_count=state["round2_count"],
        final_count=len(final),
        total_latency_ms=total_ms,
        missing_information=state["missing_information"],
        reranker=reranker.name,
        data_source=request.data_source,
        memory_scope=request.memory_scope,
        time_window=window.as_dict() if window else None,
        fallback_reason=state["fallback_reason"],
        timings_ms=timer.timings,
        hidden=hidden.get("first"),
    )
    message = f"Agentic retrieval successful, found {len(final)} memories"
    if state["fallback_reason"]:
        message = f"Agentic retrieval fell back to hybrid search, found {len(final)} memories"
    return message, AgenticResult(memories=final, count=len(final), metadata=metadata)


async def client_llm_config(given: LLMConfigIn | None, settings: Settings) -> LLMConfig:
    """A request's ``llm_config`` as the LLM client's config. 400 when the server accepts none, when a
    ``base_url`` comes without its own ``api_key`` (the server's key goes only to the server's endpoint), when
    a ``model`` other than the server's comes without one (unless MEMSYS_LLM_ALLOW_CLIENT_MODEL), or when
    the URL is unfit (``pin_client_url``)."""
    if given is None:
        return LLMConfig()
    if not settings.llm_allow_client_config:
        raise InvalidParameter(
            "Invalid field llm_config: this server does not accept one (MEMSYS_LLM_ALLOW_CLIENT_CONFIG=false)"
        )
    if given.api_key is not None and not (given.api_key.isascii() and given.api_key.isprintable()):
        raise InvalidParameter("Invalid field llm_config.api_key: must be printable ASCII (it goes in a header)")
    if given.base_url is None:
        own_model = given.model in (None, settings.llm_model)
        if not (given.api_key or own_model or settings.llm_allow_client_model):
            raise InvalidParameter(
                "Invalid field llm_config.model: the server's key pays only for its own model "
                "(pass llm_config.api_key with it, or the operator sets MEMSYS_LLM_ALLOW_CLIENT_MODEL=true)"
            )
        return LLMConfig(api_key=given.api_key, model=given.model)
    if not given.api_key:
        raise InvalidParameter(
            "Invalid field llm_config.api_key: required with llm_config.base_url "
            "(the server's key is sent only to the server's own endpoint)"
        )
    pinned = await pin_client_url(given.base_url, allow_private=settings.llm_allow_private_urls)
    return LLMConfig(api_key=given.api_key, base_url=given.base_url, model=given.model, pinned=pinned)


async def _timed(timer: _Timer, name: str, awaitable):
    start = time.perf_counter()
    try:
        return await awaitable
    finally:
        timer.since(name, start)


async def _none() -> None:
    return None


async def _rerank(reranker: Reranker, query: str, memories: list[dict]) -> list[dict]:
    """Memories ordered by the reranker's score (which becomes their ``score``); unchanged for ``none``."""
    if not memories:
        return []
    scores = await reranker.scores(query, [_document(memory) for memory in memories])
    if scores is None:
        return sorted(memories, key=lambda memory: -memory["score"])
    rescored = [
        {**memory, "score": round(float(score), 6), "retrieval_score": memory.get("retrieval_score", memory["score"])}
        for memory, score in zip(memories, scores, strict=True)
    ]
    return sorted(rescored, key=lambda memory: -memory["score"])


async def _ordered(
    runtime: Runtime, weighted: list[dict], request: AgenticRequest, window: TimeWindow | None
) -> list[dict]:
    """A question about now with no time window of its own: the newer of two memories alike, found about equally
    well, first, as lightweight retrieval orders them (``app.retrieval.time_aware.now_first``)."""
    if orders_now(request.query, request.time_aware, window):
        return await now_first(runtime, weighted, key=lambda memory: memory["score"] * memory["weight"])
    return weighted


def _public(memory: dict, explain: bool, rrf_k: int, reranker: str) -> dict:
    """The memory as answered: the bookkeeping of weighting and reranking only inside ``explain``."""
    shown = {key: value for key, value in memory.items() if key not in ("weights", "retrieval_score")}
    if explain:
        shown["explain"] = explanation(memory, mode="agentic", rrf_k=rrf_k, reranker=reranker)
    return shown


def _document(memory: dict) -> str:
    title = memory.get("title")
    return f"{title}\n{memory['content']}" if title else memory["content"]


def _dedupe(memories: list[dict]) -> list[dict]:
    """One entry per memory id, keeping its best score."""
    best: dict[str, dict] = {}
    for memory in memories:
        kept = best.get(memory["id"])
        if kept is None or memory["score"] > kept["score"]:
            best[memory["id"]] = memory
    return list(best.values())


def _parse_judgement(answer: Any, query: str) -> dict[str, Any]:
    if not isinstance(answer, dict) or "is_sufficient" not in answer:
        raise LLMBadOutput("The LLM's sufficiency answer has no is_sufficient field")
    sufficient = answer["is_sufficient"]
    if isinstance(sufficient, str):
        sufficient = sufficient.strip().lower() in ("true", "yes", "1")
    items = answer.get("refined_queries") or []
    refined: list[str] = []
    seen = {_normal(query)}
    for item in items if isinstance(items, list) else []:
        if len(refined) == REFINED_QUERIES:
            break
        text = item.strip()[:REFINED_QUERY_CHARS].strip() if isinstance(item, str) else ""
        if text and _normal(text) not in seen:
            seen.add(_normal(text))
            refined.append(text)
    return {
        "is_sufficient": bool(sufficient),
        "reasoning": str(answer.get("reasoning") or "")[:JUDGEMENT_TEXT_CHARS],
        "missing_information": str(answer.get("missing_information") or "")[:JUDGEMENT_TEXT_CHARS],
        "refined_queries": [] if sufficient else refined,
    }


def _normal(text: str) -> str:
    return " ".join(text.lower().split()).rstrip("?？.。!！")


async def _llm_time_window(
    llm: LLMClient, config: LLMConfig, query: str, today: date, language: str
) -> TimeWindow | None:
    """What the rules could not parse, asked of the LLM; any failure just means no window."""
    try:
        answer = await llm.complete_json(
            prompts.time_messages(query, today.isoformat(), language), config=config, json_schema=prompts.TIME_SCHEMA
        )
        if not isinstance(answer, dict) or not answer.get("has_time"):
            return None
        start = date.fromisoformat(str(answer["start"])[:10])
        end = date.fromisoformat(str(answer.get("end") or answer["start"])[:10])
        if end < start:
            start, end = end, start
        if end - start > timedelta(days=366 * 20):
            return None
        return TimeWindow(start=start, end=end, expression="(llm)", plain_filter=bool(answer.get("filter")))
    except LLMAuthError as exc:
        raise _rejected_key() from exc
    except (LLMError, KeyError, ValueError, TypeError) as exc:
        log.info("time expression by LLM failed: %s", exc)
        return None


def _rejected_key() -> InvalidParameter:
    return InvalidParameter("The LLM rejected the API key (llm_config.api_key or the server's MEMSYS_LLM_API_KEY)")
