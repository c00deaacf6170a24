"""On Citus, shard the tenant data by ``tenant_id``; on plain PostgreSQL, nothing.

When the database has the ``citus`` extension (a Citus coordinator, ``deploy/citus/up.sh``), the tables of tenant
data become distributed tables, sharded by ``tenant_id`` and co-located: a tenant's rows of every table live in
shards on the same worker, so each tenant's statements (retrieval's CTEs and joins included) run as one
single-shard task there. ``tenants`` and ``api_keys``, small and read before the tenant is known, become
reference tables (a copy on every node). procrastinate's queue stays on the coordinator, where the workers'
LISTEN/NOTIFY is.

The schema is the same as on plain PostgreSQL: every key and foreign key of tenant data already leads with
``tenant_id`` (migration 0003), which is what Citus needs. The foreign keys between these tables are dropped
while they are distributed and made again after: a local table may not reference a distributed one, and a local
table referencing a reference table would become a Citus local table, which cannot then take an identity column
(``messages.id``) into a distributed table. Row-level security, the policies and the grants go to
the shards with the tables. The BM25 statistics triggers run on the shards and write the co-located statistics
shards (``citus.enable_unsafe_triggers``, needed to distribute a table with triggers). Migration 0009's LEAKPROOF
mark is repeated on the workers, whose catalogs are their own. The database's ``citus.propagate_set_commands``
becomes ``local``: the ``SET LOCAL`` of the tenant (app.tenancy.scope) and of the HNSW settings then reaches the
workers' sessions of the transaction, where row-level security and the index scans read them. Later migrations'
DDL goes to the shards through the coordinator. The downgrade refuses on Citus: Citus cannot undistribute a table
with an identity column (``messages.id``); ``memsys export`` and ``memsys import`` move a deployment off Citus.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

import logging

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

REFERENCE_TABLES = ("tenants", "api_keys")
# memcells first: the others' foreign keys reference it, and co-locate with it.
DISTRIBUTED_TABLES = (
    "memcells",
    "conversation_meta",
    "messages",
    "memories",
    "bm25_corpus_stats",
    "bm25_term_stats",
    "profiles",
    "agent_offloads",
)
log = logging.getLogger("alembic.runtime.migration")
LEAKPROOF = "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"


def _citus() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar())


def upgrade() -> None:
    if not _citus():
        return
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    # Foreign keys to a reference table want one connection per node for the rest of the transaction.
    op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    foreign_keys = _foreign_keys_between(REFERENCE_TABLES + DISTRIBUTED_TABLES)
    for table, name, _ in foreign_keys:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    # memories' generated columns precede tenant_id, which breaks Citus's shard split (see migration 0032, which
    # sets them by trigger on every database): distributed without their expressions, so its shards have none.
    # Citus propagates no DROP EXPRESSION afterwards, and 0032's per-shard change cannot see shards made in the
    # same transaction.
    op.execute("ALTER TABLE memories ALTER COLUMN tsv DROP EXPRESSION, ALTER COLUMN doc_len DROP EXPRESSION")
    for table in REFERENCE_TABLES:
        op.execute(f"SELECT create_reference_table('{table}')")
    for table in DISTRIBUTED_TABLES:
        colocate = "default" if table == DISTRIBUTED_TABLES[0] else DISTRIBUTED_TABLES[0]
        op.execute(f"SELECT create_distributed_table('{table}', 'tenant_id', colocate_with => '{colocate}')")
    for table, name, definition in foreign_keys:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    if op.get_bind().exec_driver_sql("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").scalar():
        op.execute(f"SELECT run_command_on_workers($${LEAKPROOF}$$)")
    else:  # as in migration 0009
        log.warning("Not a superuser: on every worker, a superuser can run: %s", LEAKPROOF)
    _database_setting("SET citus.propagate_set_commands = 'local'")


def _database_setting(clause: str) -> None:
    quoted = clause.replace("'", "''")
    op.execute(f"DO $$BEGIN EXECUTE format('ALTER DATABASE %I {quoted}', current_database()); END$$")


def _foreign_keys_between(tables: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(table, name, definition) of each foreign key from one of ``tables`` to another."""
    rows = op.get_bind().exec_driver_sql(
        "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
        "WHERE c.contype = 'f' AND c.conrelid::regclass::text = ANY(%(t)s) "
        "AND c.confrelid::regclass::text = ANY(%(t)s) "
        "ORDER BY 1, 2",
        {"t": list(tables)},
    )
    return [tuple(row) for row in rows]


def downgrade() -> None:
    if not _citus():
        return
    # Citus cannot undistribute a table with an identity column (messages.id): there is no way back in place.
    raise RuntimeError(
        "Migration 0011 cannot be undone on Citus (it cannot undistribute messages, whose id is an identity "
        "column). To leave Citus, `memsys export` and `memsys import` into a plain PostgreSQL."
    )
