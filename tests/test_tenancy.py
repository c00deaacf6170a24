"""Keys and tenants end to end: the CLI, 401s, anonymous mode, and isolation enforced by PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest
from litestar.testing import TestClient

from app.db import migrate
from app.db.embedded import libpq_url
from app.db.engine import service_database_url
from app.settings import Settings
from tests.conftest import run_memsys as memsys
from tests.conftest import until_ready
from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, app_client, conversation, rows
from tests.tenancy_support import bearer, create_key

# Also run against a Citus coordinator in CI (.ci/run): the API and isolation tests.
pytestmark = pytest.mark.citus

RETRIEVE = "/api/v3/agentic/retrieve_lightweight"
AGENTIC = "/api/v3/agentic/retrieve_agentic"
MEMORIES = "/api/v3/agentic/memories"
META_COLUMNS = "group_id, version, scene, scene_desc, name, description, default_timezone, user_details, created_at"
META_VALUES = "'g', '1', 's', '\"d\"', 'n', 'd', 'UTC', '{}', now()"
ALL_TIME = {"time_range_days": 36500}  # the seed's conversation is from January 2025


def test_keys_cli_create_list_revoke(client: TestClient, database_url: str):
    created = memsys(database_url, "keys", "create", "--tenant", "acme", "--name", "ci")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1].split()[-1]
    assert key.startswith("msk_") and len(key) >= 40
    # Stored only as a hash: the key itself is nowhere in the table.
    stored = rows(database_url, "SELECT tenant_id, name, key_hash, key_prefix FROM api_keys")
    assert len(stored) == 1 and stored[0]["tenant_id"] == "acme" and stored[0]["name"] == "ci"
    assert key not in str(stored) and stored[0]["key_hash"] != key
    assert rows(database_url, "SELECT tenant_id FROM tenants WHERE tenant_id = 'acme'")

    listed = memsys(database_url, "keys", "list")
    assert listed.returncode == 0 and "acme" in listed.stdout and "active" in listed.stdout
    assert key not in listed.stdout

    assert client.get(f"{META}?group_id=x", headers=bearer(key)).status_code == 404  # authenticated: no such meta
    key_id = listed.stdout.splitlines()[1].split()[0]  # under the header row
    revoked = memsys(database_url, "keys", "revoke", key_id)
    assert revoked.returncode == 0, revoked.stderr
    assert "revoked" in memsys(database_url, "keys", "list").stdout
    answer = client.get(f"{META}?group_id=x", headers=bearer(key))
    # The last key revoked: no active key, the loopback test server is anonymous again; a second key closes it.
    assert answer.status_code == 404
    other = create_key(database_url, "acme")
    assert client.get(f"{META}?group_id=x", headers=bearer(key)).status_code == 401
    assert client.get(f"{META}?group_id=x", headers=bearer(other)).status_code == 404

    bad = memsys(database_url, "keys", "create", "--tenant", "no spaces allowed")
    assert bad.returncode == 2 and "Invalid tenant" in bad.stderr


def test_anonymous_until_a_key_exists_then_every_request_needs_one(client: TestClient, database_url: str):
    assert client.post(META, json=META_BODY).status_code == 200  # anonymous: tenant default
    key = create_key(database_url, "default")
    for headers in ({}, {"Authorization": "Bearer msk_wrong"}, {"Authorization": f"Basic {key}"}):
        answer = client.post(RETRIEVE, json={"query": "search"}, headers=headers)
        assert answer.status_code == 401, headers
        body = answer.json()
        assert body["status"] == "failed" and body["code"] == "UNAUTHORIZED" and body["path"] == RETRIEVE
    # Unauthenticated bad input is a 401, not a 400: nothing is parsed before the key is checked.
    assert client.post(MEMORIZE, content=b"{not json").status_code == 401
    until_ready(client)  # public: no key asked
    assert client.get("/docs/openapi.json").status_code == 200
    found = client.get(f"{META}?group_id=group_123", headers=bearer(key))
    assert found.status_code == 200 and found.json()["result"]["group_id"] == "group_123"


def _fill(client: TestClient, key: str, words: str) -> None:
    """group_123 with the seed's two users, in the key's tenant; every message says ``words``."""
    headers = bearer(key)
    assert client.post(META, json={**META_BODY, "description": words}, headers=headers).status_code == 200
    for body in conversation():
        body["content"] = f"{body['content']} {words}"
        assert client.post(MEMORIZE, json=body, headers=headers).status_code == 200
    assert client.post(FLUSH, json={"group_id": "group_123"}, headers=headers).json()["result"]["count"] > 0


def test_same_group_and_user_in_two_tenants_are_two_different_things(client, database_url, settings, fake_llm):
    key_a, key_b = create_key(database_url, "tenant-a"), create_key(database_url, "tenant-b")
    _fill(client, key_a, "zebra alpha")
    _fill(client, key_b, "yak beta")
    for key, mine, theirs in ((key_a, "zebra", "yak"), (key_b, "yak", "zebra")):
        headers = bearer(key)
        for mode in ("rrf", "embedding", "bm25"):
            for query in (mine, theirs):
                body = {"query": f"{query} search page", "group_id": "group_123", "retrieval_mode": mode, **ALL_TIME}
                result = client.post(RETRIEVE, json=body, headers=headers).json()["result"]
                contents = " ".join(m["content"] for m in result["memories"])
                assert theirs not in contents, (mode, query)
                if query == mine:
                    assert mine in contents, mode
            for source in ("event_log", "semantic_memory", "episode"):
                body = {"query": theirs, "data_source": source, "retrieval_mode": mode, **ALL_TIME}
                found = client.post(RETRIEVE, json=body, headers=headers).json()["result"]["memories"]
                assert all(theirs not in m["content"] for m in found)
        meta = client.get(f"{META}?group_id=group_123", headers=headers).json()["result"]
        assert mine in meta["description"]
        profile = client.post(
            RETRIEVE,
            json={"data_source": "profile", "user_id": "user_001", "group_id": "group_123"},
            headers=headers,
        ).json()["result"]["memories"]
        assert len(profile) == 1 and theirs not in profile[0]["content"]
        fake_llm.on("is_sufficient", {"is_sufficient": True, "reasoning": "enough", "refined_queries": []})
        llm_config = {"api_key": "client-key", "base_url": fake_llm.base_url}
        body = {"query": f"{theirs} {mine}", "group_id": "group_123", "llm_config": llm_config, **ALL_TIME}
        with app_client(settings, llm_allow_private_urls=True) as private:  # the stand-in LLM is on loopback
            agentic = private.post(AGENTIC, json=body, headers=headers)
        assert agentic.status_code == 200, agentic.text
        contents = " ".join(m["content"] for m in agentic.json()["result"]["memories"])
        assert mine in contents and theirs not in contents
    # Every row carries its tenant, both tenants hold the same group and users.
    counts = rows(database_url, "SELECT tenant_id, count(*) AS n FROM memories GROUP BY 1 ORDER BY 1")
    assert [c["tenant_id"] for c in counts] == ["tenant-a", "tenant-b"] and counts[0]["n"] == counts[1]["n"]


def test_the_service_role_sees_nothing_without_a_tenant(
    client: TestClient, database_url: str, settings: Settings, on_citus: bool
):
    _fill(client, create_key(database_url, "acme"), "kiwi")
    assert rows(database_url, "SELECT count(*) AS n FROM memories")[0]["n"] > 0  # the owner (superuser) sees them
    service_url = libpq_url(service_database_url(settings, database_url))
    with psycopg.connect(service_url) as conn:
        user, super_, bypass = conn.execute(
            "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert (user, super_, bypass) == (migrate.service_role_for(database_url, None), False, False)
        for table in ("memories", "tenant_memories", "messages", "memcells", "profiles", "bm25_term_stats"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        conn.execute("SET LOCAL memsys.tenant_id = 'other'")
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        conn.rollback()
        conn.execute("SET LOCAL memsys.tenant_id = 'acme'")
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] > 0
        conn.rollback()
        # A write without a tenant is refused: by row-level security, or on Citus before that, for want of the
        # distribution column's value.
        refused = psycopg.errors.NullValueNotAllowed if on_citus else psycopg.errors.InsufficientPrivilege
        with pytest.raises(refused):
            conn.execute(f"INSERT INTO conversation_meta ({META_COLUMNS}) VALUES ({META_VALUES})")
        conn.rollback()
        conn.execute("SET LOCAL memsys.tenant_id = 'acme'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor into another tenant
            conn.execute(f"INSERT INTO conversation_meta (tenant_id, {META_COLUMNS}) VALUES ('default', {META_VALUES})")
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # keys are read-only to the service
            conn.execute("UPDATE api_keys SET revoked_at = NULL")
    # And the running app's own connections are that role's (Citus's connections between its nodes aside).
    users = rows(
        database_url,
        "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend' AND application_name NOT LIKE 'citus\\_internal%'",
    )
    assert {u["usename"] for u in users} == {migrate.service_role_for(database_url, None)}


def test_rls_holds_the_service_role_on_every_tenant_table_and_not_the_owner(database_url: str):
    from app.db.tables import TENANT_TABLES

    found = rows(
        database_url,
        "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = ANY(%s)",
        list(TENANT_TABLES),
    )
    assert {r["relname"] for r in found} == set(TENANT_TABLES)
    # Enabled (the service role is held), not forced on the owner, who dumps and administers every tenant.
    assert all(r["relrowsecurity"] and not r["relforcerowsecurity"] for r in found)
    keys = rows(
        database_url,
        "SELECT conrelid::regclass::text AS t, (SELECT attname FROM pg_attribute WHERE attrelid = conrelid "
        "AND attnum = conkey[1]) AS first FROM pg_constraint "
        "WHERE contype IN ('p', 'u') AND conrelid::regclass::text = ANY(%s)",
        list(TENANT_TABLES),
    )
    assert keys and all(k["first"] == "tenant_id" for k in keys), keys
    indexes = rows(
        database_url,
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND indexdef LIKE '%%btree%%'",
        list(TENANT_TABLES),
    )
    assert all("(tenant_id," in i["indexdef"] for i in indexes), indexes


def test_refuses_to_serve_anonymous_on_a_public_address(server_process_factory, database_url: str):
    env = {
        "MEMSYS_DATABASE_URL": database_url,
        "MEMSYS_HOST": "0.0.0.0",
        "MEMSYS_MIGRATE_ON_START": "false",
        # An embedding endpoint that is never called: no local model loaded by the two start-ups, none asked for
        # before the first search (ready at once).
        "MEMSYS_EMBEDDING_PROVIDER": "openai",
        "MEMSYS_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1",
        "MEMSYS_EMBEDDING_PRELOAD": "false",
    }
    refused = server_process_factory(env)
    with pytest.raises(RuntimeError, match="MEMSYS_ALLOW_ANONYMOUS"):
        refused.start(timeout=60)
    allowed = server_process_factory({**env, "MEMSYS_ALLOW_ANONYMOUS": "true"})
    allowed.start(timeout=60)
    import httpx

    assert httpx.get(f"{allowed.base_url}/api/v3/agentic/memories").status_code == 200


def test_what_a_key_resolves_to_is_remembered_until_the_keys_change(
    settings: Settings, database_url: str, on_citus: bool
):
    """A valid key's tenant is remembered for the cache time; a change to the keys empties that memory at once
    where the keys watch listens (app.tenancy.watch: plain PostgreSQL), so a revoked key stops at once there; on
    Citus (no trigger to listen to) it works until the cache time ends."""
    from app.tenancy import service

    with app_client(settings, key_cache_seconds=60) as cached:
        assert cached.get(MEMORIES).status_code == 200  # anonymous: no key exists
        key = create_key(database_url, "acme")
        assert cached.get(MEMORIES).status_code == 401  # anonymous access was not remembered
        create_key(database_url, "other")  # keys stay required after the revocation
        assert cached.get(MEMORIES, headers=bearer(key)).status_code == 200
        assert cached.get(MEMORIES, headers=bearer("msk_wrong")).status_code == 401
        key_id = rows(database_url, "SELECT id FROM api_keys WHERE tenant_id = 'acme'")[0]["id"]
        revoked = memsys(database_url, "keys", "revoke", str(key_id))
        assert revoked.returncode == 0
        assert cached.get(MEMORIES, headers=bearer(key)).status_code == (200 if on_citus else 401)
        assert service.key_hash(key) in str(rows(database_url, "SELECT key_hash FROM api_keys"))
    with app_client(settings, key_cache_seconds=0) as uncached:
        assert uncached.get(MEMORIES, headers=bearer(key)).status_code == 401


def test_statements_name_their_tenant_but_an_outer_joins_optional_side_keeps_its_unmatched_rows(database_url: str):
    """app.tenancy.scope adds tenant_id = :tenant to the statements the code builds (Citus routes on it): to the
    preserved side of a LEFT JOIN only, so a MemCell without messages is still found."""
    import asyncio

    from sqlalchemy import and_, event, select

    from app.db.tables import memcells, messages
    from tests.retrieval_support import tenant_engine

    rows(
        database_url,
        "SELECT set_config('memsys.tenant_id', 'default', false); INSERT INTO memcells (stream_kind, stream_id, "
        "start_time, end_time, message_ids, participants, boundary_reason, extraction_mode) VALUES ('group', 'g', "
        "now(), now(), '{}', '{}', 'test', 'offline') RETURNING id",
    )
    seen: list[str] = []
    joined = memcells.outerjoin(
        messages, and_(messages.c.tenant_id == memcells.c.tenant_id, messages.c.memcell_id == memcells.c.id)
    )

    async def run():
        engine = tenant_engine(database_url)
        event.listen(engine.sync_engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
        try:
            async with engine.connect() as conn:
                found = (await conn.execute(select(memcells.c.stream_id, messages.c.id).select_from(joined))).all()
                await conn.execute(select(messages.c.id))
        finally:
            await engine.dispose()
        return found

    assert [tuple(row) for row in asyncio.run(run())] == [("g", None)]
    statements = [s for s in seen if "FROM memcells" in s or "FROM messages" in s]
    assert "memcells.tenant_id = %(tenant_id_1)s" in statements[0] and "messages.tenant_id = %(" not in statements[0]
    assert "messages.tenant_id = %(tenant_id_1)s" in statements[1]
