"""The service's statements have a deadline and a lock wait limit (``MEMSYS_DB_STATEMENT_TIMEOUT_SECONDS``,
``MEMSYS_DB_LOCK_TIMEOUT_SECONDS``), set on each of its connections, not on the owner's; a request whose statement
is cancelled by one gets an envelope (504, or 503 with Retry-After), never a 500."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from litestar.testing import TestClient
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.http.app import create_app
from app.settings import Settings
from tests.test_formation_concurrency import body

MEMORIZE = "/api/v3/agentic/memorize"


@contextmanager
def app_with(settings: Settings, **overrides) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"workers": 0, **overrides}))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def run(client: TestClient, sql: str):
    async def go():
        async with client.app.state.runtime.engine.connect() as conn:
            return (await conn.execute(text(sql))).scalar()

    return client.blocking_portal.call(go)


@contextmanager
def messages_locked(database_url: str) -> Iterator[None]:
    """The owner holds the messages table as a migration would (ACCESS EXCLUSIVE): every write of it waits."""
    with psycopg.connect(database_url) as owner:
        owner.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        yield
        owner.rollback()


@pytest.mark.parametrize("pooler", [False, True], ids=["at login", "per transaction behind a pooler"])
def test_a_service_connection_has_the_timeouts_and_the_owners_has_none(
    settings: Settings, database_url: str, pooler: bool
) -> None:
    settings = settings.model_copy(update={"db_transaction_pooler": pooler})
    with app_with(settings, db_statement_timeout_seconds=0.5, db_lock_timeout_seconds=0.25) as client:
        assert run(client, "SHOW statement_timeout") == "500ms"
        assert run(client, "SHOW lock_timeout") == "250ms"
        started = time.monotonic()
        with pytest.raises(OperationalError) as cancelled:
            run(client, "SELECT pg_sleep(2)")
        assert isinstance(cancelled.value.orig, psycopg.errors.QueryCanceled)
        assert 0.4 < time.monotonic() - started < 1.8
    with psycopg.connect(database_url) as owner:
        assert owner.execute("SHOW statement_timeout").fetchone() == ("0",)
    with app_with(settings, db_statement_timeout_seconds=0, db_lock_timeout_seconds=0) as client:
        assert run(client, "SHOW statement_timeout") == "0" and run(client, "SHOW lock_timeout") == "0"
        assert run(client, "SELECT 1 FROM pg_sleep(0.6)") == 1


def test_a_request_whose_statement_is_cancelled_is_a_504_envelope(settings: Settings, database_url: str) -> None:
    with app_with(settings, db_statement_timeout_seconds=0.5, db_lock_timeout_seconds=0) as client:
        with messages_locked(database_url):
            started = time.monotonic()
            answer = client.post(MEMORIZE, json=body(1))
        assert answer.status_code == 504, answer.text
        assert answer.json()["code"] == "REQUEST_TIMEOUT" and "took too long" in answer.json()["message"]
        assert time.monotonic() - started < 5
        assert client.post(MEMORIZE, json=body(2)).status_code == 200  # the lock gone, the same pool works


def test_a_request_that_waits_too_long_for_a_lock_is_a_503_to_retry(settings: Settings, database_url: str) -> None:
    with app_with(settings, db_statement_timeout_seconds=30, db_lock_timeout_seconds=0.3) as client:
        with messages_locked(database_url):
            answer = client.post(MEMORIZE, json=body(1))
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "SERVICE_UNAVAILABLE" and answer.headers["retry-after"] == "1"
        assert "locked" in answer.json()["message"]


def test_waiting_for_a_streams_formation_lock_is_not_cut_short(settings: Settings, database_url: str) -> None:
    """A worker waits for the stream another worker (or forget's re-forming) is forming, however long that takes:
    the lock timeouts are for stuck statements, not for this wait."""
    from app.formation import repository
    from app.formation.streams import Stream

    stream = Stream(kind="group", id="g-timeouts")
    with app_with(settings, db_statement_timeout_seconds=0.5, db_lock_timeout_seconds=0.2) as client:
        engine = client.app.state.runtime.for_tenant("default").engine

        async def take(hold_s: float) -> float:
            started = time.monotonic()
            async with engine.connect() as conn:
                await repository.lock_stream(conn, stream)
                await conn.commit()
                waited = time.monotonic() - started
                await asyncio.sleep(hold_s)
                assert await repository.unlock_stream(conn, stream)
                await conn.commit()
                assert (await conn.execute(text("SHOW lock_timeout"))).scalar() == "200ms"  # only while waiting
            return waited

        async def second() -> float:
            await asyncio.sleep(0.2)  # the first holds the lock by then
            return await take(0)

        async def both() -> list[float]:
            return list(await asyncio.gather(take(1.2), second()))

        first_waited, second_waited = client.blocking_portal.call(both)
    assert first_waited < 0.5 and second_waited > 0.8
