"""The dump format of ``memsys export`` / ``memsys import``: JSON lines, format ``memsys.dump``, version 1.

Line 1 is the header: ``{"type": "header", "format": "memsys.dump", "version": 1, "exported_at",
"embedding": {"model", "dimensions"}, "tenant" (or null: all), "user" (or null)}``. Then, per tenant, one
``{"type": "tenant", "tenant_id"}`` line followed by that tenant's rows, one per line, each with its
``type`` and ``tenant_id``: ``forgotten_user`` (who was forgotten, and when), ``conversation_meta``, ``memcell``,
``message``, ``memory`` (with its ``embedding`` and ``embedding_model``, its status and validity), ``memory_event`` (its
history, without the database's sequence number) and ``profile``, in that order (each
references only earlier ones; an import knows who is forgotten before it reads their rows). A dump without
``forgotten_user`` lines (none forgotten, or written before they existed) is the same version.
The last line is ``{"type": "end", "rows": N}``: a dump without it was cut short and is refused.

Rows carry their table's columns by name (docs/export-format.md lists them); times are ISO 8601 with their
offset, days ``YYYY-MM-DD``, ids strings. Left out: the message's database sequence number, the memories'
derived columns (``tsv``, ``doc_len``, ``has_group_copy``), the BM25 statistics (triggers rebuild them), API keys (a
secret of the old server) and the retrieval agent's offloads (scratch of one conversation).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, BinaryIO

from sqlalchemy import Column, Table

from app.db.tables import conversation_meta, forgotten_users, memcells, memories, memory_history, messages, profiles
from app.errors import InvalidParameter
from app.tenancy.scope import check_tenant_id
from app.transfer.rows import MAX_JSON_DEPTH, Limits, check_json, typed

FORMAT = "memsys.dump"
VERSION = 1

TABLES: dict[str, Table] = {
    "forgotten_user": forgotten_users,
    "conversation_meta": conversation_meta,
    "memcell": memcells,
    "message": messages,
    "memory": memories,
    "memory_event": memory_history,
    "profile": profiles,
}
"""Row types in dump order."""

LEFT_OUT = {"tenant_id", "tsv", "doc_len", "has_group_copy"}
_NAME_LIKE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line an import reads: a memory with a 16,000-dimension vector and its texts fits."""


def dumped_columns(table: Table) -> list[Column]:
    """The columns a dump carries: not the tenant (the line names it), not generated ones."""
    return [
        column
        for column in table.columns
        if column.name not in LEFT_OUT and not (table in (messages, memory_history) and column.name == "id")
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
    """One parsed row: its type, tenant, the values ready for its table and the line it came from."""

    type: str
    tenant_id: str
    values: dict[str, Any]
    line: int


def lines_of(file: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each at most ``MAX_LINE_BYTES`` (a longer one is a ``DumpError``, not read whole)."""
    number = 0
    while text := file.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(text) > MAX_LINE_BYTES:
            raise DumpError(f"line {number}: longer than {MAX_LINE_BYTES} bytes")
        yield text


def read(
    lines: Iterable[bytes], limits: Limits, tenants: frozenset[str] | None = None
) -> Iterator[Record | dict[str, Any]]:
    """The header (a dict), then every row as a ``Record``, checked line by line as the API checks what it
    stores (app.transfer.rows); a ``DumpError`` names the first bad line and why, never its contents. Only the
    tenants the header names (if it names one) and ``tenants`` names (if given) may have a section. The end
    line is checked against the number of rows."""
    number = 0
    rows = 0
    tenant: str | None = None
    allowed = tenants
    ended = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        data = _decode(raw, number)
        kind = data.get("type")
        if ended:
            raise DumpError(f"line {number}: a line after the end line")
        if number == 1:
            first = _header(data)
            allowed = _named_tenants(first.get("tenant"), tenants)
            yield first
            continue
        if kind == "end":
            if data.get("rows") != rows:
                raise DumpError(f"line {number}: the end line counts {data.get('rows')} rows, the dump has {rows}")
            ended = True
            continue
        if kind == "tenant":
            tenant = _tenant(data.get("tenant_id"), number)
            if allowed is not None and tenant not in allowed:
                raise DumpError(
                    f"line {number}: a section for tenant {tenant}, which this import does not name "
                    f"(it names {', '.join(sorted(allowed))})"
                )
            continue
        if kind not in TABLES:
            raise DumpError(f"line {number}: unknown type {_shown(kind)}")
        if tenant is None or data.get("tenant_id") != tenant:
            raise DumpError(
                f"line {number}: tenant_id {_shown(data.get('tenant_id'))} is not the current tenant line's"
            )
        rows += 1
        yield _record(kind, tenant, data, number, limits)
    if number == 0:
        raise DumpError("the dump is empty")
    if not ended:
        raise DumpError(f"line {number}: the dump ends without its end line (cut short?)")


def _decode(raw: bytes, number: int) -> dict[str, Any]:
    """One line's JSON object, checked for depth and unstorable strings (a NUL, a lone surrogate)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DumpError(f"line {number}: not UTF-8 (byte {exc.start + 1})") from None
    except json.JSONDecodeError as exc:
        raise DumpError(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise DumpError(f"line {number}: nested more than {MAX_JSON_DEPTH} levels deep") from None
    if not isinstance(data, dict):
        raise DumpError(f"line {number}: not a JSON object")
    try:
        check_json(data)
    except ValueError as exc:
        raise DumpError(f"line {number}: {exc}") from None
    return data


def _header(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("type") != "header" or data.get("format") != FORMAT:
        raise DumpError(f"line 1: not a {FORMAT} header")
    if data.get("version") != VERSION:
        raise DumpError(f"line 1: version {_shown(data.get('version'))}; this memsys reads version {VERSION}")
    embedding = data.get("embedding")
    if not isinstance(embedding, dict) or not isinstance(embedding.get("model"), str):
        raise DumpError("line 1: the header has no embedding.model")
    if data.get("tenant") is not None:
        _tenant(data["tenant"], 1)
    return data


def _named_tenants(header_tenant: str | None, tenants: frozenset[str] | None) -> frozenset[str] | None:
    """The tenants whose sections the import may write (``None``: any): those the header and the command name."""
    if header_tenant is None:
        return tenants
    if tenants is not None and header_tenant not in tenants:
        raise DumpError(f"line 1: the dump is of tenant {header_tenant}; --tenant names {', '.join(sorted(tenants))}")
    return frozenset({header_tenant})


def _tenant(value: Any, number: int) -> str:
    try:
        return check_tenant_id(value)
    except InvalidParameter:
        raise DumpError(f"line {number}: invalid tenant_id {_shown(value)}") from None


def _shown(value: Any) -> str:
    """A value of the dump in a message: a name-like word or a number only (a message never carries row
    contents)."""
    if isinstance(value, str) and _NAME_LIKE.fullmatch(value):
        return repr(value)
    return repr(value) if isinstance(value, int | float | bool) or value is None else "(a value not shown)"


def _record(kind: str, tenant: str, data: dict[str, Any], number: int, limits: Limits) -> Record:
    table = TABLES[kind]
    values: dict[str, Any] = {}
    for column in dumped_columns(table):
        if column.name not in data:
            if column.nullable or column.server_default is not None:
                continue
            raise DumpError(f"line {number}: {kind} has no {column.name}")
        try:
            values[column.name] = typed(column, data[column.name], limits)
        except (TypeError, ValueError) as exc:
            raise DumpError(f"line {number}: {kind}.{column.name}: {_reason(exc)}") from None
    unknown = set(data) - {c.name for c in table.columns} - {"type", "tenant_id"}
    if unknown:
        raise DumpError(f"line {number}: {kind} has {len(unknown)} unknown field(s)")
    return Record(kind, tenant, values, number)


def _reason(exc: Exception) -> str:
    """Why a value was refused; the parsers' own messages quote the value, so theirs are replaced."""
    if isinstance(exc, TypeError) or "'" in str(exc) or '"' in str(exc):
        return "not a valid value of its type"
    return str(exc)
