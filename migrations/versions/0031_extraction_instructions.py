"""Extraction instructions per tenant, app and project: text the LLM's formation prompts carry, and profile fields of
the tenant's own (app.formation.instructions).

One row per (tenant, app_id, project_id); '*' stands for every app or project. Row-level security as every tenant
table (the owner outside it, migration 0026); on Citus distributed by tenant and co-located with ``memcells``.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07
"""

from alembic import op

from app.db.citus import on_citus
from app.db.roles import quoted_role_in_migration

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('memsys.tenant_id', true), '')"


def upgrade() -> None:
    citus = on_citus(op.get_bind())
    if citus:
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute(
        f"""
        CREATE TABLE extraction_instructions (
            tenant_id text NOT NULL DEFAULT {CURRENT_TENANT},
            app_id text NOT NULL,
            project_id text NOT NULL,
            instructions text NOT NULL,
            profile_fields text[] NOT NULL DEFAULT '{{}}',
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_extraction_instructions PRIMARY KEY (tenant_id, app_id, project_id)
        )
        """
    )
    op.execute("ALTER TABLE extraction_instructions ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON extraction_instructions USING (tenant_id = {CURRENT_TENANT}) "
        f"WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON extraction_instructions TO {quoted_role_in_migration()}")
    if citus:
        op.execute(
            "SELECT create_distributed_table('extraction_instructions', 'tenant_id', colocate_with => 'memcells')"
        )
    op.execute(
        "ALTER TABLE extraction_instructions ADD CONSTRAINT fk_extraction_instructions_tenant_id_tenants "
        "FOREIGN KEY (tenant_id) REFERENCES tenants (tenant_id) ON DELETE CASCADE"
    )


def downgrade() -> None:
    op.execute("DROP TABLE extraction_instructions")
