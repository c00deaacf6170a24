"""What memsys prints on standard error: the logging of every command, quiet unless asked, and the one line
``memsys serve`` starts with.

memsys's own loggers (``app.…``) log at ``MEMSYS_LOG_LEVEL``. The libraries' routine lines (procrastinate's
line per periodic job, alembic's per migration, pgserver's initdb and pg_ctl output, uvicorn's and the MCP
server's per request) are details: they show with ``--verbose`` (or ``MEMSYS_LOG_LEVEL=DEBUG``); their warnings
and errors always show. A line written while a request is handled names its id (app.observability.request_ids);
``MEMSYS_LOG_FORMAT=json`` writes each record as one JSON object.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.observability.request_ids import RequestIdFilter

if TYPE_CHECKING:
    from app.runtime import Runtime

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMAT_IN_REQUEST = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"


def configure(level: str, *, verbose: bool = False, log_format: str = "text") -> None:
    """Log to standard error: memsys's own records from ``level`` (DEBUG when ``verbose``), the libraries' from
    WARNING (from INFO when ``verbose`` or ``level`` is DEBUG), as text lines or JSON objects (``log_format``).
    Replaces whatever was configured before."""
    own = logging.DEBUG if verbose else logging.getLevelNamesMapping()[level.upper()]
    libraries = logging.INFO if own <= logging.DEBUG else max(own, logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(_Levels(own, libraries))
    logging.basicConfig(level=min(own, libraries), handlers=[handler], force=True)
    if libraries > logging.INFO:
        # pgserver's lock file falls back to /tmp when XDG_RUNTIME_DIR is unset (containers, root): harmless
        warnings.filterwarnings("ignore", module="platformdirs")


class TextFormatter(logging.Formatter):
    """``FORMAT``, with the request's id in brackets on a line written while a request is handled."""

    def __init__(self) -> None:
        super().__init__(FORMAT)
        self._in_request = logging.Formatter(FORMAT_IN_REQUEST)

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "request_id", None):
            return self._in_request.format(record)
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the request's id while one is
    handled, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if getattr(record, "request_id", None):
            line["request_id"] = record.request_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class _Levels(logging.Filter):
    def __init__(self, own: int, libraries: int) -> None:
        super().__init__()
        self._own = own
        self._libraries = libraries

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "app" or record.name.startswith("app."):
            return record.levelno >= self._own
        if record.name == "uvicorn.access":
            return True  # uvicorn logs requests only when asked (MEMSYS_ACCESS_LOG or --verbose)
        _without_job_arguments(record)
        return record.levelno >= self._libraries


def _without_job_arguments(record: logging.LogRecord) -> None:
    """procrastinate names a job with its arguments, and a formation job's stream id may be a user's id: its
    lines keep the task and the job's number only."""
    job = getattr(record, "job", None)
    if isinstance(job, dict) and job.get("call_string"):
        record.msg = record.getMessage().replace(job["call_string"], f"{job.get('task_name')}[{job.get('id')}]")
        record.args = ()


async def start_line(runtime: Runtime) -> str:
    """``memsys serve``'s one line once it answers: where, on which data, with which model, who may call."""
    from app.tenancy import repository

    settings = runtime.settings
    async with runtime.engine.connect() as conn:
        _, any_key = await repository.key_lookup(conn, None)
    # with no key on an address where anonymity is not allowed, the service refused to start before this
    access = "API keys required" if any_key else "anonymous until the first API key (memsys keys create)"
    return (
        f"memsys serving http://{_host(settings.host)}:{settings.port}; {running_on(runtime, settings.workers)}; "
        f"access {access}"
    )


def running_on(runtime: Runtime, workers: int) -> str:
    """The data, the embedding model and the formation workers of a process (serve's, worker's, mcp's line)."""
    from sqlalchemy.engine import make_url

    from app.db.embedded import libpq_url, sqlalchemy_url

    settings = runtime.settings
    if settings.database_url:
        database = libpq_url(make_url(sqlalchemy_url(settings.database_url)).set(password=None).render_as_string())
        where = f"database {database}"
    else:
        where = f"data directory {settings.resolved_data_dir()}; database embedded PostgreSQL"
    return f"{where}; embedding model {runtime.embedder.name}; {workers} formation worker{'s' if workers != 1 else ''}"


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
