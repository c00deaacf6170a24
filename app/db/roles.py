"""The service's role: which one, making it, and exactly what it may do.

memsys logs in twice: as the **owner** (``MEMSYS_DATABASE_URL``), who owns the schema and runs the migrations and the
admin commands, and as the **service role** (``MEMSYS_SERVICE_DATABASE_URL``'s user), which serves requests and which
row-level security holds. The service role is per deployment: its name is the service URL's user, by default
``<database>_app`` (``memsys_app`` for a database named ``memsys``, or the embedded server's ``postgres``), so two
memsys databases on one cluster never share a role or a password.

``memsys migrate`` (and ``serve`` with migrate-on-start) calls ``prepare`` before the migrations and ``grant`` after
them: the role is made when missing and the owner may make roles (its password the service URL's, if it has one),
the owner is made a member (admin commands act as the service with ``SET LOCAL ROLE``), and the role gets
``SERVICE_PRIVILEGES``, nothing more. When the owner may not do a step, ``ServiceRoleMissing`` says what an
administrator must run. A password is set only when the role is made, or when asked (``--set-service-password``).
"""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.engine import Connection, make_url

from app.db.citus import on_citus
from app.db.embedded import sqlalchemy_url
from app.db.tables import QUEUE_TABLES, SEQUENCES, TENANT_TABLES
from app.errors import ConfigurationError

LEGACY_ROLE = "memsys_app"
"""The one role of memsys before the name became per deployment (migration 0003 made it)."""

# (privileges, kind of object, objects): what the service role may do, in the order an administrator would grant it.
SERVICE_PRIVILEGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("USAGE", "SCHEMA", ("public",)),
    ("SELECT, INSERT, UPDATE, DELETE", "TABLE", (*(t for t in TENANT_TABLES if t != "memory_history"), *QUEUE_TABLES)),
    # The history is append-only for the service (DELETE: forget and the purge); a sign-in is made and ended.
    ("SELECT, INSERT, DELETE", "TABLE", ("memory_history", "inspector_sessions")),
    ("SELECT", "TABLE", ("tenants", "api_keys", "alembic_version", "service_role", "tenant_memories")),
    ("USAGE, SELECT", "SEQUENCE", SEQUENCES),
)
_NOT_IDENTIFIER = re.compile(r"[^a-z0-9_]+")


class ServiceRoleMissing(ConfigurationError):
    """The owner may not make the service role or grant it to itself: an administrator must."""


def default_service_role(database: str) -> str:
    """``<database>_app`` as an identifier (lower case, letters, digits and ``_``, at most 63 bytes); ``memsys_app``
    for a database named ``memsys`` or ``postgres`` (the embedded server's), as before names were per deployment."""
    name = _NOT_IDENTIFIER.sub("_", database.lower()).strip("_")
    if name in ("", "memsys", "postgres"):
        return LEGACY_ROLE
    return f"{name[:59]}_app"


def service_role_of(service_url: str) -> str:
    """The role a service URL logs in as."""
    role = make_url(sqlalchemy_url(service_url)).username
    if not role:
        raise ConfigurationError("MEMSYS_SERVICE_DATABASE_URL names no user: give the service role's login in it")
    return role


def grant_statements(role: str) -> list[str]:
    """The GRANT statements that give ``role`` what the service needs (docs/managed-postgres.md lists them)."""
    return [
        f"GRANT {privileges} ON {'' if kind == 'TABLE' else kind + ' '}{', '.join(objects)} TO {quoted(role)}"
        for privileges, kind, objects in SERVICE_PRIVILEGES
    ]


def prepare(conn: Connection, role: str, password: str | None, *, set_password: bool = False) -> None:
    """Before the migrations, as the owner: the role exists and is safe, and the owner may act as it."""
    found = conn.execute(
        text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = :role"), {"role": role}
    ).first()
    owner = conn.execute(
        text("SELECT current_user, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user")
    ).one()
    if found is None:
        if not (owner.rolsuper or owner.rolcreaterole):
            raise ServiceRoleMissing(_admin_must(role, owner.current_user, create=True))
        conn.execute(text(f"CREATE ROLE {quoted(role)} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"))
        set_password = password is not None
    elif found[0]:
        raise ConfigurationError(
            f"The service role {role!r} is a superuser or BYPASSRLS, for which row-level security does not hold: "
            "give the service a role that is neither (MEMSYS_SERVICE_DATABASE_URL)."
        )
    if set_password and password is not None:
        literal = conn.execute(text("SELECT quote_literal(:p)"), {"p": password}).scalar_one()
        conn.execute(text(f"ALTER ROLE {quoted(role)} PASSWORD {literal}"))
    if not owner.rolsuper and not _may_act_as(conn, owner.current_user, role):
        # From PostgreSQL 16 a role's creator administers it but may not act as it until it grants itself that.
        with_set = " WITH SET TRUE" if conn.dialect.server_version_info >= (16,) else ""
        try:
            with conn.begin_nested():
                conn.execute(text(f"GRANT {quoted(role)} TO {quoted(owner.current_user)}{with_set}"))
        except Exception as exc:  # noqa: BLE001 - any refusal means an administrator must grant it
            raise ServiceRoleMissing(_admin_must(role, owner.current_user, create=False)) from exc


def grant(conn: Connection, role: str) -> None:
    """After the migrations, as the owner: the role gets ``SERVICE_PRIVILEGES`` and is recorded as the service's."""
    if on_citus(conn):
        # Grants on distributed and reference tables in one transaction: one connection per node (as migration 0011).
        conn.execute(text("SET LOCAL citus.multi_shard_modify_mode = 'sequential'"))
    for statement in grant_statements(role):
        conn.execute(text(statement))
    conn.execute(text("DELETE FROM service_role"))
    conn.execute(text("INSERT INTO service_role (name) VALUES (:role)"), {"role": role})


def _may_act_as(conn: Connection, member: str, role: str) -> bool:
    """Whether ``member`` may ``SET ROLE`` to ``role`` (PostgreSQL 16's SET option; before it, membership)."""
    option = "SET" if conn.dialect.server_version_info >= (16,) else "MEMBER"
    return bool(
        conn.execute(text(f"SELECT pg_has_role(:member, :role, '{option}')"), {"member": member, "role": role}).scalar()
    )


def _admin_must(role: str, owner: str, *, create: bool) -> str:
    steps = []
    if create:
        steps.append(f"CREATE ROLE {quoted(role)} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '<password>';")
    steps.append(f"GRANT {quoted(role)} TO {quoted(owner)};")
    why = "may not create roles (no CREATEROLE)" if create else f"may not make itself a member of {role!r}"
    return (
        f"The owner {owner!r} {why}. An administrator runs, once: {' '.join(steps)} Then run `memsys migrate` "
        "again: it grants the role what the service needs (docs/managed-postgres.md)."
    )


def quoted(identifier: str) -> str:
    """An identifier quoted for SQL."""
    return '"' + identifier.replace('"', '""') + '"'


def role_in_migration() -> str:
    """The service role's name inside a migration (app.db.migrate puts it in Alembic's configuration; a bare
    ``alembic`` run has the name of earlier versions)."""
    from alembic import context

    return context.config.attributes.get("service_role", LEGACY_ROLE)


def quoted_role_in_migration() -> str:
    """``role_in_migration``, quoted: what a migration's GRANT names."""
    return quoted(role_in_migration())
