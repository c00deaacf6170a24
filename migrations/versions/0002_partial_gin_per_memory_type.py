"""BM25 candidates per memory type: one partial GIN index on tsv per memory_type instead of one for all.

Retrieval always filters by memory_type, so the GIN index of that type alone hands back only rows of the
type: at 1M memories half or more of the heap rows the global index made the BM25 leg fetch were of
another type.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MEMORY_TYPES = ("episode", "event_log", "semantic_memory")


def upgrade() -> None:
    op.drop_index("ix_memories_tsv", table_name="memories", postgresql_using="gin")
    for memory_type in MEMORY_TYPES:
        op.execute(
            f"CREATE INDEX ix_memories_tsv_{memory_type} ON memories USING gin (tsv) "
            f"WHERE memory_type = '{memory_type}'"
        )


def downgrade() -> None:
    for memory_type in MEMORY_TYPES:
        op.drop_index(f"ix_memories_tsv_{memory_type}", table_name="memories")
    op.execute("CREATE INDEX ix_memories_tsv ON memories USING gin (tsv)")
