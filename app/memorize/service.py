"""memorize: accept one message durably, then let memory formation look at its stream."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from app import queue
from app.conversation_meta import service as conversation_meta
from app.errors import InvalidParameter, PayloadTooLarge
from app.formation import repository as formation_repository
from app.formation import service as formation
from app.formation.streams import Stream
from app.memorize import repository
from app.memorize.schemas import FlushRequest, MemorizeRequest, MemorizeResult, SavedMemory
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.memory_text import message_text
from app.text.timeparse import in_zone
from app.text.tokenize import search_tokens


async def memorize(
    runtime: Runtime, request: MemorizeRequest, *, stream: Stream | None = None, role: str | None = None
) -> tuple[str, MemorizeResult]:
    """Store the message and defer its stream's formation job, in one transaction; workers form.

    Returns the human-readable message and the result. A duplicate ``(stream, message_id)`` stores
    nothing and reports ``duplicate``. ``stream``: another stream than the request's own (the proxy files an
    assistant's answer in its user's personal stream); ``role``: who spoke (``user``, ``assistant``, …).
    """
    size = len(request.content.encode("utf-8"))
    if size > runtime.settings.max_content_bytes:
        raise PayloadTooLarge(
            f"Field content is {size} bytes; the limit is {runtime.settings.max_content_bytes} "
            "(MEMSYS_MAX_CONTENT_BYTES)"
        )
    stream = stream or Stream.of(request.group_id, request.sender)
    row = request.model_dump(mode="python", exclude={"metadata"}) | {"role": role}
    row.update(custom_metadata=request.metadata, session_id=request.session_id or request.group_id)
    # Its BM25 text now (well under a millisecond, off the loop all the same): keyword search finds the message
    # from the moment memorize answers; the intake worker adds its vector (``app.memorize.searchable``).
    text = message_text(request.sender_name, request.content)
    row.update(stream_kind=stream.kind, stream_id=stream.id, search_tokens=await run_off_loop(search_tokens, text))
    async with runtime.engine.begin() as conn:
        if request.create_time.tzinfo is None:
            row["create_time"] = _in_zone(request.create_time, await conversation_meta.zone_of(conn, request.group_id))
        inserted = await repository.insert_message(conn, row)
        if inserted:
            await queue.defer_formation(conn, runtime.tenant, stream)
            await queue.defer_indexing(conn, runtime.tenant)
    if not inserted:
        return "Message already stored (duplicate message_id)", MemorizeResult(
            saved_memories=[], count=0, status_info="duplicate"
        )
    return _answer([], idle_seconds=runtime.settings.boundary_idle_seconds)


async def flush(runtime: Runtime, request: FlushRequest) -> tuple[str, MemorizeResult]:
    """Ask a worker to close the stream's open MemCell now, whatever the boundary rules say, and wait for it
    at most ``flush_timeout_seconds``: ``extracted`` with the memories, or ``pending`` if not finished yet; a
    conversation with no message waiting (unknown, or formed already) answers ``extracted`` with none, saying so."""
    stream = Stream.of(request.group_id, request.sender or "")
    ids = await formation.request_flush(runtime, stream)
    if not ids:
        whose = f"group {stream.id!r}" if stream.kind == "group" else f"{stream.id!r}'s personal conversation"
        return (
            f"Nothing to flush: {whose} has no message waiting to be formed (none stored with these ids, or every "
            "one formed already)",
            MemorizeResult(saved_memories=[], count=0, status_info="extracted"),
        )
    timeout_s = runtime.settings.flush_timeout_seconds
    finished, memories = await formation.wait_formed(runtime, ids, timeout_s)
    if not finished:
        return (
            f"Formation still running after {timeout_s:g}s; the memories appear when it finishes",
            MemorizeResult(saved_memories=[], count=0, status_info="pending"),
        )
    fallbacks = {m["metadata"]["llm_fallback"] for m in memories if (m.get("metadata") or {}).get("llm_fallback")}
    warning = f"Formed without the LLM after {', '.join(sorted(fallbacks))}." if fallbacks else None
    return _answer(memories, warning=warning)


async def waiting_messages(runtime: Runtime) -> dict[str, int]:
    """Across tenants: messages stored and not yet formed into memories (``messages_waiting``), and of those
    the ones the intake worker has not yet made searchable (``messages_not_yet_searchable``)."""
    async with runtime.engine.connect() as conn:
        tenant_ids = await formation_repository.tenants(conn)
    totals = {"messages_waiting": 0, "messages_not_yet_searchable": 0}
    for tenant in tenant_ids:  # each tenant's rows are visible only in its own scope
        async with runtime.for_tenant(tenant).engine.connect() as conn:
            counts = await repository.count_waiting(conn)
        totals["messages_waiting"] += counts["waiting"]
        totals["messages_not_yet_searchable"] += counts["unsearchable"]
    return totals


SWEEP_BATCH = 10_000
"""Messages one sweep deletes per tenant at most: a first sweep over years of messages is spread over a few runs."""


async def delete_old_messages(runtime: Runtime) -> int:
    """One tenant's messages formed into memories and older than ``message_retention_days`` deleted (none when it
    is unset); how many."""
    days = runtime.settings.message_retention_days
    if days is None:
        return 0
    async with runtime.engine.begin() as conn:
        return await repository.delete_formed_before(conn, datetime.now(UTC) - timedelta(days=days), SWEEP_BATCH)


def _in_zone(moment: datetime, zone: tzinfo) -> datetime:
    try:
        return in_zone(moment, zone)
    except ValueError as exc:
        raise InvalidParameter(f"Invalid field create_time: {exc}") from exc


def _answer(
    memories: list[dict], *, warning: str | None = None, idle_seconds: float | None = None
) -> tuple[str, MemorizeResult]:
    """memorize's and flush's answer: the memories formed (API-shaped rows), or none yet and when they will be."""
    saved = [SavedMemory(**memory) for memory in memories]
    if saved:
        message = f"Extracted {len(saved)} memories"
        status = "extracted"
    else:
        message = "Message queued, awaiting boundary detection"
        status = "accumulated"
    formation_note = None
    if idle_seconds is not None and not saved:
        formation_note = (
            "Searchable within seconds as a message not yet formed; formed into memories at a topic boundary, "
            f"on POST /api/v3/agentic/flush, or {_idle(idle_seconds)}"
        )
    return message, MemorizeResult(
        saved_memories=saved,
        count=len(saved),
        status_info=status,
        warning=warning,
        formation=formation_note,
        idle_close_seconds=idle_seconds if idle_seconds else None,
    )


def _idle(seconds: float) -> str:
    if seconds <= 0:
        return "never by idleness (MEMSYS_BOUNDARY_IDLE_SECONDS=0)"
    return f"after {seconds:g}s without new messages in its conversation"
