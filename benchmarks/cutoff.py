"""Similarity cut-offs calibrated to the embedder: what each cosine cut-off keeps and drops on LoCoMo.

For every scored question of the LoCoMo development split (categories 1-4), the cosine between the question and
each turn of its conversation, embedded by the configured model as memsys embeds a fact or a message
("Speaker: text"): a turn named in the question's evidence is a match, every other turn is not. For each cut-off
the table gives the share of matches kept, of non-matches kept, and of questions that keep their best match.
memsys's default cut-off for a model (``app.retrieval.cutoff``) is the highest that keeps the best match of
``--keep`` (0.9) of the questions; ``/context``'s ``semantic.min_score`` and the agent use it.

    python -m benchmarks.cutoff [--data ../shared/datasets/locomo/locomo-dev.json] [--keep 0.9]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path

import numpy as np

from app.providers.embeddings import create_embedder, embedder_name
from app.settings import Settings
from benchmarks.common import ROOT, print_table, save
from benchmarks.locomo import load_conversations

DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"
CUTOFFS = [round(0.05 * step, 2) for step in range(0, 17)]


def turn_text(turn) -> str:
    return f"{turn.speaker}: {turn.content}"


async def cosines(settings: Settings, path: Path) -> tuple[list[float], list[float], list[float]]:
    """Cosines of matches, of non-matches, and each question's best match."""
    embedder = create_embedder(settings)
    matches: list[float] = []
    others: list[float] = []
    best: list[float] = []
    for conversation in load_conversations(path):
        turn_vectors = np.array(await embedder.embed([turn_text(turn) for turn in conversation.turns]))
        question_vectors = np.array(await embedder.embed([q.question for q in conversation.questions]))
        similarity = question_vectors @ turn_vectors.T  # the vectors are normalised
        ids = [turn.dia_id for turn in conversation.turns]
        for row, question in zip(similarity, conversation.questions, strict=True):
            evidence = set(question.evidence)
            hits = [float(value) for value, dia_id in zip(row, ids, strict=True) if dia_id in evidence]
            matches += hits
            others += [float(value) for value, dia_id in zip(row, ids, strict=True) if dia_id not in evidence]
            best.append(max(hits))
    return matches, others, best


def table(matches: list[float], others: list[float], best: list[float]) -> list[dict]:
    rows = []
    for cutoff in CUTOFFS:
        rows.append(
            {
                "cutoff": cutoff,
                "matches_kept": round(sum(v >= cutoff for v in matches) / len(matches), 3),
                "non_matches_kept": round(sum(v >= cutoff for v in others) / len(others), 3),
                "questions_keeping_best_match": round(sum(v >= cutoff for v in best) / len(best), 3),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--keep", type=float, default=0.9, help="share of questions whose best match is kept")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    settings = Settings()
    matches, others, best = asyncio.run(cosines(settings, args.data))
    rows = table(matches, others, best)
    print(f"model {embedder_name(settings)}: {len(best)} questions, {len(matches)} matches, {len(others)} non-matches")
    print(
        f"cosine medians: match {statistics.median(matches):.3f}, best match {statistics.median(best):.3f}, "
        f"non-match {statistics.median(others):.3f}"
    )
    print_table(rows, ["cutoff", "matches_kept", "non_matches_kept", "questions_keeping_best_match"])
    ordered = sorted(best)
    chosen = round(float(ordered[int((1 - args.keep) * len(ordered))]), 2)
    print(f"highest cut-off keeping the best match of {args.keep:.0%} of the questions: {chosen}")
    path = save(
        "cutoff",
        {"model": embedder_name(settings), "data": str(args.data), "keep": args.keep},
        {
            "rows": rows,
            "chosen": chosen,
            "median_match": statistics.median(matches),
            "median_best_match": statistics.median(best),
            "median_non_match": statistics.median(others),
            "questions": len(best),
        },
        args.out,
    )
    print(f"saved {path}")


if __name__ == "__main__":
    main()
