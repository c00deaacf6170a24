"""GET /metrics: Prometheus text format (instruments in ``app/observability/metrics.py``)."""

from __future__ import annotations

from litestar import Request, get
from litestar.response import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from app.formation import repository as formation_repository
from app.formation import tasks
from app.memories.repository import count_by_type
from app.memorize import service as memorize
from app.observability.metrics import (
    FORMATION_JOBS,
    FORMATION_OLDEST,
    MEMORIES,
    MESSAGES_NOT_SEARCHABLE,
    MESSAGES_WAITING,
)
from app.runtime import Runtime


async def refresh(runtime: Runtime) -> None:
    """The gauges read from the database: the queue's backlog, and memories per type tenant by tenant (each
    tenant's rows are visible only in its own scope)."""
    async with runtime.engine.connect() as conn:
        backlog = await tasks.backlog(conn)
        tenants = await formation_repository.tenants(conn)
    for state in ("pending", "running", "failed"):
        FORMATION_JOBS.labels(state=state).set(backlog[state])
    FORMATION_OLDEST.set(backlog["oldest_pending_seconds"] or 0)
    waiting = await memorize.waiting_messages(runtime)
    MESSAGES_WAITING.set(waiting["messages_waiting"])
    MESSAGES_NOT_SEARCHABLE.set(waiting["messages_not_yet_searchable"])
    counts: dict[str, int] = {"episode": 0, "event_log": 0, "semantic_memory": 0}
    for tenant in tenants:
        async with runtime.for_tenant(tenant).engine.connect() as conn:
            for memory_type, count in (await count_by_type(conn)).items():
                counts[memory_type] = counts.get(memory_type, 0) + count
    for memory_type, count in counts.items():
        MEMORIES.labels(memory_type=memory_type).set(count)


@get("/metrics", operation_id="metrics", tags=["health"], opt={"public": True}, include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format. Open like ``/health``: counts and latencies, no tenant's data."""
    await refresh(request.app.state.runtime)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
