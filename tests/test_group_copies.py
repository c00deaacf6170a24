"""A group episode comes once in a search without a user: the group's copy. A participant's copy is left out
only where its MemCell holds the group's copy (``memories.has_group_copy``, kept by migration 0020's triggers),
whatever order the copies are written in, and is found again once the group's copy is deleted."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from app.db.tables import memcells
from app.memories.repository import insert_memories
from tests.retrieval_support import MEMCELL, memory, retrieve, tenant_engine

OFFSITE = "The team offsite in Lisbon is booked for the second week of May"
QUERY = {"query": "Lisbon offsite", "retrieval_mode": "bm25", "top_k": 10}


def _write(database_url: str, statements: list[list[tuple[str | None, str | None, str]]]) -> list[str]:
    """Each statement a list of (user_id, group_id, memcell key) episodes of OFFSITE, inserted in one INSERT, in
    order; MemCells by key. Returns the ids in the order given."""

    async def run() -> list[str]:
        engine = tenant_engine(database_url)
        cells: dict[str, uuid.UUID] = {}
        ids: list[str] = []
        try:
            async with engine.begin() as conn:
                for rows in statements:
                    for _, _, key in rows:
                        if key not in cells:
                            cells[key] = (
                                await conn.execute(memcells.insert().returning(memcells.c.id), MEMCELL)
                            ).scalar_one()
                    new = [memory(OFFSITE, [0.1] * 384, user_id=user, group_id=group) for user, group, _ in rows]
                    for item, (_, _, key) in zip(new, rows, strict=True):
                        item.memcell_id = cells[key]
                    ids += [row["id"] for row in await insert_memories(conn, new)]
            return ids
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _found(client, **body) -> set[tuple[str | None, str | None]]:
    return {(m["user_id"], m["group_id"]) for m in retrieve(client, **QUERY, **body)["memories"]}


@pytest.mark.citus
def test_the_groups_copy_written_first_stands_for_its_participants(client, database_url):
    # As formation writes a group conversation's episode: the group's copy first, in the same statement.
    _write(database_url, [[(None, "g1", "a"), ("u1", "g1", "a"), ("u2", "g1", "a")]])
    assert _found(client) == {(None, "g1")}
    assert _found(client, group_id="g1") == {(None, "g1")}
    assert _found(client, user_id="u1") == {("u1", "g1")}
    assert _found(client, participant_copies=True) == {(None, "g1"), ("u1", "g1"), ("u2", "g1")}


@pytest.mark.citus
def test_copies_written_before_the_groups_copy_are_left_out_after_it(client, database_url):
    _write(database_url, [[("u1", "g1", "a")], [("u2", "g1", "a"), (None, "g1", "a"), ("u3", "g1", "a")]])
    assert _found(client) == {(None, "g1")}


@pytest.mark.citus
def test_a_participants_episode_without_a_groups_copy_is_found_without_a_user(client, database_url):
    # Another MemCell's group copy does not stand for it, nor does a personal episode (no group).
    _write(database_url, [[(None, "g1", "a"), ("u1", "g1", "b"), ("u2", None, "a")]])
    assert _found(client) == {(None, "g1"), ("u1", "g1"), ("u2", None)}


@pytest.mark.citus
def test_deleting_the_groups_copy_brings_its_participants_copies_back(client, database_url):
    group_copy, *_ = _write(database_url, [[(None, "g1", "a"), ("u1", "g1", "a"), ("u2", "g1", "a")]])
    assert _found(client) == {(None, "g1")}
    answer = client.request("DELETE", "/api/v0/memories", params={"memory_id": group_copy})
    assert answer.status_code == 200 and answer.json()["result"]["count"] == 1
    assert _found(client) == {("u1", "g1"), ("u2", "g1")}
