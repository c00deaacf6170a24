"""memorize's job (``app.queue`` defers it): make a tenant's new messages searchable before formation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import procrastinate

from app import queue as q
from app.memorize import searchable

if TYPE_CHECKING:
    from app.runtime import Runtime

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
