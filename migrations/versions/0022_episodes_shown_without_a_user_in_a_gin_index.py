"""The episodes a search without a user shows, in a GIN index of their own.

A search of episodes without a user shows a group episode once, the group's copy: a participant's copy whose MemCell
holds the group's copy is left out (``memories.has_group_copy``, migration 0020). Formation writes a copy per
participant, so most episodes are such copies (85% of the 1M benchmark's): the BM25 leg's candidates, found in the
episodes' GIN index, were mostly read from the table only to be dropped, and its 1,000 candidates meant reading
several thousand rows. This index holds only the episodes such a search can show; the planner takes it when the
statement is planned for that search (``NOT m.has_group_copy`` once ``:one_copy`` is true). SQL level at 1M, 60
episode searches without a user (``rrf``): 25.9 → 17.3 ms.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from app.db import online_ddl

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    online_ddl.build_index(
        "ix_memories_tsv_episode_one_copy",
        "ON memories USING gin (tsv) WHERE memory_type = 'episode' AND NOT has_group_copy",
    )


def downgrade() -> None:
    online_ddl.drop_index("ix_memories_tsv_episode_one_copy")
