"""Two ``memsys serve`` on one database, as two replicas behind a load balancer: what one knows, the other knows."""

from __future__ import annotations

import hashlib
import re

import httpx
import psycopg
import pytest

from app.tenancy.service import key_hash
from tests.tenancy_support import create_key

pytestmark = pytest.mark.managed  # a deployment's shape: run with the managed-PostgreSQL suite (pytest -m managed)


def _login(base: str, key: str) -> str:
    answer = httpx.post(f"{base}/inspect/login", data={"key": key}, headers={"Origin": base}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return answer.cookies["memsys_session"]


def test_an_inspector_session_opened_on_one_replica_is_one_on_the_other(
    database_url: str, server_process_factory
) -> None:
    env = {"MEMSYS_DATABASE_URL": database_url, "MEMSYS_MIGRATE_ON_START": "false", "MEMSYS_KEY_CACHE_SECONDS": "0"}
    first, second = server_process_factory(env), server_process_factory(env)
    first.start()
    second.start()
    key = create_key(database_url, "acme")
    session = _login(first.base_url, key)
    # PostgreSQL holds the session for both, as hashes: neither the cookie nor the key.
    assert _sessions(database_url) == [(hashlib.sha256(session.encode()).hexdigest(), key_hash(key))]

    page = httpx.get(f"{second.base_url}/inspect", cookies={"memsys_session": session})
    assert page.status_code == 200 and "acme" in page.text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    out = httpx.post(
        f"{second.base_url}/inspect/logout",
        data={"csrf_token": token},
        cookies={"memsys_session": session},
        headers={"Origin": second.base_url},
    )
    assert out.status_code == 303 and out.headers["location"] == "/inspect/login"
    # Signed out on the second: the first no longer knows the cookie either.
    again = httpx.get(f"{first.base_url}/inspect", cookies={"memsys_session": session})
    assert again.status_code == 303 and again.headers["location"] == "/inspect/login"
    assert _sessions(database_url) == []


def _sessions(database_url: str) -> list[tuple[str, str]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT id_hash, key_hash FROM inspector_sessions").fetchall()
