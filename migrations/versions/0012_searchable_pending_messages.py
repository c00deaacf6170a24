"""Messages not yet formed are searchable (read your writes): each pending message gets its vector and its
BM25 text from the intake worker moments after memorize stores it (``app.intake``), and retrieval searches
them beside the memories until formation turns them into memories (``sql/retrieval.sql``).

The vector column has no dimension: only pending messages are searched, by an exact scan of the pending rows
(no HNSW index), and always with vectors of the query's own model (``embedding_model``), so a change of model
needs no change of this column.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("embedding", pgvector.sqlalchemy.Vector(), nullable=True))
    op.add_column("messages", sa.Column("embedding_model", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("search_tokens", sa.Text(), nullable=True))
    op.add_column(
        "messages",
        sa.Column(
            "tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('simple'::regconfig, search_tokens)", persisted=True),
            nullable=True,
        ),
    )
    op.add_column(
        "messages",
        sa.Column(
            "doc_len",
            sa.Integer(),
            sa.Computed("COALESCE(array_length(string_to_array(search_tokens, ' '::text), 1), 0)", persisted=True),
            nullable=True,
        ),
    )


def downgrade() -> None:
    for column in ("doc_len", "tsv", "search_tokens", "embedding_model", "embedding"):
        op.drop_column("messages", column)
