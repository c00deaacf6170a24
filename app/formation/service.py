"""Memory formation: boundary detection on a stream and extraction of its closed MemCells, run by the
formation workers (``app.formation.tasks``, deferred through ``app.queue``); requests only store messages and ask.

Concurrency and durability (docs/formation.md has the full story):

* one stream is formed by one worker at a time: the queue's per-stream job lock, and under it a
  session-level advisory lock on a dedicated connection (forget's re-forming takes it too), released in
  ``finally`` and by PostgreSQL when the connection or the process dies (behind a transaction pooler, a
  transaction's, held open on a connection of its own for the pass);
* no transaction is open while the LLM or the embedder runs: reads and writes are short transactions;
* closing a MemCell is ONE transaction: memcell + memories + profile versions + exactly its messages
  flipped from pending to processed (a guarded update whose count must match). A job run again after a
  crash therefore forms what the dead run had not committed, and nothing twice;
* an LLM failure leaves the messages pending (``extract_attempts`` + 1) and the job tries again; after
  ``llm_fallback_after`` failed LLM extractions the MemCell is formed offline (recorded in its memories'
  metadata as ``llm_fallback``). An embedder failure ends the job, which is deferred again a little later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app import queue
from app.conversation_meta.service import get_optional as conversation_meta
from app.errors import MemsysError, ServiceUnavailable
from app.formation import agent_memory, boundary, instructions, llm_extraction, offline, profiles, reconciliation
from app.formation import repository as repo
from app.formation.language import detect_language
from app.formation.memcell import Context, Draft, Extraction, MemCell
from app.formation.streams import Stream
from app.memories import history, supersession
from app.memories import repository as memories_repo
from app.memories.history import Event
from app.memories.repository import NewMemory, by_memcell, insert_memories
from app.observability import metrics, tracing
from app.providers.embeddings import drafts_are_memories
from app.providers.llm import LLMClient, LLMError
from app.text.cpu import run_off_loop
from app.text.memory_text import text_md5
from app.text.tokenize import search_tokens_of
from app.text.tokens import count_tokens

if TYPE_CHECKING:
    from app.providers.embeddings import Embedder
    from app.runtime import Runtime

log = logging.getLogger(__name__)

# Passes over the pending buffer per job: a later pass picks up messages that arrived meanwhile.
PASSES = 3
# Texts up to this many tokens are embedded together, longer ones apart (see _embed).
SHORT_TEXT_TOKENS = 96


class FormationConflict(MemsysError):
    """A MemCell's messages were no longer all pending when it was written (nothing was written)."""


class FormationDeferred(Exception):
    """A MemCell could not be formed now; its messages stay pending. The message is the client's warning."""


@dataclass
class FormationOutcome:
    """What one pass over a stream produced: the memories saved (API-shaped dicts) and any warning."""

    memories: list[dict[str, Any]] = field(default_factory=list)
    warning: str | None = None
    deferred: bool = False
    """A MemCell could not be formed (LLM or embedder failure): its messages are still pending."""

    def warn(self, text: str) -> None:
        self.warning = f"{self.warning} {text}" if self.warning else text


async def process_stream(runtime: Runtime, stream: Stream, *, flush: bool = False) -> FormationOutcome:
    """Close every MemCell the stream's pending messages call for (all of them when ``flush``), once the
    stream's lock is free."""
    async with _stream_locked(runtime, stream) as conn:
        return await _form(runtime, conn, stream, flush=flush)


async def form_queued(runtime: Runtime, stream: Stream) -> FormationOutcome:
    """A formation job: form what the stream's pending messages call for (everything, when a flush or the
    idle close asked), trying again while an LLM extraction fails: after ``llm_fallback_after`` failures in
    a row the MemCell is formed offline, so a bad LLM never leaves a stream stuck. A result still
    ``deferred`` means the embedder failed: the caller runs the job again later."""
    with tracing.span("memsys.formation.stream", **{"memsys.stream_kind": stream.kind}) as span:
        outcome = await _form_with_retries(runtime, stream)
        span.set_attribute("memsys.memories", len(outcome.memories))
    return outcome


async def _form_with_retries(runtime: Runtime, stream: Stream) -> FormationOutcome:
    outcome = FormationOutcome()
    failures = 0
    while failures <= runtime.settings.llm_fallback_after:
        async with runtime.engine.connect() as conn:
            flush = await repo.flush_requested(conn, stream)
        step = await process_stream(runtime, stream, flush=flush)
        outcome.memories += step.memories
        if step.warning:
            outcome.warn(step.warning)
        outcome.deferred = step.deferred
        if not step.deferred:
            break
        failures = 0 if step.memories else failures + 1
    return outcome


async def request_flush(runtime: Runtime, stream: Stream) -> list[int]:
    """Ask a worker to close everything the stream has pending; the ids (rows) of those messages."""
    async with runtime.engine.begin() as conn:
        ids = await repo.request_flush(conn, stream)
        if ids:
            await queue.defer_formation(conn, runtime.tenant, stream)
    return ids


async def wait_formed(runtime: Runtime, ids: list[int], timeout_s: float) -> tuple[bool, list[dict[str, Any]]]:
    """Wait until none of these messages is pending (formed, or forgotten), at most ``timeout_s``; then the
    memories of the MemCells they went into. Polls with short checkouts: no pooled connection is held
    while waiting, however many callers wait."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        async with runtime.engine.connect() as conn:
            if await repo.count_pending(conn, ids) == 0:
                memories = [m for cell in await repo.memcells_of(conn, ids) for m in await by_memcell(conn, cell)]
                return True, memories
        left = deadline - time.monotonic()
        if left <= 0:
            return False, []
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.25)


async def close_idle_streams(runtime: Runtime) -> int:
    """Ask for every stream with pending messages and none new for ``boundary_idle_seconds`` to be formed
    as if flushed, tenant by tenant (row-level security shows a session one tenant's rows); how many."""
    idle_s = runtime.settings.boundary_idle_seconds
    if idle_s <= 0:
        return 0
    async with runtime.engine.connect() as conn:
        tenants = await repo.tenants(conn)
    closed = 0
    for tenant in tenants:
        async with runtime.for_tenant(tenant).engine.begin() as conn:
            for stream in await repo.idle_streams(conn, idle_s):
                await repo.request_flush(conn, stream)
                await queue.defer_formation(conn, tenant, stream)
                closed += 1
    return closed


async def form_again(runtime: Runtime, stream: Stream, cells: list[list[int]]) -> FormationOutcome:
    """Form each list of pending message ids (rows of ``messages``) into one MemCell, in order: the boundaries
    a MemCell had before some of its messages were forgotten. Ids no longer pending are skipped."""
    llm = runtime.formation_llm()
    outcome = FormationOutcome()
    async with _stream_locked(runtime, stream) as conn:
        async with conn.begin():
            pending = await repo.pending_messages(conn, stream)
            meta = await conversation_meta(conn, stream.group_id) if stream.group_id else None
        for ids in cells:
            wanted = set(ids)
            messages = [m for m in pending if m["id"] in wanted]
            if not messages:
                continue
            context = Context(stream, detect_language(m["content"] for m in messages), meta)
            try:
                outcome.memories += await _close(runtime, conn, context, MemCell(messages, "formed again"), llm)
            except FormationDeferred as deferred:
                outcome.warn(str(deferred))
                outcome.deferred = True
                break
    return outcome


@asynccontextmanager
async def _stream_locked(runtime: Runtime, stream: Stream) -> AsyncIterator[AsyncConnection]:
    """A connection holding the stream's advisory lock (waiting for another session that has it)."""
    if runtime.settings.db_transaction_pooler:
        async with _stream_locked_by_a_transaction(runtime, stream), runtime.engine.connect() as conn:
            yield conn
        return
    async with runtime.engine.connect() as conn:
        try:
            await repo.lock_stream(conn, stream)
            await conn.commit()
        except BaseException:
            # e.g. cancelled while waiting: the server may still grant the lock to this session later.
            await conn.invalidate()
            raise
        try:
            yield conn
        finally:
            await _release(conn, stream)


@asynccontextmanager
async def _stream_locked_by_a_transaction(runtime: Runtime, stream: Stream) -> AsyncIterator[None]:
    """The stream's advisory lock, behind a transaction pooler: a session's lock would stay on whichever server
    connection took it, so a transaction holds it, left open on a connection of its own (the pooler keeps its server
    connection) until the pass ends; closing that connection rolls it back, which releases the lock."""
    async with runtime.engine.connect() as holder:
        try:
            await repo.lock_stream(holder, stream, transaction=True)
        except BaseException:
            await holder.invalidate()  # cancelled while waiting: the lock may still be granted to it
            raise
        yield


async def _release(conn: AsyncConnection, stream: Stream) -> None:
    try:
        if not await repo.unlock_stream(conn, stream):
            log.warning("advisory lock of %s was not held at release", stream.lock_key())
        await conn.commit()
    except BaseException:
        # A pooled connection must never keep the lock: closing it is what releases it for sure.
        await conn.invalidate()
        raise


async def _form(runtime: Runtime, conn: AsyncConnection, stream: Stream, *, flush: bool) -> FormationOutcome:
    llm = runtime.formation_llm()
    rules = boundary.BoundaryRules.from_settings(runtime.settings)
    outcome = FormationOutcome()
    meta: dict[str, Any] | None = None
    # Without a flush a pass reads two MemCells' worth of pending messages (it closes at most two): cuts of
    # a prefix are the cuts of the whole, so a backlog is formed in order, a bounded piece per pass.
    limit = None if flush else 2 * rules.max_messages + 1
    for _ in range(PASSES):
        async with conn.begin():
            pending = await repo.pending_messages(conn, stream, limit=limit)
            if pending and stream.group_id and meta is None:
                meta = await conversation_meta(conn, stream.group_id)
            streak = await repo.judge_streak(conn, stream, boundary.ENDS_IN_A_ROW) if pending and llm else 0
        if not pending:
            break
        context = Context(stream, detect_language(m["content"] for m in pending), meta)
        judge = llm_extraction.boundary_judge(llm, context) if llm else None
        cuts = await boundary.cut(pending, rules, judge=judge, flush=flush, streak=streak)
        if cuts.checked_ids:
            async with conn.begin():
                await repo.mark_boundary_checked(conn, cuts.checked_ids)
        if cuts.judge_error is not None:
            outcome.warn(f"LLM boundary judgement failed ({cuts.judge_error}); the rule-based boundaries applied.")
        if cuts.judge_distrusted:
            metrics.LLM_BOUNDARY_DISTRUSTED.inc()
            outcome.warn(
                f"The LLM boundary judge ended an episode at {boundary.ENDS_IN_A_ROW} messages in a row; "
                "its answers were dropped and the rule-based boundaries applied."
            )
        for cell in cuts.closed:
            try:
                outcome.memories += await _close(runtime, conn, context, cell, llm)
            except FormationDeferred as deferred:
                outcome.warn(str(deferred))
                outcome.deferred = True
                return outcome
        if not cuts.closed:
            break
    return outcome


async def _close(
    runtime: Runtime, conn: AsyncConnection, context: Context, cell: MemCell, llm: LLMClient | None
) -> list[dict[str, Any]]:
    """Extract, embed and tokenise with no transaction open, then write everything in one transaction."""
    context = dataclasses.replace(context, language=detect_language(m["content"] for m in cell.messages))
    case = agent_memory.case_of(cell, context.stream.group_id)
    if case is not None and llm is not None:  # before any transaction: no connection held while the LLM works
        case = await agent_memory.with_llm(llm, case, cell, context.language)
    async with conn.begin():
        previous = await repo.latest_profiles(conn, cell.participants, context.stream.group_id)
        skill = await agent_memory.skill_of(conn, case, cell.scope["agent_id"]) if case is not None else None
        if llm is not None:
            given = await instructions.applying(conn, cell.scope["app_id"], cell.scope["project_id"])
            context = dataclasses.replace(context, guidance=given.text, own_profile_fields=given.profile_fields)
        embedded = (
            await repo.draft_vectors(conn, cell.ids, runtime.embedder.name)
            if drafts_are_memories(runtime.settings)
            else {}
        )
    extraction = await _extract(runtime, conn, context, cell, llm, previous)
    extraction.drafts.extend(draft for draft in (case, skill) if draft is not None)
    try:
        vectors = await _embed(runtime.embedder, extraction.drafts, embedded=embedded)
        # The cross-lingual vector, of the memory's own text (none when MEMSYS_CROSS_LINGUAL is off).
        xl_vectors = (
            await _embed(runtime.xl_embedder, extraction.drafts, Draft.xl_text)
            if runtime.xl_embedder is not None
            else [None] * len(extraction.drafts)
        )
    except ServiceUnavailable as exc:
        raise FormationDeferred(
            f"Embedding failed ({exc}); {len(cell.messages)} messages stay pending and the worker tries again."
        ) from exc
    verdicts = await _reconcile(runtime, conn, llm, extraction, vectors)
    # BM25's tokens (jieba segmentation, stemming) off the loop and before the transaction, which holds the stream.
    tokens = await run_off_loop(search_tokens_of, [draft.search_text() for draft in extraction.drafts])
    drafts = zip(extraction.drafts, vectors, xl_vectors, tokens, strict=True)
    with metrics.FORMATION_WRITE_SECONDS.time():
        async with conn.begin():
            memcell_id = await repo.insert_memcell(conn, _memcell_row(context, cell, extraction))
            new = [
                (
                    draft,
                    _new_memory(
                        draft,
                        memcell_id,
                        vector,
                        runtime.embedder.name,
                        xl_vector,
                        draft_tokens,
                        cell.scope_of(draft.source_message_ids),
                    ),
                )
                for draft, vector, xl_vector, draft_tokens in drafts
            ]
            known = await supersession.earlier(conn, _stating(extraction.drafts))
            kept, gained = supersession.duplicates([draft for draft, _ in new], known, verdicts)
            stored = {id(draft) for draft in kept}
            written = [(draft, memory) for draft, memory in new if id(draft) in stored]
            saved = await insert_memories(conn, [memory for _, memory in written])
            await agent_memory.link(conn, saved)
            await history.record(conn, [_formed(memory, memcell_id, extraction.mode) for memory in saved])
            by_draft = {id(draft): row for (draft, _), row in zip(written, saved, strict=True)}
            await supersession.apply_verdicts(conn, verdicts, by_draft, mode=runtime.settings.supersession)
            standing = await supersession.settle(conn, saved, known, mode=runtime.settings.supersession, gained=gained)
            for user, profile in extraction.profiles.items():
                profile["attributes"] = profiles.attributes(
                    supersession.current_facts(standing, user), context.language
                )
            await repo.insert_profiles(conn, _profile_rows(context, extraction, previous, memcell_id))
            flipped = await repo.mark_processed(conn, cell.ids, memcell_id)
            if flipped != len(cell.ids):
                raise FormationConflict(
                    f"{len(cell.ids) - flipped} of the MemCell's messages were already processed; nothing was written"
                )
    # The stream's id may be a user's id: only at DEBUG (issue 27).
    log.info("memcell %s: %d messages, %d memories (%s)", memcell_id, len(cell.ids), len(saved), extraction.mode)
    log.debug("memcell %s: stream %s", memcell_id, context.stream.lock_key())
    return saved


async def _extract(
    runtime: Runtime,
    conn: AsyncConnection,
    context: Context,
    cell: MemCell,
    llm: LLMClient | None,
    previous: dict[str, dict[str, Any]],
) -> Extraction:
    fallback_after = runtime.settings.llm_fallback_after
    if llm is None:
        return offline.extract(cell, context, previous)
    if cell.extract_attempts >= fallback_after:
        metrics.LLM_FALLBACKS.labels(reason="failed_extractions").inc()
        return _offline_instead(cell, context, previous, f"{cell.extract_attempts} failed LLM extractions")
    try:
        return await llm_extraction.extract(
            llm, cell, context, previous, keep_messages=runtime.settings.llm_keep_messages
        )
    except llm_extraction.WeakExtraction as weak:
        log.warning("LLM extraction of %s too weak (%s): formed offline", context.stream.lock_key(), weak)
        metrics.LLM_FALLBACKS.labels(reason=weak.kind).inc()
        return _offline_instead(cell, context, previous, str(weak))
    except LLMError as exc:
        async with conn.begin():
            await repo.count_failed_extraction(conn, cell.ids)
        attempts = cell.extract_attempts + 1
        then = (
            "it will be formed without the LLM"
            if attempts >= fallback_after
            else f"it will be tried again (attempt {attempts} of {fallback_after} before the offline fallback)"
        )
        log.warning("LLM extraction of %s failed: %s", context.stream.lock_key(), exc)
        raise FormationDeferred(
            f"LLM extraction failed ({exc}); {len(cell.messages)} messages stay pending and {then}."
        ) from exc


def _offline_instead(cell: MemCell, context: Context, previous: dict[str, dict[str, Any]], why: str) -> Extraction:
    """The offline path's memories for a MemCell the LLM could not form, each saying why (``llm_fallback``)."""
    extraction = offline.extract(cell, context, previous)
    for draft in extraction.drafts:
        draft.metadata["llm_fallback"] = why
    return extraction


async def _embed(
    embedder: Embedder,
    drafts: list[Draft],
    text_of: Callable[[Draft], str] = Draft.embedding_text,
    embedded: dict[str, list[float]] | None = None,
) -> list[list[float]]:
    """One vector per draft, of ``text_of(draft)``; identical texts (the group and personal copies of an episode)
    embedded once, and a text found in ``embedded`` (vectors by ``text_md5``: the MemCell's messages' from the
    intake worker, an event-log entry's text) not again.

    Long texts (episodes) and short ones (event-log entries) go in separate calls: a batch is padded to
    its longest text, and one transcript in a batch of short facts multiplies its cost several times.
    """
    texts = list(dict.fromkeys(text_of(draft) for draft in drafts))
    vectors: dict[str, list[float]] = {}
    if embedded:
        vectors = {text: embedded[key] for text in texts if (key := text_md5(text)) in embedded}
        metrics.EMBEDDINGS_KEPT.inc(len(vectors))
        texts = [text for text in texts if text not in vectors]
    for group in (
        [t for t in texts if count_tokens(t) > SHORT_TEXT_TOKENS],
        [t for t in texts if count_tokens(t) <= SHORT_TEXT_TOKENS],
    ):
        if group:
            with tracing.span("memsys.embedding", texts=len(group), role="memory"):
                vectors.update(zip(group, await embedder.embed(group), strict=True))
    return [vectors[text_of(draft)] for draft in drafts]


async def _reconcile(
    runtime: Runtime, conn: AsyncConnection, llm: LLMClient | None, extraction: Extraction, vectors: list[list[float]]
) -> list[reconciliation.Verdict]:
    """With the LLM that extracted the MemCell: each of its new facts against the user's nearest current memories,
    one call each, read and asked with no transaction open (``app.formation.reconciliation``)."""
    if llm is None or extraction.mode != "llm" or runtime.settings.supersession == "off":
        return []
    facts = reconciliation.reconciled(extraction.drafts)
    vector_of = {id(draft): vector for draft, vector in zip(extraction.drafts, vectors, strict=True)}
    async with conn.begin():
        candidates = [
            await memories_repo.nearest(
                conn,
                user_id=draft.user_id,
                memory_type=draft.memory_type,
                embedding=vector_of[id(draft)],
                embedding_model=runtime.embedder.name,
                limit=reconciliation.CANDIDATES,
                min_cosine=reconciliation.MIN_COSINE,
            )
            for draft in facts
        ]
    return [
        await reconciliation.verdict(llm, draft, found) for draft, found in zip(facts, candidates, strict=True) if found
    ]


def _stating(drafts: list[Draft]) -> set[str]:
    """The users the drafts state facts about."""
    return {fact["user"] for draft in drafts for fact in draft.metadata.get("facts", ())}


def _formed(memory: dict[str, Any], memcell_id, mode: str) -> Event:
    return Event(
        UUID(memory["id"]),
        "formed",
        "formation",
        user_id=memory["user_id"],
        details={"memcell_id": str(memcell_id), "source_message_ids": memory["source_message_ids"], "extraction": mode},
    )


def _memcell_row(context: Context, cell: MemCell, extraction: Extraction) -> dict[str, Any]:
    return {
        "stream_kind": context.stream.kind,
        "stream_id": context.stream.id,
        "group_id": context.stream.group_id,
        "start_time": cell.start_time,
        "end_time": cell.end_time,
        "message_ids": cell.message_ids,
        "participants": cell.participants,
        "boundary_reason": cell.reason,
        "topic_summary": cell.topic_summary or extraction.topic_summary,
        "extraction_mode": extraction.mode,
    }


def _new_memory(
    draft: Draft,
    memcell_id,
    vector: list[float],
    embedding_model: str,
    xl_vector: list[float] | None,
    tokens: str,
    scope: dict[str, Any],
) -> NewMemory:
    return NewMemory(
        memory_type=draft.memory_type,
        content=draft.content,
        timestamp=draft.timestamp,
        memcell_id=memcell_id,
        source_message_ids=draft.source_message_ids,
        embedding=vector,
        embedding_model=embedding_model,
        embedding_xl=xl_vector,
        language=detect_language([draft.content]),
        user_id=draft.user_id,
        group_id=draft.group_id,
        title=draft.title,
        summary=draft.summary,
        valid_from=draft.valid_from,
        valid_to=draft.valid_to,
        metadata=draft.metadata,
        search_text=draft.search_text(),
        search_tokens=tokens,
        scope=scope,
    )


def _profile_rows(
    context: Context, extraction: Extraction, previous: dict[str, dict[str, Any]], memcell_id
) -> list[dict[str, Any]]:
    return [
        {
            "user_id": user,
            "group_id": context.stream.group_id,
            "version": (previous.get(user) or {}).get("version", 0) + 1,
            "profile": profile,
            "source": extraction.profile_source,
            "memcell_id": memcell_id,
        }
        for user, profile in extraction.profiles.items()
    ]
