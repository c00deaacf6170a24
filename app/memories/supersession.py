"""Supersession at formation: a newer value of a fact about a user makes the memories that state the older one
outdated, and a memory with nothing current left in it superseded.

Facts are read from each memory's own text when it is formed (``app.formation.facts``; ``metadata.facts``). In the
transaction that writes a MemCell's memories, ``settle`` takes, for every (user, attribute) a new memory states, the
latest statement of the current memories of that user (by when it was said, not when it was formed: an old
conversation imported late is superseded by what the user said since). Every earlier statement of another value is
marked outdated (``metadata.facts[i].outdated_by``); a memory whose every fact is outdated becomes ``superseded``,
``superseded_by`` the newer memory of its own type (an event-log entry by an event-log entry), ``superseded_at`` and
``valid_to`` when that was said. A memory that still holds a current fact stays current ("I live in Paris and I'm
allergic to shellfish" outlives the move), and so does one that says more than its facts (``metadata.holds_more``:
four content words or more besides them, or a message of substance in an episode that states no fact): its
outdated facts are marked, its text is what was said. Each decision
is a history event with the rule and the values (``superseded``, or ``suggested`` under ``MEMSYS_SUPERSESSION=suggest``,
which changes nothing); the same value said again is ``restated``; ``restore`` undoes a supersession.

A semantic memory (one fact as a sentence) that says what a current one says already is not stored twice: the
existing one gains the new source (``duplicates``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from app.formation.facts import replaces, same_value
from app.formation.reconciliation import Verdict
from app.memories import history
from app.memories import repository as memories
from app.memories.history import Event

RULE = "offline facts: the same user's attribute stated with a newer value (app.formation.facts)"
ACTOR = "formation"


@dataclass
class Stated:
    """A memory that states facts, as supersession reads it."""

    id: UUID
    memory_type: str
    user_id: str | None
    timestamp: datetime
    facts: list[dict[str, Any]]
    source_message_ids: list[str]
    new: bool
    metadata: dict[str, Any] = field(default_factory=dict)


def stated(row: dict[str, Any], *, new: bool) -> Stated:
    timestamp = row["timestamp"]
    return Stated(
        id=UUID(str(row["id"])),
        memory_type=row["memory_type"],
        user_id=row["user_id"],
        timestamp=datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp,
        facts=[dict(fact) for fact in row["metadata"].get("facts") or []],
        source_message_ids=list(row["source_message_ids"]),
        new=new,
        metadata=dict(row["metadata"]),
    )


async def earlier(conn: AsyncConnection, users: set[str]) -> list[Stated]:
    """The current memories stating facts about these users (anyone's copy, any group)."""
    if not users:
        return []
    rows = await memories.with_facts_of(conn, sorted(users))
    return [stated(row, new=False) for row in rows]


def duplicates(
    drafts: list[Any], known: list[Stated], verdicts: list[Verdict] = ()
) -> tuple[list[Any], dict[UUID, list[str]]]:
    """The drafts to store, and for each current semantic memory that a semantic draft only restates, the sources
    it gains (that draft is not stored). A draft the LLM judged a duplicate is not stored either (``apply_verdicts``
    gives its sources to the memory it repeats)."""
    kept, gained = [], defaultdict(list)
    semantic = [memory for memory in known if memory.memory_type == "semantic_memory"]
    repeated = {id(verdict.draft) for verdict in verdicts if verdict.decision == "duplicate" and not verdict.error}
    for draft in drafts:
        if id(draft) in repeated:
            continue
        facts = draft.metadata.get("facts") or []
        same = (
            next((memory for memory in semantic if _says_the_same(memory.facts, facts)), None)
            if draft.memory_type == "semantic_memory" and facts
            else None
        )
        if same is None:
            kept.append(draft)
        else:
            gained[same.id] += [i for i in draft.source_message_ids if i not in same.source_message_ids]
    return kept, dict(gained)


async def apply_verdicts(
    conn: AsyncConnection, verdicts: list[Verdict], saved: dict[int, dict[str, Any]], *, mode: str
) -> None:
    """Write what the LLM's reconciliation decided (``app.formation.reconciliation``), each with the model's reasoning
    and the candidate's similarity: a superseded earlier memory (``suggested`` only, under ``suggest``), a repeated one
    gaining the new fact's sources, or, for an answer that could not be used, a ``rejected`` event on the new fact."""
    events: list[Event] = []
    for verdict in verdicts:
        new = saved.get(id(verdict.draft))
        chosen = verdict.chosen
        details = {"rule": "llm", "reasoning": verdict.reasoning, "answer": verdict.answer}
        if verdict.overruled:
            details["overruled"] = verdict.overruled
        if verdict.error is not None:
            if new is not None:
                details.update(error=verdict.error, candidates=[str(c["id"]) for c in verdict.candidates])
                events.append(Event(UUID(new["id"]), "rejected", ACTOR, user_id=new["user_id"], details=details))
            continue
        if chosen is None:
            continue
        details["score"] = round(float(chosen["cosine"]), 4)
        if verdict.decision == "duplicate":
            await memories.add_sources(conn, chosen["id"], verdict.draft.source_message_ids)
            events.append(
                Event(
                    chosen["id"],
                    "restated",
                    ACTOR,
                    user_id=verdict.draft.user_id,
                    details={**details, "new_sources": verdict.draft.source_message_ids},
                )
            )
            continue
        earlier = await memories.locked(conn, chosen["id"])
        if new is None or earlier is None or earlier["status"] != "current":
            continue
        when = verdict.draft.timestamp
        if earlier["timestamp"] > when:
            details["error"] = "the memory the LLM named was said after the new fact: nothing superseded"
            events.append(Event(UUID(new["id"]), "rejected", ACTOR, user_id=new["user_id"], details=details))
            continue
        details["by"] = new["id"]
        if mode == "auto":
            valid_to = when.date() if earlier["valid_from"] is None or earlier["valid_from"] <= when.date() else None
            await memories.change(
                conn,
                [earlier["id"]],
                {"status": "superseded", "superseded_by": UUID(new["id"]), "superseded_at": when, "valid_to": valid_to},
            )
        events.append(
            Event(
                earlier["id"],
                "superseded" if mode == "auto" else "suggested",
                ACTOR,
                user_id=earlier["user_id"],
                reason="the LLM's reconciliation of a new fact",
                details=details,
            )
        )
    await history.record(conn, events)


def _says_the_same(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    live = [fact for fact in old if not fact.get("outdated_by")]
    return len(live) == len(new) and all(
        a["user"] == b["user"]
        and a["attribute"] == b["attribute"]
        and same_value(a["attribute"], a["value"], b["value"])
        for a, b in zip(live, new, strict=True)
    )


async def settle(
    conn: AsyncConnection,
    new_rows: list[dict[str, Any]],
    known: list[Stated],
    *,
    mode: str,
    gained: dict[UUID, list[str]],
) -> list[Stated]:
    """Decide what the new memories supersede among ``known`` and themselves, write it (``mode`` auto) or only
    suggest it (suggest), and record every event; the memories whose facts are current afterwards."""
    fresh = [stated(row, new=True) for row in new_rows if row["metadata"].get("facts")]
    events: list[Event] = [
        Event(memory_id, "restated", ACTOR, user_id=_user_of(known, memory_id), details={"new_sources": sources})
        for memory_id, sources in gained.items()
        if sources
    ]
    if gained:
        for memory_id, sources in gained.items():
            if sources:
                await memories.add_sources(conn, memory_id, sources)
    everyone = [*known, *fresh]
    if mode == "off" or not fresh:
        await history.record(conn, events)
        return everyone
    outdated: dict[UUID, list[tuple[int, Stated, dict[str, Any]]]] = defaultdict(list)
    for key, said in _statements(everyone).items():
        if not any(memory.new for memory, _, _ in said):
            continue
        latest = max(
            ((memory, index, fact) for memory, index, fact in said if replaces(fact)),
            key=lambda item: (said_at(item[0], item[2]), item[0].new),
            default=None,
        )
        if latest is None:
            continue
        newer, _, newest = latest
        newest_at = said_at(newer, newest)
        for memory, index, fact in said:
            if memory is newer or not (memory.new or newer.new):
                continue
            if same_value(key[1], fact["value"], newest["value"]):
                if newer.new and not memory.new and memory.memory_type == newer.memory_type:
                    events.append(
                        Event(
                            memory.id,
                            "restated",
                            ACTOR,
                            user_id=memory.user_id,
                            details={"by": str(newer.id), "attribute": key[1], "value": fact["value"]},
                        )
                    )
                continue
            if said_at(memory, fact) < newest_at:
                outdated[memory.id].append((index, _superseder(everyone, memory, key, newest, newer), newest))
    changed = []
    for memory in everyone:
        marks = outdated.get(memory.id)
        if not marks:
            continue
        for index, by, newest in marks:
            fact = memory.facts[index]
            events.append(
                Event(
                    memory.id,
                    "superseded" if mode == "auto" else "suggested",
                    ACTOR,
                    user_id=memory.user_id,
                    reason=RULE,
                    details={
                        "by": str(by.id),
                        "attribute": fact["attribute"],
                        "old_value": fact["value"],
                        "new_value": newest["value"],
                        "score": 1.0,
                    },
                )
            )
            if mode == "auto":
                fact["outdated_by"] = str(by.id)
        if mode == "auto":
            changed.append((memory, marks))
    for memory, marks in changed:
        whole = all(fact.get("outdated_by") for fact in memory.facts) and not memory.metadata.get("holds_more")
        values: dict[str, Any] = {"metadata": {**memory.metadata, "facts": memory.facts}}
        if whole:
            by, when = _latest_mark(marks)
            values.update(status="superseded", superseded_by=by.id, superseded_at=when, valid_to=when.date())
        await memories.change(conn, [memory.id], values)
    await history.record(conn, events)
    superseded = {
        memory.id
        for memory, _ in changed
        if all(f.get("outdated_by") for f in memory.facts) and not memory.metadata.get("holds_more")
    }
    return [memory for memory in everyone if memory.id not in superseded]


def said_at(memory: Stated, fact: dict[str, Any]) -> datetime:
    """When a fact was said: its message's time (``at``), or the memory's."""
    at = fact.get("at")
    return datetime.fromisoformat(at) if at else memory.timestamp


def _statements(everyone: list[Stated]) -> dict[tuple[str, str], list[tuple[Stated, int, dict[str, Any]]]]:
    """Every live fact, by (user, attribute)."""
    said: dict[tuple[str, str], list[tuple[Stated, int, dict[str, Any]]]] = defaultdict(list)
    for memory in everyone:
        for index, fact in enumerate(memory.facts):
            if not fact.get("outdated_by"):
                said[(fact["user"], fact["attribute"])].append((memory, index, fact))
    return said


def _superseder(
    everyone: list[Stated], old: Stated, key: tuple[str, str], newest: dict[str, Any], fallback: Stated
) -> Stated:
    """Of the memories stating the newest value, the one of the old memory's own type and owner (the newest)."""
    stating = [
        memory
        for memory in everyone
        if memory.timestamp > old.timestamp
        and any(
            (f["user"], f["attribute"]) == key and same_value(key[1], f["value"], newest["value"]) for f in memory.facts
        )
    ]
    alike = [m for m in stating if m.memory_type == old.memory_type and m.user_id == old.user_id]
    return max(alike or stating or [fallback], key=lambda memory: memory.timestamp)


def _latest_mark(marks: list[tuple[int, Stated, dict[str, Any]]]) -> tuple[Stated, datetime]:
    """The memory that superseded the last of a memory's facts, and when that newer value was said."""
    by, newest = max(((by, newest) for _, by, newest in marks), key=lambda item: said_at(item[0], item[1]))
    return by, said_at(by, newest)


def _user_of(known: list[Stated], memory_id: UUID) -> str | None:
    return next((memory.user_id for memory in known if memory.id == memory_id), None)


def current_facts(everyone: list[Stated], user: str) -> list[tuple[Stated, dict[str, Any]]]:
    """The user's live facts among current memories, latest first, a semantic memory's preferred as the source."""
    found = [
        (memory, fact)
        for memory in everyone
        for fact in memory.facts
        if fact["user"] == user and not fact.get("outdated_by")
    ]
    rank = {"semantic_memory": 0, "event_log": 1, "episode": 2}
    return sorted(found, key=lambda item: (-item[0].timestamp.timestamp(), rank.get(item[0].memory_type, 3)))
