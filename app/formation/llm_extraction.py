"""Extraction with an LLM: the boundary judge, and per MemCell the episode (group and personal), the
event log, semantic memories and merged profiles. Two calls per MemCell (memories, then profiles);
either failing fails the extraction, so a MemCell is formed whole or not at all.
"""

from __future__ import annotations

import json
import logging
from datetime import date, datetime, time, timedelta
from typing import Any

from app.formation import instructions, llm_answers, offline, profiles, prompts
from app.formation.boundary import Judge, Judgement
from app.formation.language import gap_text
from app.formation.memcell import Context, Draft, Extraction, MemCell, Message
from app.providers.llm import LLMClient, LLMError
from app.text.timeparse import parse_iso_datetime
from app.text.tokenize import word_count

log = logging.getLogger(__name__)

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
        answer: llm_answers.Judgement = await llm.complete_json(
            [{"role": "system", "content": prompts.BOUNDARY[language]}, {"role": "user", "content": user}],
            schema=llm_answers.Judgement,
        )
        return Judgement(answer.should_end, answer.reasoning or "", answer.topic_summary)

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


class WeakExtraction(Exception):
    """The model answered in the right shape but with too little in it (``weakness``): the MemCell is formed
    by the offline path instead, at once (a model that answered so will answer so again)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


FACT_MIN_WORDS = 3
"""A fact of fewer words ("Caroline", "7 May 2023") says nothing: dropped."""
SUBSTANTIVE_WORDS = 6
"""A message of at least this many words is one a fact could come from ("Hi!" is not)."""
MESSAGES_PER_FACT = 5
"""Fewer facts than one per this many substantive messages is a weak extraction (a strong model writes about
one per message or two; a weak one 1-2 per 15 messages)."""
EPISODE_MIN_WORDS = 8


def weakness(answer: llm_answers.ExtractionAnswer, cell: MemCell) -> WeakExtraction | None:
    """Why ``answer`` is worse than the offline path's memories of ``cell`` would be, or None. The offline path
    keeps every message's words (one event-log entry each, the transcript as the episode): an answer with no
    facts, facts without content, or an episode of a few words for a real conversation loses them."""
    words = [word_count(m["content"]) for m in cell.messages]
    substantive = sum(1 for n in words if n >= SUBSTANTIVE_WORDS)
    if (episode := word_count(answer.content)) < EPISODE_MIN_WORDS and sum(words) >= 4 * EPISODE_MIN_WORDS:
        return WeakExtraction("episode_without_content", f"the LLM's episode has {episode} words")
    if substantive and not answer.event_log:
        return WeakExtraction("no_facts", f"the LLM extracted no facts from {substantive} substantive messages")
    if len(answer.event_log) * MESSAGES_PER_FACT < substantive:
        return WeakExtraction(
            "too_few_facts",
            f"the LLM extracted {len(answer.event_log)} facts from {substantive} substantive messages",
        )
    return None


async def extract(
    llm: LLMClient,
    cell: MemCell,
    context: Context,
    previous: dict[str, dict[str, Any]],
    *,
    keep_messages: bool,
) -> Extraction:
    """The MemCell's memories and profiles by the LLM; ``WeakExtraction`` when its answer is too thin. With
    ``keep_messages`` each message's own event-log entry (the offline path's) is kept beside the LLM's facts."""
    conversation = _conversation(cell, context)
    language = context.language
    answer: llm_answers.ExtractionAnswer = await llm.complete_json(
        [
            {"role": "system", "content": _guided(prompts.EXTRACTION[language], context)},
            {"role": "user", "content": conversation},
        ],
        schema=llm_answers.ExtractionAnswer,
    )
    answer.event_log = [fact for fact in answer.event_log if word_count(fact.fact) >= FACT_MIN_WORDS]
    if (weak := weakness(answer, cell)) is not None:
        raise weak
    missing = [u for u in cell.participants if u not in {e.user_id for e in answer.personal_episodes}]
    if context.stream.group_id and missing:
        answer.personal_episodes += await _personal_episodes(llm, context, conversation, missing)
    drafts = _memories(answer, cell, context)
    if keep_messages:
        drafts += offline.message_entries(cell, context)
    new_profiles = await _profiles(llm, cell, context, previous, conversation)
    return Extraction("llm", drafts, new_profiles, profile_source="llm", topic_summary=answer.summary)


def _memories(answer: llm_answers.ExtractionAnswer, cell: MemCell, context: Context) -> list[Draft]:
    group_id = context.stream.group_id
    participants = set(cell.participants)
    base = {"extraction": "llm", "boundary_reason": cell.reason}
    episode = {"title": answer.title, "summary": answer.summary, "content": answer.content}
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
    personal = {item.user_id: item for item in answer.personal_episodes if item.user_id in participants}
    for user in context.owners(cell):
        item = personal.get(user)
        own = (
            {"title": item.title or episode["title"], "summary": item.summary, "content": item.content}
            if item
            else episode
        )
        written_for = {} if item or not group_id else {"personal_episode": "group"}
        drafts.append(
            Draft(
                "episode",
                timestamp=cell.start_time,
                source_message_ids=cell.message_ids,
                user_id=user,
                group_id=group_id,
                metadata={**base, **written_for},
                **own,
            )
        )
    for fact in answer.event_log:
        sources = _sources(fact.source_message_ids, cell)
        drafts.append(
            Draft(
                "event_log",
                content=fact.fact,
                timestamp=_moment(fact.time, context) or _first_time(sources, cell),
                source_message_ids=sources,
                user_id=_owner(fact.user_id, sources, cell, participants),
                group_id=group_id,
                metadata=dict(base),
            )
        )
    for item in answer.semantic_memories:
        sources = _sources(item.source_message_ids, cell)
        valid_from = _day(item.valid_from) or cell.start_time.astimezone(context.zone).date()
        valid_to = _day(item.valid_to)
        if valid_to is not None and valid_to < valid_from:
            valid_from, valid_to = valid_to, valid_from
        drafts.append(
            Draft(
                "semantic_memory",
                content=item.content,
                timestamp=cell.end_time,
                source_message_ids=sources,
                user_id=item.user_id if item.user_id in participants else None,
                group_id=group_id,
                valid_from=valid_from,
                valid_to=valid_to,
                metadata={**base, **({"evidence": item.evidence} if item.evidence else {})},
            )
        )
    return drafts


async def _personal_episodes(
    llm: LLMClient, context: Context, conversation: str, users: list[str]
) -> list[llm_answers.PersonalEpisode]:
    """The personal episodes the extraction left out, asked for once more; none if that fails too (the
    participant then gets the group narrative, marked ``personal_episode: "group"``)."""
    language = context.language
    system = _guided(prompts.PERSONAL[language].format(users=", ".join(users)), context)
    try:
        answer: llm_answers.PersonalEpisodesAnswer = await llm.complete_json(
            [{"role": "system", "content": system}, {"role": "user", "content": conversation}],
            schema=llm_answers.PersonalEpisodesAnswer,
        )
    except LLMError as exc:
        log.warning("personal episodes of %s: %s", context.stream.lock_key(), exc)
        return []
    return [episode for episode in answer.personal_episodes if episode.user_id in users]


async def _profiles(
    llm: LLMClient, cell: MemCell, context: Context, previous: dict[str, dict[str, Any]], conversation: str
) -> dict[str, dict[str, Any]]:
    language = context.language
    fields = profiles.profile_fields(context.scene, context.own_profile_fields)
    system = _guided(
        prompts.PROFILE[language].format(
            fields=", ".join(fields), example=", ".join(f'"{name}": ...' for name in fields)
        ),
        context,
    )
    before = {user: (previous.get(user) or {}).get("profile") or {} for user in context.people(cell)}
    shown = {user: {k: v for k, v in p.items() if k != "keyword_counts"} for user, p in before.items()}
    user_prompt = (
        f"{conversation}\n\n{prompts.PREVIOUS_PROFILES_HEADER[language]}\n{json.dumps(shown, ensure_ascii=False)}"
    )
    answer: llm_answers.ProfilesAnswer = await llm.complete_json(
        [{"role": "system", "content": system}, {"role": "user", "content": user_prompt}],
        schema=llm_answers.ProfilesAnswer,
    )
    from_llm = {item.user_id: item.fields() for item in answer.profiles if item.user_id in before}
    merged = {}
    for user in context.people(cell):
        derived = profiles.derived_profile(user, cell, context, before[user])
        merged[user] = profiles.merged_llm_profile(derived, from_llm.get(user) or {}, fields, context.scene)
    return merged


def _guided(system: str, context: Context) -> str:
    """A formation prompt with the tenant's instructions after it (app.formation.instructions)."""
    return system + instructions.fenced(context.guidance) if context.guidance.strip() else system


def _sender_name(cell: MemCell, user: str) -> str | None:
    return next((m["sender_name"] for m in cell.messages if m["sender"] == user), None)


def _sources(cited: list[str], cell: MemCell) -> list[str]:
    """The cited message ids that belong to this MemCell; all of them when none does."""
    known = set(cell.message_ids)
    return list(dict.fromkeys(i for i in cited if i in known)) or cell.message_ids


def _owner(user_id: str | None, sources: list[str], cell: MemCell, participants: set[str]) -> str | None:
    if user_id in participants:
        return user_id
    senders = {m["sender"] for m in cell.messages if m["message_id"] in sources}
    return senders.pop() if len(senders) == 1 else None


def _first_time(sources: list[str], cell: MemCell) -> datetime:
    return next((m["create_time"] for m in cell.messages if m["message_id"] in sources), cell.start_time)


def _day(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def _moment(value: str | None, context: Context) -> datetime | None:
    """An ISO date-time (naive: the conversation's zone) or a bare day (its midnight there)."""
    if not value:
        return None
    text = value
    try:
        if len(text) == 10:
            moment = datetime.combine(date.fromisoformat(text), time(), tzinfo=context.zone)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return parse_iso_datetime(moment if moment.tzinfo else moment.replace(tzinfo=context.zone))
    except ValueError:  # not ISO 8601, or outside the calendar in some time zone
        return None
