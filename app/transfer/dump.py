"""The dump format of ``memsys export`` / ``memsys import``: JSON lines, format ``memsys.dump``, version 1.

Line 1 is the header: ``{"type": "header", "format": "memsys.dump", "version": 1, "exported_at",
"embedding": {"model", "dimensions"}, "tenant" (or null: all), "user" (or null)}``. Then, per tenant, one
``{"type": "tenant", "tenant_id"}`` line followed by that tenant's rows, one per line, each with its
``type`` and ``tenant_id``: ``forgotten_user`` (who was forgotten, and when), ``conversation_meta``, ``memcell``,
``message``, ``memory`` (with its ``embedding`` and ``embedding_model``) and ``profile``, in that order (each
references only earlier ones; an import knows who is forgotten before it reads their rows). A dump without
``forgotten_user`` lines (none forgotten, or written before they existed) is the same version.
The last line is ``{"type": "end", "rows": N}``: a dump without it was cut short and is refused.

Rows carry their table's columns by name (docs/export-format.md lists them); times are ISO 8601 with their
offset, days ``YYYY-MM-DD``, ids strings. Left out: the message's database sequence number, the memories'
derived search columns (``tsv``, ``doc_len``), the BM25 statistics (triggers rebuild them), API keys (a
secret of the old server) and the retrieval agent's offloads (scratch of one conversation).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Column, Date, DateTime, Table, Uuid

from app.db.tables import conversation_meta, forgotten_users, memcells, memories, messages, profiles
from app.tenancy.scope import check_tenant_id

FORMAT = "memsys.dump"
VERSION = 1

TABLES: dict[str, Table] = {
    "forgotten_user": forgotten_users,
    "conversation_meta": conversation_meta,
    "memcell": memcells,
    "message": messages,
    "memory": memories,
    "profile": profiles,
}
"""Row types in dump order."""

LEFT_OUT = {"tenant_id", "tsv", "doc_len"}


def dumped_columns(table: Table) -> list[Column]:
    """The columns a dump carries: not the tenant (the line names it), not generated ones."""
    return [
        column
        for column in table.columns
        if column.name not in LEFT_OUT and not (table is messages and column.name == "id")
    ]


class DumpError(ValueError):
    """A dump that cannot be imported; the message names the line."""


def header(embedding_model: str, dimensions: int, tenant: str | None, user: str | None) -> dict[str, Any]:
    return {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "embedding": {"model": embedding_model, "dimensions": dimensions},
        "tenant": tenant,
        "user": user,
    }


def line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=_plain, separators=(",", ":")) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    if hasattr(value, "tolist"):  # a pgvector / numpy vector
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to a dump")


@dataclass
class Record:
    """One parsed row: its type, tenant and the values ready for its table."""

    type: str
    tenant_id: str
    values: dict[str, Any]


def read(lines: Iterator[str]) -> Iterator[Record | dict[str, Any]]:
    """The header (a dict), then every row as a ``Record``, checked line by line; a ``DumpError`` names the
    first bad line. The end line is checked against the number of rows."""
    number = 0
    rows = 0
    tenant: str | None = None
    ended = False
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DumpError(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(data, dict):
            raise DumpError(f"line {number}: not a JSON object")
        kind = data.get("type")
        if ended:
            raise DumpError(f"line {number}: a line after the end line")
        if number == 1:
            yield _header(data)
            continue
        if kind == "end":
            if data.get("rows") != rows:
                raise DumpError(f"line {number}: the end line counts {data.get('rows')} rows, the dump has {rows}")
            ended = True
            continue
        if kind == "tenant":
            tenant = _tenant(data.get("tenant_id"), number)
            continue
        if kind not in TABLES:
            raise DumpError(f"line {number}: unknown type {kind!r}")
        if tenant is None or data.get("tenant_id") != tenant:
            raise DumpError(f"line {number}: tenant_id {data.get('tenant_id')!r} is not the current tenant line's")
        rows += 1
        yield _record(kind, tenant, data, number)
    if number == 0:
        raise DumpError("the dump is empty")
    if not ended:
        raise DumpError(f"line {number}: the dump ends without its end line (cut short?)")


def _header(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("type") != "header" or data.get("format") != FORMAT:
        raise DumpError(f"line 1: not a {FORMAT} header")
    if data.get("version") != VERSION:
        raise DumpError(f"line 1: version {data.get('version')!r}; this memsys reads version {VERSION}")
    embedding = data.get("embedding")
    if not isinstance(embedding, dict) or not isinstance(embedding.get("model"), str):
        raise DumpError("line 1: the header has no embedding.model")
    return data


def _tenant(value: Any, number: int) -> str:
    try:
        return check_tenant_id(value)
    except Exception as exc:
        raise DumpError(f"line {number}: invalid tenant_id {value!r}") from exc


def _record(kind: str, tenant: str, data: dict[str, Any], number: int) -> Record:
    table = TABLES[kind]
    values: dict[str, Any] = {}
    for column in dumped_columns(table):
        if column.name not in data:
            if column.nullable or column.server_default is not None:
                continue
            raise DumpError(f"line {number}: {kind} has no {column.name}")
        try:
            values[column.name] = _typed(column, data[column.name])
        except (TypeError, ValueError) as exc:
            raise DumpError(f"line {number}: {kind}.{column.name}: {exc}") from exc
    unknown = set(data) - {c.name for c in table.columns} - {"type", "tenant_id"}
    if unknown:
        raise DumpError(f"line {number}: {kind} has unknown fields {sorted(unknown)}")
    return Record(kind, tenant, values)


def _typed(column: Column, value: Any) -> Any:
    if value is None:
        if not column.nullable:
            raise ValueError("must not be null")
        return None
    kind = column.type
    if isinstance(kind, DateTime):
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise ValueError("a time needs its offset")
        return moment
    if isinstance(kind, Date):
        return date.fromisoformat(value)
    if isinstance(kind, Uuid):
        return uuid.UUID(value)
    if isinstance(kind, Vector):
        if not isinstance(value, list) or not all(isinstance(x, int | float) for x in value):
            raise ValueError("must be a list of numbers")
        return value
    return value
