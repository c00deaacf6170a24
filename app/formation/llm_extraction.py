"""Extraction with an LLM: the boundary judge, and per MemCell the episode (group and personal), the
event log, semantic memories and merged profiles. Two calls per MemCell (memories, then profiles);
either failing fails the extraction, so a MemCell is formed whole or not at all.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from typing import Any

from app.formation import profiles, prompts
from app.formation.boundary import Judge, Judgement
from app.formation.language import gap_text
from app.formation.memcell import Context, Draft, Extraction, MemCell, Message
from app.providers.llm import LLMBadOutput, LLMClient
from app.text.timeparse import parse_iso_datetime

# The judge sees at most this many of the open MemCell's latest messages.
JUDGE_CONTEXT_MESSAGES = 20


def _line(message: Message, context: Context, *, with_id: bool = False) -> str:
    when = message["create_time"].astimezone(context.zone)
    ident = f"[{message['message_id']}] " if with_id else ""
    return (
        f"{ident}{when:%Y-%m-%d %H:%M} {context.name_of(message['sender'], message['sender_name'])}: "
        + (message["content"])
    )


def boundary_judge(llm: LLMClient, context: Context) -> Judge:
    """The judge boundary detection calls for each new message of an open MemCell."""

    async def judge(segment: list[Message], message: Message, gap: timedelta) -> Judgement:
        language = context.language
        shown = segment[-JUDGE_CONTEXT_MESSAGES:]
        user = prompts.BOUNDARY_INPUT[language].format(
            transcript="\n".join(_line(m, context) for m in shown),
            gap=gap_text(gap, language),
            new=_line(message, context),
        )
        answer = await llm.complete_json(
            [{"role": "system", "content": prompts.BOUNDARY[language]}, {"role": "user", "content": user}]
        )
        if not isinstance(answer, dict) or not isinstance(answer.get("should_end"), bool | str):
            raise LLMBadOutput("The boundary judge's answer has no should_end")
        should_end = answer["should_end"]
        if isinstance(should_end, str):
            should_end = should_end.strip().lower() in ("true", "yes", "1")
        summary = answer.get("topic_summary")
        return Judgement(should_end, str(answer.get("reasoning") or ""), str(summary) if summary else None)

    return judge


def _conversation(cell: MemCell, context: Context) -> str:
    language = context.language
    participants = "\n".join(
        f"- {user}: {context.name_of(user, _sender_name(cell, user))}"
        + (f" ({context.role_of(user)})" if context.role_of(user) else "")
        for user in cell.participants
    )
    where = context.where(cell) or context.stream.id
    head = prompts.CONTEXT[language].format(
        where=where, scene=context.scene, zone=context.zone, participants=participants
    )
    lines = "\n".join(_line(m, context, with_id=True) for m in cell.messages)
    return f"{head}\n\n{prompts.MESSAGES_HEADER[language]}\n{lines}"


async def extract(llm: LLMClient, cell: MemCell, context: Context, previous: dict[str, dict[str, Any]]) -> Extraction:
    conversation = _conversation(cell, context)
    language = context.language
    answer = await llm.complete_json(
        [{"role": "system", "content": prompts.EXTRACTION[language]}, {"role": "user", "content": conversation}]
    )
    drafts = _memories(answer, cell, context)
    new_profiles = await _profiles(llm, cell, context, previous, conversation)
    summary = answer.get("summary") if isinstance(answer.get("summary"), str) else None
    return Extraction("llm", drafts, new_profiles, profile_source="llm", topic_summary=summary)


def _memories(answer: Any, cell: MemCell, context: Context) -> list[Draft]:
    if not isinstance(answer, dict) or not _text(answer.get("content")):
        raise LLMBadOutput("The extraction has no episode content")
    group_id = context.stream.group_id
    participants = set(cell.participants)
    base = {"extraction": "llm", "boundary_reason": cell.reason}
    episode = {
        "title": _text(answer.get("title")) or None,
        "summary": _text(answer.get("summary")) or None,
        "content": _text(answer["content"]),
    }
    drafts: list[Draft] = []
    if group_id:
        drafts.append(
            Draft(
                "episode",
                timestamp=cell.start_time,
                source_message_ids=cell.message_ids,
                group_id=group_id,
                metadata=dict(base),
                **episode,
            )
        )
    personal = {
        item["user_id"]: item
        for item in _items(answer.get("personal_episodes"))
        if item.get("user_id") in participants and _text(item.get("content"))
    }
    for user in cell.participants:
        item = personal.get(user)
        own = (
            {
                "title": _text(item.get("title")) or episode["title"],
                "summary": _text(item.get("summary")) or None,
                "content": _text(item["content"]),
            }
            if item
            else episode
        )
        drafts.append(
            Draft(
                "episode",
                timestamp=cell.start_time,
                source_message_ids=cell.message_ids,
                user_id=user,
                group_id=group_id,
                metadata=dict(base),
                **own,
            )
        )
    for fact in _items(answer.get("event_log")):
        content = _text(fact.get("fact") or fact.get("content"))
        if not content:
            continue
        sources = _sources(fact, cell)
        drafts.append(
            Draft(
                "event_log",
                content=content,
                timestamp=_moment(fact.get("time"), context) or _first_time(sources, cell),
                source_message_ids=sources,
                user_id=_owner(fact, sources, cell, participants),
                group_id=group_id,
                metadata=dict(base),
            )
        )
    for item in _items(answer.get("semantic_memories") or answer.get("foresight")):
        content = _text(item.get("content"))
        if not content:
            continue
        sources = _sources(item, cell)
        valid_from = _day(item.get("valid_from")) or cell.start_time.astimezone(context.zone).date()
        valid_to = _day(item.get("valid_to"))
        if valid_to is not None and valid_to < valid_from:
            valid_from, valid_to = valid_to, valid_from
        drafts.append(
            Draft(
                "semantic_memory",
                content=content,
                timestamp=cell.end_time,
                source_message_ids=sources,
                user_id=item.get("user_id") if item.get("user_id") in participants else None,
                group_id=group_id,
                valid_from=valid_from,
                valid_to=valid_to,
                metadata={**base, **({"evidence": _text(item["evidence"])} if _text(item.get("evidence")) else {})},
            )
        )
    return drafts


async def _profiles(
    llm: LLMClient, cell: MemCell, context: Context, previous: dict[str, dict[str, Any]], conversation: str
) -> dict[str, dict[str, Any]]:
    language = context.language
    fields = profiles.profile_fields(context.scene)
    system = prompts.PROFILE[language].format(
        fields=", ".join(fields), example=", ".join(f'"{name}": ...' for name in fields)
    )
    before = {user: (previous.get(user) or {}).get("profile") or {} for user in cell.participants}
    shown = {user: {k: v for k, v in p.items() if k != "keyword_counts"} for user, p in before.items()}
    user_prompt = (
        f"{conversation}\n\n{prompts.PREVIOUS_PROFILES_HEADER[language]}\n{json.dumps(shown, ensure_ascii=False)}"
    )
    answer = await llm.complete_json([{"role": "system", "content": system}, {"role": "user", "content": user_prompt}])
    listed = answer.get("profiles") if isinstance(answer, dict) else answer
    from_llm = {
        item["user_id"]: item.get("profile")
        if isinstance(item.get("profile"), dict)
        else {k: v for k, v in item.items() if k != "user_id"}
        for item in _items(listed)
        if item.get("user_id") in before
    }
    merged = {}
    for user in cell.participants:
        derived = profiles.derived_profile(user, cell, context, before[user])
        merged[user] = profiles.merged_llm_profile(derived, from_llm.get(user) or {}, context.scene)
    return merged


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _sender_name(cell: MemCell, user: str) -> str | None:
    return next((m["sender_name"] for m in cell.messages if m["sender"] == user), None)


def _sources(item: dict[str, Any], cell: MemCell) -> list[str]:
    """The cited message ids that belong to this MemCell; all of them when none does."""
    cited = item.get("source_message_ids")
    known = set(cell.message_ids)
    valid = [str(i) for i in cited if str(i) in known] if isinstance(cited, list) else []
    return list(dict.fromkeys(valid)) or cell.message_ids


def _owner(item: dict[str, Any], sources: list[str], cell: MemCell, participants: set[str]) -> str | None:
    if item.get("user_id") in participants:
        return item["user_id"]
    senders = {m["sender"] for m in cell.messages if m["message_id"] in sources}
    return senders.pop() if len(senders) == 1 else None


def _first_time(sources: list[str], cell: MemCell) -> datetime:
    return next((m["create_time"] for m in cell.messages if m["message_id"] in sources), cell.start_time)


def _day(value: Any) -> date | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip()[:10])
    except ValueError:
        return None


def _moment(value: Any, context: Context) -> datetime | None:
    """An ISO date-time (naive: the conversation's zone) or a bare day (its midnight there)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            moment = datetime.combine(date.fromisoformat(text), time(), tzinfo=context.zone)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return parse_iso_datetime(moment if moment.tzinfo else moment.replace(tzinfo=context.zone))
    except ValueError:  # not ISO 8601, or outside the calendar in some time zone
        return None
