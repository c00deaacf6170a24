"""An index that holds what the count behind a short answer's ``metadata.hidden`` reads, so it reads no memory row.

When a search answers with fewer than ``top_k`` memories, ``hidden_counts`` (``sql/retrieval.sql``) counts, over up
to 10,000 memories of the searched type, those the time range and the user/group filters left out. A memory's row
(its vectors in line, migration 0015) fills a third of a page or more, so the count read thousands of pages: 13 ms
at 1,000 rows, ~35 ms at 10,000 on a 1,000,000-memory table, more than the search itself. This index carries the
columns the count tests; the count becomes an index-only scan.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from app.db import online_ddl

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    online_ddl.build_index(
        "ix_memories_tenant_id_memory_type",
        "ON memories (tenant_id, memory_type) "
        "INCLUDE (user_id, group_id, timestamp, valid_from, valid_to, has_group_copy)",
    )


def downgrade() -> None:
    online_ddl.drop_index("ix_memories_tenant_id_memory_type")
