"""Vectors stay in the row: ``toast_tuple_target`` 8160 on ``memories`` and ``messages``.

PostgreSQL moves a row's largest values to its TOAST table once the row passes 2 kB (the default target). An
event-log memory with both vectors (1.5 kB main, 2 kB cross-lingual since migration 0014) is about 5 kB, so both
vectors went out of line, and every exact scan of a small scope (a group's memories, the pending messages) read
each vector through the TOAST index: a quarter of a search's time. With the target at a page's usable size
(8160 bytes, the largest PostgreSQL accepts) a row is toasted only when it would not fit a page, and then its
largest values first, as before. Measured on the LoCoMo dev split, one client, ``retrieve_lightweight`` rrf over
event logs in a conversation's group: p50 32.6 → 25.6 ms end to end (docs/benchmarks.md).

Rows written after this migration are laid out so; rows written before keep their vectors out of line until the
table is rewritten. This migration rewrites it (``VACUUM FULL``, which stores every row anew under the new target and
rebuilds the indexes) when the table holds at most ``REWRITE_MAX_BYTES`` (about 20,000 memories: seconds), outside
the migrations' transaction; a larger table, or one on Citus, is left to its operator: ``VACUUM FULL memories``
locks the table while it runs (docs/scaling.md).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TARGET = 8160
REWRITE_MAX_BYTES = 100 * 2**20


def _citus() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar())


def upgrade() -> None:
    for table in ("memories", "messages"):
        op.execute(f"ALTER TABLE {table} SET (toast_tuple_target = {TARGET})")
    bind = op.get_bind()
    size = bind.exec_driver_sql("SELECT pg_table_size('memories')").scalar()
    # Not `EXISTS (SELECT 1 FROM memories)`: an owner that row-level security holds sees no row there.
    rows = bind.exec_driver_sql("SELECT pg_relation_size('memories') > 0").scalar()
    if rows and size <= REWRITE_MAX_BYTES and not _citus():
        with op.get_context().autocommit_block():  # VACUUM runs outside a transaction
            op.execute("VACUUM FULL memories")


def downgrade() -> None:
    for table in ("memories", "messages"):
        op.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")
