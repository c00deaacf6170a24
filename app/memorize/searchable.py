"""Read your writes: a stored message is searchable before formation turns it into memories.

memorize stores the message with its BM25 text (keyword search finds it at once) and queues ``index_messages``
(``app.memorize.tasks``); the intake worker runs this: it gives each pending message its vector. Retrieval
searches pending messages beside the memories (``sql/retrieval.sql``) until the transaction that forms them
into memories marks them processed: an answer holds a message or its memories, never both.
"""

from __future__ import annotations

from app.memorize import repository
from app.providers.embeddings import embedder_name
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.memory_text import entry_text, message_text, text_md5
from app.text.tokenize import search_tokens_of

BATCH = 64


def _before(row: dict) -> str | None:
    return message_text(*row["before"]) if row["before"] is not None else None


async def index_pending(runtime: Runtime) -> tuple[int, int]:
    """Give every pending message of the runtime's tenant a vector of the configured model (and its BM25 text
    if memorize did not store one: messages older than that), in batches; (indexed, skipped): skipped are those
    formation held at that moment, to be tried again. Texts are embedded outside any transaction.

    Newest first: the message just sent, the one its sender may search for next, is searchable first; and
    formation takes a stream's oldest messages, so when both are behind (a burst) the two work from opposite
    ends rather than on the same messages at once.

    A message's vector is made from the text of its event-log entry (``entry_text``: the message with the pending
    turn before it): formation keeps it for the entry when that turn is in the entry's MemCell too, so a message
    is embedded once, here, rather than here and again by formation."""
    model = embedder_name(runtime.settings)
    indexed = skipped = 0
    below_id: int | None = None
    while True:
        async with runtime.engine.connect() as conn:
            rows = await repository.unindexed_pending(conn, runtime.tenant, model, BATCH, below_id=below_id)
        if not rows:
            return indexed, skipped
        below_id = rows[-1]["id"]
        texts = [message_text(row["sender_name"], row["content"]) for row in rows]
        embedded = [entry_text(text, _before(row)) for text, row in zip(texts, rows, strict=True)]
        vectors = await runtime.embedder.embed(embedded, draft=True)
        untokenized = [(row, text) for row, text in zip(rows, texts, strict=True) if row["needs_tokens"]]
        tokens = await run_off_loop(search_tokens_of, [text for _, text in untokenized])
        for (row, _), text_tokens in zip(untokenized, tokens, strict=True):
            row["search_tokens"] = text_tokens
        for row, vector, text in zip(rows, vectors, embedded, strict=True):
            row["embedding"] = vector
            row["embedding_text_md5"] = text_md5(text)
        async with runtime.engine.begin() as conn:
            stored, held = await repository.index_pending(conn, runtime.tenant, rows, model)
        indexed += stored
        skipped += held
        if len(rows) < BATCH:
            return indexed, skipped
