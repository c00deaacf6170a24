"""What keys and row-level security cost per request: rrf retrieval on this code (with a key, RLS on) against
the code before tenants (no key, no RLS), side by side in one run on the same data and queries.

    python -m benchmarks.tenancy_cost [--baseline-ref 1ba65a0] [--groups 8] [--messages 60] [--rounds 40]

Checks the baseline out in a temporary git worktree, starts both as ``memsys serve`` on embedded databases
of their own, fills both through the API with the same synthetic conversation (offline formation), then
alternates the same rrf queries between them (with and without a group filter) and compares client-side
latency, median first. The new server is driven with an API key, so every request pays the key lookup,
the per-transaction ``SET LOCAL`` and the policies.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.agentic import QUESTIONS, fill
from benchmarks.common import ROOT, memsys_server, percentiles, print_table, save

BEFORE_TENANTS = "1ba65a0"  # the last commit before tenants, keys and row-level security


def create_key(data_dir: Path) -> str:
    env = {**os.environ, "MEMSYS_DATA_DIR": str(data_dir), "MEMSYS_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", "bench"],
        env=env, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip().split()[-1]


def time_queries(servers: dict[str, tuple[str, dict]], rounds: int, group: str | None) -> dict[str, list[float]]:
    """Alternate every query between the servers, so that both see the same machine at the same moment."""
    timings: dict[str, list[float]] = {name: [] for name in servers}
    clients = {
        name: httpx.Client(base_url=url, headers=headers, timeout=60) for name, (url, headers) in servers.items()
    }
    try:
        for round_ in range(rounds + 2):
            for question in QUESTIONS:
                body = {"query": question, "retrieval_mode": "rrf", "time_range_days": 3650}
                if group:
                    body["group_id"] = group
                for name, client in clients.items():
                    started = time.perf_counter()
                    answer = client.post("/api/v3/agentic/retrieve_lightweight", json=body)
                    elapsed = (time.perf_counter() - started) * 1000
                    answer.raise_for_status()
                    assert answer.json()["result"]["count"] > 0, name
                    if round_ >= 2:  # two warm-up rounds
                        timings[name].append(elapsed)
    finally:
        for client in clients.values():
            client.close()
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline-ref", default=BEFORE_TENANTS)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--messages", type=int, default=60, help="messages per group")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of the 6 queries per server and filter")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="memsys-tenancy-") as tmp:
        baseline = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(baseline), args.baseline_ref], cwd=ROOT,
                       check=True, capture_output=True)  # fmt: skip
        try:
            new_dir, old_dir = Path(tmp) / "new", Path(tmp) / "old"
            with memsys_server(data_dir=new_dir) as new_url, memsys_server(root=baseline, data_dir=old_dir) as old_url:
                key = create_key(new_dir)
                headers = {"Authorization": f"Bearer {key}"}
                assert (
                    httpx.post(f"{new_url}/api/v3/agentic/retrieve_lightweight", json={"query": "x"}).status_code == 401
                )
                started = time.perf_counter()
                fill(new_url, args.groups, args.messages, headers=headers)
                fill(old_url, args.groups, args.messages)
                print(f"filled both in {time.perf_counter() - started:.0f} s")
                servers = {"tenants + RLS + key": (new_url, headers), f"before ({args.baseline_ref})": (old_url, {})}
                results = []
                for label, group in (("group filter", "bench_group_3"), ("no filter", None)):
                    timings = time_queries(servers, args.rounds, group)
                    for name, values in timings.items():
                        results.append({"filter": label, "server": name, "n": len(values), **percentiles(values)})
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, capture_output=True)
    for label in ("group filter", "no filter"):
        new, old = (r for r in results if r["filter"] == label)
        new["p50_ratio_to_before"] = round(new["p50"] / old["p50"], 3)
        new["p50_added_ms"] = round(new["p50"] - old["p50"], 2)
    print_table(results, ["filter", "server", "n", "p50", "p95", "p99", "p50_ratio_to_before", "p50_added_ms"])
    config = {key: value for key, value in vars(args).items() if key != "out"}
    path = save("tenancy_cost", config, results, out_dir=args.out)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
