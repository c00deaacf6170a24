"""Whether the database is a Citus coordinator (migrations and grants run differently there), and which of its errors
mean that a shard moved under a statement."""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.engine import Connection


def on_citus(conn: Connection) -> bool:
    """Whether the ``citus`` extension is installed in ``conn``'s database."""
    return bool(conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'")).scalar())


# Citus's words for a statement that found a shard or placement gone: planned or routed just before a move or a split
# committed (docs/scaling.md, "Growing a cluster while memsys serves"). The same statement run again finds the new
# placement. A shard's table is its table's name and the shard id ("memories_102008").
_PLACEMENT_GONE = re.compile(
    r"could not find valid entry for shard"
    r"|could not find any (shard|healthy) placements? for shard"
    r"|no active placements were found for shard"
    r'|relation "(public\.)?[a-z_]+_\d{6,}" does not exist'
)


def placement_moved(error: BaseException) -> bool:
    """Whether ``error`` is Citus saying that a shard moved or split under the statement: worth a retry."""
    return bool(_PLACEMENT_GONE.search(str(error)))
