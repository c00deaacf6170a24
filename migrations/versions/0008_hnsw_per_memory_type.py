"""One HNSW index per memory type (partial), in place of one over every memory.

Retrieval always filters by memory type. On one graph of every type, a search for episodes walks through
event-log and semantic entries it must skip, and on clustered memories it can settle in a region with no
episode near the query: unfiltered recall@20 against exact search was 0.79 at 100k memories and 0.54 at 1M.
A graph per type holds only what the query can return (the GIN indexes are per type for the same reason,
migration 0002), and m = 32, ef_construction = 128 (pgvector's defaults: 16, 64) link the clusters of
similar memories better: on the 1M benchmark, recall@20 with ef_search 400 went from 0.81 (defaults) to 0.95.
The price is a slower build (about 3x) and insert; formation inserts a few memories per MemCell.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

MEMORY_TYPES = ("episode", "event_log", "semantic_memory")


def upgrade() -> None:
    op.drop_index("ix_memories_embedding_hnsw", table_name="memories")
    for memory_type in MEMORY_TYPES:
        op.create_index(
            f"ix_memories_embedding_hnsw_{memory_type}",
            "memories",
            ["embedding"],
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
            postgresql_with={"m": 32, "ef_construction": 128},
            postgresql_where=f"memory_type = '{memory_type}'",
        )


def downgrade() -> None:
    for memory_type in MEMORY_TYPES:
        op.drop_index(f"ix_memories_embedding_hnsw_{memory_type}", table_name="memories")
    op.create_index(
        "ix_memories_embedding_hnsw",
        "memories",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
