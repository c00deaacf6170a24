"""Evidence recall: which of a question's evidence turns a retriever brought back, in the top k or in a budget.

A retrieved item is a ``Retrieved(content, source_ids)``: the text handed to the reader and the turns it came
from. A question's recall is the fraction of its evidence ids found among the ``source_ids`` of the items
counted; a benchmark's figure is the mean over questions.

The budget view counts items whole, in rank order, while their text fits: 1 token = 4 characters, and the
first item whose text would overflow what is left of the budget ends the fill (it is not cut, and smaller
items ranked after it are not let in). With the raw-turn baselines this is the rule that reproduces the
LoCoMo development split's reference figures (skipping instead is off by up to 0.006, see
``docs/benchmarks.md``); every system is measured with the same rule.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CHARS_PER_TOKEN = 4
TOP_K = (1, 5, 10, 20)
TOKEN_BUDGETS = (256, 512, 1024, 2048)


@dataclass(frozen=True)
class Retrieved:
    content: str
    source_ids: frozenset[str]


def clean_evidence(raw: Iterable[str], known_ids: set[str]) -> list[str]:
    """Evidence ids as the dataset gives them, split on ';', stripped, de-duplicated in order, and
    restricted to ids that name a real turn (a few are malformed, e.g. "D8:6; D9:17" or "D")."""
    ids: list[str] = []
    for item in raw:
        for part in str(item).split(";"):
            part = part.strip()
            if part in known_ids and part not in ids:
                ids.append(part)
    return ids


def recall_at_k(ranked: Sequence[Retrieved], evidence: Sequence[str], k: int) -> float:
    """Fraction of ``evidence`` among the source ids of the first ``k`` items."""
    return _recall(ranked[:k], evidence)


def within_budget(ranked: Sequence[Retrieved], tokens: int) -> list[Retrieved]:
    """The items a reader with ``tokens`` of context gets: whole items in rank order until the first that
    does not fit in what is left."""
    room = tokens * CHARS_PER_TOKEN
    chosen: list[Retrieved] = []
    for item in ranked:
        if len(item.content) > room:
            break
        chosen.append(item)
        room -= len(item.content)
    return chosen


def recall_at_tokens(ranked: Sequence[Retrieved], evidence: Sequence[str], tokens: int) -> float:
    """Fraction of ``evidence`` among the source ids of the items that fit in ``tokens``."""
    return _recall(within_budget(ranked, tokens), evidence)


def question_scores(ranked: Sequence[Retrieved], evidence: Sequence[str]) -> dict[str, dict[str, float]]:
    """Every recall figure of one question."""
    return {
        "recall_at_k": {str(k): recall_at_k(ranked, evidence, k) for k in TOP_K},
        "recall_at_tokens": {str(t): recall_at_tokens(ranked, evidence, t) for t in TOKEN_BUDGETS},
    }


def mean_scores(per_question: Sequence[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The mean of ``question_scores`` over questions, rounded to 0.001."""
    out: dict[str, dict[str, float]] = {}
    for view, keys in (("recall_at_k", TOP_K), ("recall_at_tokens", TOKEN_BUDGETS)):
        out[view] = {
            str(key): round(statistics.fmean(q[view][str(key)] for q in per_question), 3) if per_question else 0.0
            for key in keys
        }
    return out


def _recall(items: Iterable[Retrieved], evidence: Sequence[str]) -> float:
    if not evidence:
        raise ValueError("a question without evidence cannot be scored")
    found: set[str] = set()
    for item in items:
        found |= item.source_ids
    return sum(1 for e in evidence if e in found) / len(evidence)
