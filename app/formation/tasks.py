"""Formation's jobs (``app.queue`` defers them): form a stream, form it again after a forget, close idle streams."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import procrastinate

from app import queue as q
from app.formation import service as formation
from app.formation.streams import Stream

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger(__name__)


@q.queue.task(name="form_stream", queue=q.QUEUE, pass_context=True)
async def form_stream(context: procrastinate.JobContext, tenant_id: str, stream_kind: str, stream_id: str) -> None:
    runtime: Runtime = context.additional_context["runtime"]
    stream = Stream(stream_kind, stream_id)
    try:
        outcome = await formation.form_queued(runtime.for_tenant(tenant_id), stream)
    except asyncio.CancelledError:
        # The worker is stopping (SIGTERM) and this job did not finish in the grace time: what it had not
        # committed is rolled back; a new job takes the stream back to the queue, for the next worker.
        # Bounded: a stopping worker must not hang on it (the database may be going away too).
        try:
            await asyncio.wait_for(
                q.defer_in_tenant(runtime, tenant_id, q.defer_formation, stream), q.GIVE_BACK_WITHIN_S
            )
        except Exception:  # noqa: BLE001  not given back: close_idle_streams finds the stream later
            log.warning("could not give %s back to the queue", q.stream_key(tenant_id, stream), exc_info=True)
        raise
    except Exception:
        await _again_later(runtime, tenant_id, stream)
        raise  # the job is recorded as failed (counted in /health); the new one forms the stream
    if outcome.warning:
        log.warning("formation of %s: %s", q.stream_key(tenant_id, stream), outcome.warning)
    if outcome.deferred:
        await _again_later(runtime, tenant_id, stream)


async def _again_later(runtime: Runtime, tenant: str, stream: Stream) -> None:
    await q.defer_in_tenant(
        runtime, tenant, q.defer_formation, stream, schedule_in_s=runtime.settings.formation_retry_seconds
    )


@q.queue.task(name="form_again", queue=q.QUEUE, pass_context=True)
async def form_again(
    context: procrastinate.JobContext, tenant_id: str, stream_kind: str, stream_id: str, cells: list[list[int]]
) -> None:
    """Form the messages of each of ``cells`` (ids of pending messages) into one MemCell, in order: what
    forgetting a user leaves of the MemCells that had their words (``formation.service.form_again``)."""
    runtime: Runtime = context.additional_context["runtime"]
    stream = Stream(stream_kind, stream_id)
    outcome = await formation.form_again(runtime.for_tenant(tenant_id), stream, cells)
    if outcome.deferred:
        log.warning("forming %s again: %s", q.stream_key(tenant_id, stream), outcome.warning)
        await q.defer_in_tenant(
            runtime,
            tenant_id,
            q.defer_form_again,
            stream,
            cells,
            schedule_in_s=runtime.settings.formation_retry_seconds,
        )


@q.queue.periodic(cron="* * * * * */10", periodic_id="close_idle_streams")
@q.queue.task(name="close_idle_streams", queue=q.QUEUE, queueing_lock="close_idle_streams", pass_context=True)
async def close_idle_streams(context: procrastinate.JobContext, timestamp: int) -> None:
    """Streams with pending messages and none new for ``MEMSYS_BOUNDARY_IDLE_SECONDS`` are formed as if
    flushed: a conversation that simply stops is formed without anyone calling flush."""
    closed = await formation.close_idle_streams(context.additional_context["runtime"])
    if closed:
        log.info("%d idle streams closed", closed)
