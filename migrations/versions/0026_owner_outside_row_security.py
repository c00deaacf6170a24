"""The owner outside row-level security, the service role recorded, and keyword search at full speed without a
superuser.

* **No FORCE.** Tenant tables keep row-level security ENABLEd, which holds the service role (neither superuser nor
  BYPASSRLS), but no longer FORCE it on their owner. The owner is the administrator: it owns the schema and could
  lift FORCE at will, so FORCE protected nothing from it, while it kept a managed database's owner (no superuser, no
  BYPASSRLS) from dumping its own data (``pg_dump`` failed, or with ``--enable-row-security`` dumped no row) and
  from a fast keyword search. memsys's admin code that acts for a tenant as the owner runs as the service role
  (app.tenancy.scope.enter).
* **``service_role``** holds the name of the deployment's service role (app.db.roles writes it after every
  migrate), for the code and the people that act as it (``SET ROLE``).
* **``tenant_memories``**: the memories of the transaction's tenant, the columns a keyword search reads (the tenant
  rule of the row-level security policy, written in the view). Under the policy, ``tsv @@ query`` cannot use its GIN
  index unless ``ts_match_vq`` is LEAKPROOF (migration 0009), which only a superuser may declare; through the view,
  owned by the owner whom the policy does not hold, the tenant rule is an ordinary condition and the match uses the
  index. The bounded BM25 leg reads it (sql/retrieval.sql). Not a security barrier (that would keep the match from
  the index again): the conditions evaluated beside the tenant rule are the text match and comparisons, none of
  which can reveal a row.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

TENANT_TABLES = (
    "conversation_meta",
    "memcells",
    "messages",
    "memories",
    "bm25_corpus_stats",
    "bm25_term_stats",
    "profiles",
    "agent_offloads",
    "forgotten_users",
    "memory_history",
)
# What the bounded BM25 leg reads and filters on (sql/retrieval.sql's in_scope and alive); not the vectors, whose type
# `memsys reembed` changes (a view's column cannot change type). A new filter's column is added here by a migration
# (CREATE OR REPLACE VIEW may add columns at the end).
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


def upgrade() -> None:
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute("CREATE TABLE service_role (name text NOT NULL, CONSTRAINT pk_service_role PRIMARY KEY (name))")
    op.execute(
        f"CREATE VIEW tenant_memories AS SELECT {', '.join(VIEW_COLUMNS)} FROM memories "
        f"WHERE tenant_id = {CURRENT_TENANT}"
    )


def downgrade() -> None:
    op.execute("DROP VIEW tenant_memories")
    op.execute("DROP TABLE service_role")
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
