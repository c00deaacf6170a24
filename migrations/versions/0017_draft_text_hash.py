"""A pending message's vector says what text it was made from, so that formation can keep it.

The intake worker embeds a pending message with the turn before it (``app.memorize.searchable``), the text
formation embeds for the message's event-log entry when both turns end up in one MemCell. Formation then takes
the stored vector instead of embedding that text again: ``embedding_text_md5`` is the MD5 of the text, compared
with the entry's before it is kept (a message whose turn before fell into another MemCell, or arrived out of
order, has another text and is embedded again).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("embedding_text_md5", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "embedding_text_md5")
