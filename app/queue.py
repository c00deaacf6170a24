"""The queue (procrastinate): who defers which job, and the workers that run them.

Requests and services defer jobs here, in their own transaction, by the task's name; the tasks themselves live
beside the services they call (``TASK_MODULES``), imported by the workers. This module imports no service.

One formation job per stream at a time (``lock``) and at most one waiting (``queueing_lock``), both keyed by
tenant and stream. A waiting job is locked FOR SHARE by the deferring transaction, so that it cannot start
(workers fetch with SKIP LOCKED) before the message that wanted it is committed; when none waits, a new one is
deferred in a savepoint, and a conflict with one deferred meanwhile is retried the same way.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import procrastinate
from procrastinate import exceptions, jobs
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.formation.streams import Stream

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger(__name__)

QUEUE = "formation"
INTAKE_QUEUE = "intake"
"""Indexing new messages has a queue and a worker of its own: it must not wait behind a long formation job."""

TASK_MODULES = ("app.formation.tasks", "app.memorize.tasks", "app.memories.tasks")
"""Where the tasks are: imported when a worker starts (and by a defer, if not imported yet)."""

queue = procrastinate.App(connector=procrastinate.PsycopgConnector(), import_paths=TASK_MODULES)
"""Where the tasks are registered; jobs are deferred on the caller's own connection. Its connector is never
opened: each running memsys opens an app of its own (``open_queue``), so that two in one process (tests) never
share a connection pool across event loops."""

FORM_AGAIN_PRIORITY = 1
"""Above form_stream's 0: among a stream's waiting jobs, forming again with the old boundaries comes first."""

_WAITING = text("SELECT id FROM procrastinate_jobs WHERE queueing_lock = :key AND status = 'todo' FOR SHARE")


def stream_key(tenant: str, stream: Stream) -> str:
    return f"{tenant}/{stream.lock_key()}"


def index_key(tenant: str) -> str:
    return f"{tenant}/index"


def _schedule(schedule_in_s: float | None) -> dict[str, Any]:
    return {"schedule_in": {"seconds": schedule_in_s}} if schedule_in_s else {}


async def defer_formation(
    conn: AsyncConnection, tenant: str, stream: Stream, *, schedule_in_s: float | None = None
) -> None:
    """Make sure a job will form ``stream`` after this transaction commits (not before ``schedule_in_s``)."""
    key = stream_key(tenant, stream)
    await _defer_once(
        conn,
        lambda raw: queue.configure_task(
            "form_stream", connection=raw, lock=key, queueing_lock=key, **_schedule(schedule_in_s)
        ),
        key,
        tenant_id=tenant,
        stream_kind=stream.kind,
        stream_id=stream.id,
    )


async def defer_form_again(
    conn: AsyncConnection, tenant: str, stream: Stream, cells: list[list[int]], *, schedule_in_s: float | None = None
) -> None:
    """Queue ``form_again`` for the stream, after this transaction commits (under the stream's job lock)."""
    key = stream_key(tenant, stream)
    raw = (await conn.get_raw_connection()).driver_connection
    await queue.configure_task(
        "form_again", connection=raw, lock=key, priority=FORM_AGAIN_PRIORITY, **_schedule(schedule_in_s)
    ).defer_async(tenant_id=tenant, stream_kind=stream.kind, stream_id=stream.id, cells=cells)


async def defer_indexing(conn: AsyncConnection, tenant: str, *, schedule_in_s: float | None = None) -> None:
    """Make sure the intake worker indexes the tenant's new messages after this transaction commits."""
    await _defer_tenant_job(conn, "index_messages", index_key(tenant), tenant, schedule_in_s)


async def defer_reembedding(conn: AsyncConnection, tenant: str, *, schedule_in_s: float | None = None) -> None:
    """Make sure the intake worker embeds the tenant's corrected memories after this transaction commits."""
    await _defer_tenant_job(conn, "reembed_edited", f"{tenant}/reembed", tenant, schedule_in_s)


async def _defer_tenant_job(
    conn: AsyncConnection, task: str, key: str, tenant: str, schedule_in_s: float | None
) -> None:
    """One waiting job of ``task`` for the tenant at most (queueing lock ``key``)."""
    await _defer_once(
        conn,
        lambda raw: queue.configure_task(task, connection=raw, queueing_lock=key, **_schedule(schedule_in_s)),
        key,
        tenant_id=tenant,
    )


async def defer_in_tenant(
    runtime: Runtime, tenant: str, defer: Callable[..., Any], *args: Any, schedule_in_s: float | None = None
) -> None:
    """Run ``defer(conn, tenant, *args)`` in a transaction of its own in the tenant's scope: a task putting its
    work back in the queue (a failure, or a stop before it finished)."""
    async with runtime.for_tenant(tenant).engine.begin() as conn:
        await defer(conn, tenant, *args, schedule_in_s=schedule_in_s)


async def _defer_once(
    conn: AsyncConnection, configured: Callable[[Any], jobs.JobDeferrer], key: str, **arguments: Any
) -> None:
    """Defer the job ``configured`` makes (given the raw connection) unless one with the queueing lock ``key``
    is waiting; either way no waiting job can start before this transaction commits."""
    for _ in range(5):
        # Usually one is waiting (a busy stream): lock it, two round trips fewer than the savepoint below.
        if (await conn.execute(_WAITING, {"key": key})).first() is not None:
            return
        try:
            async with conn.begin_nested():
                raw = (await conn.get_raw_connection()).driver_connection
                await configured(raw).defer_async(**arguments)
                return
        except exceptions.AlreadyEnqueued:
            continue  # one was deferred meanwhile: lock it FOR SHARE on the next turn
    raise RuntimeError(f"could not defer the job of {key}")


@asynccontextmanager
async def open_queue(
    service_url: str, *, connect_arguments: dict[str, Any] | None = None, pool_size: int = 4
) -> AsyncIterator[procrastinate.App]:
    """The queue's tasks in an app of this runtime's own, open, with a connection pool to the service's database
    (a plain libpq URL; its connections opened with ``connect_arguments``, app.db.engine.psycopg_arguments): what
    ``run_workers`` runs."""
    connector = procrastinate.PsycopgConnector(
        conninfo=service_url, kwargs=connect_arguments or {}, min_size=1, max_size=pool_size, timeout=10
    )
    jobs_app = _app_of_its_own(connector)
    async with jobs_app.open_async():
        yield jobs_app


def _app_of_its_own(connector: procrastinate.PsycopgConnector) -> procrastinate.App:
    """An app with ``queue``'s tasks and periodic tasks, each bound to it (a task defers and a periodic task
    is deferred through the app it belongs to: ``App.with_connector`` would leave them on ``queue``)."""
    queue.perform_import_paths()
    jobs_app = procrastinate.App(connector=connector)
    for name, task in queue.tasks.items():
        own = copy.copy(task)
        own.blueprint = jobs_app
        jobs_app.tasks[name] = own
    for periodic in queue.periodic_registry.periodic_tasks.values():
        jobs_app.periodic_registry.register_task(
            task=jobs_app.tasks[periodic.task.name],
            cron=periodic.cron,
            periodic_id=periodic.periodic_id,
            configure_kwargs=periodic.configure_kwargs,
        )
    return jobs_app


@queue.periodic(cron="* * * * * */5", periodic_id="retry_stalled")
@queue.task(name="retry_stalled_formation", queue=QUEUE, queueing_lock="retry_stalled_formation", pass_context=True)
async def retry_stalled(context: procrastinate.JobContext, timestamp: int) -> None:
    """Jobs of dead workers (``kill -9``) go back to the queue; a formation job writes nothing twice
    (closing a MemCell is one transaction), so a retry forms what the dead one had not committed."""
    runtime: Runtime = context.additional_context["runtime"]
    manager = context.app.job_manager
    stalled = await manager.get_stalled_jobs(
        seconds_since_heartbeat=runtime.settings.worker_stalled_seconds, queue=QUEUE
    )
    for job in stalled:
        if job.id == context.job.id:
            continue
        try:
            await manager.retry_job(job)
            log.warning("job %s of a dead worker runs again", job.id)
        except exceptions.UniqueViolation:
            # The stream already has a job waiting (its queueing lock): that one forms it; end this one.
            await manager.finish_job_by_id_async(job.id, jobs.Status.ABORTED, delete_job=False)


RESTART_AFTER_S = 5.0
STOP_WITHIN_S = 10.0
"""Jobs in hand get this long to finish when the workers stop; then they are given up (run again later)."""
GIVE_BACK_WITHIN_S = 5.0
"""A job given up at the stop has this long to put its stream back in the queue."""


async def run_workers(jobs_app: procrastinate.App, runtime: Runtime, concurrency: int) -> None:
    """Form streams (``concurrency`` at a time) and index new messages (one intake worker) until cancelled;
    cancelling lets the jobs in hand finish (``STOP_WITHIN_S``), and gives back to the queue those that do not.
    A worker that fails or stops by itself (procrastinate stops when its listener loses the database) starts
    again a few seconds later; its jobs in hand are retried as stalled."""
    async with asyncio.TaskGroup() as workers:  # cancelled, it waits until both have stopped
        workers.create_task(_kept_running(jobs_app, runtime, QUEUE, concurrency))
        workers.create_task(_kept_running(jobs_app, runtime, INTAKE_QUEUE, 1))


async def _kept_running(jobs_app: procrastinate.App, runtime: Runtime, queue_name: str, concurrency: int) -> None:
    """Run a worker on ``queue_name``, again after it fails or stops by itself, until this task is cancelled.
    procrastinate may end a cancelled worker gracefully (or with an error) instead of raising the cancellation:
    the task's own cancel count, not the exception, says whether to stop."""
    stopping = asyncio.current_task().cancelling
    while not stopping():
        try:
            await _run_worker(jobs_app, runtime, queue_name, concurrency)
            if not stopping():
                log.warning("the %s worker stopped by itself; starting again in %gs", queue_name, RESTART_AFTER_S)
        except Exception:  # noqa: BLE001  anything but cancellation: log, wait, start again
            if not stopping():
                log.exception("the %s worker failed; starting again in %gs", queue_name, RESTART_AFTER_S)
        if not stopping():
            await asyncio.sleep(RESTART_AFTER_S)


async def stop_workers(workers: asyncio.Task) -> None:
    """Stop in-process workers (``run_workers`` in a task): the jobs in hand get ``STOP_WITHIN_S``; workers still
    running after that (waiting on a database that does not answer) are cancelled again, which interrupts what
    their graceful stop waits on, so that they can never hold the server's shutdown."""
    workers.cancel()
    done, _ = await asyncio.wait({workers}, timeout=STOP_WITHIN_S + GIVE_BACK_WITHIN_S + 1)
    for _ in range(3):
        if done:
            break
        log.warning("formation workers did not stop in time; interrupting them")
        workers.cancel()
        done, _ = await asyncio.wait({workers}, timeout=2)
    if not done:
        log.warning("formation workers did not stop; leaving them")
    elif not workers.cancelled() and workers.exception() is not None:
        log.warning("formation workers ended with %r", workers.exception())


async def _run_worker(jobs_app: procrastinate.App, runtime: Runtime, queue_name: str, concurrency: int) -> None:
    await jobs_app.run_worker_async(
        queues=[queue_name],
        name=queue_name,
        concurrency=concurrency,
        install_signal_handlers=False,  # the process's own handlers cancel run_workers
        additional_context={"runtime": runtime},
        delete_jobs="successful",
        fetch_job_polling_interval=1.0,
        shutdown_graceful_timeout=STOP_WITHIN_S,
        update_heartbeat_interval=runtime.settings.worker_heartbeat_seconds,
        stalled_worker_timeout=runtime.settings.worker_stalled_seconds,
        # A pooler in transaction mode drops notifications (a LISTEN stays on whichever server connection ran it):
        # then the worker only polls, every fetch_job_polling_interval.
        listen_notify=not runtime.settings.db_transaction_pooler,
    )


_BACKLOG = text(
    """
    SELECT count(*) FILTER (WHERE j.status = 'todo' AND j.task_name = 'form_stream') AS pending,
           count(*) FILTER (WHERE j.status = 'doing' AND j.task_name = 'form_stream') AS running,
           count(*) FILTER (WHERE j.status = 'failed') AS failed,
           extract(epoch FROM now() - min(e.at) FILTER (WHERE j.status = 'todo' AND j.task_name = 'form_stream'))
               AS oldest_pending_seconds
      FROM procrastinate_jobs j
      LEFT JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred'
     WHERE j.queue_name = :queue
    """
)


_JOBS_BY_STATUS = text(
    """
    SELECT queue_name, status::text AS status, count(*) AS jobs
      FROM procrastinate_jobs
     WHERE status IN ('todo', 'doing', 'failed')
     GROUP BY queue_name, status
    """
)

JOB_STATUSES = ("todo", "doing", "failed")
"""The job statuses /metrics counts: waiting, running, failed (succeeded and cancelled ones are history)."""


async def jobs_by_status(conn: AsyncConnection) -> dict[tuple[str, str], int]:
    """Jobs of every queue waiting, running and failed: ``{(queue, status): count}``, every memsys queue and status
    named (0 when none)."""
    counts = {(queue, status): 0 for queue in (QUEUE, INTAKE_QUEUE) for status in JOB_STATUSES}
    for row in (await conn.execute(_JOBS_BY_STATUS)).mappings():
        counts[(row["queue_name"], row["status"])] = row["jobs"]
    return counts


async def backlog(conn: AsyncConnection) -> dict[str, float | int | None]:
    """Formation jobs waiting, running and failed, and how long the oldest waiting one has waited."""
    row = (await conn.execute(_BACKLOG, {"queue": QUEUE})).mappings().one()
    age = row["oldest_pending_seconds"]
    return {
        "pending": row["pending"],
        "running": row["running"],
        "failed": row["failed"],
        "oldest_pending_seconds": round(float(age), 1) if age is not None else None,
    }
