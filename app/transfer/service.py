"""Exports. A user's, over HTTP: everything held about them as one JSON document (``memsys.user-export`` v1).
A tenant's or the whole database's, by ``memsys export`` / ``memsys import``: the JSON-lines dump of
app.transfer.dump, with embeddings.

A user's export holds the messages they sent, memories about them and the group-level memories formed from
their messages (types, times, provenance), every version of their profiles, and their entry in
conversations' ``user_details``. Embeddings are left out of it: they are derived, large, and model-specific.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from app.db.engine import create_engine
from app.formation.memcell import embedding_text
from app.runtime import Runtime
from app.tenancy import repository as tenancy
from app.tenancy import scope
from app.transfer import dump, repository

EXPORT_FORMAT = "memsys.user-export"
EXPORT_VERSION = 1


async def export_user(runtime: Runtime, user_id: str) -> dict[str, Any]:
    async with runtime.engine.begin() as conn:
        messages = await repository.messages_of(conn, user_id)
        memories = await repository.memories_of(conn, user_id)
        profiles = await repository.profiles_of(conn, user_id)
        details = await repository.participant_details_of(conn, user_id)
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "tenant": runtime.tenant,
        "user_id": user_id,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "messages": [_times(m, "create_time", "received_at") for m in messages],
        "memories": memories,
        "profiles": [_times(p, "created_at") for p in profiles],
        "participant_details": details,
    }


def _times(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {**row, **{key: row[key].isoformat() for key in keys}}


async def export_dump(
    runtime: Runtime, out: TextIO, *, tenant: str | None = None, user_id: str | None = None, progress: bool = True
) -> int:
    """Write the dump (app.transfer.dump) of one tenant or all, or of one user, to ``out``; returns the
    number of rows. One repeatable-read transaction: a consistent snapshot while memsys keeps running."""
    settings = runtime.settings
    rows = 0
    # The service's role, which row-level security holds (the owner may be a superuser who bypasses it):
    # each tenant's section holds that tenant's rows only.
    async with runtime.engine.connect() as conn:
        await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            tenants = [tenant] if tenant else await tenancy.tenant_ids(conn)
            out.write(dump.line(dump.header(runtime.embedder.name, settings.embedding_dimensions, tenant, user_id)))
            with tqdm(desc="export", unit=" rows", disable=not progress, file=sys.stderr) as bar:
                for tenant_id in tenants:
                    await scope.enter(conn, tenant_id)
                    out.write(dump.line({"type": "tenant", "tenant_id": tenant_id}))
                    for kind, table in dump.TABLES.items():
                        columns = dump.dumped_columns(table)
                        statement = repository.dump_statement(kind, table, columns, user_id)
                        async for row in repository.stream_rows(conn, statement):
                            out.write(dump.line({"type": kind, "tenant_id": tenant_id, **row}))
                            rows += 1
                            bar.update()
            out.write(dump.line({"type": "end", "rows": rows}))
    return rows


async def import_dump(
    runtime: Runtime, path: Path, checked: tuple[dict[str, Any], int], *, progress: bool = True
) -> dict[str, Any]:
    """Write a dump that ``check_dump`` accepted (``checked`` is its answer: call it first, so that a bad dump
    fails before the database and the model load) in one transaction. The lines are read again as they are
    written, so a file changed since then still fails with nothing written. Rows already present (same id)
    are skipped, so an import run again adds nothing. Memories of another embedding model are embedded
    again with this one."""
    first, total = checked
    embedding = first["embedding"]
    settings = runtime.settings
    counts = {kind: 0 for kind in dump.TABLES}
    reembedded = 0
    owner = create_engine(runtime.database_url, settings)
    try:
        async with owner.begin() as conn:
            with (
                path.open(encoding="utf-8") as lines,
                tqdm(total=total - 1, desc="import", unit=" rows", disable=not progress, file=sys.stderr) as bar,
            ):
                batch: list[dump.Record] = []
                for record in dump.read(lines):
                    if isinstance(record, dict):
                        continue
                    if batch and (record.type != batch[0].type or record.tenant_id != batch[0].tenant_id):
                        reembedded += await _write(runtime, conn, batch, counts)
                        batch = []
                    batch.append(record)
                    if len(batch) >= IMPORT_BATCH:
                        reembedded += await _write(runtime, conn, batch, counts)
                        batch = []
                    bar.update()
                reembedded += await _write(runtime, conn, batch, counts)
    finally:
        await owner.dispose()
    return {"rows": counts, "reembedded": reembedded, "from_model": embedding["model"], "model": runtime.embedder.name}


IMPORT_BATCH = 500


def check_dump(path: Path) -> tuple[dict[str, Any], int]:
    """Read the whole dump once: its header and its number of records, or a ``DumpError`` naming a line."""
    with path.open(encoding="utf-8") as lines:
        records = dump.read(lines)
        first = next(records)
        return first, 1 + sum(1 for _ in records)


async def _write(runtime: Runtime, conn, batch: list[dump.Record], counts: dict[str, int]) -> int:
    """Insert one batch of one type and tenant; returns how many memories were embedded again."""
    if not batch:
        return 0
    kind, tenant_id = batch[0].type, batch[0].tenant_id
    await tenancy.ensure_tenant(conn, tenant_id)
    await scope.enter(conn, tenant_id)
    rows = [record.values for record in batch]
    stale = []
    if kind == "memory":
        dimensions = runtime.settings.embedding_dimensions
        stale = [
            row
            for row in rows
            if row["embedding_model"] != runtime.embedder.name or len(row["embedding"]) != dimensions
        ]
        if stale:
            # Title and content: the neighbouring turns an offline event-log entry is embedded with are in
            # rows of this dump not yet written (memsys reembed, on a database, takes them too).
            vectors = await runtime.embedder.embed(
                [embedding_text(row.get("title"), row["content"], [], []) for row in stale]
            )
            for row, vector in zip(stale, vectors, strict=True):
                row["embedding"] = vector
                row["embedding_model"] = runtime.embedder.name
    counts[kind] += await repository.insert_rows(conn, dump.TABLES[kind], rows)
    return len(stale)
