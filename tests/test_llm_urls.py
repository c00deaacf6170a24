"""LLM endpoints a client names in ``llm_config``: the server's key never goes there, non-public hosts are
refused, and the connection goes to the address that was checked (through HTTP, against the fake LLM)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from litestar.testing import TestClient

from app.http.app import create_app
from app.providers.llm import LLMClient, LLMConfig, LLMNotConfigured
from app.providers.llm_urls import PinnedHost, pinned_http_client
from app.settings import Settings

URL = "/api/v3/agentic/retrieve_agentic"
SERVER_KEY = "server-secret-key"
SUFFICIENT = {"is_sufficient": True, "reasoning": "enough", "refined_queries": []}


def app_with(settings: Settings, **overrides) -> TestClient:
    update = {"llm_timeout_s": 2.0, "llm_max_retries": 0, "llm_api_key": SERVER_KEY, **overrides}
    return TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def private_ok(settings: Settings) -> Iterator[TestClient]:
    """An app whose operator allows client URLs on private addresses (the fake LLM is on 127.0.0.1)."""
    with app_with(settings, llm_allow_private_urls=True) as client:
        yield client


def ask(client: TestClient, llm_config: dict) -> httpx.Response:
    return client.post(URL, json={"query": "what did we decide", "group_id": "g1", "llm_config": llm_config})


def assert_refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "INVALID_PARAMETER" and body["message"].startswith(f"Invalid field {field}:"), body


def test_a_client_url_without_its_own_key_is_refused_and_gets_nothing(private_ok, database_url, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    assert_refused(ask(private_ok, {"base_url": fake_llm.base_url}), "llm_config.api_key")
    assert_refused(ask(private_ok, {"base_url": fake_llm.base_url, "model": "m"}), "llm_config.api_key")
    assert fake_llm.requests == []


def test_a_client_url_with_its_own_key_gets_only_that_key(private_ok, database_url, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    response = ask(private_ok, {"base_url": fake_llm.base_url, "api_key": "client-key", "model": "m"})
    assert response.status_code == 200, response.text
    assert fake_llm.requests, "the client's endpoint was called"
    assert {r.headers.get("authorization") for r in fake_llm.requests} == {"Bearer client-key"}
    assert not any(SERVER_KEY in str(r.headers) or SERVER_KEY in str(r.body) for r in fake_llm.requests)


def test_the_server_key_is_not_inherited_by_a_config_naming_its_own_url(fake_llm) -> None:
    client = LLMClient(LLMConfig(SERVER_KEY, "https://llm.example.com/v1", "m"))
    with pytest.raises(LLMNotConfigured):
        asyncio.run(
            client.complete_json([{"role": "user", "content": "hi"}], config=LLMConfig(base_url=fake_llm.base_url))
        )
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    "base_url",
    [
        "http://localhost:{port}/v1",
        "http://127.0.0.1:{port}/v1",
        "http://[::1]:{port}/v1",
        "http://10.0.0.1/v1",
        "http://192.168.1.10/v1",
        "http://172.16.0.1/v1",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0:{port}/v1",
        "http://224.0.0.1/v1",
        "http://[fd00::1]/v1",
        "http://[fec0::1]/v1",  # site-local: Python counts it as global
        "http://[::ffff:127.0.0.1]:{port}/v1",
        "http://2130706433:{port}/v1",  # 127.0.0.1 as one number
        "http://127.1:{port}/v1",
        "ftp://llm.example.com/v1",
        "file:///etc/passwd",
        "http:///v1",
        "\u0016",
        "http://llm.example.com\r\n/v1",
        "not a url",
        "http://host.invalid/v1",  # does not resolve
    ],
)
def test_unfit_client_urls_are_refused_before_any_call(client, fake_llm, base_url: str) -> None:
    url = base_url.format(port=fake_llm.port)
    assert_refused(ask(client, {"base_url": url, "api_key": "k", "model": "m"}), "llm_config.base_url")
    assert fake_llm.requests == []


def test_the_operator_may_refuse_any_client_config(settings: Settings, database_url, fake_llm) -> None:
    with app_with(settings, llm_allow_client_config=False, llm_allow_private_urls=True) as client:
        assert_refused(ask(client, {"base_url": fake_llm.base_url, "api_key": "k"}), "llm_config")
        assert_refused(ask(client, {"model": "m"}), "llm_config")
    assert fake_llm.requests == []


def test_an_allowed_private_url_is_reached_by_name_with_its_host_header(private_ok, database_url, fake_llm) -> None:
    fake_llm.on("is_sufficient", SUFFICIENT)
    response = ask(private_ok, {"base_url": f"http://localhost:{fake_llm.port}/v1", "api_key": "k", "model": "m"})
    assert response.status_code == 200, response.text
    assert response.json()["result"]["metadata"]["retrieval_mode"] == "agentic"
    assert fake_llm.chat_requests[-1].headers["host"] == f"localhost:{fake_llm.port}"


def test_the_connection_goes_to_the_checked_address_without_a_second_lookup(fake_llm) -> None:
    """``llm.invalid`` cannot resolve: the request arrives only because the pinned address is used."""

    async def call() -> tuple[int, type[Exception] | None]:
        pinned = PinnedHost(host="llm.invalid", addresses=("::1", "127.0.0.1"))  # ::1 refuses: next one
        async with pinned_http_client(pinned, timeout_s=5) as http:
            answer = await http.post(f"http://llm.invalid:{fake_llm.port}/v1/embeddings", json={"input": ["x"]})
            try:
                await http.post(f"http://other.invalid:{fake_llm.port}/v1/embeddings", json={"input": ["x"]})
            except httpx.ConnectError as exc:
                return answer.status_code, type(exc)
            return answer.status_code, None

    assert asyncio.run(call()) == (200, httpx.ConnectError)
    assert len(fake_llm.requests) == 1
    assert fake_llm.requests[0].headers["host"] == f"llm.invalid:{fake_llm.port}"
