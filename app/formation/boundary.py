"""Boundary detection: where a stream's pending messages are cut into MemCells.

The rules, applied message by message in conversation order (a replay: the same pending messages and
the same recorded judgements always give the same cuts, whoever holds the stream's lock):

1. a gap longer than ``boundary_gap_hours`` since the previous message closes the open MemCell before
   the new message;
2. with an LLM, the judge is asked whether the new message starts a new episode (once per message:
   a negative answer is recorded in ``messages.boundary_checked``); ``should_end`` closes it likewise;
3. a message that would take the open MemCell past ``boundary_max_tokens`` closes it before the message;
   reaching ``boundary_max_messages`` (or the token limit with one message) closes it after;
4. a flush closes whatever is left open.

A judge that ends the episode at ``ENDS_IN_A_ROW`` messages in a row (counting the single-message MemCells it
closed before this pass) is not judging: a weak model says "end" to everything, one MemCell per message. Its
answers of the pass are then dropped, the rules alone cut (``Cuts.judge_distrusted``), and every message of the
pass counts as checked; while its streak lasts, a later pass costs one answer before it is distrusted again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from app.formation.memcell import MemCell, Message
from app.providers.llm import LLMError
from app.settings import Settings
from app.text.tokens import count_tokens

ENDS_IN_A_ROW = 3
"""The judge's "end" answers in a row after which it is distrusted for the pass."""


@dataclass(frozen=True)
class Judgement:
    should_end: bool
    reasoning: str = ""
    topic_summary: str | None = None


# (the open MemCell's messages, the new message, the gap between them) -> does it start a new episode?
Judge = Callable[[list[Message], Message, timedelta], Awaitable[Judgement]]


@dataclass(frozen=True)
class BoundaryRules:
    max_tokens: int
    max_messages: int
    max_gap: timedelta

    @classmethod
    def from_settings(cls, settings: Settings) -> BoundaryRules:
        return cls(
            max_tokens=settings.boundary_max_tokens,
            max_messages=settings.boundary_max_messages,
            max_gap=timedelta(hours=settings.boundary_gap_hours),
        )


@dataclass
class Cuts:
    closed: list[MemCell] = field(default_factory=list)
    open: list[Message] = field(default_factory=list)
    checked_ids: list[int] = field(default_factory=list)
    """Messages the judge has now seen (negative answers, or a failed judge): not asked again."""
    judge_error: LLMError | None = None
    judge_distrusted: bool = False


def message_tokens(message: Message) -> int:
    return count_tokens(f"{message['sender_name']}: {message['content']}")


async def cut(
    pending: list[Message], rules: BoundaryRules, *, judge: Judge | None = None, flush: bool = False, streak: int = 0
) -> Cuts:
    """Cut ``pending`` (conversation order) into closed MemCells and the still-open remainder. ``streak``: the
    judge's "end" answers in a row before these messages (``repository.judge_streak``)."""
    cuts = await _cut(pending, rules, judge, flush, streak)
    if not cuts.judge_distrusted:
        return cuts
    by_rules = await _cut(pending, rules, None, flush, 0)
    by_rules.checked_ids, by_rules.judge_distrusted = cuts.checked_ids, True
    return by_rules


async def _cut(pending: list[Message], rules: BoundaryRules, judge: Judge | None, flush: bool, streak: int) -> Cuts:
    cuts = Cuts()
    segment: list[Message] = []
    tokens = 0
    ends_in_a_row = streak

    def close(reason: str, topic_summary: str | None = None) -> None:
        nonlocal segment, tokens
        cuts.closed.append(MemCell(segment, reason, topic_summary))
        segment, tokens = [], 0

    for message in pending:
        size = message_tokens(message)
        if segment:
            gap = message["create_time"] - segment[-1]["create_time"]
            if gap > rules.max_gap:
                close("time_gap")
            elif tokens + size > rules.max_tokens:
                close("max_tokens")
            elif judge is not None and not message["boundary_checked"]:
                try:
                    judgement = await judge(segment, message, gap)
                except LLMError as exc:
                    # Fall back to the rules for the rest of this pass; do not pay for the failure again.
                    cuts.judge_error, judge = exc, None
                    cuts.checked_ids.append(message["id"])
                else:
                    ends_in_a_row = ends_in_a_row + 1 if judgement.should_end else 0
                    if ends_in_a_row >= ENDS_IN_A_ROW:  # not asked again about any message of this pass
                        cuts.checked_ids = [m["id"] for m in pending]
                        cuts.judge_distrusted = True
                        return cuts
                    if judgement.should_end:
                        close("llm", judgement.topic_summary)
                    else:
                        cuts.checked_ids.append(message["id"])
        segment.append(message)
        tokens += size
        if len(segment) >= rules.max_messages:
            close("max_messages")
        elif tokens >= rules.max_tokens:
            close("max_tokens")
    if flush and segment:
        close("flush")
    cuts.open = segment
    return cuts
