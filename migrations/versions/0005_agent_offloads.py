"""The retrieval agent's offloaded content (seed 003): long tool replies and compressed messages, per tenant
and chat, under row-level security like every table of tenant data.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from alembic import op

from app.db.roles import quoted_role_in_migration

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
CURRENT_TENANT = "NULLIF(current_setting('memsys.tenant_id', true), '')"


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE agent_offloads (
            tenant_id text NOT NULL DEFAULT {CURRENT_TENANT}
                CONSTRAINT fk_agent_offloads_tenant_id_tenants REFERENCES tenants (tenant_id) ON DELETE CASCADE,
            ref text NOT NULL,
            chat_id text NOT NULL,
            user_id text,
            kind text NOT NULL CONSTRAINT ck_agent_offloads_kind CHECK (kind IN ('tool_message', 'compressed')),
            content text NOT NULL,
            tokens integer NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_agent_offloads PRIMARY KEY (tenant_id, ref)
        )
        """
    )
    op.execute("CREATE INDEX ix_agent_offloads_tenant_id_chat_id ON agent_offloads (tenant_id, chat_id)")
    op.execute("ALTER TABLE agent_offloads ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE agent_offloads FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON agent_offloads USING (tenant_id = {CURRENT_TENANT}) "
        f"WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON agent_offloads TO {quoted_role_in_migration()}")


def downgrade() -> None:
    op.execute("DROP TABLE agent_offloads")
