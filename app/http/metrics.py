"""GET /metrics: Prometheus text format (instruments in ``app/observability/metrics.py``)."""

from __future__ import annotations

import asyncio
import hmac
import math
import time

from litestar import Request, get
from litestar.response import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from sqlalchemy.pool import Pool, QueuePool

from app import queue
from app.errors import Forbidden, Unauthorized
from app.formation import repository as formation_repository
from app.memories.repository import count_by_type
from app.memorize import service as memorize
from app.observability.metrics import (
    DB_POOL,
    FORMATION_JOBS,
    FORMATION_OLDEST,
    MEMORIES,
    MESSAGES_NOT_SEARCHABLE,
    MESSAGES_WAITING,
    QUEUE_JOBS,
)
from app.runtime import Runtime
from app.tenancy.service import is_loopback


class Gauges:
    """The gauges read from the database, read again at most every ``MEMSYS_METRICS_REFRESH_SECONDS`` by one
    scrape at a time: a scrape costs no query in between, however often (or by however many) it is made."""

    def __init__(self, every_s: float) -> None:
        self._every_s = every_s
        self._read_at = -math.inf
        self._lock = asyncio.Lock()

    async def fresh(self, runtime: Runtime) -> None:
        async with self._lock:
            if time.monotonic() - self._read_at >= self._every_s:
                await refresh(runtime)
                self._read_at = time.monotonic()


async def refresh(runtime: Runtime) -> None:
    """The gauges read from the database: the queue's backlog, and memories per type tenant by tenant (each
    tenant's rows are visible only in its own scope), summed over the tenants."""
    async with runtime.engine.connect() as conn:
        backlog = await queue.backlog(conn)
        jobs = await queue.jobs_by_status(conn)
        tenants = await formation_repository.tenants(conn)
    for (queue_name, status), count in jobs.items():
        QUEUE_JOBS.labels(queue=queue_name, status=status).set(count)
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


def read_pool(pool: Pool) -> None:
    """The pool's figures as they are now: no query, so read at every scrape."""
    if not isinstance(pool, QueuePool):  # a pool without a size (tests' NullPool): nothing to say
        return
    size, overflow = pool.size(), max(pool.overflow(), 0)
    DB_POOL.labels(state="size").set(size)
    DB_POOL.labels(state="checked_out").set(pool.checkedout())
    DB_POOL.labels(state="idle").set(pool.checkedin())
    DB_POOL.labels(state="overflow").set(overflow)


@get("/metrics", operation_id="metrics", tags=["health"], opt={"public": True}, include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format: counts and latencies summed over the tenants, no tenant's data. With
    ``MEMSYS_METRICS_TOKEN`` it asks for that bearer token; without it, it answers loopback clients only."""
    runtime: Runtime = request.app.state.runtime
    token = runtime.settings.metrics_token
    if token:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise Unauthorized("GET /metrics needs Authorization: Bearer <MEMSYS_METRICS_TOKEN>")
    elif request.client is None or not is_loopback(request.client.host):
        raise Forbidden("GET /metrics answers loopback clients only; set MEMSYS_METRICS_TOKEN to scrape it remotely")
    await request.app.state.gauges.fresh(runtime)
    read_pool(runtime.engine.sync_engine.pool)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
