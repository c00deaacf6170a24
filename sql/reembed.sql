-- memsys reembed (app/memories/reembed.py): every memory's vector made again with the configured model.
-- Run per tenant, after SET LOCAL memsys.tenant_id (row-level security holds the owner too).

-- name: reembed_count
SELECT count(*) FROM memories
WHERE CASE WHEN CAST(:cross_lingual AS boolean) THEN embedding_xl IS NULL
           ELSE CAST(:all_rows AS boolean) OR embedding_model <> :embedding_model END;

-- name: reembed_batch
-- The next memories after :after_id (in id order), each with what its vector is made from
-- (app.formation.memcell.embedding_text): title and content, and for an event-log entry formed offline (also kept
-- beside an LLM's facts) the offline entry before it in its MemCell, which is the turn before its message.
-- The tenant named in both reads (row-level security holds it anyway): on Citus the statement is then one
-- single-shard task, which may hold the lateral join.
WITH batch AS (
    SELECT id, memcell_id, memory_type, title, content, metadata ->> 'extraction' AS extraction
    FROM memories
    WHERE tenant_id = :tenant_id
      AND id > :after_id
      AND CASE WHEN CAST(:cross_lingual AS boolean) THEN embedding_xl IS NULL  -- the cross-lingual pass
               ELSE CAST(:all_rows AS boolean) OR embedding_model <> :embedding_model END
      -- Only the memories of this model (memories whose content was corrected: 'edited'); NULL: any.
      AND (CAST(:only_model AS text) IS NULL OR embedding_model = :only_model)
    ORDER BY id
    LIMIT :batch_size
)
SELECT b.id, b.title, b.content, n.before
FROM batch b
LEFT JOIN LATERAL (
    SELECT e.id, lag(e.content) OVER w AS before
    FROM memories e
    WHERE e.tenant_id = :tenant_id AND e.memcell_id = b.memcell_id AND e.memory_type = 'event_log' AND e.metadata ->> 'extraction' = 'offline'
    WINDOW w AS (ORDER BY e.timestamp, e.created_at, e.id)
) n ON b.memory_type = 'event_log' AND b.extraction = 'offline' AND n.id = b.id
ORDER BY b.id;

-- name: reembed_update
-- One statement per batch (the BM25 statistics triggers run once per statement).
UPDATE memories m
SET embedding = CAST(v.embedding AS vector), embedding_model = :embedding_model
FROM unnest(CAST(:ids AS uuid[]), CAST(:embeddings AS text[])) AS v(id, embedding)
WHERE m.id = v.id;

-- name: reembed_xl_update
-- The cross-lingual pass: the multilingual vector and the language of the text (migration 0014).
UPDATE memories m
SET embedding_xl = CAST(v.embedding AS vector), language = v.language
FROM unnest(CAST(:ids AS uuid[]), CAST(:embeddings AS text[]), CAST(:languages AS text[])) AS v(id, embedding, language)
WHERE m.id = v.id;

-- name: vector_dimensions
SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('memories') AND attname = 'embedding';

-- name: vector_indexes
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'memories' AND indexdef LIKE '%USING hnsw%'
ORDER BY indexname;
