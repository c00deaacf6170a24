"""Print a retrieve_lightweight request as the psql script that runs memsys's exact SQL by hand.

    python -m app.retrieval.psql [--tenant T] '{"query": "Beijing food", "user_id": "u1"}' | psql "$(memsys db-url)"

The script sets one psql variable per parameter of ``sql/retrieval.sql`` (each to a SQL literal, so the
file's ``:name`` placeholders work in psql as they are), then runs ``search_scope`` (the query's cross-lingual
vector is kept only where the scope crosses languages; BM25's exactness as the service learns it beside the embedding,
which leaves one of BM25's two parts out of the statement: here both are printed, and the value folds one away),
``configure_search`` and ``hybrid_search`` in one transaction, as the service runs them: as the service's role
(the one the table ``service_role`` names) in the tenant (default ``default``), so that row-level security applies
(the owner would otherwise see every tenant's rows). Prefix the last statement with EXPLAIN (ANALYZE, BUFFERS) to see
the plan.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import date, datetime
from typing import Any

from app.db.named_sql import query
from app.db.tables import TENANT_SETTING
from app.formation.language import detect_language
from app.providers.embeddings import embedder_name
from app.retrieval import repository, service
from app.retrieval.cutoff import xl_scale
from app.retrieval.schemas import RetrieveLightweightRequest
from app.settings import Settings
from app.tenancy.scope import DEFAULT_TENANT, check_tenant_id
from app.text.tokenize import search_tokens


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime | date):
        value = value.isoformat()
    if isinstance(value, list | tuple):  # a text[] literal: '{"a","b"}'
        value = "{" + ",".join('"' + str(item).replace("\\", "\\\\").replace('"', '\\"') + '"' for item in value) + "}"
    return "'" + str(value).replace("'", "''") + "'"


def psql_set(name: str, value: Any) -> str:
    """``\\set name <literal>``; psql's own quoting wraps the literal (quotes doubled)."""
    literal = sql_literal(value)
    return f"\\set {name} '" + literal.replace("'", "''") + "'"


def script(
    request: RetrieveLightweightRequest,
    settings: Settings,
    query_vector: list[float] | None,
    tenant: str = DEFAULT_TENANT,
    xl_vector: list[float] | None = None,
) -> str:
    service.validate(request, settings)
    if request.data_source == "profile":
        raise SystemExit("data_source=profile is a plain SELECT on profiles; nothing to script")
    mode = request.retrieval_mode
    tenant = check_tenant_id(tenant)
    tuning = service.tuning_for(settings, mode, request.top_k, request.query or "")
    filters = service.filters_for(request)
    parameters = repository.search_parameters(
        tenant=tenant,
        mode=mode,
        query_vector=query_vector if mode != "bm25" else None,
        embedding_model=embedder_name(settings),
        query_tokens=search_tokens(request.query or "") if mode != "embedding" else "",
        filters=filters,
        top_k=request.top_k,
        radius=request.radius,
        tuning=tuning,
        xl_vector=xl_vector,
        query_language=detect_language([request.query or ""]),
        xl_scale=xl_scale(settings),
    )
    lines = [psql_set(name, value) for name, value in parameters.items() if not name.startswith("_")]
    lines += [
        "BEGIN;",
        "SELECT name AS service_role FROM service_role \\gset",
        'SET LOCAL ROLE :"service_role";',
        f"SET LOCAL {TENANT_SETTING} = {sql_literal(tenant)};",
    ]
    # As the service: BM25's exactness looked up where a query vector is made (a bm25 search lets the statement count),
    # the cross-lingual leg only where the scope crosses languages.
    counting = repository.counts_scope(filters, mode)
    lines += [
        psql_set("count_scope", counting),
        repository.with_caller_filter(query("search_scope"), parameters["_filter_sql"]).rstrip(";") + " \\gset",
    ]
    if counting:
        lines += ["\\if :bm25_exact", "\\set bm25_exact true", "\\else", "\\set bm25_exact false", "\\endif"]
    else:
        lines += [psql_set("bm25_exact", None), psql_set("vector_exact", False)]
    if parameters["embedding_xl"] is not None:
        lines += ["\\if :crosses", "\\else", "\\set embedding_xl NULL", "\\endif"]
    # In a scope search_scope counted small, the vector leg computes every memory's distance (vector_exact): both
    # statements are printed, and psql runs the one the count picks, as the service does.
    exact = repository.hybrid_sql({**parameters, "vector_exact": True})
    graph = repository.hybrid_sql({**parameters, "vector_exact": False})
    lines += [repository.search_settings(tuning, parameters["memory_type"])]
    lines += ["\\if :vector_exact", exact, "\\else", graph, "\\endif"] if exact != graph else [graph]
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    tenant = DEFAULT_TENANT
    if len(argv) == 3 and argv[0] == "--tenant":
        tenant, argv = argv[1], argv[2:]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    request = RetrieveLightweightRequest.model_validate(json.loads(argv[0]))
    settings = Settings()
    vector = xl_vector = None
    if request.retrieval_mode != "bm25" and request.data_source != "profile":
        from app.providers.embeddings import create_embedder, create_xl_embedder

        vector = asyncio.run(create_embedder(settings).embed([request.query or ""], query=True))[0]
        if (xl_embedder := create_xl_embedder(settings)) is not None:
            xl_vector = asyncio.run(xl_embedder.embed([request.query or ""], query=True))[0]
    sys.stdout.write(script(request, settings, vector, tenant, xl_vector))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
