"""Agentic retrieval latency: where the time goes when the LLM answers after a fixed delay.

    python -m benchmarks.agentic [--base-url URL] [--delay 0.3] [--queries 30] [--out DIR]

Starts memsys on a fresh embedded database (unless --base-url), fills it through the public API with a
synthetic conversation (offline formation), and starts an OpenAI-compatible test server on 127.0.0.1
that answers every chat call after ``--delay`` seconds. Then it times retrieve_agentic in three paths:
sufficient (one LLM call), insufficient (one LLM call + a second round of 3 searches), and insufficient
with the LLM as reranker (rerank batches in parallel). The pipeline's own work is the total minus the
time spent waiting for the LLM (``llm_judge`` + LLM rerank), as the service reports it in
``metadata.timings_ms``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from benchmarks.common import memsys_server, percentiles, print_table, save
from benchmarks.fake_llm import FakeLLM, Reply

TOPICS = [
    ("release", "the release of version {n} moved to {day} because the payment tests failed"),
    ("food", "{who} wants to try the new hot pot place near the office on {day}"),
    ("travel", "{who} booked a trip to Kyoto for the autumn leaves, flying out on {day}"),
    ("hiring", "we interviewed {n} candidates for the backend role and liked the one from Berlin"),
    ("design", "{who} shared the new onboarding mock-ups; the colour palette is still open"),
    ("infra", "the database migration to the new cluster finished at {n} percent before the rollback"),
]
PEOPLE = ["Alice", "Bob", "Chen", "Dana"]
QUESTIONS = [
    "When is the release?",
    "What food does Alice want to try?",
    "Where is Bob travelling?",
    "How did the hiring go?",
    "What happened with the database migration last week?",
    "What is still open in the design?",
]


def fill(base: str, groups: int, messages_per_group: int, headers: dict[str, str] | None = None) -> None:
    rng = random.Random(7)
    start = datetime(2025, 1, 1, 9, tzinfo=UTC)
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        for g in range(groups):
            group = f"bench_group_{g}"
            for i in range(messages_per_group):
                topic, template = rng.choice(TOPICS)
                who = rng.choice(PEOPLE)
                text = template.format(who=who, n=rng.randint(2, 40), day=f"{rng.randint(1, 28)} February")
                client.post(
                    "/api/v3/agentic/memorize",
                    json={
                        "group_id": group,
                        "message_id": f"{group}-{i}",
                        "create_time": (start + timedelta(minutes=7 * i)).isoformat(),
                        "sender": who.lower(),
                        "sender_name": who,
                        "content": f"About {topic}: {text}",
                    },
                ).raise_for_status()
            client.post("/api/v3/agentic/flush", json={"group_id": group}).raise_for_status()


def llm_handler(delay: float, sufficient: bool):
    def handle(body: dict) -> Reply:
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        if "Rate how relevant" in prompt:
            lines = re.findall(r"^\[(\d+)\] ", prompt, flags=re.MULTILINE)
            scores = [{"index": int(n), "score": round(1 / int(n), 3)} for n in lines]
            return Reply(delay=delay, content={"scores": scores})
        if "is_sufficient" in prompt:
            if sufficient:
                return Reply(delay=delay, content={"is_sufficient": True, "reasoning": "enough", "refined_queries": []})
            refined = ["release date moved", "payment tests failed", "version schedule"]
            return Reply(
                delay=delay,
                content={"is_sufficient": False, "reasoning": "need more", "refined_queries": refined},
            )
        return Reply(delay=delay, content={"has_time": False})

    return handle


def run_path(base: str, fake: FakeLLM, name: str, queries: int, delay: float, sufficient: bool, rerank: str):
    fake.reset()
    fake.handler = llm_handler(delay, sufficient)
    totals, pipeline, breakdown = [], [], {}
    with httpx.Client(base_url=base, timeout=120) as client:
        for i in range(-2, queries):  # two untimed warm-up queries
            body = {
                "query": QUESTIONS[i % len(QUESTIONS)],
                "group_id": f"bench_group_{i % 4}",
                "current_time": "2025-02-01",
                "top_k": 10,
                "llm_config": {"api_key": "bench", "base_url": fake.base_url, "model": "bench"},
            }
            started = time.perf_counter()
            response = client.post("/api/v3/agentic/retrieve_agentic", json=body)
            wall = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            if i < 0:
                fake.requests.clear()
                continue
            meta = response.json()["result"]["metadata"]
            assert meta["retrieval_mode"] == "agentic", meta
            timings = meta["timings_ms"]
            # LLM waits: the judge; the time-expression call beyond the round-1 search it overlaps; LLM rerank.
            llm_wait = timings.get("llm_judge", 0.0)
            llm_wait += max(0.0, timings.get("llm_time", 0.0) - timings.get("round1_search", 0.0))
            llm_wait += timings.get("rerank", 0.0) if rerank == "llm" else 0.0
            totals.append(wall)
            pipeline.append(meta["total_latency_ms"] - llm_wait)
            for key, value in timings.items():
                breakdown.setdefault(key, []).append(value)
    return {
        "path": name,
        "reranker": rerank,
        "llm_calls_per_query": len(fake.chat_requests) / queries,
        "end_to_end_ms": percentiles(totals),
        "pipeline_ms_beyond_llm": percentiles(pipeline),
        "timings_ms_p50": {key: percentiles(values)["p50"] for key, values in breakdown.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default=None, help="a running memsys (default: start one)")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds the fake LLM waits before answering")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--messages", type=int, default=120, help="messages per group")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    results = []
    with FakeLLM() as fake:
        with memsys_server(args.base_url) as base:
            fill(base, args.groups, args.messages)
            results.append(run_path(base, fake, "sufficient", args.queries, args.delay, True, "none"))
            results.append(run_path(base, fake, "two rounds", args.queries, args.delay, False, "none"))
        with memsys_server(None, env={"MEMSYS_RERANK_PROVIDER": "llm"}) as base:
            fill(base, args.groups, args.messages)
            results.append(run_path(base, fake, "two rounds", args.queries, args.delay, False, "llm"))

    rows = [
        {
            "path": r["path"],
            "reranker": r["reranker"],
            "llm calls": r["llm_calls_per_query"],
            "p50 ms": r["end_to_end_ms"]["p50"],
            "p95 ms": r["end_to_end_ms"]["p95"],
            "pipeline p50 ms": r["pipeline_ms_beyond_llm"]["p50"],
            "pipeline p95 ms": r["pipeline_ms_beyond_llm"]["p95"],
            "round1 p50": r["timings_ms_p50"].get("round1_search"),
            "judge p50": r["timings_ms_p50"].get("llm_judge"),
            "round2 p50": r["timings_ms_p50"].get("round2_search"),
            "rerank p50": r["timings_ms_p50"].get("rerank"),
        }
        for r in results
    ]
    print(f"retrieve_agentic with an LLM answering after {args.delay * 1000:.0f} ms")
    print_table(rows, list(rows[0]))
    config = vars(args) | {"out": str(args.out) if args.out else None}
    path = save("agentic", config, results, args.out)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
