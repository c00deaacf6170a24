"""Supersession with an LLM: one reconciliation call per new fact the model extracted, against the user's nearest
current memories (keep, supersede or duplicate), run in formation's worker before the MemCell's transaction.

The answer is untrusted like every LLM answer: schema-constrained (``llm_answers.Reconciliation``), and a number that
names no candidate, a failed call or a malformed answer changes nothing; ``app.memories.supersession.apply_verdicts``
records it as ``rejected``. Offline facts (``app.formation.facts``) are settled as without an LLM, beside these.
"""

from __future__ import annotations

import logging
import re
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
    overruled: str | None = None
    """Why a supersede the model answered was taken as a duplicate instead (``_restates``)."""


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
    if found.decision == "supersede":
        _check(found)
    return found


# A small model answers "supersede" for nearly any pair of facts about one person (Qwen2.5-Coder-1.5B did so for a
# sister's move and for "still lives in Paris": tests/test_real_llm.py). Two answers it gives are checked here:
# a fact about someone of the person's circle replaces nothing of theirs, and a fact that says nothing the earlier
# memory does not say is the same value again.
_RELATIONS = (
    r"sister|brother|sibling|mother|mom|mum|father|dad|parents?|son|daughter|child|children|kids?|friends?|"
    r"colleagues?|co-?workers?|boss|neighbou?rs?|cousin|aunt|uncle|grand(?:mother|father|ma|pa|parents?)|"
    r"room-?mate|flat-?mate|niece|nephew"
)
_SOMEONE_ELSE = re.compile(
    rf"^\W*(?:[\w-]+(?:'s|’s)|her|his|their|my)\s+(?:(?:best|old|older|younger|little|big|elder)\s+)?(?:{_RELATIONS})\b"
    r"|^\W*[\u4e00-\u9fffA-Za-z]{0,8}?的?(?:姐姐|妹妹|哥哥|弟弟|妈妈|爸爸|母亲|父亲|父母|儿子|女儿|孩子|朋友|同事|老板|邻居|表[姐妹哥弟]|堂[姐妹哥弟]|室友)",
    re.IGNORECASE,
)


def _words(text: str) -> set[str]:
    """Its Latin words and numbers, lower-cased, a final s dropped."""
    return {word.rstrip("s") for word in re.findall(r"[a-z0-9]+", text.lower())}


def _han(text: str) -> set[str]:
    return set(re.findall(r"[\u4e00-\u9fff]", text))


_AGAIN_WORDS = _words(
    "still again also too now currently yet remains remain continues continue keeps keep is are the a an and in at of "
    "to with"
)
_AGAIN_HAN = _han("还仍依然也又现在一直继续的了在是")


def _check(found: Verdict) -> None:
    fact, earlier = found.draft.content, str(found.chosen["content"])
    if _SOMEONE_ELSE.search(fact):
        found.error = "the new fact is about someone of the person's circle, not the person: nothing superseded"
        found.decision, found.chosen = "keep", None
    elif _restates(fact, earlier):
        found.decision = "duplicate"
        found.overruled = "the new fact says nothing the earlier memory does not: the same value, said again"


def _restates(fact: str, earlier: str) -> bool:
    """Every word (every Han character) of ``fact`` is in ``earlier``, but for words like still, again, now."""
    words, han = _words(fact) - _AGAIN_WORDS, _han(fact) - _AGAIN_HAN
    return words <= _words(earlier) and han <= _han(earlier) and bool(words or han)
