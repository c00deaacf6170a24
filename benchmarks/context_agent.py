"""What context assembly (`POST /api/v3/agentic/context`) and the retrieval agent (`…/agent`) add beyond the LLM.

    python -m benchmarks.context_agent [--requests 40] [--delay 0] [--out DIR]

Starts memsys on a fresh embedded database with an OpenAI-compatible test server on 127.0.0.1 as its LLM
(answering after ``--delay`` seconds), fills it through the public API with a synthetic conversation
(offline formation), then times, one request at a time, side by side in one run:

* ``retrieve_lightweight`` (rrf): one hybrid search, the reference;
* ``context``: two knowledge searches and one episode search, budgets, formatting (no LLM);
* ``agent``: two LLM calls (a ``search_memories`` tool call, then the answer) with one tool run between;
  its overhead is the total minus the time spent waiting for the LLM, as the service reports it
  (``metadata.timings_ms``), so it does not depend on ``--delay``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

import httpx

from benchmarks.common import memsys_server, percentiles, print_table, save
from benchmarks.fake_llm import FakeLLM, Reply, tool_calls

LINES = [
    "Alice loves Beijing roast duck and goes back every spring",
    "Bob is training for the Berlin marathon in September",
    "Chen moved the release to Friday because the payment tests failed",
    "Dana booked a trip to Kyoto for the autumn leaves",
    "我最喜欢吃北京烤鸭，每次去北京都要去全聚德",
    "The team agreed to review the onboarding mock-ups on Monday",
]
QUESTIONS = ["What food does Alice love?", "When is Bob's marathon?", "Why did the release move?", "北京烤鸭"]


def fill(base_url: str, messages: int) -> None:
    start = datetime(2025, 1, 15, 10, tzinfo=UTC)
    with httpx.Client(base_url=base_url, timeout=60) as http:
        for i in range(messages):
            body = {
                "group_id": "bench",
                "message_id": f"m{i}",
                "create_time": (start + timedelta(minutes=i)).isoformat(),
                "sender": f"user_{i % 3}",
                "content": f"{LINES[i % len(LINES)]} (note {i})",
            }
            http.post("/api/v3/agentic/memorize", json=body).raise_for_status()
        result = http.post("/api/v3/agentic/flush", json={"group_id": "bench"}, timeout=120).json()["result"]
        if result["status_info"] != "extracted":
            raise SystemExit(f"the corpus was not formed: {result}")


def agent_script(delay: float):
    def answer(body: dict) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Reply(content="Alice loves Beijing roast duck.", delay=delay)
        reply = tool_calls(("search_memories", {"query": last["content"]}))
        reply.delay = delay
        return reply

    return answer


def time_requests(base_url: str, path: str, bodies: list[dict]) -> tuple[list[float], list[dict]]:
    latencies, results = [], []
    with httpx.Client(base_url=base_url, timeout=120) as http:
        for body in bodies:
            began = time.perf_counter()
            response = http.post(path, json=body)
            latencies.append((time.perf_counter() - began) * 1000)
            response.raise_for_status()
            results.append(response.json()["result"])
    return latencies, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="requests per endpoint")
    parser.add_argument("--messages", type=int, default=120, help="messages in the synthetic conversation")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds the test LLM waits before answering")
    parser.add_argument("--out", default=None, help="directory for context_agent.json (default benchmarks/results)")
    args = parser.parse_args()

    with FakeLLM() as fake:
        fake.handler = agent_script(args.delay)
        # The server has no LLM (formation is offline); the agent's requests bring the test LLM in llm_config.
        llm_config = {"api_key": "bench", "base_url": fake.base_url, "model": "fake"}
        questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.requests)]
        scope = {"group_id": "bench", "time_range_days": 100000}
        rows = []
        with memsys_server(env={"MEMSYS_LLM_API_KEY": ""}) as base_url:
            fill(base_url, args.messages)
            for warm in ("/api/v3/agentic/retrieve_lightweight", "/api/v3/agentic/context"):
                time_requests(base_url, warm, [{"query": q, **scope} for q in QUESTIONS])
            plain, _ = time_requests(
                base_url, "/api/v3/agentic/retrieve_lightweight", [{"query": q, **scope} for q in questions]
            )
            context, assembled = time_requests(
                base_url,
                "/api/v3/agentic/context",
                [{"query": q, "system_prompt": "You are helpful.", "semantic": {"min_score": 0.3}, **scope}
                 for q in questions],
            )  # fmt: skip
            agent_bodies = [
                {
                    "messages": [{"role": "user", "content": q}],
                    "context_manage_mode": "auto",
                    "llm_config": llm_config,
                    **scope,
                }
                for q in questions
            ]
            agent, answered = time_requests(base_url, "/api/v3/agentic/agent", agent_bodies)
        if not all(r["success"] for r in answered):
            raise SystemExit("the agent did not answer every question")
        overheads = [r["metadata"]["timings_ms"]["overhead"] for r in answered]
        llm_waits = [r["metadata"]["timings_ms"]["llm"] for r in answered]
        reference = statistics.median(plain)
        for name, latencies in (("retrieve_lightweight (rrf)", plain), ("context", context), ("agent (total)", agent)):
            p = percentiles(latencies)
            rows.append(
                {
                    "endpoint": name,
                    "p50_ms": p["p50"],
                    "p95_ms": p["p95"],
                    "x_lightweight": round(p["p50"] / reference, 2),
                }
            )
        p = percentiles(overheads)
        rows.append({"endpoint": "agent overhead (total - LLM)", "p50_ms": p["p50"], "p95_ms": p["p95"],
                     "x_lightweight": round(p["p50"] / reference, 2)})  # fmt: skip
        print_table(rows, ["endpoint", "p50_ms", "p95_ms", "x_lightweight"])
        config = {
            "requests": args.requests,
            "messages": args.messages,
            "llm_delay_s": args.delay,
            "llm_wait_p50_ms": round(statistics.median(llm_waits), 2),
            "context_total_tokens_p50": statistics.median(r["total_tokens"] for r in assembled),
            "sequential": True,
        }
        path = save("context_agent", config, rows, out_dir=args.out)
        print(f"saved {path}")


if __name__ == "__main__":
    main()
