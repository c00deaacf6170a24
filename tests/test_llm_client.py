"""The generic LLM client against the fake OpenAI-compatible server, and the JSON output parser."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.providers.llm import (
    LLMAuthError,
    LLMBadOutput,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMNotConfigured,
    LLMTimeout,
    parse_json_output,
)
from benchmarks.fake_llm import FakeLLM, Reply

ASK = [{"role": "user", "content": "give me JSON"}]


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": [1, 2]}',
        '```json\n{"a": 1, "b": [1, 2]}\n```',
        'Here you go:\n```\n{"a": 1, "b": [1, 2],}\n```\nAnything else?',
        'Sure. {"a": 1, "b": [1, 2,],} Hope this helps.',
        '<think>maybe {"a": 0}</think>{"a": 1, "b": [1, 2]}',
        '{"a": 1, "b": [1, 2',  # cut off by the token limit: repaired
        "{'a': 1, b: [1, 2]}",  # not quite JSON: repaired
    ],
)
def test_json_output_is_found_wherever_the_model_put_it(text: str) -> None:
    assert parse_json_output(text) == {"a": 1, "b": [1, 2]}


@pytest.mark.parametrize("text", ["no json here", "{", "42", ""])
def test_unparsable_output_is_a_typed_error(text: str) -> None:
    with pytest.raises(LLMBadOutput):
        parse_json_output(text)


def client_for(fake: FakeLLM, **kwargs) -> LLMClient:
    options = {"timeout_s": 0.5, "max_retries": 1, "backoff_s": 0.01, **kwargs}
    return LLMClient(LLMConfig("server-key", fake.base_url, "server-model"), **options)


def run(coro):
    return asyncio.run(coro)


def test_retries_then_succeeds_and_sends_model_and_key(fake_llm: FakeLLM) -> None:
    fake_llm.queue(Reply(status=503), "```json\n[1, 2]\n```")
    assert run(client_for(fake_llm).complete_json(ASK)) == [1, 2]
    first, second = fake_llm.chat_requests
    assert second.body["model"] == "server-model"
    assert second.headers["authorization"] == "Bearer server-key"
    assert second.body["max_tokens"] == 4096  # always bounded (a local server would otherwise fill its context)


def test_a_caller_bound_on_the_answer_is_sent_and_the_setting_applies_otherwise(fake_llm: FakeLLM) -> None:
    from app.settings import Settings

    client = LLMClient.from_settings(
        Settings(llm_api_key="k", llm_base_url=fake_llm.base_url, llm_model="m", llm_max_tokens=700)
    )
    fake_llm.queue('{"a": 1}', '{"a": 2}')
    assert run(client.complete_json(ASK)) == {"a": 1}
    assert run(client.complete_json(ASK, max_tokens=50)) == {"a": 2}
    assert [request.body["max_tokens"] for request in fake_llm.chat_requests] == [700, 50]


def test_per_call_config_overrides_the_server_and_its_key_is_not_logged(
    fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.queue(Reply(status=500), {"ok": True})
    config = LLMConfig(api_key="request-secret", model="request-model")
    assert run(client_for(fake_llm).complete_json(ASK, config=config)) == {"ok": True}
    assert fake_llm.chat_requests[-1].headers["authorization"] == "Bearer request-secret"
    assert fake_llm.chat_requests[-1].body["model"] == "request-model"
    assert "request-secret" not in caplog.text and "request-secret" not in repr(config)


@pytest.mark.parametrize(
    ("reply", "error", "calls"),
    [
        (Reply(status=401), LLMAuthError, 1),
        (Reply(status=403), LLMAuthError, 1),
        (Reply(status=500), LLMError, 2),
        (Reply(delay=2.0, content="{}"), LLMTimeout, 2),
        (Reply(content="not json"), LLMBadOutput, 2),
        (Reply(raw_body="{broken"), LLMBadOutput, 2),
    ],
)
def test_failures_are_typed(fake_llm: FakeLLM, reply: Reply, error: type[Exception], calls: int) -> None:
    fake_llm.on("give me JSON", reply)
    with pytest.raises(error):
        run(client_for(fake_llm).complete_json(ASK))
    assert len(fake_llm.chat_requests) == calls


def test_no_key_anywhere_is_refused_before_any_call(fake_llm: FakeLLM) -> None:
    client = LLMClient(LLMConfig(None, fake_llm.base_url, "m"))
    assert not client.configured
    with pytest.raises(LLMNotConfigured):
        run(client.complete_json(ASK))
    assert fake_llm.requests == []


def test_fake_server_embeddings_and_rerank(fake_llm: FakeLLM) -> None:
    import httpx

    vectors = httpx.post(f"{fake_llm.base_url}/embeddings", json={"model": "m", "input": ["a", "b", "a"]}).json()
    data = [row["embedding"] for row in vectors["data"]]
    assert len(data[0]) == 384 and data[0] == data[2] and data[0] != data[1]
    ranked = httpx.post(
        f"{fake_llm.base_url}/rerank",
        json={"model": "r", "query": "roast duck", "documents": ["tea", "roast duck in Beijing", "duck"], "top_n": 2},
    ).json()
    assert [r["index"] for r in ranked["results"]] == [1, 2]


def test_the_response_format_steps_down_only_until_the_endpoint_has_taken_one(fake_llm: FakeLLM) -> None:
    """auto: a refusal (400, or llama-cpp-python's 500 naming response_format) of a schema the endpoint never
    took sends the same call again with less, not counted as an attempt; once it took one, an error is an error."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fake_llm.queue(
        Reply(status=400),
        Reply(status=500, json_body={"detail": "body.response_format.type: Input should be 'text' or 'json_object'"}),
        '{"a": 1}',
        Reply(status=400),
    )
    client = client_for(fake_llm, max_retries=0)
    assert run(client.complete_json(ASK, json_schema=schema)) == {"a": 1}
    formats = [r.body.get("response_format") for r in fake_llm.chat_requests]
    assert formats == [
        {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
        {"type": "json_object", "schema": schema},
        None,
    ]
    with pytest.raises(LLMError, match="HTTP 400"):  # asked without a format now: a 400 is the call's failure
        run(client.complete_json(ASK, json_schema=schema))
    assert len(fake_llm.chat_requests) == 4


def test_a_schema_the_endpoint_took_is_kept_and_a_plain_500_is_retried(fake_llm: FakeLLM) -> None:
    fake_llm.queue('{"a": 1}', Reply(status=500), '{"a": 2}')
    client = client_for(fake_llm)
    assert run(client.complete_json(ASK, json_schema={"type": "object"})) == {"a": 1}
    assert run(client.complete_json(ASK, json_schema={"type": "object"})) == {"a": 2}
    assert [r.body["response_format"]["type"] for r in fake_llm.chat_requests] == ["json_schema"] * 3


@pytest.mark.parametrize(
    ("base_url", "key"),
    [
        ("http://127.0.0.1:8080/v1", "local"),
        ("http://localhost:11434/v1", "local"),
        ("http://[::1]:8000/v1", "local"),
        ("https://openrouter.ai/api/v1", None),
        ("http://10.0.0.5:8000/v1", None),
    ],
)
def test_a_loopback_llm_needs_no_key_and_any_other_does(base_url: str, key: str | None) -> None:
    from app.settings import Settings

    settings = Settings(llm_base_url=base_url, llm_api_key=None)
    assert settings.llm_server_key == key
    assert LLMClient.from_settings(settings).configured is (key is not None)
    assert Settings(llm_base_url=base_url, llm_api_key="mine").llm_server_key == "mine"
