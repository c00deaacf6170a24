"""A participant's copy of a group episode says so in its own row: ``memories.has_group_copy``.

Formation stores a group conversation's episode once for the group (``user_id`` NULL) and once per participant
(their ``user_id`` and the ``group_id``), all in one MemCell. A search of episodes without a user shows the
group's copy only; it used to learn that a participant's episode had one by looking for it (a NOT EXISTS per
candidate), which at 1,000,000 memories cost most of an unfiltered search (129 ms of the statement, 22 ms
without it). The flag makes it a column test, and keeps the rule exact: an episode of a participant whose MemCell
has no group copy (never had one, or it was deleted) is still found without a user.

Triggers keep it, whoever writes (formation, ``memsys import``, COPY):

* before a participant's episode is inserted: whether its MemCell already holds the group's copy (formation
  writes the group's copy first in the same statement; a row-level BEFORE trigger sees the rows the statement
  wrote before it);
* after an insert with a group copy in it: the participant episodes of its MemCells written before it;
* after a delete with a group copy in it: the participant episodes of its MemCells left without one.

Nothing updates a memory's type, user, group or MemCell, so no UPDATE trigger. The statement triggers read their
transition table into arrays, one tenant at a time, and write with the tenant named, as the BM25 triggers do
(migration 0010): on Citus they then write the co-located shard only. Existing rows are set here, tenant by
tenant (the owner may be subject to row-level security: migration 0003's FORCE).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# One statement each: on Citus each is propagated to the workers as its own command.
TRIGGERS = (
    """
CREATE FUNCTION memsys_group_copy_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.has_group_copy := EXISTS (
        SELECT 1 FROM memories g
        WHERE g.tenant_id = NEW.tenant_id AND g.memcell_id = NEW.memcell_id
          AND g.memory_type = 'episode' AND g.user_id IS NULL);
    RETURN NEW;
END $$""",
    """
CREATE FUNCTION memsys_group_copy_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tenant text;
    cells uuid[];
BEGIN
    FOR tenant IN SELECT DISTINCT n.tenant_id FROM new_rows n ORDER BY 1 LOOP
        SELECT array_agg(DISTINCT n.memcell_id) INTO cells FROM new_rows n
        WHERE n.tenant_id = tenant AND n.memory_type = 'episode' AND n.user_id IS NULL;
        CONTINUE WHEN cells IS NULL;
        UPDATE memories p SET has_group_copy = true
        WHERE p.tenant_id = tenant AND p.memcell_id = ANY (cells) AND NOT p.has_group_copy
          AND p.memory_type = 'episode' AND p.user_id IS NOT NULL AND p.group_id IS NOT NULL;
    END LOOP;
    RETURN NULL;
END $$""",
    """
CREATE FUNCTION memsys_group_copy_removed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tenant text;
    cells uuid[];
BEGIN
    FOR tenant IN SELECT DISTINCT o.tenant_id FROM old_rows o ORDER BY 1 LOOP
        SELECT array_agg(DISTINCT o.memcell_id) INTO cells FROM old_rows o
        WHERE o.tenant_id = tenant AND o.memory_type = 'episode' AND o.user_id IS NULL;
        CONTINUE WHEN cells IS NULL;
        UPDATE memories p SET has_group_copy = false
        WHERE p.tenant_id = tenant AND p.memcell_id = ANY (cells) AND p.has_group_copy
          AND NOT EXISTS (SELECT 1 FROM memories g
                          WHERE g.tenant_id = tenant AND g.memcell_id = p.memcell_id
                            AND g.memory_type = 'episode' AND g.user_id IS NULL);
    END LOOP;
    RETURN NULL;
END $$""",
    """
CREATE TRIGGER memories_group_copy_row BEFORE INSERT ON memories FOR EACH ROW
    WHEN (NEW.memory_type = 'episode' AND NEW.user_id IS NOT NULL AND NEW.group_id IS NOT NULL)
    EXECUTE FUNCTION memsys_group_copy_row()""",
    """
CREATE TRIGGER memories_group_copy_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memsys_group_copy_added()""",
    """
CREATE TRIGGER memories_group_copy_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memsys_group_copy_removed()""",
)

BACKFILL = """
UPDATE memories p SET has_group_copy = true
WHERE p.memory_type = 'episode' AND p.user_id IS NOT NULL AND p.group_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM memories g
              WHERE g.tenant_id = p.tenant_id AND g.memcell_id = p.memcell_id
                AND g.memory_type = 'episode' AND g.user_id IS NULL)
"""


def _citus() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar())


def upgrade() -> None:
    op.add_column("memories", sa.Column("has_group_copy", sa.Boolean(), nullable=False, server_default=sa.false()))
    if _citus():
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    for statement in TRIGGERS:
        op.execute(statement)
    for (tenant,) in op.get_bind().exec_driver_sql("SELECT tenant_id FROM tenants ORDER BY 1").all():
        quoted = tenant.replace("'", "''")
        op.execute(f"SET LOCAL memsys.tenant_id = '{quoted}'")
        op.execute(BACKFILL)
    op.execute("SET LOCAL memsys.tenant_id = ''")


def downgrade() -> None:
    for trigger in ("memories_group_copy_row", "memories_group_copy_insert", "memories_group_copy_delete"):
        op.execute(f"DROP TRIGGER {trigger} ON memories")
    for function in ("memsys_group_copy_row", "memsys_group_copy_added", "memsys_group_copy_removed"):
        op.execute(f"DROP FUNCTION {function}()")
    op.drop_column("memories", "has_group_copy")
