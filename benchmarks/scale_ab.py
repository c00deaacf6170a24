"""memsys against itself at the peers' scale point: two or more servers (other code, other settings) on one kept
directory holding ``benchmarks/peers_scale.py``'s synthetic memories, asked the same questions in interleaved rounds.

``python -m benchmarks.peers`` loads its 100k memories afresh into every system (about four minutes) and runs one
server per system: right for a side-by-side with the peers, too coarse to see a change of a millisecond, as the
machine's speed drifts between runs by more than that. Here the corpus is loaded once into a directory that is kept,
then each round starts one server per variant on it in turn (the order alternating between rounds) and asks it the
same questions as the peers benchmark (``rrf`` and ``embedding``, in the scope holding all memories and with a
selective user filter, one client); medians over rounds, with each answer's agreement with the exact top 10::

    python -m benchmarks.scale_ab --dir /tmp/ab100k --load 100000     # once: about four minutes at 100k
    git worktree add /tmp/before HEAD~1                               # the code before a change
    python -m benchmarks.scale_ab --dir /tmp/ab100k --rounds 6 --variant before=/tmp/before --variant after=.
    python -m benchmarks.scale_ab --dir /tmp/ab100k --variant 400=.:MEMSYS_HNSW_SMALL_GRAPH_EF_SEARCH=400 \\
        --variant 300=.:MEMSYS_HNSW_SMALL_GRAPH_EF_SEARCH=300

A variant is ``name=ROOT[:VAR=VALUE[,VAR=VALUE...]]``: the code in ROOT (a checkout: ``memsys serve`` runs from there)
with those environment variables. Every variant serves the same directory, so it must hold the schema every variant's
code expects (load it with the oldest).
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import peers_scale
from benchmarks.common import memsys_server, print_table, save

QUESTIONS_FILE = "questions.pickle"
"""Beside the database in ``--dir``: the questions and their exact top 10, made by ``--load``."""


@dataclass(frozen=True)
class Variant:
    name: str
    root: Path
    env: dict[str, str]


def parse_variant(text: str) -> Variant:
    name, _, rest = text.partition("=")
    root, _, assignments = rest.partition(":")
    if not name or not root:
        raise argparse.ArgumentTypeError(f"{text!r}: a variant is name=ROOT[:VAR=VALUE,...]")
    env = dict(item.split("=", 1) for item in assignments.split(",") if item)
    return Variant(name, Path(root).resolve(), env)


def load(directory: Path, size: int, questions: int) -> None:
    """``size`` of the peers' synthetic memories into a memsys database in ``directory`` (made by this checkout's
    migrations), and ``questions`` questions with their exact top 10."""
    directory.mkdir(parents=True, exist_ok=True)
    with memsys_server(data_dir=directory, log=directory / "memsys.log"):  # its migrations make the schema
        _, asked, loaded = peers_scale.into_memsys(directory, size, questions)
        print(loaded, flush=True)
    (directory / QUESTIONS_FILE).write_bytes(pickle.dumps(asked))


def compare(directory: Path, variants: list[Variant], rounds: int) -> list[dict]:
    """``rounds`` rounds, each variant's server in turn (the order reversed every other round): one row per
    (variant, mode, scope) with each round's p50 and their median."""
    asked = pickle.loads((directory / QUESTIONS_FILE).read_bytes())
    runs: dict[str, list[list[dict]]] = {v.name: [] for v in variants}
    for number in range(rounds):
        for variant in variants if number % 2 == 0 else variants[::-1]:
            started = time.perf_counter()
            with memsys_server(
                data_dir=directory, env=variant.env, root=variant.root, log=directory / "memsys.log"
            ) as url:
                runs[variant.name].append(peers_scale.measure(url, {}, asked))
            print(f"round {number + 1}: {variant.name} ({time.perf_counter() - started:.0f} s)", flush=True)
    rows = []
    for variant in variants:
        for i, first in enumerate(runs[variant.name][0]):
            each = [run[i] for run in runs[variant.name]]
            rows.append(
                {
                    "variant": variant.name,
                    "mode": first["system"].removeprefix("memsys "),
                    "scope": first["scope"],
                    "p50_ms": round(statistics.median(r["p50_ms"] for r in each), 2),
                    "p50_ms_by_round": [r["p50_ms"] for r in each],
                    "p95_ms": round(statistics.median(r["p95_ms"] for r in each), 2),
                    "exact_top10_agreement": first["exact_top10_agreement"],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="the kept directory (its database and questions)")
    parser.add_argument("--load", type=int, default=0, help="load this many memories into --dir first")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--variant", type=parse_variant, action="append", default=[], help="name=ROOT[:VAR=VALUE,...]")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--name", default="scale_ab")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.load:
        load(args.dir, args.load, args.questions)
    if not args.variant:
        return 0
    started = time.perf_counter()
    rows = compare(args.dir, args.variant, args.rounds)
    columns = ["variant", "mode", "scope", "p50_ms", "p50_ms_by_round", "p95_ms", "exact_top10_agreement"]
    print_table(sorted(rows, key=lambda r: (r["mode"], r["scope"], r["variant"])), columns)
    config = {
        "dir": str(args.dir),
        "rounds": args.rounds,
        "variants": {v.name: {"root": str(v.root), "env": v.env} for v in args.variant},
        "seconds": round(time.perf_counter() - started),
    }
    print(f"wrote {save(args.name, config, rows, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
