"""memories.embedding_model: the model that made each vector, so that vectors of two models are never
compared (retrieval's vector leg takes only the query's model; ``memsys reembed`` remakes the others).

Existing rows get the model configured when this migration runs (the one that made them: the start-up
check refuses a model of other dimensions).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import context, op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    model = context.config.attributes.get("embedding_model", "local:all-MiniLM-L6-v2")
    op.add_column("memories", sa.Column("embedding_model", sa.Text(), server_default=model, nullable=False))
    op.alter_column("memories", "embedding_model", server_default=None)


def downgrade() -> None:
    op.drop_column("memories", "embedding_model")
