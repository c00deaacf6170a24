"""Read your writes: how long after memorize's 200 a message is found by retrieve_lightweight.

memorize only stores the message and queues ``index_messages``; the intake worker of ``memsys serve`` embeds it
and stores its BM25 text; from then on retrieval returns it (``memory_type: message``, ``formed: false``) until
formation turns it into memories, whose ``source_message_ids`` name it. One run, against a ``memsys serve`` of
its own on a fresh embedded database with default settings (offline formation, local all-MiniLM-L6-v2):

1. Idle. N probe messages, one at a time, spread over a few groups of their own, each a sentence around a
   made-up code word. After memorize's 200, retrieve_lightweight (the sentence as query, the probe's group as
   filter) is asked every ``--poll-ms`` until an answer holds a memory whose ``source_message_ids`` names the
   probe: the time from the 200 to that answer is the figure (what a client sees: it includes the last
   retrieve's own time). Found as a message or, formed meanwhile, as a memory; not found within
   ``--timeout`` s: a timeout (counted, never dropped).
2. Under load. The same, while ``--clients`` clients (another process, each on its own connection and group)
   memorize LoCoMo turns as fast as they are answered (closed loop), or ``--rate`` messages/s in all; the
   load's messages/s and memorize latency are measured over the probes' window, and the messages not yet
   searchable and not yet formed (``/health``) are sampled every second.

Each probe also keeps its last retrieve's time as the server measured it and, of that, the query's embedding:
what part of the figure is waiting for the intake worker and what part is the search itself.

    python -m benchmarks.read_your_writes                     # 50 probes idle, 50 under 16 clients
    python -m benchmarks.read_your_writes --messages 10 --clients 2 --out /tmp/ryw
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import random
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from benchmarks.common import ROOT, memsys_server, percentiles, print_table, save
from benchmarks.ingest import Connection
from benchmarks.locomo import load_conversations

DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo-dev.json"
GOAL_P95_MS = 2000
PROBE_GROUPS = 5
SYLLABLES = "ka ro vi ne tu sa mo li ze pa qu dor fen gal hix jun".split()
TOPICS = ("rollout", "audit", "offsite", "migration", "budget review", "launch", "retrospective", "hiring loop")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


@dataclass
class Probe:
    message_id: str
    group_id: str
    memorize_ms: float
    found_ms: float | None = None
    """From memorize's 200 to the retrieve answer that held it; None: a timeout."""
    found_as: str | None = None
    polls: int = 0
    last_retrieve_ms: float = 0.0
    """The last retrieve (the one that found it, or the last before the timeout): as this process saw it, as
    the server measured it, and of that its query's embedding."""
    last_server_ms: float = 0.0
    last_query_embedding_ms: float = 0.0


def probe_sentences(count: int, seed: int) -> list[str]:
    """``count`` sentences, each around a code word no other one (nor LoCoMo) has."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(4)) + "x")
    return [
        f"The {word} {rng.choice(TOPICS)} moves to {rng.choice(DAYS)} at {rng.randint(8, 17)} o'clock."
        for word in sorted(words, key=lambda _: rng.random())
    ]


async def run_probes(
    base_url: str, run: str, sentences: list[str], poll_s: float, timeout_s: float, gap_s: float = 0.1
) -> list[Probe]:
    """Memorize each sentence and poll retrieve_lightweight until it is found (or ``timeout_s``), one at a time,
    ``gap_s`` apart on average."""
    probes: list[Probe] = []
    rng = random.Random(run)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        for i, sentence in enumerate(sentences):
            group = f"probe-{run}-{i % PROBE_GROUPS}"
            body = {
                "group_id": group,
                "message_id": f"probe-{i}",
                "create_time": datetime.now(UTC).isoformat(),
                "sender": "prober",
                "sender_name": "Prober",
                "content": sentence,
            }
            began = time.perf_counter()
            answer = await http.post("/api/v3/agentic/memorize", json=body)
            stored = time.perf_counter()
            answer.raise_for_status()
            probe = Probe(body["message_id"], group, round((stored - began) * 1000, 2))
            query = {"query": sentence, "group_id": group, "top_k": 10}
            while True:
                asked = time.perf_counter()
                answer = await http.post("/api/v3/agentic/retrieve_lightweight", json=query)
                answered = time.perf_counter()
                answer.raise_for_status()
                result = answer.json()["result"]
                probe.polls += 1
                probe.last_retrieve_ms = round((answered - asked) * 1000, 2)
                probe.last_server_ms = result["metadata"]["total_latency_ms"]
                probe.last_query_embedding_ms = result["metadata"]["query_embedding_ms"]
                hit = next((m for m in result["memories"] if probe.message_id in m["source_message_ids"]), None)
                if hit is not None:
                    probe.found_ms = round((answered - stored) * 1000, 2)
                    probe.found_as = hit["memory_type"]
                    break
                if answered - stored > timeout_s:
                    break
                await asyncio.sleep(max(0.0, asked + poll_s - answered))
            probes.append(probe)
            await asyncio.sleep(rng.uniform(0, 2 * gap_s))  # not in step with any poll interval of the server
    return probes


async def sample_backlog(base_url: str, samples: list[tuple[int, int]]) -> None:
    """Messages not yet searchable and messages not yet formed (``/health``), every second, until cancelled."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        while True:
            formation = (await http.get("/health")).json()["result"]["formation"]
            samples.append((formation["messages_not_yet_searchable"], formation["messages_waiting"]))
            await asyncio.sleep(1.0)


def summary(probes: list[Probe], scenario: str) -> dict:
    """The figures of one scenario: found latency, how it was found, timeouts. A timeout counts in the percentiles
    as longer than any probe found: a percentile that falls on one is None (``over_timeout`` names it)."""
    found = [p.found_ms for p in probes if p.found_ms is not None]
    found_as: dict[str, int] = {}
    for probe in probes:
        if probe.found_as:
            found_as[probe.found_as] = found_as.get(probe.found_as, 0) + 1
    latency = percentiles([math.inf if p.found_ms is None else p.found_ms for p in probes])
    over_timeout = [name for name in ("p50", "p95") if latency[name] == math.inf]
    return {
        "scenario": scenario,
        "probes": len(probes),
        "found": len(found),
        "timeouts": len(probes) - len(found),
        "p50_ms": None if "p50" in over_timeout else latency["p50"],
        "p95_ms": None if "p95" in over_timeout else latency["p95"],
        "over_timeout": over_timeout,
        "max_ms": round(max(found), 2) if found else None,
        "found_as": found_as,
        "found_as_message_share": round(found_as.get("message", 0) / len(found), 3) if found else None,
        "memorize_ms": percentiles([p.memorize_ms for p in probes]),
        "last_retrieve_ms": percentiles([p.last_retrieve_ms for p in probes]),
        "last_server_ms": percentiles([p.last_server_ms for p in probes]),
        "last_query_embedding_ms": percentiles([p.last_query_embedding_ms for p in probes]),
        "polls": percentiles([p.polls for p in probes]),
        "detail": [asdict(p) for p in probes],
    }


def load_process(base_url: str, data: str, clients: int, rate: float, run: str, stop, results) -> None:
    """The load (in a process of its own, so that its event loop does not delay the probes' clock): ``clients``
    clients, each memorizing one LoCoMo conversation's turns in order into a group of its own (again, a year
    later, when it runs out), until ``stop`` is set: as fast as they are answered, or ``rate`` messages/s in all
    (each client on its own schedule, catching up when an answer was late). Puts ``(answered_at, latency_ms)``
    of every memorize (``time.monotonic``, which every process shares) and the failures on ``results``."""
    conversations = load_conversations(Path(data))
    done: list[tuple[float, float]] = []
    failures: list[str] = []

    async def client(c: int) -> None:
        connection = Connection(base_url)
        conversation = conversations[c % len(conversations)]
        lap, sent, start = 0, 0, time.monotonic() + c / rate if rate else 0.0
        try:
            while not stop.is_set():
                for turn in conversation.turns:
                    if stop.is_set():
                        return
                    if rate:
                        await asyncio.sleep(max(0.0, start + sent * clients / rate - time.monotonic()))
                        sent += 1
                    body = {
                        "group_id": f"load-{run}-{c}",
                        "message_id": f"{lap}-{turn.dia_id}",
                        "create_time": (turn.create_time + timedelta(days=366 * lap)).isoformat(),
                        "sender": turn.speaker,
                        "sender_name": turn.speaker,
                        "content": turn.content,
                    }
                    began = time.monotonic()
                    await connection.post("/api/v3/agentic/memorize", body)
                    answered = time.monotonic()
                    done.append((answered, (answered - began) * 1000))
                lap += 1
        except Exception as exc:  # noqa: BLE001  reported to the parent, which fails the run
            failures.append(f"client {c}: {exc!r}")
        finally:
            connection.close()

    async def all_clients() -> None:
        await asyncio.gather(*(client(c) for c in range(clients)))

    asyncio.run(all_clients())
    results.put((done, failures))


def load_figures(done: list[tuple[float, float]], window: tuple[float, float], clients: int) -> dict:
    """Messages/s and memorize latency of the load's requests answered within ``window`` (the probes' run)."""
    start, end = window
    inside = [latency for answered, latency in done if start <= answered <= end]
    latency = percentiles(inside)
    return {
        "clients": clients,
        "messages": len(inside),
        "seconds": round(end - start, 2),
        "msg_per_s": round(len(inside) / (end - start), 1),
        "memorize_p50_ms": latency["p50"],
        "memorize_p95_ms": latency["p95"],
        "memorize_max_ms": round(max(inside), 2) if inside else None,
        "messages_total": len(done),
    }


def under_load(
    base_url: str, args: argparse.Namespace, run: str, sentences: list[str]
) -> tuple[list[Probe], dict, list[tuple[int, int]]]:
    """The probes while the load runs: probes, the load's figures, the backlog samples."""
    poll_s = args.poll_ms / 1000
    spawn = multiprocessing.get_context("spawn")
    stop, results = spawn.Event(), spawn.Queue()
    loader = spawn.Process(
        target=load_process, args=(base_url, str(args.data), args.clients, args.rate, run, stop, results), daemon=True
    )
    loader.start()
    backlog: list[tuple[int, int]] = []

    async def measured() -> tuple[list[Probe], tuple[float, float]]:
        sampler = asyncio.create_task(sample_backlog(base_url, backlog))
        try:
            await asyncio.sleep(args.warmup)  # the clients connected and answered: a steady load
            start = time.monotonic()
            probes = await run_probes(base_url, f"{run}-load", sentences, poll_s, args.timeout, args.probe_gap)
            return probes, (start, time.monotonic())
        finally:
            sampler.cancel()

    try:
        probes, window = asyncio.run(measured())
    finally:
        stop.set()
    done, failures = results.get(timeout=120)
    loader.join(timeout=30)
    if failures:
        raise SystemExit(f"the load failed: {failures[:3]}")
    return probes, load_figures(done, window, args.clients), backlog


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50, help="probe messages in each scenario")
    parser.add_argument("--clients", type=int, default=16, help="memorize clients of the load")
    parser.add_argument("--rate", type=float, default=0, help="the load's messages/s in all; 0: as fast as it goes")
    parser.add_argument("--poll-ms", type=float, default=20, help="retrieve every this often until found")
    parser.add_argument("--timeout", type=float, default=30, help="seconds after which a probe counts as a timeout")
    parser.add_argument("--warmup", type=float, default=3, help="seconds of load before the first probe")
    parser.add_argument("--probe-gap", type=float, default=0.1, help="mean seconds between a probe found and the next")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON: the load's messages")
    parser.add_argument("--base-url", help="drive this memsys instead of starting one")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="a setting for the memsys started (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=None, help="directory for the JSON (default benchmarks/results)")
    parser.add_argument("--log", type=Path, help="a file for the memsys server's output")
    args = parser.parse_args(argv)

    settings = dict(setting.split("=", 1) for setting in args.env)
    env = {"MEMSYS_LLM_API_KEY": "", "TQDM_DISABLE": "1", **settings}  # default: offline formation, local MiniLM
    poll_s = args.poll_ms / 1000
    run = uuid.uuid4().hex[:8]  # groups of their own, also on a memsys given by --base-url
    with memsys_server(args.base_url, env=env, log=args.log) as base_url:
        # The first search after the start loads what it needs (the model in the embedding process): not measured.
        (warmup,) = asyncio.run(run_probes(base_url, f"{run}-warmup", probe_sentences(1, 0), poll_s, args.timeout))
        idle_probes = probe_sentences(args.messages, 1)
        probes = asyncio.run(run_probes(base_url, f"{run}-idle", idle_probes, poll_s, args.timeout, args.probe_gap))
        idle = summary(probes, "idle")
        idle["warmup_probe"] = asdict(warmup)
        print(f"idle: p50 {idle['p50_ms']} ms, p95 {idle['p95_ms']} ms, {idle['timeouts']} timeouts", flush=True)
        probes, load, backlog = under_load(base_url, args, run, probe_sentences(args.messages, 2))
        paced = f" at {args.rate:g} msg/s" if args.rate else ""
        loaded = summary(probes, f"{args.clients} clients memorizing{paced}")
        loaded["load"] = load
        for i, name in enumerate(("not_yet_searchable", "not_yet_formed")):
            samples = [sample[i] for sample in backlog]
            loaded[name] = {"max": max(samples, default=0), "last": samples[-1] if samples else 0, "every_s": samples}

    rows = [idle, loaded]
    over = f">{args.timeout * 1000:g}"
    table = [{**row, **{f"{name}_ms": over for name in row["over_timeout"]}} for row in rows]
    print()
    print_table(table, ["scenario", "probes", "p50_ms", "p95_ms", "max_ms", "found_as_message_share", "timeouts"])
    unsearchable, unformed = loaded["not_yet_searchable"], loaded["not_yet_formed"]
    print(
        f"\nload: {load['msg_per_s']} msg/s, memorize p50 {load['memorize_p50_ms']} ms, p95 {load['memorize_p95_ms']} "
        f"ms; messages not yet searchable: at most {unsearchable['max']}, {unsearchable['last']} at the end; not yet "
        f"formed: {unformed['last']} at the end"
    )
    for row in rows:
        met = row["p95_ms"] is not None and row["p95_ms"] <= GOAL_P95_MS
        p95 = over if row["p95_ms"] is None else row["p95_ms"]
        print(f"goal p95 <= {GOAL_P95_MS} ms, {row['scenario']}: {p95} ms, {'met' if met else 'MISSED'}")

    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    config = {
        "settings": f"the memsys at {args.base_url}"
        if args.base_url
        else "memsys serve defaults (MEMSYS_WORKERS=1, offline formation, local all-MiniLM-L6-v2), fresh embedded "
        "database",
        "settings_changed": settings,
        "messages": args.messages,
        "probe_groups": PROBE_GROUPS,
        "clients": args.clients,
        "load_rate": args.rate or "as fast as answered",
        "poll_ms": args.poll_ms,
        "timeout_s": args.timeout,
        "warmup_s": args.warmup,
        "probe_gap_s": args.probe_gap,
        "load_data": args.data.name,
        "goal_p95_ms": GOAL_P95_MS,
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted_app_changes": bool(git("status", "--porcelain", "app", "migrations", "sql")),
    }
    path = save("read_your_writes", config, {"idle": idle, "under_load": loaded}, out_dir=args.out)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
