"""Forget a user or a group in the caller's tenant: one transaction deletes, then the streams the user shared
with others are formed again from the messages that remain.

Forgetting a user deletes their messages (in groups and their personal stream), their profiles and their
entry in conversations' ``user_details``; and in each stream where they spoke, the first MemCell with
their words and every later one, with all their memories and the profile versions they produced (a
profile version builds on the previous one, so all from that point on may carry the user's words). The
other members' messages of those MemCells go back to pending and a formation worker forms them again,
MemCell by MemCell with the old boundaries (a ``form_again`` job per stream, queued in the same
transaction), so the others keep memories and profiles of their own words only.
Their conversations alone with an assistant (the EverMemOS v1 personal conversation ``personal:<user_id>``, and
any group with no other sender than them and an assistant: a v1 session) go whole, as a forgotten group does:
the assistant's replies quote them.
Forgetting a user also records them in ``forgotten_users`` with the time (``forgotten_at`` in the answer), so
that ``memsys import`` of a dump taken before leaves them out (app.transfer.screening).
Both operations are idempotent: forgetting someone unknown deletes nothing and answers the zero counts (and
records them: a backup may still hold them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app import queue
from app.forget import repository
from app.formation.streams import Stream
from app.runtime import Runtime

personal_conversation = repository.personal_conversation


async def forget_user(runtime: Runtime, user_id: str) -> dict[str, Any]:
    async with runtime.engine.begin() as conn:
        conversations = await _forget_conversations_alone_with_assistant(conn, user_id)
        cells = await repository.memcells_from_first_of_sender(conn, user_id)
        others = await repository.other_messages_of(conn, cells, user_id)
        deleted = await repository.delete_memcells(conn, cells)
        await repository.reset_to_pending(conn, [m["id"] for m in others])
        for key, count in (await repository.delete_user_rows(conn, user_id)).items():
            deleted[key] = deleted.get(key, 0) + count
        reformed = await _form_again(conn, runtime.tenant, others)
        forgotten_at = await repository.record_forgotten(conn, user_id)
    return {
        "user_id": user_id,
        "deleted": deleted,
        "reformed": reformed,
        "conversations": conversations,
        "forgotten_at": forgotten_at.isoformat(),
    }


async def _forget_conversations_alone_with_assistant(conn: AsyncConnection, user_id: str) -> dict[str, Any]:
    """Delete the user's conversations with an assistant only, whole; how many held something, and what went."""
    found = await repository.group_ids_in(conn, repository.conversations_alone_with_assistant(user_id))
    forgotten, deleted = 0, Counter()
    for group_id in found:
        counts = await repository.delete_group_rows(conn, group_id)
        forgotten += any(counts.values())
        deleted.update(counts)
    return {"forgotten": forgotten, "deleted": dict(deleted)}


async def forget_group(runtime: Runtime, group_id: str) -> dict[str, Any]:
    async with runtime.engine.begin() as conn:
        deleted = await repository.delete_group_rows(conn, group_id)
    return {"group_id": group_id, "deleted": deleted}


async def _form_again(conn: AsyncConnection, tenant: str, messages: list[dict[str, Any]]) -> dict[str, int]:
    """Queue the remaining messages of each deleted MemCell to be formed into one MemCell again, stream by
    stream; what was queued."""
    cells: dict[Stream, dict[Any, list[int]]] = defaultdict(lambda: defaultdict(list))
    for message in messages:
        cells[Stream(message["stream_kind"], message["stream_id"])][message["memcell_id"]].append(message["id"])
    for stream, by_cell in cells.items():
        await queue.defer_form_again(conn, tenant, stream, list(by_cell.values()))
    return {"memcells": sum(len(by_cell) for by_cell in cells.values()), "messages": len(messages)}
