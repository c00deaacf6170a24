"""What a user can get wrong when starting memsys, said in a line or two with what to do (``memsys`` prints it
instead of a traceback; ``--verbose`` shows the traceback too).

``explain`` reads the exception and its causes: memsys's own refusals (``ConfigurationError``), settings that do not
validate, a PostgreSQL without pgvector, one that cannot be reached, a database migrated by a newer memsys, an address
that cannot be bound. Anything else is not explained: the traceback is the report.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator

import psycopg
from alembic.util.exc import CommandError
from pydantic import ValidationError
from pydantic_settings import SettingsError

from app.errors import ConfigurationError

PGVECTOR_HELP = (
    "pgvector is a PostgreSQL extension memsys needs (its vector columns and HNSW indexes). Get it: Debian/Ubuntu, "
    "`apt install postgresql-<major>-pgvector` from the PostgreSQL project's apt repository (apt.postgresql.org; "
    "Debian's own archive has no pgvector); Docker, the `pgvector/pgvector:pg17` image; Amazon RDS, Cloud SQL, Azure "
    "and Supabase ship it: the database owner runs `CREATE EXTENSION vector;`. Or unset MEMSYS_DATABASE_URL: memsys "
    "then starts its embedded PostgreSQL, which has pgvector."
)


class StartupError(ConfigurationError):
    """memsys cannot start, for a reason the message gives with what to do."""


def explain(exc: BaseException) -> str | None:
    """The message for a start-up failure a user can fix, or None when it is not one of those."""
    for error in _chain(exc):
        if isinstance(error, ConfigurationError):
            return str(error)
        if isinstance(error, ValidationError) and error.title == "Settings":
            return "; ".join(_setting_error(detail) for detail in error.errors())
        if isinstance(error, SettingsError):  # an unknown variable, a secret's file, a value that is not JSON
            return _settings_source_error(error)
        if isinstance(error, CommandError) and "Can't locate revision" in str(error):
            return (
                f"The database was migrated by a newer memsys ({error}). Run that version of memsys, or a newer one; "
                "an older memsys cannot serve a newer schema."
            )
        if isinstance(error, psycopg.Error):
            return _database_error(error)
        if isinstance(error, OSError) and error.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            return None  # said by the caller, who knows the address (``bind_error``)
    return None


def bind_error(host: str, port: int, error: OSError) -> StartupError:
    """The socket could not be bound: in use, a port below 1024 without the right, or an address not this host's."""
    if error.errno == errno.EADDRINUSE:
        hint = "another process (perhaps another memsys) listens there: stop it, or choose another --port (MEMSYS_PORT)"
    elif error.errno == errno.EACCES:
        hint = "ports below 1024 need privileges: choose a port above 1024 with --port (MEMSYS_PORT)"
    else:
        hint = (
            "the address is not one of this machine's: use 127.0.0.1, 0.0.0.0 or one of its own (--host, MEMSYS_HOST)"
        )
    return StartupError(f"Cannot listen on {host}:{port}: {error.strerror}; {hint}.")


def _database_error(error: psycopg.Error) -> str | None:
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    if 'extension "vector"' in text or ("vector.control" in text):
        return f"PostgreSQL has no pgvector ({first}). {PGVECTOR_HELP}"
    if isinstance(error, psycopg.errors.InsufficientPrivilege) and "vector" in text:
        return (
            f"The database role may not create the pgvector extension ({first}). Ask the database's owner or an "
            "administrator to run `CREATE EXTENSION vector;` in memsys's database, then start memsys again."
        )
    if "unsupported startup parameter" in text:  # PgBouncer refusing the timeouts memsys sends at login
        return (
            f"Cannot connect to PostgreSQL: {first}. A connection pooler (PgBouncer) refuses the settings memsys sends "
            "when it logs in: behind a pooler set MEMSYS_DB_TRANSACTION_POOLER=true (docs/managed-postgres.md)."
        )
    if isinstance(error, psycopg.OperationalError):
        return (
            f"Cannot connect to PostgreSQL: {first}. Check MEMSYS_DATABASE_URL (host, port, database, user, "
            "password) and that the server is running; or unset it to use memsys's embedded PostgreSQL."
        )
    return None


def _setting_error(detail: dict) -> str:
    name = "MEMSYS_" + "_".join(str(part) for part in detail["loc"]).upper() if detail["loc"] else "a setting"
    return f"Invalid setting {name}: {detail['msg']} (given {detail.get('input')!r})"


def _settings_source_error(error: SettingsError) -> str:
    if match := re.match(r'error parsing value for field "(\w+)"', str(error)):
        return f"Invalid setting MEMSYS_{match.group(1).upper()}: not JSON (a list or a map is given as JSON)"
    return str(error)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes and contexts, and a SQLAlchemy error's driver error, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        error = todo.pop(0)
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        todo += [getattr(error, "orig", None), error.__cause__, error.__context__]
        if isinstance(error, BaseExceptionGroup):
            todo += list(error.exceptions)
