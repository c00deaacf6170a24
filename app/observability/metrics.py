"""Prometheus metrics, all named ``memsys_…``: the one place they are defined.

HTTP requests (count, latency, in progress, per route template) come from Litestar's Prometheus middleware
with the prefix ``memsys``. Defined here: retrieval latency per mode, LLM and embedding call latency and
errors, and the gauges ``app/http/metrics.py`` reads from the database at each scrape (the formation backlog,
memories per type). This module imports nothing of memsys, so that every layer may record here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from litestar.plugins.prometheus import PrometheusConfig
from prometheus_client import Counter, Gauge, Histogram

HTTP = PrometheusConfig(app_name="memsys", prefix="memsys", group_path=True, exclude=["/metrics"])

RETRIEVAL_SECONDS = Histogram(
    "memsys_retrieval_duration_seconds", "One hybrid search (SQL and query embedding)", ["mode"]
)
LLM_SECONDS = Histogram("memsys_llm_call_duration_seconds", "One LLM call, retries included", ["outcome"])
LLM_TOKENS = Counter(
    "memsys_llm_tokens_total",
    "Tokens of memsys's own LLM calls (formation, agentic retrieval, the agent) as the LLM counted them, by direction: "
    "input (the prompt) or output (the answer)",
    ["direction"],
)
LLM_ERRORS = Counter("memsys_llm_errors_total", "LLM calls that failed after their retries", ["kind"])
LLM_ANSWERS = Counter(
    "memsys_llm_answers_total",
    "LLM answers to a JSON prompt, by the answer asked for: valid or unusable",
    ["answer", "outcome"],
)
LLM_FALLBACKS = Counter(
    "memsys_llm_fallbacks_total",
    "MemCells formed by the offline path although an LLM is configured, by reason",
    ["reason"],
)
LLM_BOUNDARY_DISTRUSTED = Counter(
    "memsys_llm_boundary_distrusted_total", "Boundary passes whose LLM judge ended an episode at every message"
)
FORMATION_WRITE_SECONDS = Histogram(
    "memsys_formation_write_seconds",
    "The transaction that writes one MemCell, its memories and profiles (it holds the stream's rows meanwhile)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
EMBEDDING_SECONDS = Histogram("memsys_embedding_duration_seconds", "One embedding call", ["provider"])
EMBEDDING_ERRORS = Counter("memsys_embedding_errors_total", "Embedding calls that failed", ["provider"])
EMBEDDINGS_KEPT = Counter(
    "memsys_embeddings_kept_total",
    "Memories' vectors formation took from their pending message (its intake vector, of the same text) rather than"
    " embedding again",
)
REQUESTS_REJECTED = Counter(
    "memsys_requests_rejected_total",
    "Requests refused or stopped before their handler finished (busy, tenant_share, slow_body, slow_head, host,"
    " origin, deadline, client_gone)",
    ["reason"],
)
FORMATION_JOBS = Gauge("memsys_formation_jobs", "Formation jobs by state (at the last scrape)", ["state"])
FORMATION_OLDEST = Gauge(
    "memsys_formation_oldest_pending_seconds", "Age of the oldest waiting formation job (0: none waiting)"
)
MESSAGES_WAITING = Gauge(
    "memsys_messages_waiting", "Messages stored and not yet formed into memories, all tenants (at the last scrape)"
)
MESSAGES_NOT_SEARCHABLE = Gauge(
    "memsys_messages_not_yet_searchable",
    "Of the waiting messages, those not yet embedded: found by keyword, not yet by meaning (last scrape)",
)
MEMORIES = Gauge("memsys_memories", "Memories per type, all tenants (at the last scrape)", ["memory_type"])
QUEUE_JOBS = Gauge(
    "memsys_queue_jobs",
    "Jobs of memsys's queues (formation, intake) by status: todo (waiting), doing (running), failed (last scrape)",
    ["queue", "status"],
)
DB_POOL = Gauge(
    "memsys_db_pool_connections",
    "The service's database connection pool in this process, read at each scrape: size (the connections it keeps),"
    " checked_out (in use), idle (in the pool), overflow (opened beyond the size under load: at most the"
    " size again)",
    ["state"],
)
DB_POOL_TIMEOUTS = Counter(
    "memsys_db_pool_timeouts_total",
    "Requests that waited MEMSYS_DB_POOL_TIMEOUT_SECONDS for a database connection in vain (answered 503)",
)


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.labels(**labels).observe(time.perf_counter() - started)
