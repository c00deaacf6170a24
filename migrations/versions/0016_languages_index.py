"""An index of the memories' languages: a search runs the cross-lingual HNSW scan only when it can find something.

The cross-lingual vector leg (migration 0014) ranks a memory only when it is written in another language than the
query's (``sql/retrieval.sql``, ``crossed``). When the searched scope holds no such memory its HNSW scan is wasted,
and at ``ef_search`` 800 it doubled the time of a search over 100,000 English memories (77 ms against 36 ms,
docs/benchmarks.md). The statement first asks this index whether the scope holds a memory of the searched type in
another language, and skips the scan (and the cross-lingual distances of the main leg) when it does not.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from app.db import online_ddl

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    online_ddl.build_index(
        "ix_memories_tenant_id_memory_type_language_group_id",
        "ON memories (tenant_id, memory_type, language, group_id) INCLUDE (user_id)",
    )


def downgrade() -> None:
    online_ddl.drop_index("ix_memories_tenant_id_memory_type_language_group_id")
