"""Two changes that let the same schema run on Citus (migration 0011), made on every database.

* A message's and a profile's reference to their MemCell no longer sets itself NULL when the MemCell goes:
  ``ON DELETE SET NULL (memcell_id)`` is a column list Citus does not accept on a distributed table whose key is
  part of the reference. Forget, the one place that deletes MemCells, detaches their messages itself
  (``app.forget.repository.delete_memcells``) and deletes their profile versions before them, as it already did;
  the references are plain (NO ACTION), so a MemCell that something still names cannot go.
* The BM25 statistics triggers read their transition table (``new_rows``/``old_rows``) into arrays, one tenant at
  a time, and write the statistics from those arrays with the tenant named: on Citus a statement that reads a
  transition table cannot write a distributed table, and a trigger on a shard may only write co-located shards,
  which naming the tenant guarantees. The statistics are the same as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

REFERENCING_TABLES = ("messages", "profiles")

BM25_TRIGGERS = """
CREATE OR REPLACE FUNCTION memsys_bm25_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tenant text;
    types text[]; counts bigint[]; lengths bigint[];
    term_types text[]; terms text[]; dfs bigint[];
BEGIN
    FOR tenant IN SELECT DISTINCT n.tenant_id FROM new_rows n ORDER BY 1 LOOP
        SELECT array_agg(memory_type), array_agg(n), array_agg(len) INTO types, counts, lengths
        FROM (SELECT memory_type, count(*) AS n, sum(doc_len) AS len FROM new_rows
              WHERE tenant_id = tenant GROUP BY 1 ORDER BY 1) s;
        INSERT INTO bm25_corpus_stats AS c (tenant_id, memory_type, doc_count, total_len)
        SELECT tenant, u.memory_type, u.n, u.len FROM unnest(types, counts, lengths) AS u(memory_type, n, len)
        ORDER BY 2
        ON CONFLICT (tenant_id, memory_type) DO UPDATE
            SET doc_count = c.doc_count + EXCLUDED.doc_count, total_len = c.total_len + EXCLUDED.total_len;
        SELECT array_agg(memory_type), array_agg(term), array_agg(df) INTO term_types, terms, dfs
        FROM (SELECT n.memory_type, l.term, count(*) AS df
              FROM new_rows n CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS l(term)
              WHERE n.tenant_id = tenant GROUP BY 1, 2 ORDER BY 1, 2) s;
        INSERT INTO bm25_term_stats AS t (tenant_id, memory_type, term, df)
        SELECT tenant, u.memory_type, u.term, u.df FROM unnest(term_types, terms, dfs) AS u(memory_type, term, df)
        ORDER BY 2, 3
        ON CONFLICT (tenant_id, memory_type, term) DO UPDATE SET df = t.df + EXCLUDED.df;
    END LOOP;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memsys_bm25_remove() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tenant text;
    types text[]; counts bigint[]; lengths bigint[];
    term_types text[]; terms text[]; dfs bigint[];
BEGIN
    FOR tenant IN SELECT DISTINCT o.tenant_id FROM old_rows o ORDER BY 1 LOOP
        SELECT array_agg(memory_type), array_agg(n), array_agg(len) INTO types, counts, lengths
        FROM (SELECT memory_type, count(*) AS n, sum(doc_len) AS len FROM old_rows
              WHERE tenant_id = tenant GROUP BY 1 ORDER BY 1) s;
        UPDATE bm25_corpus_stats c
        SET doc_count = c.doc_count - u.n, total_len = c.total_len - u.len
        FROM unnest(types, counts, lengths) AS u(memory_type, n, len)
        WHERE c.tenant_id = tenant AND c.memory_type = u.memory_type;
        SELECT array_agg(memory_type), array_agg(term), array_agg(df) INTO term_types, terms, dfs
        FROM (SELECT o.memory_type, l.term, count(*) AS df
              FROM old_rows o CROSS JOIN LATERAL unnest(tsvector_to_array(o.tsv)) AS l(term)
              WHERE o.tenant_id = tenant GROUP BY 1, 2 ORDER BY 1, 2) s;
        UPDATE bm25_term_stats t
        SET df = t.df - u.df
        FROM unnest(term_types, terms, dfs) AS u(memory_type, term, df)
        WHERE t.tenant_id = tenant AND t.memory_type = u.memory_type AND t.term = u.term;
        DELETE FROM bm25_term_stats WHERE tenant_id = tenant AND df <= 0;
    END LOOP;
    RETURN NULL;
END $$;
"""

# Migration 0003's functions, for the downgrade.
BM25_TRIGGERS_BEFORE = """
CREATE OR REPLACE FUNCTION memsys_bm25_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bm25_corpus_stats AS c (tenant_id, memory_type, doc_count, total_len)
    SELECT tenant_id, memory_type, count(*), sum(doc_len) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (tenant_id, memory_type) DO UPDATE
        SET doc_count = c.doc_count + EXCLUDED.doc_count, total_len = c.total_len + EXCLUDED.total_len;
    INSERT INTO bm25_term_stats AS t (tenant_id, memory_type, term, df)
    SELECT n.tenant_id, n.memory_type, l.term, count(*)
    FROM new_rows n CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS l(term)
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, memory_type, term) DO UPDATE SET df = t.df + EXCLUDED.df;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memsys_bm25_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bm25_corpus_stats c
    SET doc_count = c.doc_count - o.n, total_len = c.total_len - o.len
    FROM (SELECT tenant_id, memory_type, count(*) AS n, sum(doc_len) AS len FROM old_rows GROUP BY 1, 2) o
    WHERE c.tenant_id = o.tenant_id AND c.memory_type = o.memory_type;
    UPDATE bm25_term_stats t
    SET df = t.df - o.n
    FROM (
        SELECT r.tenant_id, r.memory_type, l.term, count(*) AS n
        FROM old_rows r CROSS JOIN LATERAL unnest(tsvector_to_array(r.tsv)) AS l(term)
        GROUP BY 1, 2, 3
    ) o
    WHERE t.tenant_id = o.tenant_id AND t.memory_type = o.memory_type AND t.term = o.term;
    DELETE FROM bm25_term_stats WHERE df <= 0;
    RETURN NULL;
END $$;
"""


def _reference(table: str, on_delete: str) -> None:
    name = f"fk_{table}_tenant_id_memcells"
    op.execute(
        f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} FOREIGN KEY (tenant_id, memcell_id) "
        f"REFERENCES memcells (tenant_id, id){on_delete}"
    )


def upgrade() -> None:
    for table in REFERENCING_TABLES:
        _reference(table, "")
    op.execute(BM25_TRIGGERS)


def downgrade() -> None:
    op.execute(BM25_TRIGGERS_BEFORE)
    for table in REFERENCING_TABLES:
        _reference(table, " ON DELETE SET NULL (memcell_id)")
