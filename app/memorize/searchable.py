"""Read your writes: a stored message is searchable before formation turns it into memories.

memorize only stores the message and queues ``index_messages`` (``app.formation.tasks``); the intake worker
runs this: it gives each pending message its vector and its BM25 text, and retrieval searches pending
messages beside the memories (``sql/retrieval.sql``) until the transaction that forms them into memories
marks them processed: an answer holds a message or its memories, never both.
"""

from __future__ import annotations

from app.memorize import repository
from app.providers.embeddings import embedder_name
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.tokenize import search_tokens

BATCH = 64


def message_text(sender_name: str, content: str) -> str:
    """What a pending message's vector and BM25 text are made from: who said it and what, as an episode shows it."""
    return f"{sender_name}: {content}"


def _search_tokens(texts: list[str]) -> list[str]:
    return [search_tokens(text) for text in texts]


async def index_pending(runtime: Runtime) -> int:
    """Index every pending message of the runtime's tenant not yet indexed with the configured model, in
    batches; the count indexed. Texts are embedded outside any transaction."""
    model = embedder_name(runtime.settings)
    indexed = 0
    while True:
        async with runtime.engine.connect() as conn:
            rows = await repository.unindexed_pending(conn, runtime.tenant, model, BATCH)
        if not rows:
            return indexed
        texts = [message_text(row["sender_name"], row["content"]) for row in rows]
        vectors = await runtime.embedder.embed(texts)
        tokens = await run_off_loop(_search_tokens, texts)
        for row, vector, text_tokens in zip(rows, vectors, tokens, strict=True):
            row.update(embedding=vector, search_tokens=text_tokens)
        async with runtime.engine.begin() as conn:
            indexed += await repository.index_pending(conn, runtime.tenant, rows, model)
        if len(rows) < BATCH:
            return indexed
