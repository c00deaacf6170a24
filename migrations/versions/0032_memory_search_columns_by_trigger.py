"""``memories.tsv`` and ``memories.doc_len`` are set by a trigger, no longer generated columns: Citus can then split
a shard of ``memories`` (``isolate_tenant_to_new_shard``, ``citus_split_shard_by_split_points``).

Citus (13.2.2 and before) copies a shard being split with ``SELECT <every column but the generated ones>`` and
routes each row by the distribution column's position in the whole table. In ``memories`` the two generated columns
(15, 16) come before ``tenant_id`` (19), so the split read another column as the tenant and failed ("cannot find
shard interval"): a large tenant could not be given a shard of its own (docs/scaling.md). ``messages`` has its
generated columns after ``tenant_id`` and splits as it is.

The values are the same: a BEFORE INSERT OR UPDATE trigger computes both from ``search_tokens`` whenever a row is
inserted or one of the three columns is written, so a write of ``tsv`` or ``doc_len`` alone cannot make them
disagree with the text (as a generated column could not). The BM25 statistics triggers (AFTER) see the values.
Every database gets it, one node or Citus: the schema stays the same on both. Dropping the expressions keeps the
stored values and rewrites nothing (on Citus it is run on each shard: Citus does not propagate it).

The downgrade makes them generated columns again: they are dropped (their GIN indexes and the view
``tenant_memories`` with them) and added back, which rewrites the table, and the indexes and the view are made again
from their definitions.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07
"""

from alembic import op

from app.db.citus import on_citus
from app.db.roles import quoted_role_in_migration

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

TSV = "to_tsvector('simple'::regconfig, search_tokens)"
DOC_LEN = "COALESCE(array_length(string_to_array(search_tokens, ' '::text), 1), 0)"


DROP_EXPRESSIONS = (
    "ALTER TABLE {} ALTER COLUMN tsv DROP EXPRESSION IF EXISTS, ALTER COLUMN doc_len DROP EXPRESSION IF EXISTS"
)


def upgrade() -> None:
    generated = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT attgenerated <> '' FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'tsv'"
        )
        .scalar()
    )
    if on_citus(op.get_bind()):
        if generated:  # distributed before migration 0011 dropped the expressions first
            _drop_expressions_on_citus()
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")  # DDL, then an UPDATE of every shard
    elif generated:
        op.execute(DROP_EXPRESSIONS.format("memories"))
    op.execute(
        f"""
CREATE FUNCTION memsys_memory_search_columns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tsv := {TSV.replace("search_tokens", "NEW.search_tokens")};
    NEW.doc_len := {DOC_LEN.replace("search_tokens", "NEW.search_tokens")};
    RETURN NEW;
END $$"""
    )
    op.execute(
        """
CREATE TRIGGER memories_search_columns BEFORE INSERT OR UPDATE OF search_tokens, tsv, doc_len ON memories
    FOR EACH ROW EXECUTE FUNCTION memsys_memory_search_columns()"""
    )
    # Rows written between the shards' change and the trigger (Citus: the shards change in their own transactions).
    op.execute("UPDATE memories SET search_tokens = search_tokens WHERE tsv IS NULL AND search_tokens IS NOT NULL")


def _drop_expressions_on_citus() -> None:
    """Citus propagates no ``DROP EXPRESSION``: it is run on every shard, then on the table itself and its copies on
    the workers (metadata) with propagation off, so that new shards (splits, moves) are made without the expressions
    too. The column numbers stay as they are everywhere. The shards' and workers' changes commit on their own (Citus
    runs them on connections of their own): a failure is raised here, and running the migration again completes
    it."""
    bind = op.get_bind()
    on_shards = f"SELECT shardid, result FROM run_command_on_shards('memories', $c${DROP_EXPRESSIONS.format('%s')}$c$)"
    on_workers = (
        "SELECT nodeport, result FROM run_command_on_workers($c$SET citus.enable_ddl_propagation = off; "
        f"{DROP_EXPRESSIONS.format('public.memories')}$c$)"
    )
    for statement in (on_shards, on_workers):
        failed = [
            (where, result)
            for where, result in bind.exec_driver_sql(statement.replace("%", "%%"))
            if result not in ("ALTER TABLE", "SET")
        ]
        if failed:
            raise RuntimeError(f"dropping memories' column expressions failed on {failed[:5]}")
    op.execute("SET LOCAL citus.enable_ddl_propagation = off")
    op.execute(DROP_EXPRESSIONS.format("memories"))
    op.execute("SET LOCAL citus.enable_ddl_propagation = on")


def downgrade() -> None:
    indexes = [
        definition
        for (definition,) in op.get_bind().exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'memories' "
            "AND indexdef ~ '\\m(tsv|doc_len)\\M' ORDER BY indexname"
        )
    ]
    view = op.get_bind().exec_driver_sql("SELECT pg_get_viewdef('tenant_memories')").scalar()
    op.execute("DROP VIEW tenant_memories")
    op.execute("DROP TRIGGER memories_search_columns ON memories")
    op.execute("DROP FUNCTION memsys_memory_search_columns()")
    op.execute("ALTER TABLE memories DROP COLUMN tsv, DROP COLUMN doc_len")
    op.execute(
        f"ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS ({TSV}) STORED, "
        f"ADD COLUMN doc_len integer GENERATED ALWAYS AS ({DOC_LEN}) STORED"
    )
    for definition in indexes:
        op.execute(definition)
    op.execute(f"CREATE VIEW tenant_memories AS {view}")
    op.execute("GRANT SELECT ON tenant_memories TO " + quoted_role_in_migration())
