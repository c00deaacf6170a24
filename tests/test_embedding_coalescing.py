"""Concurrent short embed calls share trips to the local model, and get exactly their own vectors."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.providers.embeddings import COALESCE_MAX_CHARS, LocalEmbedder, _Coalescer


def test_calls_arriving_during_a_batch_go_together_in_order() -> None:
    trips: list[list[str]] = []

    async def encode(texts: list[str]) -> list[list[float]]:
        trips.append(list(texts))
        await asyncio.sleep(0.05)
        return [[float(len(t))] for t in texts]

    async def main() -> list[list[list[float]]]:
        batcher = _Coalescer(encode, asyncio.get_running_loop())
        first = asyncio.create_task(batcher.submit(["a"]))
        await asyncio.sleep(0.01)  # the first trip is under way
        rest = [asyncio.create_task(batcher.submit(["bb", "ccc"])), asyncio.create_task(batcher.submit(["dddd"]))]
        return await asyncio.gather(first, *rest)

    results = asyncio.run(main())
    assert trips == [["a"], ["bb", "ccc", "dddd"]]
    assert results == [[[1.0]], [[2.0], [3.0]], [[4.0]]]


def test_a_failed_trip_fails_its_callers_and_not_the_next() -> None:
    async def encode(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0.01)
        if "boom" in texts:
            raise RuntimeError("model failed")
        return [[1.0] for _ in texts]

    async def main():
        batcher = _Coalescer(encode, asyncio.get_running_loop())
        failed = await asyncio.gather(batcher.submit(["boom"]), return_exceptions=True)
        ok = await batcher.submit(["fine"])
        return failed, ok

    failed, ok = asyncio.run(main())
    assert isinstance(failed[0], RuntimeError) and ok == [[1.0]]


@pytest.mark.parametrize("worker_process", [False, True])
def test_concurrent_queries_get_the_vectors_they_would_get_alone(worker_process: bool) -> None:
    embedder = LocalEmbedder("all-MiniLM-L6-v2", 384, 64, threads=1, worker_process=worker_process)
    queries = [f"what did person {i} eat for dinner on day {i}?" for i in range(8)]
    assert all(len(q) <= COALESCE_MAX_CHARS for q in queries)

    async def main():
        alone = [await embedder.embed([q]) for q in queries]
        together = await asyncio.gather(*(embedder.embed([q]) for q in queries))
        return alone, together

    alone, together = asyncio.run(main())
    for a, t in zip(alone, together, strict=True):
        assert np.allclose(a, t, atol=1e-5)


def test_a_dead_embedding_worker_process_is_restarted(client, database_url):
    """kill -9 of the local model's worker process: the next formation starts a new one and forms."""
    import os
    import signal

    from tests.formation_helpers import FLUSH, MEMORIZE, conversation

    embedder = client.app.state.runtime.embedder
    pids = list(embedder._worker._processes)  # the pool's processes: what a crash would take away
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for body in conversation()[:2]:
        client.post(MEMORIZE, json=body)
    result = client.post(FLUSH, json={"group_id": "group_123"}).json()["result"]
    assert result["status_info"] == "extracted" and result["count"] > 0
    assert set(embedder._worker._processes).isdisjoint(pids)
