"""Tenants, API keys and row-level security: every row of tenant data belongs to a tenant.

* ``tenants`` and ``api_keys`` (keys stored as SHA-256 only).
* ``tenant_id`` on every table of tenant data, leading its primary key, unique constraints, foreign keys
  and btree indexes; it defaults to the transaction's ``memsys.tenant_id`` setting. Existing rows belong to
  the tenant ``default``.
* Row-level security ENABLE + FORCE on those tables, one policy each: ``tenant_id`` equals the setting
  (``SET LOCAL`` by app.tenancy). Without the setting a query sees and writes nothing.
* BM25 statistics are kept per tenant (the triggers group by tenant_id).
* The service's role (``memsys_app`` then; the deployment's now: app.db.roles), created if missing, gets
  DML on tenant data and read access to ``api_keys``; migrations keep running as the owner.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

from app.db.roles import quoted_role_in_migration, role_in_migration

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_TABLES = (
    "conversation_meta",
    "memcells",
    "messages",
    "memories",
    "bm25_corpus_stats",
    "bm25_term_stats",
    "profiles",
)
CURRENT_TENANT = "NULLIF(current_setting('memsys.tenant_id', true), '')"
MEMORY_TYPES = ("episode", "event_log", "semantic_memory")

BM25_TRIGGERS = """
CREATE OR REPLACE FUNCTION memsys_bm25_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bm25_corpus_stats AS c (tenant_id, memory_type, doc_count, total_len)
    SELECT tenant_id, memory_type, count(*), sum(doc_len) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (tenant_id, memory_type) DO UPDATE
        SET doc_count = c.doc_count + EXCLUDED.doc_count, total_len = c.total_len + EXCLUDED.total_len;
    INSERT INTO bm25_term_stats AS t (tenant_id, memory_type, term, df)
    SELECT n.tenant_id, n.memory_type, l.term, count(*)
    FROM new_rows n CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS l(term)
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, memory_type, term) DO UPDATE SET df = t.df + EXCLUDED.df;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memsys_bm25_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bm25_corpus_stats c
    SET doc_count = c.doc_count - o.n, total_len = c.total_len - o.len
    FROM (SELECT tenant_id, memory_type, count(*) AS n, sum(doc_len) AS len FROM old_rows GROUP BY 1, 2) o
    WHERE c.tenant_id = o.tenant_id AND c.memory_type = o.memory_type;
    UPDATE bm25_term_stats t
    SET df = t.df - o.n
    FROM (
        SELECT r.tenant_id, r.memory_type, l.term, count(*) AS n
        FROM old_rows r CROSS JOIN LATERAL unnest(tsvector_to_array(r.tsv)) AS l(term)
        GROUP BY 1, 2, 3
    ) o
    WHERE t.tenant_id = o.tenant_id AND t.memory_type = o.memory_type AND t.term = o.term;
    DELETE FROM bm25_term_stats WHERE df <= 0;
    RETURN NULL;
END $$;
"""

BM25_TRIGGERS_BEFORE = """
CREATE OR REPLACE FUNCTION memsys_bm25_add() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION memsys_bm25_remove() RETURNS trigger LANGUAGE plpgsql AS $$
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
"""

# (table, constraint, definition) before and after: keys and foreign keys gain tenant_id in front.
CONSTRAINTS = [
    ("conversation_meta", "pk_conversation_meta", "PRIMARY KEY ({t}id)"),
    ("conversation_meta", "uq_conversation_meta_group_id", "UNIQUE ({t}group_id)"),
    ("memcells", "pk_memcells", "PRIMARY KEY ({t}id)"),
    ("messages", "pk_messages", "PRIMARY KEY ({t}id)"),
    ("messages", "uq_messages_stream_kind_stream_id_message_id", "UNIQUE ({t}stream_kind, stream_id, message_id)"),
    ("memories", "pk_memories", "PRIMARY KEY ({t}id)"),
    ("bm25_corpus_stats", "pk_bm25_corpus_stats", "PRIMARY KEY ({t}memory_type)"),
    ("bm25_term_stats", "pk_bm25_term_stats", "PRIMARY KEY ({t}memory_type, term)"),
    ("profiles", "pk_profiles", "PRIMARY KEY ({t}id)"),
    ("profiles", "uq_profiles_user_id_group_id_version", "UNIQUE NULLS NOT DISTINCT ({t}user_id, group_id, version)"),
]
FOREIGN_KEYS = [
    ("messages", "SET NULL"),
    ("memories", "CASCADE"),
    ("profiles", "SET NULL"),
]
# (old name, new name, table, columns after tenant_id, WHERE)
INDEXES = [
    ("ix_memcells_stream_kind_stream_id_end_time", "ix_memcells_tenant_id_stream_kind_stream_id_end_time",
     "memcells", "stream_kind, stream_id, end_time", None),
    ("ix_messages_pending", "ix_messages_pending", "messages", "stream_kind, stream_id, create_time",
     "status = 'pending'"),
    ("ix_messages_memcell_id", "ix_messages_tenant_id_memcell_id", "messages", "memcell_id", None),
    ("ix_memories_memory_type_group_id_timestamp", "ix_memories_tenant_id_memory_type_group_id_timestamp",
     "memories", "memory_type, group_id, timestamp", None),
    ("ix_memories_memory_type_user_id_timestamp", "ix_memories_tenant_id_memory_type_user_id_timestamp",
     "memories", "memory_type, user_id, timestamp", None),
    ("ix_memories_memcell_id", "ix_memories_tenant_id_memcell_id", "memories", "memcell_id", None),
]  # fmt: skip
_CHILD_FK = "fk_{table}_tenant_id_memcells"
_OLD_FK = "fk_{table}_memcell_id_memcells"


def upgrade() -> None:
    # app.db.roles.prepare makes the role before the migrations; this makes it for a bare `alembic upgrade`.
    name = op.get_bind().exec_driver_sql("SELECT quote_literal(%(n)s)", {"n": role_in_migration()}).scalar()
    op.execute(f"""
        DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) THEN
                EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOBYPASSRLS', {name});
            END IF;
        END $$""")
    op.execute("""
        CREATE TABLE tenants (
            tenant_id text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_tenants PRIMARY KEY (tenant_id),
            CONSTRAINT ck_tenants_tenant_id CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
        )""")
    op.execute("INSERT INTO tenants (tenant_id) VALUES ('default')")
    op.execute("""
        CREATE TABLE api_keys (
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            tenant_id text NOT NULL,
            name text,
            key_hash text NOT NULL,
            key_prefix text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz,
            CONSTRAINT pk_api_keys PRIMARY KEY (id),
            CONSTRAINT uq_api_keys_key_hash UNIQUE (key_hash),
            CONSTRAINT fk_api_keys_tenant_id_tenants FOREIGN KEY (tenant_id)
                REFERENCES tenants (tenant_id) ON DELETE CASCADE
        )""")

    for table, _ in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_OLD_FK.format(table=table)}")
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ADD COLUMN tenant_id text NOT NULL DEFAULT 'default'")
        op.execute(f"ALTER TABLE {table} ALTER COLUMN tenant_id SET DEFAULT {CURRENT_TENANT}")
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT fk_{table}_tenant_id_tenants FOREIGN KEY (tenant_id) "
            "REFERENCES tenants (tenant_id) ON DELETE CASCADE"
        )
    for table, name, definition in CONSTRAINTS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {_renamed(name)} {definition.format(t='tenant_id, ')}")
    for table, action in FOREIGN_KEYS:
        column_list = " (memcell_id)" if action == "SET NULL" else ""
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {_CHILD_FK.format(table=table)} FOREIGN KEY (tenant_id, memcell_id) "
            f"REFERENCES memcells (tenant_id, id) ON DELETE {action}{column_list}"
        )
    for old, new, table, columns, where in INDEXES:
        op.execute(f"DROP INDEX {old}")
        op.execute(f"CREATE INDEX {new} ON {table} (tenant_id, {columns})" + (f" WHERE {where}" if where else ""))
    op.execute("CREATE INDEX ix_messages_tenant_id_sender ON messages (tenant_id, sender)")
    op.execute(BM25_TRIGGERS)

    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} USING (tenant_id = {CURRENT_TENANT}) "
            f"WITH CHECK (tenant_id = {CURRENT_TENANT})"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {quoted_role_in_migration()}")
    op.execute(f"GRANT USAGE ON SCHEMA public TO {quoted_role_in_migration()}")
    op.execute(f"GRANT SELECT ON tenants, api_keys, alembic_version TO {quoted_role_in_migration()}")
    op.execute(f"GRANT USAGE, SELECT ON SEQUENCE messages_id_seq TO {quoted_role_in_migration()}")


def downgrade() -> None:
    # Without tenant_id the keys of two tenants collide: refuse rather than fail half-way or merge them.
    op.execute("""
        DO $$ BEGIN
            IF EXISTS (SELECT FROM tenants WHERE tenant_id <> 'default') THEN
                RAISE EXCEPTION 'memsys: downgrading below 0003 would merge tenants; delete every tenant '
                    'but default first (DELETE FROM tenants WHERE tenant_id <> ''default'' deletes their data)';
            END IF;
        END $$""")
    op.execute(f"REVOKE USAGE, SELECT ON SEQUENCE messages_id_seq FROM {quoted_role_in_migration()}")
    op.execute(f"REVOKE SELECT ON alembic_version FROM {quoted_role_in_migration()}")
    op.execute(f"REVOKE USAGE ON SCHEMA public FROM {quoted_role_in_migration()}")
    for table in TENANT_TABLES:
        op.execute(f"REVOKE ALL ON {table} FROM {quoted_role_in_migration()}")
        op.execute(f"DROP POLICY tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute(BM25_TRIGGERS_BEFORE)
    op.execute("DROP INDEX ix_messages_tenant_id_sender")
    for old, new, table, columns, where in INDEXES:
        op.execute(f"DROP INDEX {new}")
        op.execute(f"CREATE INDEX {old} ON {table} ({columns})" + (f" WHERE {where}" if where else ""))
    for table, _ in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_CHILD_FK.format(table=table)}")
    for table, name, definition in CONSTRAINTS:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_renamed(name)}")
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition.format(t='')}")
    for table, action in FOREIGN_KEYS:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {_OLD_FK.format(table=table)} FOREIGN KEY (memcell_id) "
            f"REFERENCES memcells (id) ON DELETE {action}"
        )
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN tenant_id")
    op.execute("DROP TABLE api_keys")
    op.execute("DROP TABLE tenants")


def _renamed(name: str) -> str:
    """The naming convention's name once tenant_id leads (unique constraints name their columns)."""
    return (
        name.replace("uq_conversation_meta_", "uq_conversation_meta_tenant_id_")
        .replace("uq_messages_", "uq_messages_tenant_id_")
        .replace("uq_profiles_", "uq_profiles_tenant_id_")
    )
