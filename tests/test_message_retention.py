"""``MEMSYS_MESSAGE_RETENTION_DAYS``: messages formed into memories are deleted that long after memsys received them,
by the periodic sweep of the in-process worker; their memories stay, and so do messages still waiting for formation.
Unset (the default), nothing is deleted."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from app.memorize import service as memorize
from app.settings import Settings
from tests.formation_helpers import FLUSH, MEMORIZE, app_client, conversation, message, rows, wait_for

# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = pytest.mark.processes

AGED = "UPDATE messages SET received_at = now() - interval '3 days' WHERE message_id = ANY(%s)"


def _age(database_url: str, message_ids: list[str]) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(AGED, (message_ids,))


def test_formed_messages_past_their_retention_go_and_their_memories_stay(settings: Settings, database_url: str):
    with app_client(settings, message_retention_days=2) as client:
        for body in conversation()[:3]:
            assert client.post(MEMORIZE, json=body).status_code == 200
        assert client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]["status_info"] == "extracted"
        formed = [
            r["message_id"] for r in rows(database_url, "SELECT message_id FROM messages WHERE status = 'processed'")
        ]
        assert len(formed) == 3
        recent = message(10, "Formed but recent", group_id="group_recent")
        assert client.post(MEMORIZE, json=recent).status_code == 200
        assert client.post(FLUSH, json={"group_id": "group_recent"}).json()["result"]["status_info"] == "extracted"
        memories_before = rows(database_url, "SELECT count(*) AS n FROM memories")[0]["n"]
        assert memories_before > 0
        _age(database_url, formed)

        # The sweep runs every 30 seconds.
        wait_for(
            database_url,
            "SELECT count(*) FROM messages WHERE status = 'processed' AND group_id = 'group_123'",
            0,
            timeout=75,
        )
    left = rows(database_url, "SELECT group_id, status FROM messages ORDER BY group_id")
    assert left == [{"group_id": "group_recent", "status": "processed"}]
    assert rows(database_url, "SELECT count(*) AS n FROM memories")[0]["n"] == memories_before


def test_only_formed_messages_go_and_only_with_a_retention(settings: Settings, database_url: str):
    """Without workers, nothing forms: aged pending messages stay whatever the retention; a message formed (here
    marked so by hand, as formation does) goes only once a retention is set."""
    with app_client(settings, workers=0) as client:
        for body in conversation()[:2]:
            assert client.post(MEMORIZE, json=body).status_code == 200
        _age(database_url, [body["message_id"] for body in conversation()[:2]])
        runtime = client.app.state.runtime.for_tenant("default")
        assert runtime.settings.message_retention_days is None
        assert client.blocking_portal.call(memorize.delete_old_messages, runtime) == 0
        kept = dataclasses.replace(runtime, settings=runtime.settings.model_copy(update={"message_retention_days": 2}))
        assert client.blocking_portal.call(memorize.delete_old_messages, kept) == 0  # pending: kept
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE messages SET status = 'processed' WHERE message_id = %s", ("msg_001",))
        assert client.blocking_portal.call(memorize.delete_old_messages, runtime) == 0  # no retention
        assert client.blocking_portal.call(memorize.delete_old_messages, kept) == 1
    assert rows(database_url, "SELECT message_id, status FROM messages") == [
        {"message_id": "msg_002", "status": "pending"}
    ]
