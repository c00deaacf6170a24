"""A tenant's shards moved by Citus while memsys writes and reads them: nothing lost, nothing formed twice,
every search answered the same (docs/scaling.md, "Moving shards while memsys serves").

Only on a Citus coordinator (``pytest -m citus``, on the cluster ``deploy/citus/up.sh`` makes, with
``wal_level = logical``); the benchmark at scale is ``python -m benchmarks.citus_online``.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from app.db.citus import placement_moved
from tests.formation_helpers import assert_each_message_in_one_memcell, rows, wait_for

pytestmark = pytest.mark.citus

ARCHIVE = [
    "Alice moved the release of the billing service to Friday after the payment tests failed",
    "Bob booked the team offsite in Lisbon for the first week of October",
    "Chen found that the nightly backup job skipped the analytics database twice",
    "Dana wants the onboarding checklist to mention the VPN certificate renewal",
]


def _memorize(client, group: str, message_id: str, content: str) -> int:
    body = {
        "group_id": group, "message_id": message_id, "sender": "alice", "sender_name": "Alice",
        "create_time": "2026-06-01T10:00:00Z", "content": content,
    }  # fmt: skip
    return client.post("/api/v3/agentic/memorize", json=body).status_code


def _search(client, query: str) -> tuple[int, list[str]]:
    body = {"query": query, "group_id": "archive", "data_source": "event_log", "top_k": 10, "time_range_days": 100000}
    response = client.post("/api/v3/agentic/retrieve_lightweight", json=body)
    ids = [m["id"] for m in response.json()["result"]["memories"]] if response.status_code == 200 else []
    return response.status_code, ids


def _placement(database_url: str, tenant: str) -> tuple[int, int]:
    """(shard id of the tenant's memcells shard, port of the worker holding it)."""
    row = rows(
        database_url,
        """SELECT s.shardid, n.nodeport FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
            JOIN pg_dist_node n USING (groupid)
           WHERE s.shardid = get_shard_id_for_distribution_column('memcells', %s::text)""",
        tenant,
    )[0]
    return row["shardid"], row["nodeport"]


def test_a_tenant_isolated_and_moved_while_it_writes_and_reads_loses_nothing(client, database_url, on_citus):
    if not on_citus:
        pytest.skip("needs a Citus coordinator (pytest -m citus)")
    for n, text in enumerate(ARCHIVE * 3):
        assert _memorize(client, "archive", f"a{n}", f"{text} (note {n})") == 200
    assert client.post("/api/v3/agentic/flush", json={"group_id": "archive"}).status_code == 200
    wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0, timeout=60)
    queries = ["When is the billing release?", "Where is the offsite?", "What did the backup job skip?"]
    reference = {q: _search(client, q) for q in queries}
    assert all(status == 200 and ids for status, ids in reference.values())

    # While memsys keeps writing to the tenant and reading from it, the tenant gets a shard of its own (the split
    # blocks the shard group's writes while it copies: Citus's non-blocking split stalls under concurrent UPDATEs,
    # citusdata/citus#6790), which then moves to the other worker by logical replication, writes flowing.
    workers = [r["nodeport"] for r in rows(database_url, "SELECT nodeport FROM pg_dist_node WHERE groupid > 0")]
    failure: list[BaseException] = []
    moved: list[tuple[int, int, int]] = []

    def isolate_and_move() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(
                    "SELECT isolate_tenant_to_new_shard('memcells', 'default'::text, 'CASCADE', "
                    "shard_transfer_mode => 'block_writes')"
                )
                shard, source = _placement(database_url, "default")
                target = next(port for port in workers if port != source)
                conn.execute(
                    "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s, "
                    "shard_transfer_mode => 'force_logical')",
                    (shard, source, target),
                )
                moved.append((shard, source, target))
        except BaseException as exc:  # noqa: BLE001 (reported by the test's thread)
            failure.append(exc)

    mover = threading.Thread(target=isolate_and_move)
    began = time.monotonic()
    mover.start()
    statuses, answers, sent = [], [], []
    while mover.is_alive() or len(sent) < 5:
        message_id = f"live{len(sent)}"
        statuses.append(_memorize(client, "live", message_id, f"live note number {len(sent)} about the move"))
        sent.append(message_id)
        query = queries[len(sent) % len(queries)]
        answers.append((query, *_search(client, query)))
    mover.join(timeout=120)
    assert not failure, failure
    shard, _, target = moved[0]
    assert _placement(database_url, "default") == (shard, target), "the move did not complete"
    moved_s = time.monotonic() - began

    assert statuses == [200] * len(sent), statuses
    assert [(q, status, ids) for q, status, ids in answers if (status, ids) != reference[q]] == [], moved_s
    assert client.post("/api/v3/agentic/flush", json={"group_id": "live"}).status_code == 200
    wait_for(database_url, "SELECT count(*) FROM messages WHERE status = 'pending'", 0, timeout=60)
    stored = rows(database_url, "SELECT message_id FROM messages WHERE group_id = 'live'")
    assert sorted(r["message_id"] for r in stored) == sorted(sent)
    assert_each_message_in_one_memcell(database_url, {*sent, *(f"a{n}" for n in range(len(ARCHIVE) * 3))})
    assert {q: _search(client, q) for q in queries} == reference
    # The shards the split and the move left behind go now rather than in Citus's next cleanup round: until then
    # they still hold the tenant's old rows under the reference table's foreign keys (a tenant deleted meanwhile
    # would cascade into them).
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CALL citus_cleanup_orphaned_resources()")
        assert conn.execute("SELECT count(*) FROM pg_dist_cleanup").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("message", "moved"),
    [
        ("could not find valid entry for shard 102147", True),  # seen in a formation job during a split
        ("could not find valid entry for shard placement 40", True),
        ("could not find any healthy placement for shard 102039", True),
        ("no active placements were found for shard 102039", True),
        ('relation "public.memories_102039" does not exist', True),
        ('relation "memories" does not exist', False),  # the table itself: not a move
        ("canceling statement due to lock timeout", False),
        ("duplicate key value violates unique constraint", False),
    ],
)
def test_a_shard_moved_under_a_statement_is_told_from_other_errors(message: str, moved: bool):
    """The errors memsys answers with a 503 and Retry-After (app/http/errors.py), as Citus words them (Citus 13.2's
    sources): the statement run again finds the shard's new placement."""
    assert placement_moved(psycopg.errors.InternalError_(message)) is moved
