"""A message's role: who spoke, as a chat API says it (``user``, ``assistant``, ``system``, ``tool``).

memorize takes it as an optional field; the OpenAI-compatible proxy stores its user's turn as ``user`` and the LLM's
answer as ``assistant``. Formation counts a message of role ``assistant`` (or ``system``, ``tool``) as an AI's turn
whatever its sender id, as it does for the senders ``assistant``, ``system`` and ``tool``. Null for the messages
stored before, and when a client does not say. Adding a nullable column without a default rewrites nothing.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

from app.db import online_ddl

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("role", sa.Text(), nullable=True))
    online_ddl.add_check("messages", "ck_messages_role", "role IN ('user', 'assistant', 'system', 'tool')")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_messages_role"), "messages", type_="check")
    op.drop_column("messages", "role")
