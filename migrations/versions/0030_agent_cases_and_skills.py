"""Agent memory: ``agent_case`` (how an agent did one task: its intent, approach, quality and key insight) and
``agent_skill`` (a way of working that recurred in several of an agent's cases) become memory types, with the same
per-type indexes as the others (an HNSW graph per vector, a GIN index of the BM25 text), built concurrently.
A profile version may also come from an edit (``profiles.source`` 'edited': EverOS v2's profile operations).

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


def _replace_check(table: str, column: str, values: tuple[str, ...]) -> None:
    """``column``'s list CHECK on ``table``, under the name it has (migration 0001's, as its naming made it)."""
    name = (
        op.get_bind()
        .exec_driver_sql(
            f"SELECT conname FROM pg_constraint WHERE conrelid = to_regclass('{table}') AND contype = 'c' "
            f"AND strpos(pg_get_constraintdef(oid), '{values[0]}') > 0"
        )
        .scalar_one()
    )
    op.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    online_ddl.add_check(table, f'"{name}"', f"{column} IN ({', '.join(map(repr, values))})")


def _types_check(types: tuple[str, ...]) -> None:
    _replace_check("memories", "memory_type", types)


def upgrade() -> None:
    _types_check(OLD_TYPES + NEW_TYPES)
    _replace_check("profiles", "source", ("llm", "derived", "edited"))
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
    op.execute("DELETE FROM profiles WHERE source = 'edited'")
    _replace_check("profiles", "source", ("llm", "derived"))
