"""Supersession with an LLM: one reconciliation call per new fact the model extracted, against the user's nearest
current memories (keep, supersede or duplicate), run in formation's worker before the MemCell's transaction.

The answer is untrusted like every LLM answer: schema-constrained (``llm_answers.Reconciliation``), and a number that
names no candidate, a failed call or a malformed answer changes nothing; ``app.memories.supersession.apply_verdicts``
records it as ``rejected``. Offline facts (``app.formation.facts``) are settled as without an LLM, beside these.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from app.formation import llm_answers, prompts
from app.formation.memcell import Draft
from app.providers.llm import LLMClient, LLMError

log = logging.getLogger(__name__)

RECONCILED_TYPES = ("event_log", "semantic_memory")
MAX_FACTS = 8
"""At most this many of a MemCell's new facts are reconciled (one call each): formation's work stays bounded."""
CANDIDATES = 3
MIN_COSINE = 0.45
"""An earlier memory less similar than this to the new fact is not asked about."""


@dataclass
class Verdict:
    """What the model decided for one new fact (``draft``), or why its answer was not used (``error``)."""

    draft: Draft
    candidates: list[dict[str, Any]]
    decision: str = "keep"
    chosen: dict[str, Any] | None = None
    reasoning: str | None = None
    error: str | None = None
    answer: dict[str, Any] = field(default_factory=dict)


def reconciled(drafts: list[Draft]) -> list[Draft]:
    """The new facts a reconciliation call is made for: the model's own event-log facts and semantic memories about
    one user (not the offline entries kept beside them, which offline facts settle)."""
    return [
        draft
        for draft in drafts
        if draft.memory_type in RECONCILED_TYPES and draft.user_id and draft.metadata.get("extraction") == "llm"
    ][:MAX_FACTS]


async def verdict(llm: LLMClient, draft: Draft, candidates: list[dict[str, Any]]) -> Verdict:
    """One call: the new fact against its candidates (``id``, ``content``, ``timestamp``, ``cosine``)."""
    found = Verdict(draft, candidates)
    earlier = "\n".join(
        f"{n}. ({c['timestamp'].date().isoformat()}) {c['content']}" for n, c in enumerate(candidates, 1)
    )
    user = prompts.RECONCILIATION_INPUT.format(
        when=draft.timestamp.date().isoformat(), fact=draft.content, earlier=earlier
    )
    try:
        answer: llm_answers.Reconciliation = await llm.complete_json(
            [{"role": "system", "content": prompts.RECONCILIATION}, {"role": "user", "content": user}],
            schema=llm_answers.Reconciliation,
        )
    except LLMError as exc:
        log.warning("reconciliation of a new fact failed: %s", exc)
        found.error = f"the LLM's answer could not be used: {exc}"
        return found
    found.answer = answer.model_dump()
    found.reasoning = answer.reasoning
    if answer.decision == "keep":
        return found
    if answer.memory is None or not 1 <= answer.memory <= len(candidates):
        found.error = (
            f"the LLM answered {answer.decision} of memory {answer.memory}, which names none of the {len(candidates)}"
        )
        return found
    found.decision, found.chosen = answer.decision, candidates[answer.memory - 1]
    return found
