"""Named SQL queries kept in ``sql/*.sql`` as ``-- name: <query_name>`` blocks, parsed once.

The retrieval statements live there so that a user can read them and run them with psql. A line
``-- include: <query_name>`` in a block stands for that block's SQL (its leading comment lines left out), indented
as the line is: one text for what two statements share.
"""

from __future__ import annotations

import functools
import re

from sqlalchemy import TextClause, text

from app import PROJECT_ROOT

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^([ \t]*)--\s*include:\s*(\w+)\s*$", re.MULTILINE)


def parse(sql_text: str) -> dict[str, str]:
    parts = _NAME.split(sql_text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


@functools.cache
def queries() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((PROJECT_ROOT / "sql").glob("*.sql")):
        for name, body in parse(path.read_text(encoding="utf-8")).items():
            if name in found:
                raise ValueError(f"SQL query {name!r} is defined twice (second time in {path.name})")
            found[name] = body
    return {name: _included(body, found) for name, body in found.items()}


def _included(body: str, found: dict[str, str]) -> str:
    """``body`` with each ``-- include: <name>`` line replaced by that block's SQL (its own includes too), indented
    as the line."""

    def sql_of(match: re.Match) -> str:
        lines = _included(found[match[2]], found).splitlines()
        while lines and lines[0].lstrip().startswith("--"):
            lines.pop(0)
        return "\n".join(match[1] + line if line else line for line in lines)

    return _INCLUDE.sub(sql_of, body)


def query(name: str) -> str:
    return queries()[name]


@functools.cache
def statement(name: str) -> TextClause:
    """The query as a SQLAlchemy ``text()`` clause, made once: making one parses the text for its bind parameters
    (0.5 ms for the 18 kB hybrid search, which every search would otherwise pay)."""
    return text(query(name))
