"""Scopes beyond user and group, and the caller's own metadata (EverOS's v2 API, and v3's ``filters``).

``messages`` and ``memories`` gain ``app_id`` and ``project_id`` ('default' unless a caller names them), ``agent_id``
(the agent a conversation was with: an assistant's sender on v2) and ``session_id`` (v2's conversation; a v3 group's
id unless the caller names another), and ``custom_metadata``: the JSON object a caller attaches to a message, carried
to the memories formed from it. ``memories.metadata`` stays memsys's own (facts, extraction details): a caller's
filter reads only ``custom_metadata``. Adding a column with a constant default rewrites nothing; the indexes are
built concurrently (app.db.online_ddl). ``tenant_memories`` (migration 0026), which the bounded BM25 leg reads, gains
the new columns: a caller's filter is in every leg. Its conditions (app.retrieval.filters) are jsonb containment,
extraction and comparison, ``strpos`` and casts of bound parameters: none raises on a row's value, so evaluated beside
the view's tenant rule they reveal nothing of another tenant's rows.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07
"""

from alembic import op

from app.db import online_ddl
from app.db.roles import quoted_role_in_migration

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

TABLES = ("messages", "memories")
SCOPE_COLUMNS = ("app_id", "project_id", "agent_id", "session_id", "custom_metadata")
# Migration 0026's view, as it was (a migration is a snapshot of its time).
VIEW_COLUMNS = (
    "tenant_id",
    "id",
    "memory_type",
    "user_id",
    "group_id",
    "has_group_copy",
    "valid_from",
    "valid_to",
    "status",
    "superseded_at",
    "expires_at",
    "timestamp",
    "doc_len",
    "tsv",
)
CURRENT_TENANT = "NULLIF(current_setting('memsys.tenant_id', true), '')"


def _view(columns: tuple[str, ...]) -> str:
    return (
        f"CREATE OR REPLACE VIEW tenant_memories AS SELECT {', '.join(columns)} FROM memories "
        f"WHERE tenant_id = {CURRENT_TENANT}"
    )


def upgrade() -> None:
    for table in TABLES:
        op.execute(
            f"""
            ALTER TABLE {table}
                ADD COLUMN app_id text NOT NULL DEFAULT 'default',
                ADD COLUMN project_id text NOT NULL DEFAULT 'default',
                ADD COLUMN agent_id text,
                ADD COLUMN session_id text,
                ADD COLUMN custom_metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb
            """
        )
    op.execute(_view(VIEW_COLUMNS + SCOPE_COLUMNS))
    online_ddl.build_index("ix_memories_custom_metadata", "ON memories USING gin (custom_metadata jsonb_path_ops)")
    online_ddl.build_index(
        "ix_memories_agent", "ON memories (tenant_id, memory_type, agent_id, timestamp) WHERE agent_id IS NOT NULL"
    )
    online_ddl.build_index(
        "ix_memories_session",
        "ON memories (tenant_id, memory_type, session_id, timestamp) WHERE session_id IS NOT NULL",
    )
    online_ddl.build_index("ix_messages_session", "ON messages (tenant_id, session_id) WHERE session_id IS NOT NULL")


def downgrade() -> None:
    for name in ("ix_messages_session", "ix_memories_session", "ix_memories_agent", "ix_memories_custom_metadata"):
        online_ddl.drop_index(name)
    op.execute("DROP VIEW tenant_memories")
    op.execute(_view(VIEW_COLUMNS))
    op.execute("GRANT SELECT ON tenant_memories TO " + quoted_role_in_migration())
    for table in TABLES:
        op.execute(
            f"ALTER TABLE {table} DROP COLUMN app_id, DROP COLUMN project_id, DROP COLUMN agent_id, "
            "DROP COLUMN session_id, DROP COLUMN custom_metadata"
        )
