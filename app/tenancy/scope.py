"""The tenant of a transaction: the one place that issues ``SET LOCAL memsys.tenant_id``.

A tenant-scoped engine (``scoped(engine, tenant)``) shares the pool of the service's engine and carries the
tenant as an execution option; the ``begin`` listener that ``install`` puts on the engine sets it at the
start of every transaction, explicit or automatic. Row-level security compares ``tenant_id`` with that
setting (migration 0003), and new rows take it as their default: repositories never name the tenant. An
engine that is not scoped sets nothing, and then sees and writes nothing. ``SET LOCAL`` (not ``set_config``)
because Citus forwards it to its workers.

The same engine names the tenant in every SELECT, UPDATE and DELETE of a table of tenant data that the code
builds with SQLAlchemy (``tenant_id = :tenant``, added by a ``before_execute`` listener). Row-level security
would filter them anyway; on Citus the condition on the distribution column is what makes each a single-shard
task instead of one task per shard. The retrieval statement of ``sql/retrieval.sql`` names its tenant itself.
"""

from __future__ import annotations

import re

from sqlalchemy import Delete, Select, Table, Update, event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.selectable import Alias, FromClause, Join

from app.db.roles import quoted
from app.db.tables import TENANT_SETTING, TENANT_TABLES
from app.errors import InvalidParameter

DEFAULT_TENANT = "default"
TENANT_OPTION = "memsys_tenant"
_TENANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_tenant_id(tenant: str) -> str:
    """A tenant id: 1-64 letters, digits, ``_ . -``, starting with a letter or digit (as the schema checks)."""
    if not isinstance(tenant, str) or not _TENANT_ID.fullmatch(tenant):
        raise InvalidParameter(
            "Invalid tenant: 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return tenant


def install(engine: AsyncEngine) -> AsyncEngine:
    """Make every transaction of a scoped engine set its tenant, and its statements name it. Call once per
    engine."""
    event.listen(engine.sync_engine, "begin", _set_tenant)
    event.listen(engine.sync_engine, "before_execute", _name_tenant, retval=True)
    return engine


def scoped(engine: AsyncEngine, tenant: str) -> AsyncEngine:
    """A view of ``engine`` (same pool) whose transactions belong to ``tenant``."""
    return engine.execution_options(**{TENANT_OPTION: check_tenant_id(tenant)})


def tenant_of(conn: AsyncConnection) -> str | None:
    return conn.sync_connection.get_execution_options().get(TENANT_OPTION)


async def enter(conn: AsyncConnection, tenant: str, *, as_service: bool = False) -> None:
    """Move the rest of an owner's transaction into ``tenant`` (export and import span tenants in one).
    ``as_service``: make row-level security hold reads and updates too: row-level security does not hold the owner
    (nor a superuser), so the rest of the transaction runs as the service's role, the one ``service_role`` names
    (``leave`` returns to the owner; the owner is a member of it: app.db.roles)."""
    if as_service:
        # Read, then SET: on Citus a set_config('role', …) in a query may be run on a worker, where the table is not.
        role = (await conn.exec_driver_sql("SELECT name FROM service_role WHERE name <> current_user")).scalar()
        if role is not None:
            await conn.exec_driver_sql(f"SET LOCAL ROLE {quoted(role)}")
    await conn.exec_driver_sql(_set_local(tenant))


async def leave(conn: AsyncConnection) -> None:
    """Back to the owner's role (after ``enter(..., as_service=True)``) for the rest of the transaction."""
    await conn.exec_driver_sql("SET LOCAL ROLE NONE")


def _set_tenant(conn: Connection) -> None:
    tenant = conn.get_execution_options().get(TENANT_OPTION)
    if tenant is not None:
        conn.exec_driver_sql(_set_local(tenant))


def _name_tenant(conn: Connection, statement, multiparams, params, execution_options):
    tenant = {**conn.get_execution_options(), **execution_options}.get(TENANT_OPTION)
    if tenant is not None:
        if isinstance(statement, Update | Delete):
            statement = _where_tenant(statement, statement.table, tenant)
        elif isinstance(statement, Select):
            for source in statement.get_final_froms():
                for table in _tables(source):
                    statement = _where_tenant(statement, table, tenant)
    return statement, multiparams, params


def _tables(source: FromClause) -> list[FromClause]:
    """The tables (or aliases of tables) a FROM item reads directly, but not an outer join's optional side (its
    tenant in WHERE would drop the unmatched rows); a subquery's own are its own affair."""
    if isinstance(source, Join):
        left = [] if source.full else _tables(source.left)
        return left + ([] if source.isouter or source.full else _tables(source.right))
    return [source] if isinstance(source, Table | Alias) else []


def _where_tenant(statement, table: FromClause, tenant: str):
    named = table.element if isinstance(table, Alias) else table
    if isinstance(named, Table) and named.name in TENANT_TABLES:
        return statement.where(table.c.tenant_id == tenant)
    return statement


def _set_local(tenant: str) -> str:
    # SET takes no bind parameters; the id was checked against a pattern without quotes.
    return f"SET LOCAL {TENANT_SETTING} = '{check_tenant_id(tenant)}'"
