"""The async SQLAlchemy engine, and where the database URL comes from."""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db import migrate
from app.db.embedded import embedded_database_url, sqlalchemy_url
from app.errors import ConfigurationError
from app.providers.embeddings import embedder_name
from app.settings import LEGACY_DATA_DIR, Settings, default_data_dir

log = logging.getLogger(__name__)


def resolve_database_url(settings: Settings, *, keep_running: bool = False) -> str:
    """The owner's URL: ``MEMSYS_DATABASE_URL`` when set, else the embedded server's (started if need be)."""
    if settings.database_url:
        return settings.database_url
    data_dir = settings.resolved_data_dir()
    if settings.data_dir is None and data_dir == LEGACY_DATA_DIR.resolve():
        default = default_data_dir()
        log.warning(
            "using the database in ./.memsys of the current folder (%s), where earlier versions of memsys kept it; "
            "memsys now keeps its data in %s whatever the folder. To use this one from any folder, set "
            "MEMSYS_DATA_DIR=%s, or move it there with memsys stopped (if %s holds nothing yet): "
            "mkdir -p %s && mv %s %s",
            data_dir,
            default,
            data_dir,
            default,
            default.parent,
            data_dir,
            default,
        )
    return embedded_database_url(data_dir, keep_running=keep_running)


def create_engine(database_url: str, settings: Settings) -> AsyncEngine:
    engine = create_async_engine(
        sqlalchemy_url(database_url),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_timeout=settings.db_pool_timeout_seconds,  # then sqlalchemy's TimeoutError: a 503, not a hang
        connect_args={"connect_timeout": 10, **psycopg_arguments(settings)},
    )
    _ping_after_idle(engine)
    return engine


def psycopg_arguments(settings: Settings) -> dict[str, Any]:
    """What memsys's psycopg connections are opened with besides their URL: behind a transaction pooler, no
    prepared statements (psycopg prepares a statement run five times on a connection, and the pooler may give the next
    transaction a server connection that does not have it)."""
    return {"prepare_threshold": None} if settings.db_transaction_pooler else {}


def require_a_session(settings: Settings, work: str) -> None:
    """Refuse ``work`` (migrations, backups: session settings, and a lock held across transactions) through a pooler
    in transaction mode."""
    if settings.db_transaction_pooler:
        raise ConfigurationError(
            f"{work} need a session of their own, which a pooler in transaction mode does not keep "
            "(MEMSYS_DB_TRANSACTION_POOLER=true): run them with MEMSYS_DATABASE_URL pointing at PostgreSQL itself and "
            "MEMSYS_DB_TRANSACTION_POOLER unset, and memsys behind the pooler with MEMSYS_MIGRATE_ON_START=false "
            "(docs/managed-postgres.md)."
        )


def limit_statements(engine: AsyncEngine, settings: Settings) -> AsyncEngine:
    """Each new connection of ``engine`` starts with ``MEMSYS_DB_STATEMENT_TIMEOUT_SECONDS`` and
    ``MEMSYS_DB_LOCK_TIMEOUT_SECONDS`` (libpq's ``options``, so no round trip is added): for the service's engine,
    not the owner's migrations. Behind a transaction pooler, which refuses ``options`` at login (PgBouncer: "unsupported
    startup parameter") and would leave a session's settings to whoever gets its server connection next, each
    transaction sets them (``SET LOCAL``: one round trip more)."""
    # 0 turns a timeout off; anything above it is at least a millisecond
    timeouts = {
        name: max(1, round(seconds * 1000)) if seconds > 0 else 0
        for name, seconds in (
            ("statement_timeout", settings.db_statement_timeout_seconds),
            ("lock_timeout", settings.db_lock_timeout_seconds),
        )
    }
    if settings.db_transaction_pooler:
        set_local = "; ".join(f"SET LOCAL {name} = {ms}" for name, ms in timeouts.items())

        @event.listens_for(engine.sync_engine, "begin")
        def timeouts_of_transaction(conn) -> None:
            conn.exec_driver_sql(set_local)

        return engine
    options = " ".join(f"-c {name}={ms}" for name, ms in timeouts.items())

    @event.listens_for(engine.sync_engine, "do_connect")
    def with_timeouts(dialect, record, cargs, cparams) -> None:
        cparams["options"] = f"{cparams.get('options', '')} {options}".strip()

    return engine


PING_AFTER_IDLE_S = 1.0
"""A pooled connection back in the pool this long ago is pinged before it is used again, and replaced if the
database dropped it (a restart); one back sooner is used as it is. SQLAlchemy's ``pool_pre_ping`` pings at every
checkout: one more round trip for every transaction (two per search, 0.2 ms each), for connections that were in use
a moment ago. A database that restarts within the second fails the statements of the connections it dropped
(a 503); SQLAlchemy then replaces every connection of the pool that is older than the failure."""

_IDLE_SINCE = "memsys_idle_since"


def _ping_after_idle(engine: AsyncEngine) -> None:
    pool, dialect = engine.sync_engine.pool, engine.sync_engine.dialect

    @event.listens_for(pool, "connect")
    @event.listens_for(pool, "checkin")
    def idle(dbapi_connection, record) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def ping(dbapi_connection, record, proxy) -> None:
        if time.monotonic() - record.info.get(_IDLE_SINCE, 0.0) < PING_AFTER_IDLE_S:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:  # the pool discards it and takes another
            raise DisconnectionError(f"A pooled connection was dropped: {exc}") from exc


def service_database_url(settings: Settings, owner_url: str) -> str:
    """The URL the service logs in with: ``MEMSYS_SERVICE_DATABASE_URL``, else the owner's as ``<database>_app``
    (app.db.roles) with no password (right for the embedded server's socket)."""
    if settings.service_database_url:
        return settings.service_database_url
    role = migrate.service_role_for(owner_url, None)
    return make_url(sqlalchemy_url(owner_url)).set(username=role, password=None).render_as_string(False)


def schema_ready(settings: Settings, owner_url: str) -> None:
    """Migrate if ``MEMSYS_MIGRATE_ON_START``, then refuse a schema this code does not match (never migrated, behind
    or ahead of it) in one line (``migrate.check_schema``): every command that opens memsys's tables does this."""
    if settings.migrate_on_start:
        migrate_schema(settings, owner_url)
    migrate.check_schema(owner_url)


def migrate_schema(settings: Settings, owner_url: str, *, set_service_password: bool = False) -> None:
    """Apply the migrations as the owner, the service role made or checked first and granted after (app.db.roles)."""
    require_a_session(settings, "Migrations")
    migrate.upgrade(
        owner_url,
        settings.embedding_dimensions,
        service_url=service_database_url(settings, owner_url),
        embedding_model=embedder_name(settings),
        set_service_password=set_service_password,
    )


def check_service_role(service_url: str) -> None:
    """Refuse a service login that row-level security would not hold (superuser or BYPASSRLS)."""
    engine = create_sync_engine(sqlalchemy_url(service_url), connect_args={"connect_timeout": 10})
    try:
        with engine.connect() as conn:
            user, unsafe = conn.execute(
                text("SELECT rolname, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
            ).one()
    finally:
        engine.dispose()
    if unsafe:
        raise ConfigurationError(
            f"The service logs in as {user!r}, a superuser or BYPASSRLS role, for which row-level security does "
            "not hold. Set MEMSYS_SERVICE_DATABASE_URL to a login of a role that is neither (`memsys migrate` "
            "makes and grants it: docs/managed-postgres.md)."
        )
