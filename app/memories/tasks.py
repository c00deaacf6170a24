"""The memories' jobs (``app.queue`` defers or schedules them): embed corrected memories again, sweep expired
and deleted ones."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import procrastinate

from app import queue as q
from app.formation import repository as formation_repository
from app.memories import reembed
from app.memories import service as memories

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger(__name__)


@q.queue.task(name="reembed_edited", queue=q.INTAKE_QUEUE, pass_context=True)
async def reembed_edited(context: procrastinate.JobContext, tenant_id: str) -> None:
    """Embed again the tenant's memories whose content was corrected (``app.memories.service.edit_memory``)."""
    runtime: Runtime = context.additional_context["runtime"]
    try:
        await reembed.edited(runtime.for_tenant(tenant_id))
    except Exception:
        await q.defer_in_tenant(
            runtime, tenant_id, q.defer_reembedding, schedule_in_s=runtime.settings.formation_retry_seconds
        )
        raise


@q.queue.periodic(cron="* * * * * */30", periodic_id="sweep_memories")
@q.queue.task(name="sweep_memories", queue=q.QUEUE, queueing_lock="sweep_memories", pass_context=True)
async def sweep_memories(context: procrastinate.JobContext, timestamp: int) -> None:
    """Memories past their ``expires_at`` marked expired, deleted ones past ``MEMSYS_DELETED_RETENTION_DAYS`` purged,
    tenant by tenant."""
    runtime: Runtime = context.additional_context["runtime"]
    async with runtime.engine.connect() as conn:
        tenants = await formation_repository.tenants(conn)
    for tenant in tenants:
        done = await memories.sweep(runtime.for_tenant(tenant))
        if any(done.values()):
            log.info("memories swept: %s", done)
