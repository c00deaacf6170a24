"""memorize: accept one message durably, then let memory formation look at its stream."""

from __future__ import annotations

from app.errors import PayloadTooLarge
from app.formation import service as formation
from app.formation.streams import Stream
from app.memorize import repository
from app.memorize.schemas import FlushRequest, MemorizeRequest, MemorizeResult, SavedMemory
from app.runtime import Runtime


async def memorize(runtime: Runtime, request: MemorizeRequest) -> tuple[str, MemorizeResult]:
    """Store the message (committed before anything else happens), then run boundary detection.

    Returns the human-readable message and the result. A duplicate ``(stream, message_id)`` stores
    nothing and reports ``duplicate``.
    """
    size = len(request.content.encode("utf-8"))
    if size > runtime.settings.max_content_bytes:
        raise PayloadTooLarge(
            f"Field content is {size} bytes; the limit is {runtime.settings.max_content_bytes} "
            "(MEMSYS_MAX_CONTENT_BYTES)"
        )
    stream = Stream.of(request.group_id, request.sender)
    row = request.model_dump(mode="python")
    row.update(stream_kind=stream.kind, stream_id=stream.id)
    async with runtime.engine.begin() as conn:
        inserted = await repository.insert_message(conn, row)
        due = inserted and await formation.is_due(conn, runtime, stream)
    if not inserted:
        return "Message already stored (duplicate message_id)", MemorizeResult(
            saved_memories=[], count=0, status_info="duplicate"
        )
    if not due:
        return _answer(formation.FormationOutcome())
    outcome = await formation.process_stream(runtime, stream)
    return _answer(outcome)


async def flush(runtime: Runtime, request: FlushRequest) -> tuple[str, MemorizeResult]:
    """Close the stream's open MemCell now, whatever the boundary rules say."""
    stream = Stream.of(request.group_id, request.sender or "")
    outcome = await formation.process_stream(runtime, stream, flush=True)
    return _answer(outcome)


def _answer(outcome: formation.FormationOutcome) -> tuple[str, MemorizeResult]:
    saved = [SavedMemory(**memory) for memory in outcome.memories]
    if saved:
        message = f"Extracted {len(saved)} memories"
        status = "extracted"
    else:
        message = "Message queued, awaiting boundary detection"
        status = "accumulated"
    return message, MemorizeResult(saved_memories=saved, count=len(saved), status_info=status, warning=outcome.warning)
