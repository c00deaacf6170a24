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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from app.formation.memcell import MemCell, Message
from app.providers.llm import LLMError
from app.settings import Settings
from app.text.tokens import count_tokens


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


def message_tokens(message: Message) -> int:
    return count_tokens(f"{message['sender_name']}: {message['content']}")


async def cut(pending: list[Message], rules: BoundaryRules, *, judge: Judge | None = None, flush: bool = False) -> Cuts:
    """Cut ``pending`` (conversation order) into closed MemCells and the still-open remainder."""
    cuts = Cuts()
    segment: list[Message] = []
    tokens = 0

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
