"""Agent memory: a MemCell in which an agent worked with tools becomes an **agent case**, and a way of working that
recurs in several of one agent's cases becomes an **agent skill** (EverOS's agent_cases / agent_skills).

By rules (docs/formation.md says what they catch and miss); with an LLM, the case's intent, approach, quality and
key insight are the LLM's reading of the session (``with_llm``, schema-constrained), the rules' when it fails:

* a case needs an agent (the MemCell's ``agent_id``) and at least one tool call. Its task intent is the first user
  message; its approach the tools called, in order; its key insight the final answer (the last assistant message
  that calls no tool); its quality 0.2, plus 0.4 with a final answer, plus up to 0.4 for tool rounds (four or more:
  all of it), less 0.3 when a tool's result reads as an error.
* a skill is the sequence of distinct tools a case used, once two or more of the agent's current cases of quality
  0.5 or more share it (a failed run teaches no way of working):
  named by its tools, described by the tasks it served, with the cases' mean quality as its confidence and its
  maturity growing with the cases behind it (five: 1.0). A newer version of the same skill supersedes the older.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.tables import memories
from app.formation import prompts
from app.formation.llm_answers import AgentCaseAnswer
from app.formation.memcell import Draft, MemCell
from app.memories import history
from app.memories.history import Event
from app.providers.llm import LLMClient, LLMError

MAX_INTENT = 300
MAX_INSIGHT = 300
MATURE_AFTER = 5
SKILL_EVIDENCE = 2
"""A skill needs this many current cases of the agent with the same tools, each of at least ``SKILL_QUALITY``."""
SKILL_QUALITY = 0.5
"""A case below it (no final answer, or a tool that failed) teaches no way of working: it makes no skill."""
log = logging.getLogger(__name__)
ACTOR = "formation"
_ERROR = re.compile(r"\b(error|exception|failed|failure|traceback|denied|not found)\b", re.IGNORECASE)


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _tools(message: dict[str, Any]) -> list[str]:
    return [call["name"] for call in (message.get("custom_metadata") or {}).get("tool_calls", []) if call.get("name")]


def case_of(cell: MemCell, group_id: str | None) -> Draft | None:
    """The MemCell's agent case, or None (no agent, or no tool called)."""
    agent = cell.scope["agent_id"]
    tools = [name for message in cell.messages for name in _tools(message)]
    if agent is None or not tools:
        return None
    users = [m for m in cell.messages if m.get("role") == "user"]
    answers = [m for m in cell.messages if m.get("role") == "assistant" and not _tools(m)]
    results = [m for m in cell.messages if m.get("role") == "tool"]
    intent = _cut(users[0]["content"] if users else cell.messages[0]["content"], MAX_INTENT)
    final = _cut(answers[-1]["content"], MAX_INSIGHT) if answers else None
    sequence = list(dict.fromkeys(tools))
    steps = " → ".join(name for i, name in enumerate(tools) if i == 0 or tools[i - 1] != name)
    approach = f"Called {steps}" + (", then answered." if final else "; no final answer.")
    failed = any(_ERROR.search(m["content"]) for m in results)
    quality = round(min(1.0, max(0.0, 0.2 + 0.4 * (final is not None) + 0.1 * min(len(tools), 4) - 0.3 * failed)), 2)
    return Draft(
        memory_type="agent_case",
        content=f"Task: {intent}\nApproach: {approach}\nOutcome: {final or 'no final answer'}",
        timestamp=cell.end_time,
        source_message_ids=cell.message_ids,
        group_id=group_id,
        title=_cut(intent, 80),
        summary=approach,
        metadata={
            "task_intent": intent,
            "approach": approach,
            "quality_score": quality,
            "key_insight": final,
            "tools": sequence,
            "skill_key": " > ".join(sequence),
        },
    )


async def with_llm(llm: LLMClient, case: Draft, cell: MemCell, language: str) -> Draft:
    """The case as the LLM reads the session (schema-constrained: ``AgentCaseAnswer``); the rules' case when the LLM
    gives no usable answer. Its tools and skill key stay the rules' (what was called is not a matter of reading)."""
    lines = []
    for message in cell.messages:
        calls = ", ".join(_tools(message))
        lines.append(f"{message.get('role') or 'user'}: {message['content']}" + (f" [calls {calls}]" if calls else ""))
    try:
        answer: AgentCaseAnswer = await llm.complete_json(
            [
                {"role": "system", "content": prompts.AGENT_CASE[language]},
                {"role": "user", "content": "\n".join(lines)},
            ],
            schema=AgentCaseAnswer,
        )
    except LLMError as exc:
        log.warning("agent case by rules (the LLM gave no usable answer: %s)", exc)
        return case
    intent, approach = _cut(answer.task_intent, MAX_INTENT), _cut(answer.approach, MAX_INTENT)
    insight = _cut(answer.key_insight, MAX_INSIGHT) if answer.key_insight else None
    metadata = {
        **case.metadata,
        "task_intent": intent,
        "approach": approach,
        "quality_score": round(answer.quality_score, 2),
        "key_insight": insight,
        "extraction": "llm",
    }
    content = f"Task: {intent}\nApproach: {approach}\nOutcome: {insight or 'no final answer'}"
    return dataclasses.replace(case, content=content, title=_cut(intent, 80), summary=approach, metadata=metadata)


async def skill_of(conn: AsyncConnection, case: Draft, agent_id: str) -> Draft | None:
    """The skill ``case`` makes with the agent's earlier current cases of the same tools, or None (too few)."""
    key = case.metadata["skill_key"]
    if case.metadata["quality_score"] < SKILL_QUALITY:
        return None
    earlier = (
        await conn.execute(
            select(memories.c.id, memories.c.metadata)
            .where(
                memories.c.memory_type == "agent_case",
                memories.c.agent_id == agent_id,
                memories.c.status == "current",
                memories.c.metadata["skill_key"].astext == key,
                memories.c.metadata["quality_score"].as_float() >= SKILL_QUALITY,
            )
            .order_by(memories.c.timestamp.desc())
            .limit(50)
        )
    ).all()
    if len(earlier) + 1 < SKILL_EVIDENCE:
        return None
    cases = [case.metadata, *(row.metadata for row in earlier)]
    tools = case.metadata["tools"]
    intents = list(dict.fromkeys(c["task_intent"] for c in cases))[:3]
    description = "For tasks like: " + "; ".join(_cut(intent, 100) for intent in intents)
    steps = [f"{i}. Call {name}" for i, name in enumerate(tools, 1)] + [f"{len(tools) + 1}. Answer from what they gave"]
    name = "Use " + " then ".join(tools)
    return Draft(
        memory_type="agent_skill",
        content=f"{name}\n{description}\n" + "\n".join(steps),
        timestamp=case.timestamp,
        source_message_ids=case.source_message_ids,
        group_id=case.group_id,
        title=name,
        summary=description,
        metadata={
            "name": name,
            "description": description,
            "skill_key": case.metadata["skill_key"],
            "confidence": round(sum(c["quality_score"] for c in cases) / len(cases), 2),
            "maturity_score": round(min(1.0, len(cases) / MATURE_AFTER), 2),
            "source_case_ids": [str(row.id) for row in earlier],
        },
    )


async def link(conn: AsyncConnection, saved: Sequence[dict[str, Any]]) -> None:
    """After a MemCell's memories are written: its skill names its new case among its sources, and supersedes the
    agent's earlier version of the same skill."""
    case = next((m for m in saved if m["memory_type"] == "agent_case"), None)
    skill = next((m for m in saved if m["memory_type"] == "agent_skill"), None)
    if case is None or skill is None:
        return
    metadata = {**skill["metadata"], "source_case_ids": [case["id"], *skill["metadata"]["source_case_ids"]]}
    await conn.execute(update(memories).where(memories.c.id == UUID(skill["id"])).values(metadata=metadata))
    new = UUID(skill["id"])
    older = await conn.execute(
        update(memories)
        .where(
            memories.c.memory_type == "agent_skill",
            memories.c.agent_id == skill["agent_id"],
            memories.c.status == "current",
            memories.c.metadata["skill_key"].astext == metadata["skill_key"],
            memories.c.id != new,
        )
        .values(status="superseded", superseded_by=new, superseded_at=datetime.fromisoformat(skill["timestamp"]))
        .returning(memories.c.id)
    )
    await history.record(
        conn, [Event(old, "superseded", ACTOR, details={"superseded_by": str(new)}) for old in older.scalars()]
    )
