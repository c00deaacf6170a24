"""The HNSW graphs hold half-precision copies of the vectors (pgvector's ``halfvec``): the same neighbours, half the
pages to walk.

A search's vector leg walks ``hnsw.ef_search`` (800) candidates through the graph; at 100k memories in one scope
that walk was most of the statement (17 ms of 22). On graphs of ``embedding::halfvec`` (an expression index; the
column keeps its full-precision vectors) the same walk reads half the bytes: at 100k memories, ef_search 800, 9 ms
for the same exact-top-10 agreement (0.999), and ef_search 400 gives 0.997 at 4 ms. The vector leg orders its
candidates by the half-precision distance and reports the full-precision cosine (``sql/retrieval.sql``), so scores
are unchanged. The indexes keep their names; ``memsys reembed`` writes a new dimension into them.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from alembic import op

from app.db import online_ddl

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

MEMORY_TYPES = ("episode", "event_log", "semantic_memory")
XL_DIMENSIONS = 512


def _dimensions() -> int:
    return int(
        op.get_bind()
        .exec_driver_sql(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('memories') AND attname = 'embedding'"
        )
        .scalar()
    )


def _rebuild(half: bool) -> None:
    dimensions = {"embedding": _dimensions(), "embedding_xl": XL_DIMENSIONS}
    for column, size in dimensions.items():
        for memory_type in MEMORY_TYPES:
            name = f"ix_memories_{column}_hnsw_{memory_type}"
            indexed = f"({column}::halfvec({size})) halfvec_cosine_ops" if half else f"{column} vector_cosine_ops"
            online_ddl.build_index(
                name,
                f"ON memories USING hnsw ({indexed}) WITH (m = 32, ef_construction = 128) "
                f"WHERE memory_type = '{memory_type}'",
            )


def upgrade() -> None:
    _rebuild(half=True)


def downgrade() -> None:
    _rebuild(half=False)
