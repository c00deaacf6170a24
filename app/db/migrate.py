"""Applying the Alembic migrations from code, and the start-up checks of the schema."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from alembic import command
from alembic.config import Config
from psycopg.errors import LockNotAvailable
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app import PROJECT_ROOT
from app.db import roles
from app.db.embedded import sqlalchemy_url
from app.db.named_sql import statement
from app.errors import ConfigurationError

log = logging.getLogger(__name__)

LOCK_ATTEMPTS = 10
"""How many times ``upgrade`` runs a migration that gave up waiting for a lock (migrations/env.py's lock_timeout)."""

MIGRATION_LOCK = 0x6D656D7379730001
"""The advisory lock ``upgrade`` holds: two replicas migrating at once take turns (the second finds nothing to do)."""


def alembic_config(
    database_url: str,
    embedding_dimensions: int,
    embedding_model: str | None = None,
    *,
    service_role: str | None = None,
) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    cfg.attributes["embedding_dimensions"] = embedding_dimensions
    cfg.attributes["service_role"] = service_role or service_role_for(database_url, None)
    if embedding_model:
        cfg.attributes["embedding_model"] = embedding_model  # what migration 0007 gives the rows already there
    return cfg


def service_role_for(database_url: str, service_url: str | None) -> str:
    """The service's role: the service URL's user, else ``<database>_app`` (app.db.roles)."""
    if service_url:
        return roles.service_role_of(service_url)
    return roles.default_service_role(make_url(sqlalchemy_url(database_url)).database or "memsys")


def upgrade(
    database_url: str,
    embedding_dimensions: int,
    revision: str = "head",
    *,
    service_url: str | None = None,
    embedding_model: str | None = None,
    set_service_password: bool = False,
) -> None:
    """Migrate as the owner, one process at a time: the service role made (or checked) first, granted after.

    The service URL's password becomes the role's only when the role is made here, or with ``set_service_password``.
    """
    role = service_role_for(database_url, service_url)
    password = make_url(sqlalchemy_url(service_url)).password if service_url else None
    cfg = alembic_config(database_url, embedding_dimensions, embedding_model, service_role=role)
    for attempt in range(LOCK_ATTEMPTS):
        try:
            return _upgrade(cfg, database_url, revision, role, password, set_service_password)
        except OperationalError as exc:
            if not isinstance(exc.orig, LockNotAvailable) or attempt == LOCK_ATTEMPTS - 1:
                raise
            log.warning("a migration waited over its lock timeout for a busy table; trying again (%s)", exc.orig)
            time.sleep(1.0 + attempt)


def _upgrade(cfg: Config, database_url: str, revision: str, role: str, password: str | None, set_password: bool):
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with _migration_lock(engine), engine.connect() as conn:
            roles.prepare(conn, role, password, set_password=set_password)
            conn.commit()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
            if revision == "head":
                roles.grant(conn, role)
                conn.commit()
    finally:
        engine.dispose()


@contextmanager
def _migration_lock(engine) -> Iterator[None]:
    """Hold ``MIGRATION_LOCK`` on a connection of its own, asked for with ``pg_try_advisory_lock`` between sleeps: a
    process blocked in ``pg_advisory_lock`` would hold a snapshot, for which the other's concurrent index build waits
    (a deadlock); one that asks again and again holds none between its questions."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as lock:
        waited = False
        while not lock.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": MIGRATION_LOCK}).scalar():
            if not waited:
                log.warning("another memsys is migrating this database: waiting for it to finish")
                waited = True
            time.sleep(0.5)
        try:
            yield
        finally:
            lock.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})


def current_revision(database_url: str) -> str | None:
    """The revision the database is at (None before the first migration)."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def downgrade(database_url: str, embedding_dimensions: int, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url, embedding_dimensions), revision)


def check_schema(database_url: str) -> None:
    """Refuse to serve a database this code does not match: never migrated, migrated by a newer memsys (an older
    replica started during an upgrade would fail on it at its first request), or not yet migrated to this code's head
    (``memsys migrate`` runs first: docs/operations.md, "Upgrades")."""
    from alembic.script import ScriptDirectory

    found = current_revision(database_url)
    scripts = ScriptDirectory.from_config(alembic_config(database_url, 0, service_role="unused"))
    head = scripts.get_current_head()
    if found == head:
        return
    if found is None:
        raise ConfigurationError(
            "The database has no memsys schema yet: run `memsys migrate` (as the owner), or start with "
            "MEMSYS_MIGRATE_ON_START=true."
        )
    known = {script.revision for script in scripts.walk_revisions()}
    if found not in known:
        raise ConfigurationError(
            f"The database was migrated by a newer memsys (revision {found}; this one knows up to {head}). Run that "
            "version of memsys or a newer one: an older memsys cannot serve a newer schema."
        )
    raise ConfigurationError(
        f"The database is at revision {found} and this memsys needs {head}: run `memsys migrate` with this version "
        'first (docs/operations.md, "Upgrades"), or start with MEMSYS_MIGRATE_ON_START=true.'
    )


def check_embedding_dimensions(database_url: str, embedding_dimensions: int) -> None:
    """Refuse to start when the database's vector column was made for another embedding model."""
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with engine.connect() as conn:
            found = conn.execute(statement("vector_dimensions")).scalar()
    finally:
        engine.dispose()
    if found is not None and found != embedding_dimensions:
        raise ConfigurationError(
            f"The database stores {found}-dimensional embeddings but the configured embedding model gives "
            f"{embedding_dimensions} (MEMSYS_EMBEDDING_DIMENSIONS / MEMSYS_EMBEDDING_MODEL). Use the model the "
            "database was built with, or run `memsys reembed` (with memsys stopped) to embed every memory again."
        )
