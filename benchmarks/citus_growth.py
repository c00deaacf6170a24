"""The same memories on 1, 2 and 3 Citus workers: what each worker holds, what a search costs, how long adding one
takes.

    python -m benchmarks.citus_growth [--tenants 8] [--per-tenant 5000] [--queries 20] [--dir DIR] [--port 9760]

A local cluster (``deploy/citus/up.sh`` with one registered worker and two spare) gets a fresh database migrated by
memsys, the scale corpus (benchmarks/scale_corpus: realistic sentences and vectors, 384 dimensions) copied in through
the coordinator, ``--tenants`` tenants of ``--per-tenant`` memories. Then, on 1 worker, then after the second and the
third are added (``citus_add_node`` and ``citus_rebalance_start()`` to its end, timed), the service's rrf search
(its role, one tenant a transaction, as benchmarks/citus.py runs it) over every tenant's queries: latency p50/p95,
the CPU seconds each node's processes spent on them, and each worker's share of the data (shards, bytes with
indexes). All the nodes share this machine's cores, so the latency shows what more workers cost or save per request
(the hop, smaller indexes per shard), not the throughput more machines give; the bytes per worker are what a worker
must hold in memory. JSON to benchmarks/results/citus_growth.json; the nodes are stopped at the end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import psutil
from sqlalchemy import create_engine

from app.db.embedded import sqlalchemy_url
from app.settings import Settings
from benchmarks import scale_corpus
from benchmarks.citus import copy_in, corpus_and_queries, prepare, retrieval, search
from benchmarks.citus_online import Cluster
from benchmarks.common import RESULTS_DIR, print_table, save


def node_cpu_s(cluster: Cluster, nodes: int) -> dict[int, float]:
    """CPU seconds (user + system) of each node so far: its postmaster, the backends it has reaped (a connection
    that ended), and those still running."""
    seconds = {}
    for node in range(nodes):
        data = cluster.directory / ("coordinator" if node == 0 else f"worker{node}")
        postmaster = psutil.Process(int((data / "postmaster.pid").read_text().split()[0]))
        own = postmaster.cpu_times()
        total = own.user + own.system + own.children_user + own.children_system
        for child in postmaster.children():
            try:
                times = child.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:  # ended meanwhile: counted among the reaped at the next reading
                pass
        seconds[node] = total
    return seconds


def per_worker(cluster: Cluster) -> dict[str, dict]:
    rows = cluster.sql(
        "SELECT nodeport, count(*) FILTER (WHERE table_name = 'memories'::regclass), sum(shard_size) "
        "FROM citus_shards GROUP BY 1 ORDER BY 1"
    )
    return {
        ("coordinator" if port == cluster.port else f"worker{port - cluster.port}"): {
            "memories_shards": n, "mb": round(float(size) / 2**20, 1),
        }
        for port, n, size in rows
    }  # fmt: skip


def measure(cluster: Cluster, settings: Settings, queries: dict, now) -> dict:
    """Latency and recall as benchmarks.citus measures them; then every query's rrf search once more (both filters),
    with each node's CPU seconds read before and after."""
    rows, _ = retrieval(cluster.url, settings, queries, now)
    nodes = 1 + len(cluster.registered())
    engine = create_engine(sqlalchemy_url(cluster.url))
    try:
        with engine.connect() as conn:
            before = node_cpu_s(cluster, nodes)
            for grouped in (False, True):
                for tenant, qs in queries.items():
                    for q in qs:
                        search(conn, settings, tenant, q, grouped, now)
            after = node_cpu_s(cluster, nodes)
    finally:
        engine.dispose()
    searches = 2 * sum(len(qs) for qs in queries.values())
    spent = {("coordinator" if n == 0 else f"worker{n}"): after[n] - before[n] for n in before}
    return {
        "retrieval": rows,
        "cpu_ms_per_search": {node: round(seconds * 1000 / searches, 2) for node, seconds in spent.items()},
        "cpu_ms_per_search_all_nodes": round(sum(spent.values()) * 1000 / searches, 2),
        "per_worker": per_worker(cluster),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--per-tenant", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=20, help="queries per tenant and filter")
    parser.add_argument("--anchors", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--port", type=int, default=9760, help="the coordinator's; workers on the next three")
    parser.add_argument("--dir", type=Path, help="the nodes' data (default: a new temporary directory)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="citus_growth")
    args = parser.parse_args()
    settings = Settings()
    directory, corpus, queries, _ = corpus_and_queries(args, "memsys-citus-growth-")
    now = scale_corpus.now_utc()
    cluster = Cluster(directory, args.port, database="memsys_growth", workers=1, spare=2)
    results: dict[str, object] = {}
    try:
        cluster.up()
        memcells = prepare(cluster.url, args.tenants)
        results["copy"] = copy_in(cluster.url, corpus, memcells, args.per_tenant, now)
        print(f"COPY {results['copy']['rows']:,} memories: {results['copy']['rows_per_s']:,} rows/s", flush=True)
        steps = []
        for workers in (1, 2, 3):
            added = {}
            if workers > 1:
                began = time.perf_counter()
                added = cluster.add_worker(workers) | {"seconds": round(time.perf_counter() - began, 1)}
            figures = measure(cluster, settings, queries, now)
            steps.append({"workers": workers, "rebalance": added, **figures})
            print(f"{workers} worker(s): {figures['per_worker']} rebalance {added}", flush=True)
        results["steps"] = steps
    finally:
        cluster.down()
    table = [
        {
            "workers": s["workers"],
            "filter": row["filter"],
            "rrf p50 ms": row["rrf_ms"]["p50"],
            "rrf p95 ms": row["rrf_ms"]["p95"],
            "recall@20": row["vector_recall_at_20"],
            "CPU ms/search (all nodes)": s["cpu_ms_per_search_all_nodes"],
            "MB per worker": " / ".join(str(w["mb"]) for w in s["per_worker"].values()),
            "rebalance s": s["rebalance"].get("seconds", ""),
        }
        for s in results["steps"]
        for row in s["retrieval"]
    ]
    print_table(table, list(table[0]))
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    print(f"saved {save(args.name, config, results, out_dir=args.out)}")


if __name__ == "__main__":
    main()
