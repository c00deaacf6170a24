"""conversation_meta.scene_desc as JSONB: a string (seed 000) or an object (upstream's v3 demos and v0 SDK).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE conversation_meta ALTER COLUMN scene_desc TYPE jsonb USING to_jsonb(scene_desc)")


def downgrade() -> None:
    # A string goes back as itself; an object as its JSON text.
    op.execute(
        "ALTER TABLE conversation_meta ALTER COLUMN scene_desc TYPE text USING "
        "CASE jsonb_typeof(scene_desc) WHEN 'string' THEN scene_desc #>> '{}' ELSE scene_desc::text END"
    )
