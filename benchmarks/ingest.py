"""Memorize throughput: messages per second and latency, offline formation with local embeddings.

Scenarios: 1 client on one group; 16 concurrent clients each on its own group; 16 concurrent clients
on one shared group (the stream lock's contended path). Each client sends its messages one after the
other (closed loop), so the figures are sustained throughput at that concurrency, not a burst. Every
MemCell formed on the way (one per ``boundary_max_messages`` messages) is part of the measured time:
its embedding and write happen inside the memorize call that closes it.

After each scenario every group is flushed (not timed) and the event-log entries reported by all
answers are counted: there must be exactly one per message sent (nothing lost, nothing twice).

    python -m benchmarks.ingest                      # own memsys on a fresh embedded database
    python -m benchmarks.ingest --base-url http://127.0.0.1:1995
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import httpx

from app.text.tokenize import count_tokens
from benchmarks.common import memsys_server, percentiles, print_table, save

WORDS_PER_MESSAGE = 7
WORDS = (
    "deploy release search index latency budget design review migration postgres vector memory agent "
    "schedule meeting customer feedback roadmap bug fix test coverage rollout"
).split()


def message(group: str, client: int, i: int, start: datetime) -> dict:
    """A chat message about as long as the seed's ("Let's discuss the technical approach for the new
    feature today": 11 words); formation embeds every message, so length is what costs."""
    words = " ".join(WORDS[(i * 7 + k * 3 + client) % len(WORDS)] for k in range(WORDS_PER_MESSAGE))
    return {
        "group_id": group,
        "group_name": f"Bench {group}",
        "message_id": f"{client}-{i}",
        "create_time": (start + timedelta(seconds=i)).isoformat(),
        "sender": f"user_{client % 4}",
        "sender_name": f"User {client % 4}",
        "content": f"Let's talk about the {words} today",
    }


class ServerCPU:
    """CPU seconds used by the memsys process and its PostgreSQL (postmaster and backends), so that the
    figures can be read on a machine other work shares: messages per CPU-second do not depend on it."""

    def __init__(self, base_url: str) -> None:
        self.processes: list = []
        try:
            import psutil

            port = urlparse(base_url).port
            pid = next(c.pid for c in psutil.net_connections("tcp") if c.laddr.port == port and c.pid)
            server = psutil.Process(pid)
            data_dir = server.environ().get("MEMSYS_DATA_DIR")
            self.processes = [server]
            if data_dir:
                marker = f"{data_dir}/pg"
                self.processes += [
                    p
                    for p in psutil.process_iter(["cmdline"])
                    if "-D" in (p.info["cmdline"] or []) and marker in (p.info["cmdline"] or [])
                ]
        except Exception:  # noqa: BLE001  (a benchmark against --base-url elsewhere has no local process)
            self.processes = []

    def seconds(self) -> float | None:
        if not self.processes:
            return None
        total = 0.0
        for process in self.processes:
            try:
                for p in [process, *process.children(recursive=True)]:
                    times = p.cpu_times()
                    total += times.user + times.system
                times = process.cpu_times()
                total += times.children_user + times.children_system
            except Exception:  # noqa: BLE001  a backend that ended between listing and reading
                continue
        return total


async def run_scenario(
    base_url: str, name: str, clients: int, messages: int, shared_group: bool, cpu: ServerCPU | None = None
) -> dict:
    run = uuid.uuid4().hex[:8]
    start = datetime(2025, 1, 15, 10, tzinfo=UTC)
    per_client = messages // clients
    groups = [f"{run}-shared" if shared_group else f"{run}-{c}" for c in range(clients)]
    latencies: list[float] = []
    outcomes: dict[str, int] = {}
    event_logs = 0
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)

    load_before = os.getloadavg()[0]
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as http:

        async def client(c: int) -> None:
            nonlocal event_logs
            for i in range(per_client):
                body = message(groups[c], c, i if not shared_group else i * clients + c, start)
                began = time.perf_counter()
                response = await http.post("/api/v3/agentic/memorize", json=body)
                latencies.append((time.perf_counter() - began) * 1000)
                response.raise_for_status()
                result = response.json()["result"]
                outcomes[result["status_info"]] = outcomes.get(result["status_info"], 0) + 1
                event_logs += sum(m["memory_type"] == "event_log" for m in result["saved_memories"])

        cpu_before = cpu.seconds() if cpu else None
        began = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        elapsed = time.perf_counter() - began
        cpu_used = cpu.seconds() - cpu_before if cpu and cpu_before is not None else None

        for group in dict.fromkeys(groups):
            flushed = await http.post("/api/v3/agentic/flush", json={"group_id": group})
            flushed.raise_for_status()
            event_logs += sum(m["memory_type"] == "event_log" for m in flushed.json()["result"]["saved_memories"])

    sent = per_client * clients
    load_after = os.getloadavg()[0]
    if event_logs != sent:
        raise SystemExit(f"{name}: {sent} messages sent but {event_logs} event-log entries formed")
    latency = percentiles(latencies)
    return {
        "scenario": name,
        "clients": clients,
        "groups": len(set(groups)),
        "messages": sent,
        "seconds": round(elapsed, 2),
        "messages_per_s": round(sent / elapsed, 1),
        "p50_ms": latency["p50"],
        "p95_ms": latency["p95"],
        "p99_ms": latency["p99"],
        "extracted_answers": outcomes.get("extracted", 0),
        "accumulated_answers": outcomes.get("accumulated", 0),
        "server_cpu_s": round(cpu_used, 1) if cpu_used else None,
        "messages_per_cpu_s": round(sent / cpu_used, 1) if cpu_used else None,
        "load_avg_1m_before": round(load_before, 2),
        "load_avg_1m_after": round(load_after, 2),
    }


async def warm_up(base_url: str) -> None:
    """A few memorize calls and a flush so that the first measured request pays no first-use costs."""
    await run_scenario(base_url, "warm-up", 4, 80, shared_group=False)


async def main_async(args: argparse.Namespace, base_url: str) -> list[dict]:
    await warm_up(base_url)
    scenarios = [
        ("1 client", 1, args.messages_single, False),
        ("16 clients", 16, args.messages_concurrent, False),
        ("16 clients, 1 group", 16, args.messages_concurrent, True),
    ]
    results = []
    cpu = ServerCPU(base_url)
    for name, clients, messages, shared in scenarios:
        results.append(await run_scenario(base_url, name, clients, messages, shared_group=shared, cpu=cpu))
        print(
            f"{name}: {results[-1]['messages_per_s']} messages/s, p50 {results[-1]['p50_ms']} ms, "
            f"p95 {results[-1]['p95_ms']} ms",
            flush=True,
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="drive this memsys instead of starting one")
    parser.add_argument("--messages-single", type=int, default=300, help="messages sent by the single client")
    parser.add_argument("--messages-concurrent", type=int, default=1600, help="messages sent by 16 clients")
    parser.add_argument("--out", default=None, help="directory for ingest.json (default benchmarks/results)")
    parser.add_argument(
        "--embedding-base-url",
        help="embed through this OpenAI-compatible /embeddings endpoint instead of the local model "
        "(to see the pipeline without the local model's CPU cost); results go to ingest_remote_embeddings.json",
    )
    args = parser.parse_args()

    env = {"MEMSYS_LLM_API_KEY": "", "MEMSYS_EMBEDDING_PROVIDER": "local", "MEMSYS_LOG_LEVEL": "WARNING"}
    if args.embedding_base_url:
        env.update(MEMSYS_EMBEDDING_PROVIDER="openai", MEMSYS_EMBEDDING_BASE_URL=args.embedding_base_url)
    with memsys_server(args.base_url, env=env) as base_url:
        results = asyncio.run(main_async(args, base_url))
    columns = ["scenario", "clients", "groups", "messages", "seconds", "messages_per_s", "p50_ms", "p95_ms"]
    print_table(results, [*columns, "messages_per_cpu_s", "load_avg_1m_before"])
    config = {
        "mode": "offline formation, "
        + (f"embeddings from {args.embedding_base_url}" if args.embedding_base_url else "local all-MiniLM-L6-v2"),
        "boundary_max_messages": 50,
        "closed_loop": True,
        "base_url": args.base_url or "own memsys on a fresh embedded database",
        "message_tokens": count_tokens(message("g", 0, 0, datetime(2025, 1, 15, tzinfo=UTC))["content"]),
        "messages_single": args.messages_single,
        "messages_concurrent": args.messages_concurrent,
    }
    path = save("ingest_remote_embeddings" if args.embedding_base_url else "ingest", config, results, out_dir=args.out)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
