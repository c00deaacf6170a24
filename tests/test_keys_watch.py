"""app.tenancy.watch: a request without a key is served anonymously without reading api_keys while the watch knows
no active key exists, and any change to the keys (by memsys or by hand in psql) closes that at once."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from app.db.embedded import libpq_url
from app.db.engine import service_database_url
from app.db.migrate import service_role_for
from app.settings import Settings
from app.tenancy.watch import KeysWatch
from tests.formation_helpers import app_client
from tests.tenancy_support import bearer, create_key

MEMORIES = "/api/v3/agentic/memories"


@pytest.fixture
def plain_postgres(on_citus: bool) -> None:
    if on_citus:
        pytest.skip("on Citus api_keys has no trigger: the watch does not listen (tested in test_tenancy)")


def _owner(database_url: str, sql: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql)


async def _until(watch: KeysWatch, anonymous: bool, timeout: float = 10.0) -> float:
    """Seconds until ``watch.anonymous`` is ``anonymous``; fails after ``timeout``."""
    started = time.monotonic()
    while watch.anonymous is not anonymous:
        assert time.monotonic() - started < timeout, f"the watch still says anonymous={watch.anonymous}"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def test_the_watch_follows_every_change_to_the_keys(plain_postgres, settings: Settings, database_url: str):
    changes: list[int] = []
    watch = KeysWatch(libpq_url(service_database_url(settings, database_url)), lambda: changes.append(1))

    async def scenario() -> None:
        task = asyncio.create_task(watch.run())
        try:
            await _until(watch, True)  # no key yet
            await asyncio.to_thread(create_key, database_url, "acme")  # as memsys keys create does
            await _until(watch, False, timeout=2.0)
            assert changes
            _owner(database_url, "UPDATE api_keys SET revoked_at = now()")  # by hand in psql
            await _until(watch, True)
            _owner(database_url, "UPDATE api_keys SET revoked_at = NULL")
            await _until(watch, False, timeout=2.0)
            _owner(database_url, "TRUNCATE api_keys")
            await _until(watch, True)
            # Its connection ended (a database restart): not anonymous until it listens again.
            _owner(
                database_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'memsys keys watch'",
            )
            await _until(watch, False)
            await _until(watch, True)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert watch.anonymous is False

    asyncio.run(scenario())


def test_a_request_without_a_key_does_not_read_the_keys_while_the_watch_listens(
    plain_postgres, settings: Settings, database_url: str
):
    with app_client(settings) as client:
        deadline = time.monotonic() + 10
        while not client.app.state.keys_watch.anonymous:
            assert time.monotonic() < deadline, "the keys watch did not start"
            time.sleep(0.01)
        _owner(database_url, f"REVOKE SELECT ON api_keys FROM {service_role_for(database_url, None)}")
        try:
            # Served anonymously although the service's role can no longer read api_keys: no look-up was made.
            assert client.get(MEMORIES).status_code == 200
            # A key is still looked up (and that look-up now fails).
            assert client.get(MEMORIES, headers=bearer("msk_someone")).json()["code"] == "SYSTEM_ERROR"
        finally:
            _owner(database_url, f"GRANT SELECT ON api_keys TO {service_role_for(database_url, None)}")
        key = create_key(database_url, "acme")
        assert client.get(MEMORIES).status_code == 401  # the first key closed anonymous access at once
        assert client.get(MEMORIES, headers=bearer(key)).status_code == 200
