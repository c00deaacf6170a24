"""A database that ran the retired revision 0015 gets main's 0015.

One commit of memsys's history (4cc0fb6, soon reverted) numbered a different migration 0015: it added
``messages.embedding_digest``. A database migrated by that commit records revision 0015, so upgrading it skipped
main's 0015 (``toast_tuple_target`` on ``memories`` and ``messages``) without a word. This migration finds the
retired migration's column and, where it is, does what main's 0015 does (the setting; the rewrite of the table is
left to its operator, as 0015 leaves a large one: docs/operations.md) and drops the column, which no code reads.
tests/test_migrations.py checks that every revision id is its file's number, unique, and one step after the one
before it (a linear chain).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

TARGET = 8160  # as migration 0015


def upgrade() -> None:
    retired = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT 1 FROM pg_attribute WHERE attrelid = 'messages'::regclass AND attname = 'embedding_digest' "
            "AND NOT attisdropped"
        )
        .scalar()
    )
    if retired:
        for table in ("memories", "messages"):
            op.execute(f"ALTER TABLE {table} SET (toast_tuple_target = {TARGET})")
        op.execute("ALTER TABLE messages DROP COLUMN embedding_digest")


def downgrade() -> None:
    pass  # nothing to undo: main's 0015 setting stays, as on every database that ran main's 0015
