"""How much of a question's evidence ``POST /api/v3/agentic/context`` hands the caller's LLM, side by side per code.

    python -m benchmarks.context_recall [--code worktree] [--code REF ...] [--limit-conversations N] [--out DIR]

For each ``--code`` (the work tree, or a git ref) a ``memsys serve`` of that code on a fresh embedded database
memorizes the LoCoMo dev conversations through the public API (offline formation, the default) and, for every
question of categories 1-4, assembles a context three ways:

* ``defaults, knowledge``: the request's defaults (5 facts at most, 2,000 tokens), episodes off;
* ``defaults``: the request's defaults with the episode snippets (3 at most, 1,500 tokens);
* ``2,048 tokens``: facts and episodes half each (50 and 5 at most), as ``benchmarks/real_llm.py`` asks.

The figure is the share of a question's evidence turns whose text is in the assembled messages (offline memories
hold the words of each turn; an episode cut to fit holds only its beginning), averaged over questions, per
category. No LLM. Saves ``context_recall.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

from benchmarks.common import RESULTS_DIR, memsys_server, print_table, save
from benchmarks.locomo import CATEGORIES, Conversation, Turn, ingest, load_conversations
from benchmarks.real_llm import DEFAULT_DATA, NO_LLM, code_snapshot, context_budgets, describe_code

BUDGET = 2048
WAYS = {
    "defaults, knowledge": {"episodes": {"enabled": False}},
    "defaults": {},
    "2,048 tokens": context_budgets(BUDGET),
}


def evidence_share(text: str, evidence: list[Turn]) -> float:
    return sum(1 for turn in evidence if turn.content in text) / len(evidence)


def measure(base_url: str, conversations: list[Conversation]) -> dict[str, dict[str, float]]:
    shares: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for conversation in conversations:
            turns = {turn.dia_id: turn for turn in conversation.turns}
            for question in conversation.questions:
                evidence = [turns[e] for e in question.evidence if e in turns]
                if question.category not in CATEGORIES or not evidence:
                    continue
                for way, extra in WAYS.items():
                    body = {
                        "query": question.question,
                        "group_id": conversation.sample_id,
                        "current_time": conversation.asked_on.isoformat(),
                        **extra,
                    }
                    response = client.post("/api/v3/agentic/context", json=body)
                    response.raise_for_status()
                    text = "\n".join(m.get("content") or "" for m in response.json()["result"]["messages"])
                    share = evidence_share(text, evidence)
                    shares[way][str(question.category)].append(share)
                    shares[way]["all"].append(share)
    return {
        way: {category: round(statistics.mean(values), 3) for category, values in by_category.items()}
        | {"questions": len(by_category["all"])}
        for way, by_category in shares.items()
    }


def run(args: argparse.Namespace) -> dict:
    conversations = load_conversations(args.data, args.limit_conversations)
    results: dict[str, dict] = {}
    for code in args.code or ["worktree"]:
        name = describe_code(code)
        print(f"[context_recall] {name}: memorizing {len(conversations)} conversations", file=sys.stderr)
        started = time.perf_counter()
        with code_snapshot(code) as root, memsys_server(env=NO_LLM, root=root) as base_url:
            asyncio.run(ingest(base_url, conversations, concurrency=3))
            results[name] = measure(base_url, conversations)
        results[name]["seconds"] = round(time.perf_counter() - started, 1)
    config = {"data": str(args.data), "conversations": len(conversations), "ways": WAYS, "codes": list(results)}
    path = save("context_recall", config, results, args.out, extra={"benchmark": "context_recall"})
    rows = [
        {"code": name, "way": way, **{c: figures[way].get(c) for c in ("all", "1", "2", "3", "4")}}
        for name, figures in results.items()
        for way in WAYS
    ]
    print_table(rows, ["code", "way", "all", "1", "2", "3", "4"])
    print(f"\nwrote {path}")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a file in the LoCoMo format")
    parser.add_argument("--code", action="append", help="worktree (default) or a git ref; repeat to compare")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where context_recall.json goes")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
