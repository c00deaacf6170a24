"""A selective filter on your metadata against the selective user filter of today, at the peers' scale point (100k
memories), through HTTP.

Runs on a copy of a directory loaded once by ``python -m benchmarks.scale_ab --dir D --load 100000``::

    python -m benchmarks.filters --dir /tmp/ab100k --rounds 4

The copy is upgraded by this checkout (migration 0029 adds the metadata column and its GIN index), then every
memory's metadata is set to ``{"owner": <its user>, "plan": <one of three>}``, so that ``{"owner": u}`` holds the same
100 memories as ``user_id: u`` (1,000 users). The peers' questions are asked, one client, in interleaved rounds, in
four ways for ``rrf`` and ``embedding``: the whole scope (no filter), ``user_id`` (today's selective filter), the
metadata filter ``{"owner": u}``, and ``{"owner": u, "plan": {"in": [two plans]}}``. Medians of the rounds' p50 / p95;
each metadata answer is compared with the user filter's (the same ids, in order).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from benchmarks import peers_scale
from benchmarks.common import copy_database, memsys_server, percentiles, print_table, save

PLANS = ("free", "pro", "team")


def bodies(asked: list, mode: str, way: str) -> list[dict]:
    out = []
    for question in asked:
        body = peers_scale.memsys_body(question, "large", mode)
        if way == "user_id":
            body = peers_scale.memsys_body(question, "selective", mode)
        elif way == "metadata":
            body["filters"] = {"owner": question.user}
        elif way == "metadata and plans":
            body["filters"] = {"owner": question.user, "plan": {"in": list(PLANS[:2])}}
        out.append(body)
    return out


WAYS = ("no filter", "user_id", "metadata", "metadata and plans")


def run(directory: Path, rounds: int) -> tuple[list[dict], dict]:
    asked = pickle.loads((directory / "questions.pickle").read_bytes())
    with tempfile.TemporaryDirectory(prefix="memsys-filters-") as temporary:
        copy = copy_database(directory, Path(temporary)).parent
        with memsys_server(data_dir=copy, log=copy / "memsys.log") as url:  # migrates the copy to head
            tagged = _set_metadata(copy)
            runs: dict[tuple[str, str], list[dict]] = {}
            answers: dict[tuple[str, str], list[set[int]]] = {}
            for number in range(rounds):
                order = [(mode, way) for mode in ("rrf", "embedding") for way in WAYS]
                for mode, way in order if number % 2 == 0 else order[::-1]:
                    path = "/api/v3/agentic/retrieve_lightweight"
                    latencies, found = asyncio.run(
                        peers_scale._ask(url, path, bodies(asked, mode, way), peers_scale._memsys_indexes)
                    )
                    runs.setdefault((mode, way), []).append(percentiles(latencies))
                    answers[(mode, way)] = found
                print(f"round {number + 1} of {rounds}", flush=True)
    rows = []
    for (mode, way), each in runs.items():
        same = None
        if way == "metadata":
            pairs = zip(answers[(mode, way)], answers[(mode, "user_id")], strict=True)
            same = round(statistics.mean(a == b for a, b in pairs), 3)
        rows.append(
            {
                "mode": mode,
                "filter": way,
                "p50_ms": round(statistics.median(r["p50"] for r in each), 2),
                "p95_ms": round(statistics.median(r["p95"] for r in each), 2),
                "p50_ms_by_round": [round(r["p50"], 2) for r in each],
                "same_answers_as_user_id": same,
            }
        )
    return rows, {"metadata_set_seconds": tagged}


def _set_metadata(copy: Path) -> float:
    """Every memory's metadata, its owner and a plan, as the owner through the embedded server's socket in the copy;
    how long that took (seconds)."""
    started = time.perf_counter()
    socket_dir = copy / "pg"
    with psycopg.connect(f"postgresql://postgres@/postgres?host={socket_dir}", autocommit=True) as conn:
        conn.execute(
            "UPDATE memories SET custom_metadata = jsonb_build_object('owner', user_id, 'plan', "
            "(ARRAY['free', 'pro', 'team'])[1 + abs(hashtext(id::text)) % 3]) WHERE custom_metadata = '{}'"
        )
        conn.execute("VACUUM ANALYZE memories")
    return round(time.perf_counter() - started, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="loaded by benchmarks.scale_ab --load 100000")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows, extra = run(args.dir, args.rounds)
    print_table(rows, ["mode", "filter", "p50_ms", "p95_ms", "p50_ms_by_round", "same_answers_as_user_id"])
    config = {"dir": str(args.dir), "rounds": args.rounds, "seconds": round(time.perf_counter() - started), **extra}
    print(f"wrote {save('filters', config, rows, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
