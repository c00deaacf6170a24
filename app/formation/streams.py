"""A stream is the sequence of messages that boundary detection cuts into MemCells.

Messages with a ``group_id`` form that group's stream; messages without one form the sender's
personal stream (``stream_kind = 'personal'``, ``stream_id`` = sender, memories with no group_id).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stream:
    kind: str
    id: str

    @property
    def group_id(self) -> str | None:
        return self.id if self.kind == "group" else None

    @classmethod
    def of(cls, group_id: str | None, sender: str) -> Stream:
        return cls("group", group_id) if group_id else cls("personal", sender)

    def lock_key(self) -> str:
        return f"{self.kind}:{self.id}"
