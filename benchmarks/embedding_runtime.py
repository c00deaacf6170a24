"""The local embedding model on ONNX Runtime against torch, side by side in one run: the same vectors, the time
of one query (in the process and through the worker process, as the server embeds), batch throughput, start-up.

    python -m benchmarks.embedding_runtime [--queries 200] [--threads 1]

Saves ``benchmarks/results/embedding_runtime.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from app.providers.embeddings import BUNDLED_MODEL, LocalEmbedder
from benchmarks.common import percentiles, print_table, save

SUBJECTS = ["the mobile user survey", "the support group", "a camping trip by the lake", "北京烤鸭", "the release"]


def questions(count: int) -> list[str]:
    return [f"What did we decide about {SUBJECTS[i % len(SUBJECTS)]} on day {i}?" for i in range(count)]


def passages(count: int) -> list[str]:
    """Formation-sized texts: an event-log entry with the turns around it."""
    turn = "Melanie: we went camping near the lake and saw {} deer at dawn; the kids loved the campfire stories."
    return [" ".join(turn.format(i + j) for j in range(3)) for i in range(count)]


def measure(runtime: str, queries: list[str], batch: list[str], threads: int) -> tuple[dict, np.ndarray]:
    started = time.perf_counter()
    embedder = LocalEmbedder(BUNDLED_MODEL, 384, 64, threads=threads, worker_process=True, runtime=runtime)
    embedder.load()  # the model loads on first use otherwise: the start is construction and load
    start_s = time.perf_counter() - started
    for q in queries[:10]:
        embedder.embed_sync([q])
    in_process = []
    for q in queries:
        t = time.perf_counter()
        embedder.embed_sync([q])
        in_process.append((time.perf_counter() - t) * 1000)

    async def through_worker() -> list[float]:
        times = []
        for q in queries:
            t = time.perf_counter()
            await embedder.embed([q])
            times.append((time.perf_counter() - t) * 1000)
        return times

    worker = asyncio.run(through_worker())
    t = time.perf_counter()
    embedder.embed_sync(batch)
    batch_s = time.perf_counter() - t
    row = {
        "runtime": runtime,
        "start_s": round(start_s, 2),
        "query_ms": percentiles(in_process),
        "query_via_worker_ms": percentiles(worker),
        "batch_texts_per_s": round(len(batch) / batch_s, 1),
    }
    return row, np.asarray(embedder.embed_sync(queries[:20] + batch[:20]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256, help="formation-sized texts embedded in one call")
    parser.add_argument("--threads", type=int, default=1, help="MEMSYS_EMBEDDING_THREADS (default 1, as memsys)")
    parser.add_argument("--out", help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    queries, batch = questions(args.queries), passages(args.batch)
    rows, vectors = [], {}
    for runtime in ("torch", "onnx"):
        row, vectors[runtime] = measure(runtime, queries, batch, args.threads)
        rows.append(row)
    difference = float(np.abs(vectors["torch"] - vectors["onnx"]).max())
    config = {"queries": args.queries, "batch": args.batch, "threads": args.threads, "model": BUNDLED_MODEL}
    path = save("embedding_runtime", config, {"runtimes": rows, "max_abs_difference": difference}, args.out)
    print_table(
        [
            {
                "runtime": r["runtime"],
                "start s": r["start_s"],
                "query p50": r["query_ms"]["p50"],
                "query p95": r["query_ms"]["p95"],
                "via worker p50": r["query_via_worker_ms"]["p50"],
                "batch texts/s": r["batch_texts_per_s"],
            }
            for r in rows
        ],
        ["runtime", "start s", "query p50", "query p95", "via worker p50", "batch texts/s"],
    )
    print(f"largest difference between the two runtimes' vector components: {difference:.2e}\nsaved {path}")


if __name__ == "__main__":
    main()
