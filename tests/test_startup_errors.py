"""The start-up mistakes a user makes first, each said in a line with what to do (no traceback without --verbose),
by the real ``memsys`` command against a real PostgreSQL."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from app.db import migrate
from tests.conftest import recreate_database

ROOT = Path(__file__).resolve().parent.parent


def memsys(*args: str, **env: str) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "MEMSYS_LOG_LEVEL": "WARNING", **env}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=run_env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def said_plainly(done: subprocess.CompletedProcess, *phrases: str) -> None:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"memsys {done.args[3]}: "), done.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


@pytest.fixture
def empty_database(server_url: str, on_citus: bool) -> str:
    if on_citus:
        pytest.skip("a database of its own: the Citus cluster's is shared")
    return recreate_database(server_url, "memsys_startup_errors")


def test_a_port_in_use_is_said_before_anything_starts(database_url: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        done = memsys("serve", "--port", port, MEMSYS_DATABASE_URL=database_url)
    said_plainly(done, f"Cannot listen on 127.0.0.1:{port}", "--port")


def test_a_database_that_does_not_answer(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]  # then closed: nothing listens there
    url = f"postgresql://memsys:secret@127.0.0.1:{port}/memsys"
    for command in (("serve", "--port", "0"), ("migrate",), ("worker",)):
        done = memsys(*command, MEMSYS_DATABASE_URL=url)
        said_plainly(done, "Cannot connect to PostgreSQL", "Connection refused", "MEMSYS_DATABASE_URL")
        assert "secret" not in done.stderr
    verbose = memsys("migrate", "--verbose", MEMSYS_DATABASE_URL=url)
    assert verbose.returncode != 0 and "Traceback" in verbose.stderr


def test_a_postgresql_without_pgvector_says_where_to_get_it(empty_database: str) -> None:
    """The test's PostgreSQL (18) looks for extensions in an empty folder only (``extension_control_path``): as
    a server without the pgvector package installed. The folder is one its server process may read."""
    no_extensions = Path(tempfile.mkdtemp(prefix="memsys-no-extensions-"))
    (no_extensions / "extension").mkdir()
    for folder in (no_extensions, no_extensions / "extension"):
        folder.chmod(0o755)
    url = (
        f"{empty_database}{'&' if '?' in empty_database else '?'}options=-c%20extension_control_path%3D{no_extensions}"
    )
    try:
        with psycopg.connect(url) as conn:
            available = conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        assert available == (0,)
        for command in (("migrate",), ("serve", "--port", "0")):
            done = memsys(*command, MEMSYS_DATABASE_URL=url)
            said_plainly(done, "no pgvector", "apt.postgresql.org", "CREATE EXTENSION")
    finally:
        shutil.rmtree(no_extensions)


def test_a_database_migrated_by_a_newer_memsys(empty_database: str) -> None:
    migrate.upgrade(empty_database, 384)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_a_newer_memsys'")
    said_plainly(memsys("migrate", MEMSYS_DATABASE_URL=empty_database), "newer memsys", "9999_from_a_newer_memsys")


def test_a_setting_that_does_not_validate_is_named() -> None:
    said_plainly(memsys("serve", MEMSYS_PORT="eighty"), "MEMSYS_PORT", "'eighty'")
    said_plainly(memsys("migrate", MEMSYS_DB_POOL_SIZE="many"), "MEMSYS_DB_POOL_SIZE")


def test_serving_every_address_before_any_key_is_refused_in_one_line(empty_database: str) -> None:
    done = memsys("serve", "--host", "0.0.0.0", "--port", "0", MEMSYS_DATABASE_URL=empty_database)
    said_plainly(done, "Refusing to serve 0.0.0.0 without API keys", "memsys keys create")


def test_serving_a_schema_that_is_not_this_codes_is_refused_in_one_line(empty_database: str) -> None:
    """Without migrate-on-start (replicas upgraded by one `memsys migrate`): a database behind this code, ahead of
    it, or never migrated is named, with what to do, before anything is served."""
    off = {"MEMSYS_DATABASE_URL": empty_database, "MEMSYS_MIGRATE_ON_START": "false"}
    said_plainly(memsys("serve", "--port", "0", **off), "no memsys schema yet", "memsys migrate")
    said_plainly(memsys("keys", "create", "--tenant", "acme", **off), "no memsys schema yet", "memsys migrate")
    migrate.upgrade(empty_database, 384, "0020")
    said_plainly(memsys("serve", "--port", "0", **off), "at revision 0020", "run `memsys migrate`")
    migrate.upgrade(empty_database, 384)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_a_newer_memsys'")
    said_plainly(memsys("worker", **off), "newer memsys", "9999_from_a_newer_memsys")
