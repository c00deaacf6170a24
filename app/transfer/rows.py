"""How ``memsys import`` checks a dump's values before the database sees them: as the API checks what it stores.

Ids and names (every text column that is not free text) are ``Identifier``s: at most ``MAX_IDENTIFIER_CHARS``
characters. A message's content is bounded by ``MEMSYS_MAX_CONTENT_BYTES``, like memorize's; other free text by
``MEMSYS_MAX_BODY_BYTES``. No string anywhere, JSON keys included, may hold a NUL or a lone surrogate
(app.validation.unstorable), and JSON values nest at most ``MAX_JSON_DEPTH`` levels, like a request body. Each
column's value has its column's JSON type; the columns the schema restricts to a few words take only those.
A bad value is a ``ValueError`` saying why, never the value itself (the caller names the line and column).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import ARRAY, BigInteger, Boolean, Column, Date, DateTime, Integer, Text, Uuid
from sqlalchemy.dialects.postgresql import JSONB

from app.db.tables import HISTORY_EVENTS, MEMORY_STATUSES, MEMORY_TYPES
from app.validation import MAX_IDENTIFIER_CHARS, unstorable

MAX_JSON_DEPTH = 32
"""As app.http.json_body's bound on a request body."""
MAX_VECTOR_DIMENSIONS = 16_000
"""pgvector's largest vector."""
FREE_TEXT = frozenset(
    {"content", "title", "summary", "topic_summary", "description", "search_tokens", "boundary_reason", "reason"}
)
"""Text columns that are not ids or names."""
CHOICES: dict[str, tuple[str, ...]] = {
    "stream_kind": ("group", "personal"),
    "messages.status": ("pending", "processed"),
    "memories.status": MEMORY_STATUSES,
    "memory_type": MEMORY_TYPES,
    "extraction_mode": ("llm", "offline"),
    "source": ("llm", "derived"),
    "event": HISTORY_EVENTS,
}
"""Columns the schema's check constraints restrict to these words, by name (or ``table.name`` where two tables'
columns of one name hold different words)."""
_INTEGER_BITS = {Integer: 32, BigInteger: 64}


@dataclass(frozen=True)
class Limits:
    """The API's size bounds (settings) that an imported row must keep too."""

    max_content_bytes: int
    max_text_bytes: int

    @classmethod
    def of(cls, settings: Any) -> Limits:
        return cls(max_content_bytes=settings.max_content_bytes, max_text_bytes=settings.max_body_bytes)


def check_json(value: Any) -> None:
    """``ValueError`` when a decoded JSON value nests too deep, or holds a string (or key) that cannot be stored or
    a number that is not finite; it names where (``field.0.key``)."""
    pending: list[tuple[str, Any, int]] = [("", value, 1)]
    while pending:
        path, item, depth = pending.pop()
        where = f"{path}: " if path else ""
        if isinstance(item, str):
            _storable(item, where)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{where}holds a number that is not finite (NaN or Infinity)")
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str):
                    _storable(key, f"{where}a key ")
                pending.append((f"{path}.{key}" if path else str(key), child, depth + 1))


def typed(column: Column, value: Any, limits: Limits) -> Any:
    """``value`` of the dump, checked and converted for ``column``."""
    if value is None:
        if not column.nullable:
            raise ValueError("must not be null")
        return None
    kind = column.type
    if isinstance(kind, DateTime):
        moment = datetime.fromisoformat(_string(value))
        if moment.tzinfo is None:
            raise ValueError("a time needs its offset")
        return moment
    if isinstance(kind, Date):
        return date.fromisoformat(_string(value))
    if isinstance(kind, Uuid):
        return uuid.UUID(_string(value))
    if isinstance(kind, Vector):
        return _vector(value)
    if isinstance(kind, Boolean):
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return value
    if type(kind) in _INTEGER_BITS:
        return _integer(value, _INTEGER_BITS[type(kind)])
    if isinstance(kind, ARRAY):
        if not isinstance(value, list):
            raise ValueError("must be a list of ids")
        return [_identifier(item) for item in value]
    if isinstance(kind, JSONB):
        check_json(value)
        if column.name == "refer_list" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ValueError("must be a list of message ids")
        for item in value if column.name == "refer_list" else ():
            _identifier(item)
        return value
    if isinstance(kind, Text):
        return _text(f"{column.table.name}.{column.name}", value, limits)
    raise ValueError(f"a column of type {kind} cannot be imported")


def _text(qualified: str, value: Any, limits: Limits) -> str:
    name = qualified.partition(".")[2]
    choices = CHOICES.get(qualified) or CHOICES.get(name)
    if choices:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value
    if name not in FREE_TEXT:
        return _identifier(value)
    bound = limits.max_content_bytes if name == "content" else limits.max_text_bytes
    if len(_storable(_string(value)).encode("utf-8", "surrogatepass")) > bound:
        raise ValueError(f"longer than {bound} bytes")
    return value


def _identifier(value: Any) -> str:
    if len(_storable(_string(value))) > MAX_IDENTIFIER_CHARS:
        raise ValueError(f"an id or name of more than {MAX_IDENTIFIER_CHARS} characters")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {_json_type(value)}")
    return value


def _storable(value: str, what: str = "") -> str:
    reason = unstorable(value)
    if reason:
        raise ValueError(what + reason)
    return value


def _integer(value: Any, bits: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"must be an integer, not {_json_type(value)}")
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(f"out of range for a {bits}-bit integer")
    return value


def _vector(value: Any) -> list[float]:
    if not isinstance(value, list) or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        raise ValueError("must be a list of numbers")
    if not 1 <= len(value) <= MAX_VECTOR_DIMENSIONS:
        raise ValueError(f"must have 1 to {MAX_VECTOR_DIMENSIONS} numbers")
    if not all(math.isfinite(x) for x in value):
        raise ValueError("holds a number that is not finite (NaN or Infinity)")
    return value


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), "null" if value is None else type(value).__name__)
