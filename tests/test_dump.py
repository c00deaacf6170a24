"""memsys export / memsys import as a user runs them (the real CLI, real databases): a round trip gives the same
retrieval results, another embedding model is embedded again, a bad line imports nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from litestar.testing import TestClient

from app.http.app import create_app
from app.settings import Settings
from tests.conftest import recreate_database
from tests.conftest import run_memsys as memsys
from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, conversation, message
from tests.tenancy_support import bearer, create_key

# Real processes started, killed and restarted: pytest -m processes (.ci/run), kept out of the README's run.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parent.parent
RETRIEVE = "/api/v3/agentic/retrieve_lightweight"
QUERIES = [
    ({"query": "project release date", "data_source": "episode"}),
    ({"query": "What does the team plan?", "data_source": "event_log"}),
    ({"query": "bicycle garage", "user_id": "user_001", "data_source": "episode"}),
]


def _fill(client: TestClient, headers: dict) -> None:
    assert client.post(META, json=META_BODY, headers=headers).status_code == 200
    for body in conversation("group_123"):
        assert client.post(MEMORIZE, json=body, headers=headers).status_code == 200
    assert (
        client.post(FLUSH, json={"group_id": "group_123"}, headers=headers).json()["result"]["status_info"]
        == "extracted"
    )
    body = message(100, "I keep my bicycle in the garage", sender="user_001", group_id=None)
    assert client.post(MEMORIZE, json=body, headers=headers).status_code == 200
    assert (
        client.post(FLUSH, json={"sender": "user_001"}, headers=headers).json()["result"]["status_info"] == "extracted"
    )


def _answers(settings: Settings, url: str, keys: dict[str, str]) -> dict[str, list]:
    """Each tenant's retrieval results (ids, contents and scores) for the queries, from the database at ``url``."""
    answers = {}
    app_settings = settings.model_copy(update={"database_url": url, "workers": 0})
    with TestClient(create_app(app_settings), raise_server_exceptions=False) as client:
        for tenant, key in keys.items():
            for number, query in enumerate(QUERIES):
                response = client.post(RETRIEVE, json={**query, "time_range_days": 100000}, headers=bearer(key))
                assert response.status_code == 200, response.text
                memories = response.json()["result"]["memories"]
                answers[f"{tenant}/{number}"] = [(m["id"], m["content"], round(m["score"], 5)) for m in memories]
    return answers


def _keys_in(url: str, tenants: list[str]) -> dict[str, str]:
    return {tenant: create_key(url, tenant) for tenant in tenants}


@pytest.fixture
def dumped(client: TestClient, database_url: str, settings: Settings, tmp_path: Path):
    keys = _keys_in(database_url, ["acme", "other"])
    _fill(client, bearer(keys["acme"]))
    _fill(client, bearer(keys["other"]))
    path = tmp_path / "dump.jsonl"
    done = memsys(database_url, "export", "--output", str(path))
    assert done.returncode == 0, done.stderr
    return path, _answers(settings, database_url, keys)


def test_export_then_import_round_trip_other_model_and_bad_dumps(dumped, server_url, settings) -> None:
    path, before = dumped
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    head, end = lines[0], lines[-1]
    assert head["format"] == "memsys.dump" and head["version"] == 1
    assert head["embedding"] == {"model": "local:all-MiniLM-L6-v2", "dimensions": 384}
    assert end == {"type": "end", "rows": len(lines) - 2 - sum(1 for line in lines if line["type"] == "tenant")}
    kinds = {line["type"] for line in lines}
    assert kinds == {
        "header",
        "tenant",
        "conversation_meta",
        "memcell",
        "message",
        "memory",
        "memory_event",
        "profile",
        "end",
    }
    memory = next(line for line in lines if line["type"] == "memory")
    assert len(memory["embedding"]) == 384 and memory["embedding_model"] == "local:all-MiniLM-L6-v2"
    assert "tsv" not in memory and "api_key" not in path.read_text()

    target = recreate_database(server_url, "memsys_import_test")
    done = memsys(target, "import", str(path))
    assert done.returncode == 0, done.stderr
    assert "embedded again: 0" in done.stderr
    assert _answers(settings, target, _keys_in(target, ["acme", "other"])) == before
    with psycopg.connect(target) as conn:
        per_tenant = dict(conn.execute("SELECT tenant_id, count(*) FROM messages GROUP BY 1").fetchall())
        stats = conn.execute("SELECT count(*) FROM bm25_term_stats").fetchone()[0]
    dumped_messages = sum(1 for line in lines if line["type"] == "message")
    assert (
        per_tenant == {"acme": dumped_messages // 2, "other": dumped_messages // 2} and stats > 0
    )  # the triggers rebuilt BM25's statistics

    again = memsys(target, "import", str(path))  # run again: nothing is added twice
    assert again.returncode == 0
    assert (
        "memsys import: added 0 forgotten_user, 0 conversation_meta, 0 memcell, 0 message, 0 memory, 0 memory_event, "
        "0 profile; "
        "embedded again: 0" in again.stderr.splitlines()
    )
    assert f"memsys import: skipped, already present (same id or same message): {_counts(lines)}" in again.stderr

    # These two were written with the test and never called (its name promised them).
    _another_embedding_model_is_embedded_again(path, before, server_url, settings)
    _a_malformed_line_is_named_and_nothing_is_imported(path, server_url)


def _counts(lines: list[dict]) -> str:
    """'N conversation_meta, N memcell, ...': the dump's rows by type, as memsys import counts them."""
    kinds = Counter(line["type"] for line in lines)
    return ", ".join(
        f"{kinds[kind]} {kind}"
        for kind in ("conversation_meta", "memcell", "message", "memory", "memory_event", "profile")
    )


def _another_embedding_model_is_embedded_again(path: Path, before: dict, server_url: str, settings: Settings) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path = path.with_name("other-model.jsonl")
    lines[0]["embedding"] = {"model": "openai:text-embedding-3-small", "dimensions": 8}
    memories = 0
    for line in lines:
        if line["type"] == "memory":
            line.update(embedding=[0.125] * 8, embedding_model="openai:text-embedding-3-small")
            memories += 1
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    target = recreate_database(server_url, "memsys_import_test")
    done = memsys(target, "import", str(path))
    assert done.returncode == 0, done.stderr
    assert f"embedded again: {memories}" in done.stderr
    after = _answers(settings, target, _keys_in(target, ["acme", "other"]))
    # Episodes are embedded from their own text, as formation embeds them: the same answers, the same order.
    for name in ("acme/0", "acme/2", "other/0", "other/2"):
        assert [m[0] for m in after[name]] == [m[0] for m in before[name]]


def _a_malformed_line_is_named_and_nothing_is_imported(good: Path, server_url: str) -> None:
    lines = good.read_text().splitlines()
    lines[6] = lines[6][:-10]  # cut mid-object
    path = good.with_name("malformed.jsonl")
    path.write_text("\n".join(lines) + "\n")
    target = recreate_database(server_url, "memsys_import_test")
    done = memsys(target, "import", str(path))
    assert done.returncode == 2
    assert "line 7: not JSON" in done.stderr and "nothing was imported" in done.stderr
    with psycopg.connect(target) as conn:  # refused before the database is even migrated
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0

    truncated = path.with_name("cut.jsonl")
    truncated.write_text("\n".join(good.read_text().splitlines()[:20]) + "\n")
    done = memsys(target, "import", str(truncated))
    assert done.returncode == 2 and "without its end line" in done.stderr
