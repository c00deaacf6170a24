"""Initial schema: conversation metadata, message buffer, memcells, memories (HNSW + GIN), BM25 stats, profiles.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Statement-level triggers keep BM25's corpus statistics in the writing transaction. Rows are
# upserted in (memory_type, term) order so that concurrent writers lock them in the same order.
BM25_TRIGGERS = """
CREATE FUNCTION memsys_bm25_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bm25_corpus_stats AS c (memory_type, doc_count, total_len)
    SELECT memory_type, count(*), sum(doc_len) FROM new_rows GROUP BY memory_type ORDER BY memory_type
    ON CONFLICT (memory_type) DO UPDATE
        SET doc_count = c.doc_count + EXCLUDED.doc_count, total_len = c.total_len + EXCLUDED.total_len;
    INSERT INTO bm25_term_stats AS t (memory_type, term, df)
    SELECT n.memory_type, l.term, count(*)
    FROM new_rows n CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS l(term)
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (memory_type, term) DO UPDATE SET df = t.df + EXCLUDED.df;
    RETURN NULL;
END $$;

CREATE FUNCTION memsys_bm25_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bm25_corpus_stats c
    SET doc_count = c.doc_count - o.n, total_len = c.total_len - o.len
    FROM (SELECT memory_type, count(*) AS n, sum(doc_len) AS len FROM old_rows GROUP BY memory_type) o
    WHERE c.memory_type = o.memory_type;
    UPDATE bm25_term_stats t
    SET df = t.df - o.n
    FROM (
        SELECT r.memory_type, l.term, count(*) AS n
        FROM old_rows r CROSS JOIN LATERAL unnest(tsvector_to_array(r.tsv)) AS l(term)
        GROUP BY 1, 2
    ) o
    WHERE t.memory_type = o.memory_type AND t.term = o.term;
    DELETE FROM bm25_term_stats WHERE df <= 0;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_bm25_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memsys_bm25_add();
CREATE TRIGGER memories_bm25_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memsys_bm25_remove();
CREATE TRIGGER memories_bm25_update_old AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memsys_bm25_remove();
CREATE TRIGGER memories_bm25_update_new AFTER UPDATE ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memsys_bm25_add();
"""


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False)


def _uuid_pk() -> sa.Column:
    return sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False)


def upgrade() -> None:
    dimensions = int(context.config.attributes.get("embedding_dimensions", 384))
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "conversation_meta",
        _uuid_pk(),
        sa.Column("group_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("scene", sa.Text(), nullable=False),
        sa.Column("scene_desc", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("default_timezone", sa.Text(), nullable=False),
        sa.Column("user_details", postgresql.JSONB(), nullable=False),
        sa.Column("tags", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_conversation_meta"),
        sa.UniqueConstraint("group_id", name="uq_conversation_meta_group_id"),
    )

    op.create_table(
        "memcells",
        _uuid_pk(),
        sa.Column("stream_kind", sa.Text(), nullable=False),
        sa.Column("stream_id", sa.Text(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=True),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message_ids", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("participants", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("boundary_reason", sa.Text(), nullable=False),
        sa.Column("topic_summary", sa.Text(), nullable=True),
        sa.Column("extraction_mode", sa.Text(), nullable=False),
        _created_at(),
        sa.CheckConstraint("stream_kind IN ('group', 'personal')", name="ck_memcells_stream_kind"),
        sa.CheckConstraint("extraction_mode IN ('llm', 'offline')", name="ck_memcells_extraction_mode"),
        sa.PrimaryKeyConstraint("id", name="pk_memcells"),
    )
    op.create_index("ix_memcells_stream_kind_stream_id_end_time", "memcells", ["stream_kind", "stream_id", "end_time"])

    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("stream_kind", sa.Text(), nullable=False),
        sa.Column("stream_id", sa.Text(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=True),
        sa.Column("group_name", sa.Text(), nullable=True),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sender", sa.Text(), nullable=False),
        sa.Column("sender_name", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("refer_list", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("boundary_checked", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("extract_attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("memcell_id", sa.Uuid(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("stream_kind IN ('group', 'personal')", name="ck_messages_stream_kind"),
        sa.CheckConstraint("status IN ('pending', 'processed')", name="ck_messages_status"),
        sa.ForeignKeyConstraint(
            ["memcell_id"], ["memcells.id"], name="fk_messages_memcell_id_memcells", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.UniqueConstraint(
            "stream_kind", "stream_id", "message_id", name="uq_messages_stream_kind_stream_id_message_id"
        ),
    )
    op.create_index(
        "ix_messages_pending",
        "messages",
        ["stream_kind", "stream_id", "create_time"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_messages_memcell_id", "messages", ["memcell_id"])

    op.create_table(
        "memories",
        _uuid_pk(),
        sa.Column("memory_type", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("group_id", sa.Text(), nullable=True),
        sa.Column("memcell_id", sa.Uuid(), nullable=False),
        sa.Column("source_message_ids", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_from", sa.Date(), nullable=True),
        sa.Column("valid_to", sa.Date(), nullable=True),
        sa.Column("metadata", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("search_tokens", sa.Text(), nullable=False),
        sa.Column(
            "tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('simple'::regconfig, search_tokens)", persisted=True),
            nullable=True,
        ),
        sa.Column(
            "doc_len",
            sa.Integer(),
            sa.Computed("COALESCE(array_length(string_to_array(search_tokens, ' '::text), 1), 0)", persisted=True),
            nullable=True,
        ),
        sa.Column("embedding", pgvector.sqlalchemy.Vector(dimensions), nullable=False),
        _created_at(),
        sa.CheckConstraint(
            "memory_type IN ('episode', 'event_log', 'semantic_memory')", name="ck_memories_memory_type"
        ),
        sa.CheckConstraint(
            "valid_from IS NULL OR valid_to IS NULL OR valid_from <= valid_to", name="ck_memories_validity"
        ),
        sa.ForeignKeyConstraint(
            ["memcell_id"], ["memcells.id"], name="fk_memories_memcell_id_memcells", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
    )
    op.create_index(
        "ix_memories_embedding_hnsw",
        "memories",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index("ix_memories_tsv", "memories", ["tsv"], postgresql_using="gin")
    op.create_index("ix_memories_memory_type_group_id_timestamp", "memories", ["memory_type", "group_id", "timestamp"])
    op.create_index("ix_memories_memory_type_user_id_timestamp", "memories", ["memory_type", "user_id", "timestamp"])
    op.create_index("ix_memories_memcell_id", "memories", ["memcell_id"])

    op.create_table(
        "bm25_corpus_stats",
        sa.Column("memory_type", sa.Text(), nullable=False),
        sa.Column("doc_count", sa.BigInteger(), nullable=False),
        sa.Column("total_len", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("memory_type", name="pk_bm25_corpus_stats"),
    )
    op.create_table(
        "bm25_term_stats",
        sa.Column("memory_type", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("df", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("memory_type", "term", name="pk_bm25_term_stats"),
    )
    op.execute(BM25_TRIGGERS)

    op.create_table(
        "profiles",
        _uuid_pk(),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("profile", postgresql.JSONB(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("memcell_id", sa.Uuid(), nullable=True),
        _created_at(),
        sa.CheckConstraint("source IN ('llm', 'derived')", name="ck_profiles_source"),
        sa.ForeignKeyConstraint(
            ["memcell_id"], ["memcells.id"], name="fk_profiles_memcell_id_memcells", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_profiles"),
        sa.UniqueConstraint(
            "user_id",
            "group_id",
            "version",
            name="uq_profiles_user_id_group_id_version",
            postgresql_nulls_not_distinct=True,
        ),
    )


def downgrade() -> None:
    op.drop_table("profiles")
    op.execute("DROP TRIGGER IF EXISTS memories_bm25_insert ON memories")
    op.execute("DROP TRIGGER IF EXISTS memories_bm25_delete ON memories")
    op.execute("DROP TRIGGER IF EXISTS memories_bm25_update_old ON memories")
    op.execute("DROP TRIGGER IF EXISTS memories_bm25_update_new ON memories")
    op.execute("DROP FUNCTION IF EXISTS memsys_bm25_add()")
    op.execute("DROP FUNCTION IF EXISTS memsys_bm25_remove()")
    op.drop_table("bm25_term_stats")
    op.drop_table("bm25_corpus_stats")
    op.drop_table("memories")
    op.drop_table("messages")
    op.drop_table("memcells")
    op.drop_table("conversation_meta")
