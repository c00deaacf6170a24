"""What ``memsys import`` leaves out of a dump, and why (issue 26): it never brings back a forgotten user and never
writes a memory twice.

* **About a user forgotten since.** ``DELETE /users/{user_id}`` records the user and the time in
  ``forgotten_users``; a dump records its own (``forgotten_user`` lines). The import leaves out what the dump holds
  about a user forgotten (in the database or in the dump, the later time) at or after the row was stored: their
  messages (``received_at``), the MemCells holding their words (``created_at``, ``participants``), the memories and
  profile versions about them (``created_at``), their entry in a conversation's ``user_details``
  (``updated_at``). What they said after being forgotten is kept. ``--include-forgotten USER`` (or every user)
  brings them back: the database's record of them is deleted and the dump's is not written.
* **A MemCell formed again since.** When a message of a MemCell of the dump is stored already, outside that
  MemCell (forget formed the others' messages into a new one, or they wait to be), the MemCell is left out
  with its memories and profile versions: the messages' memories are those of the stored MemCell.
* **A message whose MemCell was left out** is written (if new) as pending, without its MemCell, and queued to be
  formed again with the old MemCell's boundaries, as forget does with the others' messages.
* **Already present.** A row whose id is stored, or a message of its stream with the same ``message_id``.

A ``Screen`` is one tenant's section of one import: plain decisions on rows, no database (the service reads what
it needs through the repository and passes it in).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from app.formation.streams import Stream

MessageKey = tuple[str, str, str]
"""A message as a stream knows it: (stream_kind, stream_id, message_id)."""

PARTICIPANT_ENTRY = "participant entry"


@dataclass
class Tally:
    """What an import wrote and what it left out, by row type and reason, for its report."""

    added: Counter = field(default_factory=Counter)
    forgotten: Counter = field(default_factory=Counter)
    formed_again: Counter = field(default_factory=Counter)
    of_left_out: Counter = field(default_factory=Counter)
    present: Counter = field(default_factory=Counter)
    to_form: int = 0
    forgotten_users: dict[str, set[str]] = field(default_factory=dict)
    brought_back: dict[str, set[str]] = field(default_factory=dict)


@dataclass
class Screen:
    """One tenant's section of a dump: who is forgotten and since when, the MemCells left out, and the messages
    written without their MemCell (to be formed again)."""

    tenant: str
    tally: Tally
    forgotten: dict[str, datetime]
    bring_back: frozenset[str] | None
    """Users brought back (``None``: every one)."""
    left_out: dict[UUID, tuple[str, datetime]] = field(default_factory=dict)
    """MemCell id -> (reason, start_time)."""
    detached: dict[Stream, dict[UUID, list[int]]] = field(default_factory=dict)
    """Per stream, the new rows' ids of the messages written without their MemCell, by that MemCell."""
    _memcell_of: dict[MessageKey, UUID] = field(default_factory=dict)
    """The MemCell a message written without it had in the dump."""

    def brings_back(self, user_id: str) -> bool:
        return self.bring_back is None or user_id in self.bring_back

    def tombstones(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The dump's forgotten users to record (not those brought back); from now on they are forgotten here."""
        kept = []
        for row in rows:
            user = row["user_id"]
            if self.brings_back(user):
                self.tally.brought_back.setdefault(self.tenant, set()).add(user)
                continue
            row.setdefault("forgotten_at", datetime.now(UTC))
            if user not in self.forgotten or self.forgotten[user] < row["forgotten_at"]:
                self.forgotten[user] = row["forgotten_at"]
            kept.append(row)
        return kept

    def keep(
        self, kind: str, rows: list[dict[str, Any]], stored: dict[MessageKey, UUID | None] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(rows to write as they are, messages to write without their MemCell); counts what is left out.
        ``stored``, for MemCells: their messages already stored, with the MemCell holding them."""
        if kind == "conversation_meta":
            return [self._without_forgotten_participants(row) for row in rows], []
        if kind == "memcell":
            return [row for row in rows if self._keeps_memcell(row, stored or {})], []
        if kind == "message":
            return self._messages(rows)
        if kind in ("memory", "profile"):
            return [row for row in rows if self._keeps_derived(kind, row)], []
        return rows, []

    def _forgotten_at(self, user_id: str | None, stamp: datetime | None) -> bool:
        """Whether ``user_id`` was forgotten at or after ``stamp`` (a row without its time counts as before)."""
        since = self.forgotten.get(user_id) if user_id is not None else None
        if since is None or (stamp is not None and stamp > since):
            return False
        self.tally.forgotten_users.setdefault(self.tenant, set()).add(user_id)
        return True

    def _without_forgotten_participants(self, row: dict[str, Any]) -> dict[str, Any]:
        details = row.get("user_details") or {}
        gone = [user for user in details if self._forgotten_at(user, row.get("updated_at"))]
        if gone:
            self.tally.forgotten[PARTICIPANT_ENTRY] += len(gone)
            row["user_details"] = {user: detail for user, detail in details.items() if user not in gone}
        return row

    def _keeps_memcell(self, row: dict[str, Any], stored: dict[MessageKey, UUID | None]) -> bool:
        if any([self._forgotten_at(user, row.get("created_at")) for user in row["participants"]]):
            reason = "forgotten"
        elif any(key in stored and stored[key] != row["id"] for key in memcell_messages(row)):
            reason = "formed_again"
        else:
            return True
        self.left_out[row["id"]] = (reason, row["start_time"])
        getattr(self.tally, reason)["memcell"] += 1
        return False

    def _messages(self, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        kept, detached = [], []
        for row in rows:
            if self._forgotten_at(row["sender"], row.get("received_at")):
                self.tally.forgotten["message"] += 1
            elif row.get("memcell_id") in self.left_out:
                self._memcell_of[message_key(row)] = row["memcell_id"]
                detached.append(
                    {**row, "memcell_id": None, "status": "pending", "boundary_checked": False, "extract_attempts": 0}
                )
            else:
                kept.append(row)
        return kept, detached

    def _keeps_derived(self, kind: str, row: dict[str, Any]) -> bool:
        """A memory or a profile version: left out when it is about a forgotten user or of a MemCell left out."""
        if self._forgotten_at(row.get("user_id"), row.get("created_at")):
            self.tally.forgotten[kind] += 1
        elif row.get("memcell_id") in self.left_out:
            self.tally.of_left_out[kind] += 1
        else:
            return True
        return False

    def written_detached(self, written: Iterable[dict[str, Any]]) -> None:
        """Note the messages just written without their MemCell (their new row id and key) under the MemCell they
        had in the dump, to be formed again with its boundaries."""
        for row in written:
            cell = self._memcell_of[message_key(row)]
            stream = Stream(row["stream_kind"], row["stream_id"])
            self.detached.setdefault(stream, {}).setdefault(cell, []).append(row["id"])
            self.tally.to_form += 1

    def cells_to_form(self) -> dict[Stream, list[list[int]]]:
        """Per stream, the messages to form again, one list per old MemCell in the order the MemCells began."""
        return {
            stream: [ids for cell, ids in sorted(by_cell.items(), key=lambda item: self.left_out[item[0]][1])]
            for stream, by_cell in self.detached.items()
        }


def message_key(row: dict[str, Any]) -> MessageKey:
    return row["stream_kind"], row["stream_id"], row["message_id"]


def memcell_messages(row: dict[str, Any]) -> list[MessageKey]:
    return [(row["stream_kind"], row["stream_id"], message_id) for message_id in row["message_ids"]]
