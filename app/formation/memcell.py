"""The shapes memory formation passes around: a closed MemCell, its context, and what extraction made of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.formation.streams import Stream
from app.text.memory_text import ASSISTANT_SENDERS, embedding_text, nearest_end, nearest_start, xl_text

# A pending message as read from the buffer: id, message_id, group_name, create_time, sender,
# sender_name, content, refer_list, boundary_checked, extract_attempts.
Message = dict[str, Any]


@dataclass
class MemCell:
    """One episode's worth of consecutive messages of a stream, closed for ``reason``."""

    messages: list[Message]
    reason: str
    topic_summary: str | None = None

    @property
    def scope(self) -> dict[str, Any]:
        """What its memories carry of its messages' scopes and metadata (migration 0029): the app, project and
        session of its last message, the first agent named, and the messages' metadata merged in order (a later
        message's key wins)."""
        return self.scope_of(self.message_ids)

    def scope_of(self, message_ids: list[str]) -> dict[str, Any]:
        """The scope of a memory formed from ``message_ids``: the cell's scopes, and the metadata of those messages
        only, merged in order (a fact said in one message carries that message's metadata; an episode, formed from
        them all, every message's). Ids of none of its messages: the whole cell's metadata."""
        last = self.messages[-1]
        named = set(message_ids)
        sources = [message for message in self.messages if message["message_id"] in named] or self.messages
        merged: dict[str, Any] = {}
        for message in sources:
            merged.update(message.get("custom_metadata") or {})
        return {
            "app_id": last.get("app_id", "default"),
            "project_id": last.get("project_id", "default"),
            "session_id": last.get("session_id"),
            "agent_id": next((m["agent_id"] for m in self.messages if m.get("agent_id")), None),
            "custom_metadata": merged,
        }

    @property
    def ids(self) -> list[int]:
        return [message["id"] for message in self.messages]

    @property
    def message_ids(self) -> list[str]:
        return [message["message_id"] for message in self.messages]

    @property
    def start_time(self) -> datetime:
        return self.messages[0]["create_time"]

    @property
    def end_time(self) -> datetime:
        return self.messages[-1]["create_time"]

    @property
    def participants(self) -> list[str]:
        """Senders in order of first appearance."""
        return list(dict.fromkeys(message["sender"] for message in self.messages))

    @property
    def extract_attempts(self) -> int:
        return max(message["extract_attempts"] for message in self.messages)


@dataclass
class Context:
    """What extraction knows besides the messages: the stream, its conversation-meta and language."""

    stream: Stream
    language: str
    meta: dict[str, Any] | None = None
    guidance: str = ""
    """The tenant's extraction instructions for the MemCell's app and project (app.formation.instructions)."""
    own_profile_fields: tuple[str, ...] = ()
    """Profile fields of the tenant's own, beside the scene's."""

    @property
    def zone(self) -> tzinfo:
        name = (self.meta or {}).get("default_timezone") or "UTC"
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            return ZoneInfo("UTC")

    @property
    def scene(self) -> str:
        return (self.meta or {}).get("scene") or ("assistant" if self.stream.kind == "personal" else "group_chat")

    def name_of(self, user_id: str, fallback: str | None = None) -> str:
        detail = ((self.meta or {}).get("user_details") or {}).get(user_id) or {}
        return detail.get("full_name") or fallback or user_id

    def role_of(self, user_id: str) -> str | None:
        return (((self.meta or {}).get("user_details") or {}).get(user_id) or {}).get("role")

    def is_assistant(self, user_id: str, role: str | None = None) -> bool:
        """An AI's turn, not a person's: a sender of ``ASSISTANT_SENDERS``, a message whose ``role`` is one of
        them (migration 0025), or a sender with the role assistant in the conversation's meta."""
        return (
            user_id in ASSISTANT_SENDERS
            or role in ASSISTANT_SENDERS
            or (self.role_of(user_id) or "").lower() == "assistant"
        )

    def owners(self, cell: MemCell) -> list[str]:
        """Whose own episode a MemCell gives: every participant of a group; in a personal stream, its owner only
        (an assistant answering there is not a second owner)."""
        return cell.participants if self.stream.group_id else [self.stream.id]

    def people(self, cell: MemCell) -> list[str]:
        """The participants who get a profile: not the assistants (by sender, role or meta)."""
        assistants = {m["sender"] for m in cell.messages if self.is_assistant(m["sender"], m.get("role"))}
        return [user for user in cell.participants if user not in assistants]

    def where(self, cell: MemCell) -> str:
        """The conversation's name as people say it."""
        names = [m["group_name"] for m in cell.messages if m.get("group_name")]
        if self.meta and self.meta.get("name"):
            return self.meta["name"]
        return names[-1] if names else (self.stream.group_id or "")


@dataclass
class Draft:
    """A memory before it has an embedding and a MemCell id."""

    memory_type: str
    content: str
    timestamp: datetime
    source_message_ids: list[str]
    user_id: str | None = None
    group_id: str | None = None
    title: str | None = None
    summary: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    """The turns around a message (offline event log), nearest last in ``before`` and first in ``after``:
    a reply like "Yes, yesterday!" is found by what it answers. Indexed with the memory and never
    returned: the memory's content stays the message alone, so a reader gets no more text than before."""

    EMBEDDING_CONTEXT_TURNS = 1
    """Of the context, the nearest turn before goes into the embedding (more dilutes the vector; BM25 takes all of
    it, both sides). Not the turn after: a shorter text to embed, and on LoCoMo's 760 questions (rrf over event
    logs) 0.766 / 0.905 @512 / @2048 against 0.756 / 0.902 with a turn each side; LongMemEval's first 19 questions
    the same (docs/benchmarks.md, "Where formation's CPU goes")."""

    def embedding_text(self) -> str:
        return embedding_text(self.title, self.content, self.before[len(self.before) - self.EMBEDDING_CONTEXT_TURNS :])

    def xl_text(self) -> str:
        return xl_text(self.title, self.content)

    def search_text(self) -> str:
        """What BM25 indexes: title and content, and the context around it (each turn cut as for the vector)."""
        own = "\n".join(part for part in (self.title, self.content) if part)
        if not (self.before or self.after):
            return own
        return "\n".join([own, *nearest_end(self.before), own, *nearest_start(self.after)])


@dataclass
class Extraction:
    """What one MemCell became: memories, new profile versions (user_id → profile) and how."""

    mode: str  # 'llm' | 'offline'
    drafts: list[Draft]
    profiles: dict[str, dict[str, Any]]
    profile_source: str  # 'llm' | 'derived'
    topic_summary: str | None = None
