"""A memory's life: its status, what superseded it, when it expires, and an append-only history of every event.

``memories`` gains ``status`` (``current``, ``superseded``, ``deleted``, ``expired``; every existing memory is
current), ``superseded_by`` (the memory that holds the newer value), ``superseded_at`` (that memory's time: ``as_of``
searches compare with it), ``expires_at`` (a memory is not found after it; the sweep marks it expired) and
``deleted_at`` (a soft delete's time: the purge removes it for good after ``MEMSYS_DELETED_RETENTION_DAYS``).
``ix_memories_facts`` finds the memories stating facts about a user (``metadata.facts``, supersession's candidates).
Searches read current memories only by default (``sql/retrieval.sql``'s ``in_scope``); the memories that are not
current, or that will expire, are few and sit in a partial index, which ``lifecycle_hidden`` counts from.

``memory_history`` records each event of a memory (formed, superseded, suggested, restated, edited, deleted,
restored, expired, reembedded, purged, rejected) with when, by what (``actor``) and why (``reason``, ``details``).
It is append-only for the service's role: SELECT and INSERT, and DELETE only for ``forget`` and the purge (no
UPDATE). Tenant data like the others: ``tenant_id`` leads the key, row-level security ENABLE + FORCE with the same
policy; on Citus distributed by ``tenant_id``, co-located with ``memcells`` (migration 0013's pattern). It holds no
foreign key to ``memories``: a purged memory's tombstone outlives it.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02
"""

from alembic import op

from app.db import online_ddl
from app.db.roles import quoted_role_in_migration

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('memsys.tenant_id', true), '')"
EVENTS = (
    "formed",
    "superseded",
    "suggested",
    "restated",
    "edited",
    "deleted",
    "restored",
    "expired",
    "reembedded",
    "purged",
    "rejected",
)


def _citus() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar())


def upgrade() -> None:
    citus = _citus()
    if citus:
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute(
        "ALTER TABLE memories "
        "ADD COLUMN status text NOT NULL DEFAULT 'current', "
        "ADD COLUMN superseded_by uuid, "
        "ADD COLUMN superseded_at timestamptz, "
        "ADD COLUMN expires_at timestamptz, "
        "ADD COLUMN deleted_at timestamptz"
    )
    online_ddl.add_check("memories", "ck_memories_status", "status IN ('current', 'superseded', 'deleted', 'expired')")
    events = ", ".join(f"'{event}'" for event in EVENTS)
    op.execute(
        f"""
        CREATE TABLE memory_history (
            tenant_id text NOT NULL DEFAULT {CURRENT_TENANT},
            id bigint GENERATED ALWAYS AS IDENTITY,
            memory_id uuid NOT NULL,
            user_id text,
            event text NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            actor text NOT NULL,
            reason text,
            details jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            CONSTRAINT pk_memory_history PRIMARY KEY (tenant_id, id),
            CONSTRAINT ck_memory_history_event CHECK (event IN ({events}))
        )
        """
    )
    op.execute("CREATE INDEX ix_memory_history_tenant_id_memory_id ON memory_history (tenant_id, memory_id, id)")
    op.execute("CREATE INDEX ix_memory_history_tenant_id_user_id ON memory_history (tenant_id, user_id)")
    op.execute("ALTER TABLE memory_history ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_history FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON memory_history USING (tenant_id = {CURRENT_TENANT}) "
        f"WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, DELETE ON memory_history TO {quoted_role_in_migration()}")
    if citus:
        op.execute("SELECT create_distributed_table('memory_history', 'tenant_id', colocate_with => 'memcells')")
    op.execute(
        "ALTER TABLE memory_history ADD CONSTRAINT fk_memory_history_tenant_id_tenants FOREIGN KEY (tenant_id) "
        "REFERENCES tenants (tenant_id) ON DELETE CASCADE"
    )
    # The indexes last, built concurrently (each commits what came before it: app.db.online_ddl).
    online_ddl.build_index(
        "ix_memories_not_current",
        "ON memories (tenant_id, memory_type, user_id, group_id) "
        "INCLUDE (status, expires_at, has_group_copy) WHERE status <> 'current' OR expires_at IS NOT NULL",
    )
    # The count behind a short answer's metadata.hidden tests a memory's life too: migration 0021's index carries it,
    # so that the count still reads no memory row.
    online_ddl.build_index(
        "ix_memories_tenant_id_memory_type",
        "ON memories (tenant_id, memory_type) INCLUDE "
        "(user_id, group_id, timestamp, valid_from, valid_to, has_group_copy, status, superseded_at, expires_at)",
    )
    # The memories stating facts about a user, wherever they are (supersession's candidates).
    online_ddl.build_index(
        "ix_memories_facts", "ON memories USING gin ((metadata -> 'facts') jsonb_path_ops) WHERE metadata ? 'facts'"
    )


def downgrade() -> None:
    op.execute("DROP TABLE memory_history")
    op.execute("DROP INDEX ix_memories_not_current")
    op.execute("DROP INDEX ix_memories_facts")
    op.execute("DROP INDEX ix_memories_tenant_id_memory_type")
    op.execute(
        "CREATE INDEX ix_memories_tenant_id_memory_type ON memories (tenant_id, memory_type) "
        "INCLUDE (user_id, group_id, timestamp, valid_from, valid_to, has_group_copy)"
    )
    op.execute(
        "ALTER TABLE memories DROP CONSTRAINT ck_memories_status, DROP COLUMN status, DROP COLUMN superseded_by, "
        "DROP COLUMN superseded_at, DROP COLUMN expires_at, DROP COLUMN deleted_at"
    )
