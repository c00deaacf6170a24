"""Who was forgotten, per tenant: ``forgotten_users (tenant_id, user_id, forgotten_at)``.

``DELETE /api/v3/agentic/users/{user_id}`` records the user here (the time of the last forget); ``memsys import``
leaves out what a dump holds about them from before that time, so a backup taken before the forget does not bring
them back (issue 26). Tenant data like the others: ``tenant_id`` leads the key, row-level security ENABLE + FORCE
with the same policy, DML for the service's role. On Citus it is distributed by ``tenant_id`` and co-located with
``memcells`` (migration 0011's pattern: the policy and grants exist before it is distributed, so they go to the
shards with it, and the foreign key to the reference table ``tenants`` is made after).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from alembic import op

from app.db.roles import quoted_role_in_migration

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('memsys.tenant_id', true), '')"


def _citus() -> bool:
    return bool(op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar())


def upgrade() -> None:
    citus = _citus()
    if citus:
        # A foreign key to a reference table wants one connection per node for the rest of the transaction.
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute(
        f"""
        CREATE TABLE forgotten_users (
            tenant_id text NOT NULL DEFAULT {CURRENT_TENANT},
            user_id text NOT NULL,
            forgotten_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_forgotten_users PRIMARY KEY (tenant_id, user_id)
        )
        """
    )
    op.execute("ALTER TABLE forgotten_users ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE forgotten_users FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON forgotten_users USING (tenant_id = {CURRENT_TENANT}) "
        f"WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON forgotten_users TO {quoted_role_in_migration()}")
    if citus:
        # Before the foreign key: a local table referencing a reference table would become a Citus local table.
        op.execute("SELECT create_distributed_table('forgotten_users', 'tenant_id', colocate_with => 'memcells')")
    op.execute(
        "ALTER TABLE forgotten_users ADD CONSTRAINT fk_forgotten_users_tenant_id_tenants FOREIGN KEY (tenant_id) "
        "REFERENCES tenants (tenant_id) ON DELETE CASCADE"
    )


def downgrade() -> None:
    op.execute("DROP TABLE forgotten_users")
