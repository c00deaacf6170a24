"""Exports. A user's, over HTTP: everything held about them as one JSON document (``memsys.user-export`` v1).
A tenant's or the whole database's, by ``memsys export`` / ``memsys import``: the JSON-lines dump of
app.transfer.dump, with embeddings.

A user's export holds the messages they sent, memories about them and the group-level memories formed from
their messages (types, times, provenance), every version of their profiles, and their entry in
conversations' ``user_details``. Embeddings are left out of it: they are derived, large, and model-specific.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from tqdm import tqdm

from app import queue
from app.db.engine import create_engine
from app.runtime import Runtime
from app.tenancy import repository as tenancy
from app.tenancy import scope
from app.text.memory_text import embedding_text
from app.transfer import dump, repository, screening
from app.transfer.rows import Limits

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
    runtime: Runtime,
    path: Path,
    checked: tuple[dict[str, Any], int],
    *,
    include_forgotten: Collection[str] | Literal["all"] = (),
    tenants: frozenset[str] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write a dump that ``check_dump`` accepted (``checked`` is its answer: call it first, so that a bad dump
    fails before the database and the model load) in one transaction. The lines are read again as they are
    written, so a file changed since then still fails with nothing written. What the dump holds about users
    forgotten since, MemCells formed again since and rows already present are left out (app.transfer.screening),
    so an import never writes a memory twice nor brings a forgotten user back, unless ``include_forgotten``
    names them (or is ``"all"``): then they are no longer forgotten. Memories of another embedding model are
    embedded again with this one. ``tenants``: as ``check_dump``'s. A row the database refuses is a
    ``DumpError`` naming its lines and the constraint, never the row (and nothing is written)."""
    first, total = checked
    tally = screening.Tally(added=Counter(dict.fromkeys(dump.TABLES, 0)))
    bring_back = None if include_forgotten == "all" else frozenset(include_forgotten)
    owner = create_engine(runtime.database_url, runtime.settings)
    try:
        async with owner.begin() as conn:
            with (
                path.open("rb") as file,
                tqdm(total=total - 1, desc="import", unit=" rows", disable=not progress, file=sys.stderr) as bar,
            ):
                records = dump.read(dump.lines_of(file), Limits.of(runtime.settings), tenants)
                screens, reembedded = await _write_all(runtime, conn, records, bar, tally, bring_back)
            for screen in screens.values():
                for stream, cells in screen.cells_to_form().items():
                    await queue.defer_form_again(conn, screen.tenant, stream, cells)
    finally:
        await owner.dispose()
    return {
        "rows": dict(tally.added),
        "skipped": {
            "forgotten": _in_dump_order(tally.forgotten),
            "formed_again": _in_dump_order(tally.formed_again),
            "of_left_out_memcells": _in_dump_order(tally.of_left_out),
            "present": _in_dump_order(tally.present),
        },
        "forgotten_users": {tenant: sorted(users) for tenant, users in sorted(tally.forgotten_users.items())},
        "brought_back": {tenant: sorted(users) for tenant, users in sorted(tally.brought_back.items())},
        "to_form": tally.to_form,
        "reembedded": reembedded,
        "from_model": first["embedding"]["model"],
        "model": runtime.embedder.name,
    }


def import_report(result: dict[str, Any]) -> list[str]:
    """What ``import_dump`` wrote, what it left out and why (counts by row type), one line each for the CLI."""

    def counts(by_kind: dict[str, int]) -> str:
        return ", ".join(f"{count} {kind}" for kind, count in by_kind.items() if count)

    def users(by_tenant: dict[str, list[str]]) -> str:
        return "; ".join(f"{tenant}: {', '.join(names)}" for tenant, names in by_tenant.items())

    skipped = result["skipped"]
    lines = [f"added {', '.join(f'{n} {kind}' for kind, n in result['rows'].items())}; "
             f"embedded again: {result['reembedded']}"]  # fmt: skip
    if any(skipped["forgotten"].values()):
        lines.append(
            f"skipped, about users forgotten since ({users(result['forgotten_users'])}): "
            f"{counts(skipped['forgotten'])}; to bring one back: memsys import FILE --include-forgotten USER"
        )
    if any(skipped["formed_again"].values()):
        lines.append(f"skipped, formed again since the dump: {counts(skipped['formed_again'])}")
    if any(skipped["of_left_out_memcells"].values()):
        lines.append(f"skipped with their MemCell: {counts(skipped['of_left_out_memcells'])}")
    if skipped["present"]:
        lines.append(f"skipped, already present (same id or same message): {counts(skipped['present'])}")
    if result["to_form"]:
        lines.append(f"{result['to_form']} message to form again (their MemCell was not imported): queued")
    if result["brought_back"]:
        lines.append(f"no longer forgotten: {users(result['brought_back'])}")
    return lines


IMPORT_BATCH = 500


def _in_dump_order(counts: Counter) -> dict[str, int]:
    """The counts that are not zero, by row type in dump order (then a conversation's participant entries)."""
    return {kind: counts[kind] for kind in [*dump.TABLES, screening.PARTICIPANT_ENTRY] if counts[kind]}


def check_dump(path: Path, limits: Limits, tenants: frozenset[str] | None = None) -> tuple[dict[str, Any], int]:
    """Read the whole dump once: its header and its number of records, or a ``DumpError`` naming a line.
    ``tenants``: the only tenants whose sections it may hold (``None``: those the header names, or any)."""
    with path.open("rb") as file:
        records = dump.read(dump.lines_of(file), limits, tenants)
        first = next(records)
        return first, 1 + sum(1 for _ in records)


async def _write_all(
    runtime: Runtime,
    conn: AsyncConnection,
    records: Iterator[dump.Record | dict[str, Any]],
    bar: tqdm,
    tally: screening.Tally,
    bring_back: frozenset[str] | None,
) -> tuple[dict[str, screening.Screen], int]:
    """Write the dump's rows in batches of one type and tenant; each tenant's screen, and how many memories were
    embedded again."""
    screens: dict[str, screening.Screen] = {}
    reembedded = 0

    async def write(batch: list[dump.Record]) -> int:
        if not batch:
            return 0
        tenant = batch[0].tenant_id
        await tenancy.ensure_tenant(conn, tenant)
        await scope.enter(conn, tenant)
        try:
            if tenant not in screens:
                screens[tenant] = await _screen(conn, tenant, tally, bring_back)
            return await _write(runtime, conn, screens[tenant], batch)
        except DBAPIError as exc:
            # The driver's message and SQLAlchemy's quote the row: name the lines and the constraint instead.
            first, last = batch[0].line, batch[-1].line
            where = f"line {first}" if first == last else f"lines {first}-{last}"
            raise dump.DumpError(
                f"{where}: the database refused a {batch[0].type} row of tenant {tenant} ({refusal(exc)})"
            ) from None

    batch: list[dump.Record] = []
    for record in records:
        if isinstance(record, dict):
            continue
        # One statement inserts a batch with its first row's columns: a row with other columns (a nullable one
        # left out of some lines) starts a batch of its own, or its extra values would be dropped.
        if batch and (
            record.type != batch[0].type
            or record.tenant_id != batch[0].tenant_id
            or record.values.keys() != batch[0].values.keys()
        ):
            reembedded += await write(batch)
            batch = []
        batch.append(record)
        if len(batch) >= IMPORT_BATCH:
            reembedded += await write(batch)
            batch = []
        bar.update()
    reembedded += await write(batch)
    return screens, reembedded


def refusal(exc: DBAPIError) -> str:
    """What the database refused, without the values: the error's class, SQLSTATE and constraint."""
    error = exc.orig
    diag = getattr(error, "diag", None)
    parts = [type(error).__name__, f"SQLSTATE {getattr(error, 'sqlstate', None) or 'unknown'}"]
    if diag is not None and diag.constraint_name:
        parts.append(f"constraint {diag.constraint_name}")
    if diag is not None and diag.column_name:
        parts.append(f"column {diag.column_name}")
    return ", ".join(parts)


async def _screen(
    conn: AsyncConnection, tenant: str, tally: screening.Tally, bring_back: frozenset[str] | None
) -> screening.Screen:
    """The tenant's screen: who the database holds as forgotten, once those brought back are no longer."""
    if bring_back is None or bring_back:
        cleared = await repository.clear_forgotten(conn, tenant, bring_back)
        if cleared:
            tally.brought_back.setdefault(tenant, set()).update(cleared)
    return screening.Screen(tenant, tally, await repository.forgotten_in(conn, tenant), bring_back)


async def _write(runtime: Runtime, conn: AsyncConnection, screen: screening.Screen, batch: list[dump.Record]) -> int:
    """Write one batch of one type and tenant, what its screen keeps of it; returns how many memories were
    embedded again."""
    kind, tally = batch[0].type, screen.tally
    rows = [record.values for record in batch]
    if kind == "forgotten_user":
        kept = screen.tombstones(rows)
        recorded = await repository.record_forgotten(conn, kept)
        tally.added[kind] += recorded
        tally.present[kind] += len(kept) - recorded
        return 0
    stored = None
    if kind == "memcell":
        stored = await repository.stored_messages(conn, screen.tenant, [
            key for row in rows for key in screening.memcell_messages(row)
        ])  # fmt: skip
    kept, detached = screen.keep(kind, rows, stored)
    reembedded = await _embed_again(runtime, kept) if kind == "memory" else 0
    if kind == "memory_event":
        added = await repository.insert_history(conn, kept)
    else:
        added = await repository.insert_rows(conn, dump.TABLES[kind], kept)
    written = await repository.insert_messages(conn, detached)
    screen.written_detached(written)
    tally.added[kind] += added + len(written)
    tally.present[kind] += len(kept) + len(detached) - added - len(written)
    return reembedded


async def _embed_again(runtime: Runtime, rows: list[dict[str, Any]]) -> int:
    """Embed again, with this server's model, the memories of another model or of other dimensions; how many."""
    dimensions = runtime.settings.embedding_dimensions
    stale = [
        row for row in rows if row["embedding_model"] != runtime.embedder.name or len(row["embedding"]) != dimensions
    ]
    if stale:
        # Title and content: the neighbouring turns an offline event-log entry is embedded with are in
        # rows of this dump not yet written (memsys reembed, on a database, takes them too).
        vectors = await runtime.embedder.embed([embedding_text(row.get("title"), row["content"], []) for row in stale])
        for row, vector in zip(stale, vectors, strict=True):
            row["embedding"] = vector
            row["embedding_model"] = runtime.embedder.name
    return len(stale)
