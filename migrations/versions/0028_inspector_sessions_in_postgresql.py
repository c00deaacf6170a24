"""The inspector's sign-ins in PostgreSQL: a cookie from one replica is a session on every other.

``inspector_sessions``: the SHA-256 of the cookie's session id, the signing key's hash, who the memory history
names for its edits (the key's prefix), the session's CSRF token, and when it ends. No row-level security (a
session is looked up before the request's tenant is known, as a key is); the service role may read, add and delete
rows, not change them.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07
"""

from alembic import op

from app.db.roles import quoted_role_in_migration

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE inspector_sessions (
            id_hash text NOT NULL,
            key_hash text NOT NULL,
            actor text NOT NULL,
            csrf_token text NOT NULL,
            expires_at timestamptz NOT NULL,
            CONSTRAINT pk_inspector_sessions PRIMARY KEY (id_hash)
        )
        """
    )
    op.execute("CREATE INDEX ix_inspector_sessions_expires_at ON inspector_sessions (expires_at)")
    op.execute(f"GRANT SELECT, INSERT, DELETE ON inspector_sessions TO {quoted_role_in_migration()}")


def downgrade() -> None:
    op.execute("DROP TABLE inspector_sessions")
