"""Agent memory: ``agent_case`` (how an agent did one task: its intent, approach, quality and key insight) and
``agent_skill`` (a way of working that recurred in several of an agent's cases) become memory types, with the same
per-type indexes as the others (an HNSW graph per vector, a GIN index of the BM25 text), built concurrently.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07
"""

from alembic import op

from app.db import online_ddl

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

OLD_TYPES = ("episode", "event_log", "semantic_memory")
NEW_TYPES = ("agent_case", "agent_skill")
XL_DIMENSIONS = 512


def _dimensions() -> int:
    return int(
        op.get_bind()
        .exec_driver_sql(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('memories') AND attname = 'embedding'"
        )
        .scalar()
    )


def _types_check(types: tuple[str, ...]) -> None:
    """The memory types' CHECK, under the name it has (migration 0001's, as its naming made it)."""
    name = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass('memories') AND contype = 'c' "
            "AND strpos(pg_get_constraintdef(oid), 'semantic_memory') > 0"
        )
        .scalar_one()
    )
    op.execute(f'ALTER TABLE memories DROP CONSTRAINT "{name}"')
    online_ddl.add_check("memories", f'"{name}"', f"memory_type IN ({', '.join(map(repr, types))})")


def upgrade() -> None:
    _types_check(OLD_TYPES + NEW_TYPES)
    for memory_type in NEW_TYPES:
        for column, size in {"embedding": _dimensions(), "embedding_xl": XL_DIMENSIONS}.items():
            online_ddl.build_index(
                f"ix_memories_{column}_hnsw_{memory_type}",
                f"ON memories USING hnsw (({column}::halfvec({size})) halfvec_cosine_ops) "
                f"WITH (m = 48, ef_construction = 200) WHERE memory_type = '{memory_type}'",
            )
        online_ddl.build_index(
            f"ix_memories_tsv_{memory_type}", f"ON memories USING gin (tsv) WHERE memory_type = '{memory_type}'"
        )


def downgrade() -> None:
    op.execute(f"DELETE FROM memories WHERE memory_type IN {NEW_TYPES!r}")
    for memory_type in NEW_TYPES:
        for name in (f"ix_memories_embedding_hnsw_{memory_type}", f"ix_memories_embedding_xl_hnsw_{memory_type}"):
            online_ddl.drop_index(name)
        online_ddl.drop_index(f"ix_memories_tsv_{memory_type}")
    _types_check(OLD_TYPES)
