"""memorize's jobs: make a tenant's new messages searchable before formation (``app.queue`` defers it), and delete
messages past ``MEMSYS_MESSAGE_RETENTION_DAYS`` (periodic)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import procrastinate

from app import queue as q
from app.formation import repository as formation_repository
from app.memorize import searchable
from app.memorize import service as memorize

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger(__name__)

INDEX_AGAIN_AFTER_S = 1.0


@q.queue.task(name="index_messages", queue=q.INTAKE_QUEUE, pass_context=True)
async def index_messages(context: procrastinate.JobContext, tenant_id: str) -> None:
    """Give the tenant's pending messages their vectors (``app.memorize.searchable``)."""
    runtime: Runtime = context.additional_context["runtime"]
    try:
        _, skipped = await searchable.index_pending(runtime.for_tenant(tenant_id))
        if skipped:  # formation held them: it forms them now, or they are tried again in a moment
            await q.defer_in_tenant(runtime, tenant_id, q.defer_indexing, schedule_in_s=INDEX_AGAIN_AFTER_S)
    except Exception:
        # Formation forms them anyway; they become searchable when the embedder is back.
        await q.defer_in_tenant(
            runtime, tenant_id, q.defer_indexing, schedule_in_s=runtime.settings.formation_retry_seconds
        )
        raise


@q.queue.periodic(cron="* * * * * */30", periodic_id="sweep_messages")
@q.queue.task(name="sweep_messages", queue=q.QUEUE, queueing_lock="sweep_messages", pass_context=True)
async def sweep_messages(context: procrastinate.JobContext, timestamp: int) -> None:
    """Messages formed into memories and past ``MEMSYS_MESSAGE_RETENTION_DAYS`` deleted, tenant by tenant."""
    runtime: Runtime = context.additional_context["runtime"]
    if runtime.settings.message_retention_days is None:
        return
    async with runtime.engine.connect() as conn:
        tenants = await formation_repository.tenants(conn)
    for tenant in tenants:
        deleted = await memorize.delete_old_messages(runtime.for_tenant(tenant))
        if deleted:
            log.info("messages past their retention deleted: %d", deleted)
