"""Schema changes that do not stop the service: what migrations use on tables that can be large.

An index is built ``CONCURRENTLY`` (reads and writes go on while it is built) outside the migrations' transaction,
under a temporary name, and takes its final name once built, so a rebuilt index replaces the old one with a lock of
a moment. Every migration statement also runs under ``lock_timeout`` (migrations/env.py): a statement that would
queue behind a long query — and make every search queue behind it — gives up instead, and ``memsys migrate`` tries
again (app.db.migrate).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from alembic import op

from app.db.citus import on_citus


def build_index(name: str, definition: str) -> None:
    """``CREATE INDEX <name> <definition>`` (``definition`` from ``ON``), built concurrently; an index of that
    name already there is replaced once the new one is built."""
    if _citus():
        op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(f"CREATE INDEX {name} {definition}")
        return
    with op.get_context().autocommit_block(), _no_lock_timeout():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}_new")
        op.execute(f"CREATE INDEX CONCURRENTLY {name}_new {definition}")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"ALTER INDEX {name}_new RENAME TO {name}")


def drop_index(name: str) -> None:
    """``DROP INDEX`` without blocking reads and writes."""
    if _citus():
        op.execute(f"DROP INDEX IF EXISTS {name}")
        return
    with op.get_context().autocommit_block(), _no_lock_timeout():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def _citus() -> bool:
    """On Citus an index is built in the migrations' transaction, as before: the chain relies on settings made
    with SET LOCAL for the whole transaction (migration 0011's sequential mode), which a commit in between would end.
    Online index builds on a live Citus cluster are the operator's (docs/scaling.md)."""
    return on_citus(op.get_bind())


def add_check(table: str, name: str, condition: str) -> None:
    """A CHECK constraint added without scanning the table under an exclusive lock: added NOT VALID (a moment's
    lock), then validated (a scan that lets reads and writes go on)."""
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({condition}) NOT VALID")
    op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


@contextmanager
def _no_lock_timeout() -> Iterator[None]:
    """A concurrent build or drop waits for the transactions before it without blocking anyone: no need to give up."""
    bind = op.get_bind()
    before = bind.exec_driver_sql("SHOW lock_timeout").scalar()
    bind.exec_driver_sql("SET lock_timeout = 0")
    try:
        yield
    finally:
        bind.exec_driver_sql(f"SET lock_timeout = '{before}'")
