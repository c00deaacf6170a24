"""Whether the database is a Citus coordinator: migrations and grants run differently there."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection


def on_citus(conn: Connection) -> bool:
    """Whether the ``citus`` extension is installed in ``conn``'s database."""
    return bool(conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'")).scalar())
