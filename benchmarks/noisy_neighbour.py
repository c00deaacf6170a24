"""Noisy neighbour: a well-behaved tenant's searches while another tenant attacks, side by side with quiet.

``python -m benchmarks.noisy_neighbour [--seconds 15] [--clients 4]`` starts a ``memsys serve`` of its own (default
settings, a fresh embedded database), creates a key for tenant ``good`` and one for tenant ``noisy``, gives ``good``
a small conversation, and then, scenario by scenario, runs ``good``'s retrieval load (``--clients`` closed-loop
retrieve_lightweight calls) for ``--seconds`` while ``noisy`` (in a process of its own) does one of:

* ``quiet``: nothing (the baseline);
* ``fan_out``: 16 concurrent v1 searches of the widest shape allowed (4 memory types × 50 groups);
* ``slow_bodies``: 64 connections that send a request head and trickle its body a byte at a time;
* ``slow_llm``: 16 concurrent retrieve_agentic calls whose ``llm_config`` names an endpoint answering after 20 s;
* ``mcp_flood``: 150 concurrent MCP ``search_memories`` calls over ``/mcp``.

It prints, per scenario, the good tenant's p50/p95, its error rate and any 5xx, and the attacker's answers by status;
the goal is the good tenant's p95 within 2× quiet and no 5xx. Saves ``benchmarks/results/noisy_neighbour.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.common import ROOT, memsys_server, percentiles, print_table, save

SCENARIOS = ("quiet", "fan_out", "slow_bodies", "slow_llm", "mcp_flood")
GOAL_RATIO = 2.0
RETRIEVE = "/api/v3/agentic/retrieve_lightweight"
CONVERSATION = [
    "I moved the product launch to March 3rd because the payment provider is late.",
    "Then the press release waits too; I'll tell Dana from marketing.",
    "The beta group gets access a week earlier, on February 24th.",
    "Remember that Omar is allergic to peanuts when we order the launch dinner.",
    "The launch dinner is at the Lebanese place on Elm Street.",
    "Budget for the launch is 40k, of which 12k goes to ads.",
]
QUESTIONS = [
    "When is the product launch?",
    "Who is allergic to peanuts?",
    "Where is the launch dinner?",
    "How much is the ads budget?",
    "When does the beta group get access?",
]


def create_key(data_dir: Path, tenant: str) -> str:
    env = {**os.environ, "MEMSYS_DATA_DIR": str(data_dir), "MEMSYS_LOG_LEVEL": "WARNING"}
    env.pop("MEMSYS_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", tenant],
        env=env, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip().split()[-1]


def seed(base_url: str, key: str) -> None:
    """The good tenant's conversation, formed."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base_url + "/api/v3/agentic", headers=headers, timeout=120) as client:
        for number, text in enumerate(CONVERSATION):
            body = {
                "group_id": "launch",
                "message_id": f"m{number}",
                "create_time": f"2026-01-10T10:{number:02d}:00Z",
                "sender": "ana" if number % 2 == 0 else "omar",
                "content": text,
            }
            client.post("/memorize", json=body).raise_for_status()
        client.post("/flush", json={"group_id": "launch"}).raise_for_status()


async def good_load(base_url: str, key: str, clients: int, seconds: float) -> dict:
    """``clients`` closed loops of retrieve_lightweight for ``seconds``: latencies of the 200s, and the others."""
    latencies: list[float] = []
    statuses: collections.Counter = collections.Counter()
    stop_at = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {key}"}

    async def loop(number: int) -> None:
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
            turn = number
            while time.monotonic() < stop_at:
                body = {"query": QUESTIONS[turn % len(QUESTIONS)], "group_id": "launch", "top_k": 5}
                turn += 1
                started = time.perf_counter()
                try:
                    answer = await client.post(RETRIEVE, json=body)
                    status = answer.status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                elapsed = (time.perf_counter() - started) * 1000
                statuses[status] += 1
                if status == 200:
                    latencies.append(elapsed)

    await asyncio.gather(*(loop(number) for number in range(clients)))
    total = sum(statuses.values())
    errors = total - statuses[200]
    return {
        "requests": total,
        "latency_ms": percentiles(latencies),
        "p50_ms": percentiles(latencies).get("p50"),
        "p95_ms": percentiles(latencies).get("p95"),
        "error_rate": round(errors / total, 4) if total else None,
        "server_errors": sum(count for status, count in statuses.items() if isinstance(status, int) and status >= 500),
        "statuses": {str(status): count for status, count in statuses.items()},
    }


# ---- the attacker, in a process of its own ------------------------------------------------------------------


def attack(kind: str, base_url: str, key: str, llm_url: str, stop, results) -> None:
    statuses = asyncio.run(_attack(kind, base_url, key, llm_url, stop))
    results.put({str(status): count for status, count in statuses.items()})


async def _attack(kind: str, base_url: str, key: str, llm_url: str, stop) -> collections.Counter:
    statuses: collections.Counter = collections.Counter()
    headers = {"Authorization": f"Bearer {key}"}

    async def repeat(send, concurrency: int) -> None:
        async def one() -> None:
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
                while not stop.is_set():
                    try:
                        statuses[(await send(client)).status_code] += 1
                    except httpx.HTTPError as exc:
                        statuses[type(exc).__name__] += 1
                        await asyncio.sleep(0.05)

        await asyncio.gather(*(one() for _ in range(concurrency)))

    if kind == "fan_out":
        body = {
            "query": "what did we decide about the launch",
            "memory_types": ["episodic_memory", "event_log", "foresight", "profile"],
            "filters": {"user_id": "ana", "group_id": {"in": [f"g{n}" for n in range(50)]}},
        }
        await repeat(lambda client: client.post("/api/v1/memories/search", json=body), 16)
    elif kind == "slow_llm":
        body = {
            "query": "what happened at the launch",
            "group_id": "launch",
            "llm_config": {"api_key": "noisy", "base_url": llm_url, "model": "slow"},
        }
        await repeat(lambda client: client.post("/api/v3/agentic/retrieve_agentic", json=body), 16)
    elif kind == "mcp_flood":
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search_memories", "arguments": {"query": "launch dinner", "group_id": "launch"}},
        }
        accept = {"Accept": "application/json, text/event-stream"}
        await repeat(lambda client: client.post("/mcp", json=call, headers=accept), 150)
    elif kind == "slow_bodies":
        await asyncio.gather(*(_trickle(base_url, key, stop, statuses) for _ in range(64)))
    return statuses


async def _trickle(base_url: str, key: str, stop, statuses: collections.Counter) -> None:
    """Send a request head, then the body a byte every half second; start again when the server gives up."""
    host, port = base_url.removeprefix("http://").split(":")
    head = (
        f"POST {RETRIEVE} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    ).encode()
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
        except OSError:
            statuses["connect_failed"] += 1
            await asyncio.sleep(0.5)
            continue
        try:
            writer.write(head)
            while not stop.is_set() and not reader.at_eof():
                writer.write(b" ")
                await writer.drain()
                try:
                    answer = await asyncio.wait_for(reader.read(64), 0.5)
                except TimeoutError:
                    continue
                if answer:
                    statuses[answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/") else "garbage"] += 1
                break
        except OSError:
            statuses["closed"] += 1
        finally:
            writer.close()


def slow_llm_server(delay_s: float):
    from benchmarks.fake_llm import FakeLLM, Reply

    fake = FakeLLM()
    fake.record = False
    fake.handler = lambda body: Reply(
        content={"is_sufficient": True, "reasoning": "slow", "refined_queries": []}, delay=delay_s
    )
    return fake


def run_scenario(kind: str, base_url: str, keys: dict[str, str], llm_url: str, args) -> dict:
    stop = multiprocessing.Event()
    results = multiprocessing.Queue()
    attacker = None
    if kind != "quiet":
        attacker = multiprocessing.Process(target=attack, args=(kind, base_url, keys["noisy"], llm_url, stop, results))
        attacker.start()
        time.sleep(args.ramp)  # the attack in full swing before the good tenant is measured
    try:
        good = asyncio.run(good_load(base_url, keys["good"], args.clients, args.seconds))
    finally:
        stop.set()
    attacked = {}
    if attacker is not None:
        try:
            attacked = results.get(timeout=90)
        except Exception:  # noqa: BLE001  an attacker that could not report: its process is stopped below
            attacked = {"unreported": 1}
        attacker.join(timeout=30)
        if attacker.is_alive():
            attacker.kill()
    return {"scenario": kind, **good, "attacker_statuses": attacked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15, help="the good tenant's load per scenario")
    parser.add_argument("--clients", type=int, default=4, help="the good tenant's concurrent clients")
    parser.add_argument("--ramp", type=float, default=2, help="seconds of attack before the good tenant is measured")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, of " + ", ".join(SCENARIOS))
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="a setting for the memsys started (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=None, help="directory for the JSON (default benchmarks/results)")
    parser.add_argument("--log", type=Path, help="a file for the memsys server's output")
    args = parser.parse_args(argv)
    scenarios = [name for name in args.scenarios.split(",") if name]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown or "quiet" not in scenarios:
        parser.error(f"scenarios: {', '.join(SCENARIOS)}; quiet (the baseline) among them")

    settings = dict(setting.split("=", 1) for setting in args.env)
    env = {"MEMSYS_LLM_API_KEY": "", "TQDM_DISABLE": "1", **settings}
    fake = slow_llm_server(20.0)
    with tempfile.TemporaryDirectory(prefix="memsys-noisy-") as data, fake:
        with memsys_server(env=env, data_dir=Path(data), log=args.log) as base_url:
            keys = {tenant: create_key(Path(data), tenant) for tenant in ("good", "noisy")}
            seed(base_url, keys["good"])
            asyncio.run(good_load(base_url, keys["good"], 1, 2))  # the model loaded, the plans warm
            rows = []
            for kind in scenarios:
                row = run_scenario(kind, base_url, keys, fake.base_url, args)
                print(
                    f"{kind}: good p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, errors {row['error_rate']}",
                    flush=True,
                )
                rows.append(row)

    quiet = next(row for row in rows if row["scenario"] == "quiet")
    for row in rows:
        row["p95_vs_quiet"] = round(row["p95_ms"] / quiet["p95_ms"], 2) if row["p95_ms"] and quiet["p95_ms"] else None
        row["goal_met"] = (
            row["p95_vs_quiet"] is not None and row["p95_vs_quiet"] <= GOAL_RATIO and row["server_errors"] == 0
        )
    print()
    print_table(
        [
            {**row, "attacker": " ".join(f"{k}:{v}" for k, v in sorted(row["attacker_statuses"].items()))}
            for row in rows
        ],
        [
            "scenario",
            "requests",
            "p50_ms",
            "p95_ms",
            "p95_vs_quiet",
            "error_rate",
            "server_errors",
            "goal_met",
            "attacker",
        ],
    )
    config = {
        "settings": "memsys serve defaults, fresh embedded database; tenants good and noisy with a key each",
        "settings_changed": settings,
        "seconds": args.seconds,
        "good_clients": args.clients,
        "ramp_s": args.ramp,
        "goal": f"good tenant p95 <= {GOAL_RATIO}x quiet, no 5xx",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
    }
    print(f"\nsaved {save('noisy_neighbour', config, rows, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
