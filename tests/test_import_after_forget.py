"""Import after forget (issue 26, point 10): a dump taken before ``DELETE /users/wei`` brings wei back only when
asked for by name, and an import never writes a memory twice. Forget goes through a real ``memsys serve`` over
HTTP (its worker forms the others' messages again), export and import through the ``memsys`` command."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.conftest import process_env, recreate_database
from tests.conftest import run_memsys as memsys
from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, message, rows, wait_for
from tests.tenancy_support import bearer, create_key

# Also run against a Citus coordinator in CI (.ci/run): forget records who it forgot in a distributed table.
# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = [pytest.mark.citus, pytest.mark.processes]

GROUP = "group_trip"
TRIP = [
    ("alice", "I booked the flights to Lisbon for March"),
    ("wei", "My passport expires in February so I must renew it"),
    ("alice", "The hotel near the river has a rooftop pool"),
    ("alice", "We should visit the tile museum on Sunday"),
    ("wei", "I am allergic to shellfish"),
    ("alice", "I will rent a car for the coast road"),
    ("alice", "My sister lives in Porto and can host us"),
    ("wei", "I prefer window seats on long flights"),
    ("alice", "Dinner reservations are for eight o'clock"),
    ("alice", "Let us pack light this time"),
]
WEI_ALONE = "I keep my diary in the blue box under the bed"
ALICE_TEXTS = {text for sender, text in TRIP if sender == "alice"}
WEI_TEXTS = {text for sender, text in TRIP if sender == "wei"} | {WEI_ALONE}
ACME = "tenant_id = 'acme'"


def _fill(base_url: str, key: str) -> None:
    """The trip's group (alice and wei) and wei's personal stream, formed by the server's worker."""
    headers = bearer(key)
    details = {"alice": {"full_name": "Alice", "role": "planner"}, "wei": {"full_name": "Wei", "role": "traveller"}}
    meta = {**META_BODY, "group_id": GROUP, "user_details": details}
    assert httpx.post(base_url + META, json=meta, headers=headers).status_code == 200
    for i, (sender, text) in enumerate(TRIP, start=1):
        body = message(i, text, sender=sender, group_id=GROUP)
        assert httpx.post(base_url + MEMORIZE, json=body, headers=headers).status_code == 200
    personal = message(50, WEI_ALONE, sender="wei", group_id=None)
    assert httpx.post(base_url + MEMORIZE, json=personal, headers=headers).status_code == 200
    for flush in ({"group_id": GROUP}, {"sender": "wei"}):
        answer = httpx.post(base_url + FLUSH, json=flush, headers=headers, timeout=60)
        assert answer.json()["result"]["status_info"] == "extracted", answer.text


def _forget_wei(base_url: str, key: str, database_url: str) -> None:
    answer = httpx.delete(base_url + "/api/v3/agentic/users/wei", headers=bearer(key), timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["reformed"]["messages"] == 7  # alice's, formed again by the worker
    wait_for(database_url, f"SELECT count(*) FROM messages WHERE {ACME} AND status = 'pending'", 0, timeout=60)


def _snapshot(database_url: str) -> dict[str, list]:
    """Every row of every tenant, as ids (messages by stream and message id), to compare before and after."""
    return {
        "memcells": rows(database_url, "SELECT tenant_id, id FROM memcells ORDER BY 1, 2"),
        "messages": rows(
            database_url,
            "SELECT tenant_id, stream_id, message_id, memcell_id, status FROM messages ORDER BY 1, 2, 3",
        ),
        "memories": rows(database_url, "SELECT tenant_id, id FROM memories ORDER BY 1, 2"),
        "profiles": rows(database_url, "SELECT tenant_id, id FROM profiles ORDER BY 1, 2"),
        "meta": rows(database_url, "SELECT tenant_id, user_details FROM conversation_meta ORDER BY 1"),
    }


def _event_logs(database_url: str, tenant: str = "acme") -> Counter:
    """How many times each message's text is stored in the tenant as an event log ("Name: text", offline)."""
    found = rows(
        database_url, "SELECT content FROM memories WHERE tenant_id = %s AND memory_type = 'event_log'", tenant
    )
    return Counter(row["content"].split(": ", 1)[1] for row in found)


def _wei_words(database_url: str) -> list[str]:
    """Every stored text of acme that holds one of wei's sentences (messages and memories)."""
    texts = [r["content"] for r in rows(database_url, f"SELECT content FROM messages WHERE {ACME}")]
    texts += [r["content"] for r in rows(database_url, f"SELECT content FROM memories WHERE {ACME}")]
    return [text for text in texts if any(words in text for words in WEI_TEXTS)]


@pytest.fixture
def served(database_url: str, server_process_factory):
    keys = {tenant: create_key(database_url, tenant) for tenant in ("acme", "other")}
    server = server_process_factory(process_env(database_url))
    server.start()
    for key in keys.values():
        _fill(server.base_url, key)
    return server, keys


def test_a_dump_from_before_a_forget_brings_nobody_back_and_duplicates_nothing(
    served, database_url: str, tmp_path: Path
) -> None:
    server, keys = served
    before = tmp_path / "before.jsonl"
    assert memsys(database_url, "export", "-o", str(before)).returncode == 0
    per_message = _event_logs(database_url)
    assert {text for text in per_message if text in ALICE_TEXTS} == ALICE_TEXTS  # offline: one per message

    _forget_wei(server.base_url, keys["acme"], database_url)
    assert _wei_words(database_url) == []
    forgotten = _snapshot(database_url)
    alice_logs = _event_logs(database_url)
    assert sorted(alice_logs.values()) == [1] * 7 and set(alice_logs) == ALICE_TEXTS

    done = memsys(database_url, "import", str(before))
    assert done.returncode == 0, done.stderr
    # Nothing written: wei stays forgotten, alice's MemCell formed again is not joined by the old one.
    assert _snapshot(database_url) == forgotten
    assert _event_logs(database_url) == alice_logs
    assert _wei_words(database_url) == []
    lines = done.stderr.splitlines()
    assert (
        "memsys import: added 0 forgotten_user, 0 conversation_meta, 0 memcell, 0 message, 0 memory, 0 memory_event, "
        "0 profile; "
        "embedded again: 0" in lines
    )
    # wei's rows: 2 MemCells (the group's, the personal one), 4 messages, the memories about wei (3 + 1 event
    # logs, the personal episode and wei's copy of the group episode, the semantic memory of wei's allergy), 2
    # profiles, the participant entry.
    assert (
        "memsys import: skipped, about users forgotten since (acme: wei): 2 memcell, 4 message, 7 memory, "
        "2 profile, 1 participant entry; to bring one back: memsys import FILE --include-forgotten USER" in lines
    ), done.stderr
    # The others' rows of the group's old MemCell: alice's 7 event logs, her copy and the group's episode, her
    # profile version.
    assert "memsys import: skipped with their MemCell: 9 memory, 1 profile" in lines, done.stderr
    assert (
        "memsys import: skipped, already present (same id or same message): 2 conversation_meta, 2 memcell, "
        "18 message, 16 memory, 32 memory_event, 3 profile" in lines
    ), done.stderr

    # A dump taken after the forget holds the record of it, the same as the database's: nothing to add.
    after = tmp_path / "after.jsonl"
    assert memsys(database_url, "export", "-o", str(after)).returncode == 0
    same = memsys(database_url, "import", str(after))
    assert same.returncode == 0 and "added 0 forgotten_user, 0 conversation_meta, 0 memcell" in same.stderr
    assert "memsys import: skipped, already present (same id or same message): 1 forgotten_user, " in same.stderr
    assert _snapshot(database_url) == forgotten

    again = memsys(database_url, "import", str(before), "--include-forgotten", "wei")
    assert again.returncode == 0, again.stderr
    assert "memsys import: no longer forgotten: acme: wei" in again.stderr.splitlines(), again.stderr
    assert rows(database_url, "SELECT * FROM forgotten_users") == []
    back = rows(database_url, f"SELECT stream_id, status, memcell_id FROM messages WHERE {ACME} AND sender = 'wei'")
    assert len(back) == 4
    # The group's old MemCell is not written (alice's words are in the MemCell formed since): wei's three messages
    # of it come back without it, queued to be formed again; the personal MemCell comes back whole.
    assert "memsys import: skipped, formed again since the dump: 1 memcell" in again.stderr.splitlines()
    assert "memsys import: skipped with their MemCell: 14 memory, 2 profile" in again.stderr.splitlines()
    assert "memsys import: 3 message to form again (their MemCell was not imported): queued" in again.stderr
    assert (
        "memsys import: added 0 forgotten_user, 0 conversation_meta, 1 memcell, 4 message, 2 memory, 2 memory_event, "
        "1 profile; "
        "embedded again: 0" in again.stderr.splitlines()
    ), again.stderr
    wait_for(database_url, f"SELECT count(*) FROM messages WHERE {ACME} AND status = 'pending'", 0, timeout=60)
    assert rows(database_url, f"SELECT count(*) AS n FROM memcells WHERE {ACME} AND 'wei' = ANY(participants)") == [
        {"n": 2}
    ]
    logs = _event_logs(database_url)
    assert set(logs) == ALICE_TEXTS | WEI_TEXTS and sorted(logs.values()) == [1] * 11  # each text once

    third = memsys(database_url, "import", str(before), "--include-forgotten", "wei")
    assert third.returncode == 0 and "added 0 forgotten_user, 0 conversation_meta, 0 memcell, 0 message" in third.stderr
    assert _event_logs(database_url) == logs


def test_a_dump_carries_its_forgotten_users_into_a_new_database(
    served, database_url: str, server_url: str, tmp_path: Path
) -> None:
    """Restoring a new server from two backups, the later one taken after the forget: wei stays forgotten, but
    what wei said after being forgotten is kept."""
    server, keys = served
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    assert memsys(database_url, "export", "-o", str(before)).returncode == 0
    _forget_wei(server.base_url, keys["acme"], database_url)
    later = message(60, "I am back and I like trains", sender="wei", group_id=GROUP, at=datetime.now().astimezone())
    assert httpx.post(server.base_url + MEMORIZE, json=later, headers=bearer(keys["acme"])).status_code == 200
    httpx.post(server.base_url + FLUSH, json={"group_id": GROUP}, headers=bearer(keys["acme"]), timeout=60)
    wait_for(database_url, f"SELECT count(*) FROM messages WHERE {ACME} AND status = 'pending'", 0, timeout=60)
    assert memsys(database_url, "export", "-o", str(after)).returncode == 0
    tombstones = [json.loads(line) for line in after.read_text().splitlines() if '"forgotten_user"' in line]
    assert [(t["tenant_id"], t["user_id"]) for t in tombstones] == [("acme", "wei")]
    stamp = rows(database_url, "SELECT forgotten_at FROM forgotten_users")[0]["forgotten_at"]
    assert abs(stamp - datetime.fromisoformat(tombstones[0]["forgotten_at"])) < timedelta(seconds=1)
    wanted = _snapshot(database_url)

    target = recreate_database(server_url, "memsys_import_forget_test")
    for path in (after, before):
        done = memsys(target, "import", str(path))
        assert done.returncode == 0, done.stderr
    assert _snapshot(target) == wanted
    assert rows(target, f"SELECT content FROM messages WHERE {ACME} AND sender = 'wei'") == [
        {"content": "I am back and I like trains"}
    ]
    assert rows(target, "SELECT tenant_id, user_id FROM forgotten_users") == [{"tenant_id": "acme", "user_id": "wei"}]
    # The other tenant's wei was never forgotten: all there, once.
    assert rows(target, "SELECT count(*) AS n FROM messages WHERE tenant_id = 'other' AND sender = 'wei'") == [{"n": 4}]
    assert sorted(_event_logs(target, "other").values()) == [1] * 11

    # Asked for, without a name: every forgotten user of the dump comes back, and is no longer forgotten.
    everyone = memsys(target, "import", str(before), "--include-forgotten")
    assert everyone.returncode == 0, everyone.stderr
    assert "memsys import: no longer forgotten: acme: wei" in everyone.stderr.splitlines()
    assert rows(target, "SELECT * FROM forgotten_users") == []
    back = rows(target, f"SELECT status, count(*) AS n FROM messages WHERE {ACME} AND sender = 'wei' GROUP BY 1")
    # The three of the group's old MemCell wait for a worker (none runs on this database); the personal one came
    # back with its MemCell; the one said after the forget was there.
    assert sorted((r["status"], r["n"]) for r in back) == [("pending", 3), ("processed", 2)]
    queued = rows(target, "SELECT task_name, args FROM procrastinate_jobs WHERE status = 'todo'")
    assert [(job["task_name"], job["args"]["stream_id"], len(job["args"]["cells"][0])) for job in queued] == [
        ("form_again", GROUP, 3)
    ]
