"""memsys behind PgBouncer in transaction pooling mode (docs/managed-postgres.md), as a platform team runs it: the
database provisioned and migrated on PostgreSQL itself, then a real ``pgbouncer`` (``pool_mode = transaction``,
server connections handed out in turn, so a client's next transaction lands on another one) in front of it, and a
real ``memsys serve`` and ``memsys keys`` whose ``MEMSYS_DATABASE_URL`` is the pooler's.

Needs pgbouncer (``apt-get install pgbouncer``); without it the test is skipped, except in CI (``CI=true``), where it
fails.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url

from tests.conftest import free_port, process_env
from tests.tenancy_support import bearer
from tests.test_managed_postgres import memsys, provision
from tests.test_startup_errors import said_plainly

pytestmark = pytest.mark.managed

OWNER, DATABASE = "acme_owner", "pooled_memsys"
API = "/api/v3/agentic"
WORDS = {"acme": "zeppelin", "globex": "submarine"}


def pgbouncer_binary() -> str:
    """Debian's pgbouncer, or a skip (a failure in CI) naming how to install it."""
    path = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if path:
        return path
    reason = "the PgBouncer test needs pgbouncer (apt-get install pgbouncer)"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason}: CI must install it (.ci/run)")
    pytest.skip(reason)


@pytest.fixture
def pgbouncer(server_url: str, on_citus: bool, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The owner's URL through PgBouncer in transaction mode, and PgBouncer's log."""
    binary = pgbouncer_binary()
    if on_citus:
        pytest.skip("a database of its own: the Citus cluster's is shared")
    direct = provision(server_url, OWNER, DATABASE)
    migrated = memsys("migrate", MEMSYS_DATABASE_URL=direct)  # on PostgreSQL itself: migrations need a session
    assert migrated.returncode == 0, migrated.stderr
    server = conninfo_to_dict(server_url)
    host, port = server.get("host") or "localhost", server.get("port") or "5432"
    users = tmp_path / "users.txt"
    users.write_text(f'"{OWNER}" ""\n"{DATABASE}_app" ""\n')  # trust, as the test server's own logins
    listen = free_port()
    config = tmp_path / "pgbouncer.ini"
    config.write_text(
        f"[databases]\n{DATABASE} = host={host} port={port} dbname={DATABASE}\n\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {users}\npool_mode = transaction\ndefault_pool_size = 5\n"
        "server_round_robin = 1\n"
    )
    # pgbouncer refuses to run as root: then as the owner of the server's socket directory (the embedded server's
    # user, the only one that may enter it), or nobody.
    user = []
    if os.geteuid() == 0:
        user = ["-u", pwd.getpwuid(os.stat(host).st_uid).pw_name if os.path.isdir(host) else "nobody"]
    log = tmp_path / "pgbouncer.log"
    with log.open("wb") as output:
        bouncer = subprocess.Popen([binary, *user, str(config)], stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            assert bouncer.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        yield make_url(direct).set(host="127.0.0.1", port=listen, query={}).render_as_string(False), log
    finally:
        bouncer.terminate()
        bouncer.wait(timeout=10)


def other(tenant: str) -> str:
    return "globex" if tenant == "acme" else "acme"


def create_key(tenant: str, env: dict[str, str]) -> tuple[str, str]:
    """``memsys keys create``: the key's id and the key."""
    done = memsys("keys", "create", "--tenant", tenant, **env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0].split()[2], done.stdout.split()[-1]  # "Created key <id> (…", the key last


def memorize(base: str, key: str, tenant: str, first: int, count: int) -> None:
    """``count`` messages into the tenant's group ``trip``, four requests at a time."""

    def one(i: int) -> None:
        body = {
            "group_id": "trip",
            "sender": "alice",
            "message_id": f"m{i}",
            "create_time": f"2026-03-01T10:{i:02d}:00Z",
            "content": f"Booked the {WORDS[tenant]} tour number {i}",
        }
        answer = httpx.post(f"{base}{API}/memorize", json=body, headers=bearer(key), timeout=60)
        assert answer.status_code == 200, answer.text

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(first, first + count)))


def flush(base: str, key: str) -> dict:
    answer = httpx.post(f"{base}{API}/flush", json={"group_id": "trip"}, headers=bearer(key), timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def search(base: str, key: str, query: str) -> list[str]:
    body = {"query": query, "group_id": "trip", "top_k": 10}
    answer = httpx.post(f"{base}{API}/retrieve_lightweight", json=body, headers=bearer(key), timeout=60)
    assert answer.status_code == 200, answer.text
    return [memory["content"] for memory in answer.json()["result"]["memories"]]


def test_memsys_serves_through_pgbouncer_in_transaction_mode(pgbouncer, server_process_factory) -> None:
    url, bouncer_log = pgbouncer
    env = {**process_env(url), "MEMSYS_KEY_CACHE_SECONDS": "1"}
    # Without the setting the pooler refuses memsys's login (the timeouts in libpq's options), and memsys says what
    # to set; with it, migrations are refused (they need a session: the fixture ran them on PostgreSQL itself).
    said_plainly(
        memsys("serve", "--port", str(free_port()), **env),
        "unsupported startup parameter",
        "MEMSYS_DB_TRANSACTION_POOLER=true",
    )
    env["MEMSYS_DB_TRANSACTION_POOLER"] = "true"
    said_plainly(memsys("migrate", **env), "Migrations need a session", "MEMSYS_MIGRATE_ON_START=false")

    server = server_process_factory(env)
    server.start(timeout=120)
    base = server.base_url
    assert httpx.get(f"{base}{API}/memories").status_code == 200  # no key yet: anonymous, on loopback
    keys = {tenant: create_key(tenant, env) for tenant in WORDS}
    # The first key ends anonymous access at once (a keys watch LISTENing through the pooler would never hear of it).
    assert httpx.get(f"{base}{API}/memories").status_code == 401

    # Each tenant's messages are formed into memories, twice on the same stream (its formation lock taken again).
    for first in (0, 6):
        for tenant, (_, key) in keys.items():
            memorize(base, key, tenant, first, 6)
            formed = flush(base, key)
            assert formed["status_info"] == "extracted" and formed["count"] > 0, formed

    # Searches answer, many at once and each query many times on each connection; a tenant finds its own memories,
    # and never the other's, even when it asks for them.
    def searched(turn: int) -> tuple[str, list[str]]:
        tenant = list(WORDS)[turn % 2]
        key = keys[tenant][1]
        found = search(base, key, f"the {WORDS[tenant]} tour")
        assert any(WORDS[tenant] in content for content in found), (tenant, found)
        return tenant, found + search(base, key, f"the {WORDS[other(tenant)]} tour")

    with ThreadPoolExecutor(4) as pool:
        for tenant, found in pool.map(searched, range(40)):
            assert not any(WORDS[other(tenant)] in content for content in found), (tenant, found)
    for tenant, (_, key) in keys.items():
        listed = httpx.get(f"{base}{API}/memories", headers=bearer(key), timeout=60).json()["result"]["memories"]
        contents = [m.get("content") or "" for m in listed]
        assert any(WORDS[tenant] in c for c in contents), (tenant, listed)
        assert not any(WORDS[other(tenant)] in c for c in contents), (tenant, listed)

    # A revoked key stops within MEMSYS_KEY_CACHE_SECONDS; the other tenant's goes on.
    revoked = memsys("keys", "revoke", keys["acme"][0], **env)
    assert revoked.returncode == 0, revoked.stderr
    deadline = time.monotonic() + 5
    while httpx.get(f"{base}{API}/memories", headers=bearer(keys["acme"][1])).status_code != 401:
        assert time.monotonic() < deadline, "the revoked key still works"
        time.sleep(0.2)
    assert httpx.get(f"{base}{API}/memories", headers=bearer(keys["globex"][1])).status_code == 200

    server.stop()
    output = server.output()
    assert "Traceback" not in output and "prepared statement" not in output, output
    # No LISTEN went through the pooler: PostgreSQL would then notify server connections no client holds.
    assert "when not linked" not in bouncer_log.read_text()
