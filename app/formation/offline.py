"""Extraction without an LLM: the default on a fresh machine, and the fallback when the LLM keeps failing.

Per MemCell it produces exactly:

* the **episode**: the transcript rendered readably (local times, speaker names), with a deterministic
  title (conversation, day, top keywords) and summary (who, how many messages, when, how it opened);
  stored once as the group episode (``user_id`` NULL) and once per participant (``user_id`` = them), the
  same text embedded once. A personal stream has only its owner's episode (there is no group);
* the **event log**: one entry per message, ``"<speaker>: <content>"`` at the message's time, owned by
  its sender, indexed (not returned) with the turns around it: two either side for BM25, one for the
  embedding, the message's own text counted twice;
* a **semantic memory** per fact a participant states about themselves ("I moved to Berlin" → "Alice lives in
  Berlin.", ``app.formation.facts``), valid from the day it was said: each entry, episode and semantic memory carries
  its facts in ``metadata.facts``, which supersession reads (``app.memories.supersession``);
* a **derived profile** per participant (see ``profiles.derived_profile``).
"""

from __future__ import annotations

from typing import Any

from app.formation import facts, profiles
from app.formation.language import day_text
from app.formation.memcell import Context, Draft, Extraction, MemCell
from app.text.memory_text import message_text

TITLE_KEYWORDS = 3
OPENING_CHARS = 120
CONTEXT_TURNS = 2
"""Turns before and after a message indexed with its event-log entry (see Draft.before)."""


def transcript(cell: MemCell, context: Context) -> str:
    """``[2025-01-15 10:00] Zhang San: ...`` lines, in the conversation's time zone."""
    zone = context.zone
    return "\n".join(
        f"[{m['create_time'].astimezone(zone):%Y-%m-%d %H:%M}] {context.name_of(m['sender'], m['sender_name'])}: "
        f"{m['content']}"
        for m in cell.messages
    )


def title(cell: MemCell, context: Context) -> str:
    words = profiles.top_keywords(profiles.keyword_counts(m["content"] for m in cell.messages), TITLE_KEYWORDS)
    day = day_text(cell.start_time.astimezone(context.zone), context.language)
    where = context.where(cell)
    if context.language == "zh":
        head = f"{where} {day}" if where else day
        return f"{head}：{'、'.join(words)}" if words else head
    head = f"{where} on {day}" if where else day
    return f"{head}: {', '.join(words)}" if words else head


def summary(cell: MemCell, context: Context) -> str:
    zone = context.zone
    start, end = cell.start_time.astimezone(zone), cell.end_time.astimezone(zone)
    names = [_named(user, cell, context) for user in cell.participants]
    opening = cell.messages[0]["content"].strip().replace("\n", " ")
    if len(opening) > OPENING_CHARS:
        opening = opening[:OPENING_CHARS].rstrip() + "…"
    first_speaker = context.name_of(cell.messages[0]["sender"], cell.messages[0]["sender_name"])
    count = len(cell.messages)
    if context.language == "zh":
        span = f"{day_text(start, 'zh')}{start:%H:%M}至" + (
            f"{end:%H:%M}" if start.date() == end.date() else f"{day_text(end, 'zh')}{end:%H:%M}"
        )
        return f"{span}（{zone}），{'、'.join(names)}共发了{count}条消息。{first_speaker}开头说：“{opening}”"
    span = f"from {start:%H:%M} to {end:%H:%M} on {day_text(start, 'en')}"
    if start.date() != end.date():
        span = f"from {day_text(start, 'en')} {start:%H:%M} to {day_text(end, 'en')} {end:%H:%M}"
    plural = "s" if count != 1 else ""
    who = _english_list(names)
    return f"{count} message{plural} {'between' if len(names) > 1 else 'by'} {who} {span} ({zone}). " + (
        f'{first_speaker} opened with: "{opening}"'
    )


def extract(cell: MemCell, context: Context, previous_profiles: dict[str, dict[str, Any]]) -> Extraction:
    group_id = context.stream.group_id
    episode = {
        "title": title(cell, context),
        "summary": summary(cell, context),
        "content": transcript(cell, context),
    }
    owners: list[str | None] = [*([None] if group_id else []), *context.owners(cell)]
    entries = message_entries(cell, context)
    stated = _episode_facts(entries)
    more = any(entry.metadata.get("holds_more") for entry in entries)
    drafts = [
        Draft(
            "episode",
            timestamp=cell.start_time,
            source_message_ids=cell.message_ids,
            user_id=owner,
            group_id=group_id,
            metadata={
                "extraction": "offline",
                "boundary_reason": cell.reason,
                **({"facts": stated} if stated else {}),
                **({"holds_more": True} if stated and more else {}),
            },
            **episode,
        )
        for owner in owners
    ]
    drafts += entries
    drafts += fact_memories(entries, context)
    new_profiles = {
        user: profiles.derived_profile(user, cell, context, (previous_profiles.get(user) or {}).get("profile"))
        for user in context.people(cell)
    }
    return Extraction("offline", drafts, new_profiles, profile_source="derived", topic_summary=None)


def message_entries(cell: MemCell, context: Context) -> list[Draft]:
    """The event log of ``cell`` as the offline path writes it: one entry per message, ``"<speaker>: <content>"``
    at the message's time, owned by its sender, with the turns around it indexed beside it. The LLM path keeps
    these beside its own facts too (``Settings.llm_keep_messages``), so an extraction that misses something
    never loses what was said."""
    group_id = context.stream.group_id
    zone = context.zone
    lines = [message_text(context.name_of(m["sender"], m["sender_name"]), m["content"]) for m in cell.messages]
    return [
        Draft(
            "event_log",
            content=lines[i],
            timestamp=m["create_time"],
            source_message_ids=[m["message_id"]],
            user_id=m["sender"],
            group_id=group_id,
            metadata={
                "extraction": "offline",
                "local_time": m["create_time"].astimezone(zone).isoformat(),
                **({"assistant": True} if context.is_assistant(m["sender"], m.get("role")) else {}),
                **_facts_of(m, context),
            },
            before=lines[max(0, i - CONTEXT_TURNS) : i],
            after=lines[i + 1 : i + 1 + CONTEXT_TURNS],
        )
        for i, m in enumerate(cell.messages)
    ]


MORE_WORDS = 4
"""Content words beyond its facts from which a message says more than them (``holds_more``)."""


def _facts_of(message: dict, context: Context) -> dict:
    """What a participant's message states about them (an assistant's states nothing about the user), as metadata:
    ``facts``, and ``holds_more`` when it says more than its facts (or, without facts, says anything of
    substance): supersession then marks its facts outdated but keeps the memory current."""
    if context.is_assistant(message["sender"], message.get("role")):
        return {}
    said = message["create_time"].isoformat()
    stated = [{**fact.as_json(), "at": said} for fact in facts.facts_of(message["sender"], message["content"])]
    rest = message["content"] if not stated else facts.unstated(message["content"])
    more = sum(profiles.keyword_counts([rest]).values()) >= MORE_WORDS
    return {**({"facts": stated} if stated else {}), **({"holds_more": True} if more else {})}


def _episode_facts(entries: list[Draft]) -> list[dict]:
    """An episode's facts: its messages', the last value of each (user, attribute) that has one, all the others."""
    kept: dict[tuple, dict] = {}
    for entry in entries:
        for fact in entry.metadata.get("facts", ()):
            single = facts.replaces(fact)
            key = (fact["user"], fact["attribute"]) if single else (fact["user"], fact["attribute"], fact["value"])
            kept.pop(key, None)
            kept[key] = fact
    return list(kept.values())


def fact_memories(entries: list[Draft], context: Context) -> list[Draft]:
    """One semantic memory per fact of the event log (a fact said twice in the MemCell, once): the fact as a
    sentence, owned by its speaker, valid from the day it was said."""
    drafts, seen = [], set()
    for entry in entries:
        for fact in entry.metadata.get("facts", ()):
            key = (fact["user"], fact["attribute"], fact["value"])
            if key in seen:
                continue
            seen.add(key)
            said = facts.Fact(**{key: value for key, value in fact.items() if key != "at"})
            name = context.name_of(said.user, entry.content.partition(": ")[0] or None)
            drafts.append(
                Draft(
                    "semantic_memory",
                    content=facts.sentence(said, name, context.language),
                    timestamp=entry.timestamp,
                    source_message_ids=entry.source_message_ids,
                    user_id=said.user,
                    group_id=entry.group_id,
                    valid_from=entry.timestamp.astimezone(context.zone).date(),
                    metadata={"extraction": "offline", "facts": [fact]},
                )
            )
    return drafts


def _named(user: str, cell: MemCell, context: Context) -> str:
    sender_name = next((m["sender_name"] for m in cell.messages if m["sender"] == user), None)
    name = context.name_of(user, sender_name)
    role = context.role_of(user)
    if not role:
        return name
    return f"{name}（{role}）" if context.language == "zh" else f"{name} ({role})"


def _english_list(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
