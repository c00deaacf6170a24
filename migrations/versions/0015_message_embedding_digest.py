"""A pending message's vector says what text it was made from, so that formation can reuse it.

The intake worker embeds each pending message with the turn before it (read your writes, migration 0012), the same
text that formation embeds for the message's event-log entry (app.formation.memcell.embedding_text). With the
text's digest beside the vector, formation reuses the vector when the digests (and the model) agree instead of
asking the model again: one embedding per message, not two. NULL for messages indexed before this migration:
formation embeds those itself.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("embedding_digest", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "embedding_digest")
