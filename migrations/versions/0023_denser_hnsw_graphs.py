"""Denser HNSW graphs: m 48 and ef_construction 200 (were 32 and 128, migration 0008).

At 1M memories the episodes' vector leg found 0.940 of the exact 20 at ``hnsw.ef_search`` 800 (pgvector's bound is
1,000, which found no more): three of 50 questions walked into a cluster of near-identical sentences and never left
it. On graphs built with more links per vector and a wider search while building, the same 50 questions find 1.000.
Rebuilding takes time in proportion to the memories (about 100 s per 100k memories of a type on 2 cores); the graphs
are a fifth larger. The indexes keep their names, expressions and conditions (migration 0019).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from alembic import op

from app.db import online_ddl

revision = "0023"
down_revision = "0022"
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


def _rebuild(m: int, ef_construction: int) -> None:
    for column, size in {"embedding": _dimensions(), "embedding_xl": XL_DIMENSIONS}.items():
        for memory_type in MEMORY_TYPES:
            name = f"ix_memories_{column}_hnsw_{memory_type}"
            online_ddl.build_index(
                name,
                f"ON memories USING hnsw (({column}::halfvec({size})) halfvec_cosine_ops) "
                f"WITH (m = {m}, ef_construction = {ef_construction}) WHERE memory_type = '{memory_type}'",
            )


def upgrade() -> None:
    _rebuild(48, 200)


def downgrade() -> None:
    _rebuild(32, 128)
