"""Context assembly under token budgets (seed 002): the messages a caller sends to its LLM.

Order (seed 002): [1] the caller's system prompt, [2] retrieved knowledge, [3] episode snippets, [4] the
session history pruned to its budget, [5] the user's new message, last. [2] and [3] are system messages.

Budgets: each section stays within its own (``semantic.max_tokens``, ``episodes.max_tokens``,
``history_max_tokens``) and the whole within ``context_max_tokens``. [1] and [5] are never cut: if they
alone exceed ``context_max_tokens`` the request is a 400 naming it. When the sections together would
exceed it, they are trimmed in this order until the whole fits: episode snippets (lowest-ranked first),
then history (oldest whole turn first), then knowledge (lowest-ranked record first).

Tokens are counted with ``app.text.tokens`` (the project's one token counter), per message with the chat
format's overhead.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from app.context.schemas import ChatMessage, ContextRequest, ContextResult, Section, Source
from app.errors import InvalidParameter
from app.retrieval import service as retrieval
from app.retrieval.cutoff import similarity_cutoff
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.tokens import count_message_tokens, count_tokens, truncate_tokens

KNOWLEDGE_HEADER = "[Retrieved Knowledge]\n"
EPISODES_HEADER = "[Episode Snippets]\n"
KNOWLEDGE_TYPES = ("event_log", "semantic_memory")
MIN_SNIPPET_TOKENS = 24
"""An episode is cut to fit what is left of its budget, but not to fewer tokens than this."""


@dataclass
class _Records:
    """A section of retrieved records: rendered as one system message under a header."""

    header: str
    records: list[tuple[dict[str, Any], str, bool]] = field(default_factory=list)  # memory, text, truncated

    def text(self) -> str:
        return self.header + "".join(text for _, text, _ in self.records) if self.records else ""

    def message(self) -> dict[str, str] | None:
        return {"role": "system", "content": self.text()} if self.records else None

    def tokens(self) -> int:
        message = self.message()
        return count_message_tokens(message) if message else 0

    def sources(self) -> list[Source]:
        return [
            Source(
                id=memory["id"],
                memory_type=memory["memory_type"],
                score=round(memory["score"], 4),
                tokens=count_tokens(text),
                truncated=truncated,
            )
            for memory, text, truncated in self.records
        ]


async def assemble(runtime: Runtime, request: ContextRequest) -> tuple[str, ContextResult]:
    _validate(request, runtime)
    system = {"role": "system", "content": request.system_prompt} if request.system_prompt else None
    user = {"role": "user", "content": request.query}
    fixed = (count_message_tokens(system) if system else 0) + count_message_tokens(user)
    if fixed > request.context_max_tokens:
        raise InvalidParameter(
            f"Invalid field context_max_tokens: {request.context_max_tokens} is less than the system prompt and the "
            f"user's message alone ({fixed} tokens)"
        )
    searching = (request.semantic.enabled and request.semantic.max_tokens) or (
        request.episodes.enabled and request.episodes.max_tokens
    )
    vector = (await runtime.embedder.embed([request.query], query=True))[0] if searching else []
    knowledge_memories, episode_memories = await asyncio.gather(
        _knowledge(runtime, request, vector), _episodes(runtime, request, vector)
    )
    knowledge, episodes, turns = await run_off_loop(
        _fill, request, knowledge_memories, episode_memories, request.context_max_tokens - fixed
    )
    history = [m for turn in turns for m in turn]
    messages = [m for m in (system, knowledge.message(), episodes.message()) if m] + history + [user]
    sections = {
        "system": Section(tokens=count_message_tokens(system) if system else 0),
        "knowledge": Section(
            tokens=knowledge.tokens(), budget=request.semantic.max_tokens, sources=knowledge.sources()
        ),
        "episodes": Section(tokens=episodes.tokens(), budget=request.episodes.max_tokens, sources=episodes.sources()),
        "history": Section(
            tokens=sum(count_message_tokens(m) for m in history),
            budget=request.history_max_tokens,
            messages=len(history),
            dropped=len(request.history) - len(history),
        ),
        "user": Section(tokens=count_message_tokens(user)),
    }
    total = sum(section.tokens for section in sections.values())
    result = ContextResult(
        messages=messages, sections=sections, total_tokens=total, context_max_tokens=request.context_max_tokens
    )
    return f"Context assembled: {len(messages)} messages, {total} tokens", result


def _validate(request: ContextRequest, runtime: Runtime) -> None:
    retrieval.check_scope(request)
    retrieval.check_query_length(request.query, runtime.settings)


async def _knowledge(runtime: Runtime, request: ContextRequest, vector: list[float]) -> list[dict[str, Any]]:
    """Facts and semantic memories at least ``min_score`` similar by cosine (unset: the model's calibrated
    cut-off), ranked by hybrid search (``rrf``: the query's words count beside its meaning), best first; each
    record's score is its cosine. On LoCoMo's dev split the default 5 facts hold 0.63 of the questions' evidence,
    0.48 ranked by cosine alone (``benchmarks/context_recall.py``)."""
    section = request.semantic
    if not section.enabled or section.max_tokens == 0:
        return []
    min_score = section.min_score if section.min_score is not None else similarity_cutoff(runtime.settings)
    found = await asyncio.gather(
        *(
            retrieval.search(
                runtime,
                query=request.query,
                filters=retrieval.filters_for(request, memory_type=memory_type),
                top_k=2 * section.top_k,
                mode="rrf",
                radius=min_score,
                query_vector=vector,
            )
            for memory_type in KNOWLEDGE_TYPES
        )
    )
    # A memory only BM25 found has no cosine to hold against the floor: it is left out (twice top_k asked).
    memories = [m for result in found for m in result.memories if m["cosine"] is not None]
    ranked = sorted(memories, key=lambda m: -m["score"])[: section.top_k]
    return [{**m, "score": m["cosine"]} for m in ranked]


async def _episodes(runtime: Runtime, request: ContextRequest, vector: list[float]) -> list[dict[str, Any]]:
    section = request.episodes
    if not section.enabled or section.max_tokens == 0:
        return []
    found = await retrieval.search(
        runtime,
        query=request.query,
        # Messages not yet formed come once, with the knowledge (its event-log search).
        filters=dataclasses.replace(retrieval.filters_for(request, memory_type="episode"), include_pending=False),
        top_k=section.top_k,
        mode="rrf",
        query_vector=vector,
    )
    return found.memories


def _fill(
    request: ContextRequest, knowledge_memories: list[dict], episode_memories: list[dict], room: int
) -> tuple[_Records, _Records, list[list[dict[str, Any]]]]:
    """Each section within its budget, then the whole within ``room`` (what [1] and [5] leave)."""
    knowledge = _Records(KNOWLEDGE_HEADER)
    for memory in knowledge_memories:
        _add(knowledge, memory, _knowledge_record(memory, request.group_id), request.semantic.max_tokens, cut=False)
    episodes = _Records(EPISODES_HEADER)
    for memory in episode_memories:
        _add(episodes, memory, _episode_record(memory, request.group_id), request.episodes.max_tokens, cut=True)
    turns = _latest_turns(request.history, request.history_max_tokens)
    history_tokens = sum(tokens for _, tokens in turns)
    while knowledge.tokens() + episodes.tokens() + history_tokens > room:
        if episodes.records:
            episodes.records.pop()
        elif turns:
            history_tokens -= turns.pop(0)[1]
        else:
            knowledge.records.pop()
    return knowledge, episodes, [turn for turn, _ in turns]


def _add(section: _Records, memory: dict, text: str, budget: int, *, cut: bool) -> None:
    """Add the record if the section stays within ``budget``; else, with ``cut``, the longest beginning of
    it that fits (at least ``MIN_SNIPPET_TOKENS``), found by bisection."""
    section.records.append((memory, text, False))
    if section.tokens() <= budget:
        return
    section.records.pop()
    if not cut:
        return
    low, high, best = MIN_SNIPPET_TOKENS, count_tokens(text), None
    while low <= high:
        middle = (low + high) // 2
        section.records.append((memory, truncate_tokens(text, middle).rstrip() + "…\n---\n", True))
        if section.tokens() <= budget:
            best, low = section.records[-1], middle + 1
        else:
            high = middle - 1
        section.records.pop()
    if best is not None:
        section.records.append(best)


def _source_line(memory: dict, group_id: str | None) -> str:
    """``Source: event_log · 2025-01-15 · user u1``: the type, the day, whose; the group when the request did not
    name it. The memory's id is left to ``sections``' sources: in the text it cost more tokens than most facts."""
    parts = [memory["memory_type"], memory["timestamp"][:10]]
    if memory.get("group_id") and memory["group_id"] != group_id:
        parts.append(f"group {memory['group_id']}")
    if memory.get("user_id"):
        parts.append(f"user {memory['user_id']}")
    return "Source: " + " · ".join(parts) + "\n"


def _knowledge_record(memory: dict, group_id: str | None) -> str:
    return f"{_source_line(memory, group_id)}{memory['content']}\n---\n"


def _episode_record(memory: dict, group_id: str | None) -> str:
    title = f"{memory['title']}\n" if memory.get("title") else ""
    return f"{_source_line(memory, group_id)}{title}{memory['content']}\n---\n"


def _latest_turns(history: list[ChatMessage], budget: int) -> list[tuple[list[dict[str, Any]], int]]:
    """The latest whole turns within ``budget``, with their tokens. A turn starts at a user message and
    holds what follows it (assistant replies, tool calls and their tool replies), so a tool call never
    loses its reply; a turn that does not fit is dropped with every older one."""
    turns: list[list[dict[str, Any]]] = []
    for message in history:
        if message.role == "user" or not turns:
            turns.append([])
        turns[-1].append(message.as_openai())
    kept: list[tuple[list[dict[str, Any]], int]] = []
    used = 0
    for turn in reversed(turns):
        tokens = sum(count_message_tokens(m) for m in turn)
        if used + tokens > budget:
            break
        kept.insert(0, (turn, tokens))
        used += tokens
    return kept
