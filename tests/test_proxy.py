"""Issue 30: the OpenAI-compatible memory proxy, through a real ``memsys serve`` driven by the real ``openai``
package, with the scripted OpenAI-compatible server (benchmarks/fake_llm.py) as the upstream LLM. Two tenants with
their own keys; the server's upstream key must reach the upstream and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import psycopg
import pytest

from benchmarks.fake_llm import CHAT, FakeLLM, Recorded, Reply
from tests.conftest import ServerProcess, empty_tables, process_env
from tests.tenancy_support import bearer, create_key
from tests.test_typescript_client import built_client, doc_example, node_or_skip, run_node_example

UPSTREAM_KEY = "sk-upstream-secret-0123456789"
UPSTREAM_MODEL = "upstream-model"
RETRIEVE = "/api/v3/agentic/retrieve_lightweight"
PROXY_DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations" / "openai-proxy.md"
REPLIES: dict[str, Any] = {}
"""The upstream's scripted answers, by a text the request's last message contains."""


def _answer(body: dict) -> Any:
    prompt = Recorded(CHAT, body, {}).prompt
    if "should_end" in prompt:  # the formation worker's boundary judge: one episode, never cut
        return {"should_end": False, "reasoning": "same conversation", "topic_summary": None}
    last = str(body["messages"][-1].get("content"))
    return next((reply for text, reply in REPLIES.items() if text in last), None)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        fake.handler = _answer
        yield fake


@pytest.fixture(scope="module")
def keys(database_url: str) -> Iterator[dict[str, str]]:
    yield {"a": create_key(database_url, "tenant-a"), "b": create_key(database_url, "tenant-b")}
    empty_tables(database_url)


@pytest.fixture(scope="module")
def server(database_url: str, keys: dict[str, str], upstream: FakeLLM) -> Iterator[ServerProcess]:
    env = {
        **process_env(database_url),
        "MEMSYS_LLM_API_KEY": UPSTREAM_KEY,
        "MEMSYS_LLM_BASE_URL": upstream.base_url,
        "MEMSYS_LLM_MODEL": UPSTREAM_MODEL,
        "MEMSYS_LLM_TIMEOUT_SECONDS": "3",
        "MEMSYS_LLM_MAX_TOKENS": "1000",
        "MEMSYS_PROXY_MAX_MESSAGES": "20",
        "MEMSYS_BOUNDARY_IDLE_SECONDS": "0",
        # The proxy and agentic retrieval use the upstream; formation stays offline (no extraction prompt goes out).
        "MEMSYS_FORMATION_LLM": "offline",
    }
    process = ServerProcess(env, cwd=Path(__file__).resolve().parent.parent)
    process.start(timeout=120)
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _empty_tables(upstream: FakeLLM) -> Iterator[None]:
    """The keys live for the module; each test scripts its own answers."""
    yield
    REPLIES.clear()
    upstream.requests.clear()


def client(server: ServerProcess, key: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=30, **options)


def proxied(upstream: FakeLLM) -> list[Recorded]:
    """The upstream requests the proxy made: every one (formation is offline, MEMSYS_FORMATION_LLM)."""
    return upstream.chat_requests


def stored(database_url: str, text: str) -> list[tuple]:
    """Each stored message holding ``text``: (stream kind, stream id, sender, sender name, role)."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT stream_kind, stream_id, sender, sender_name, role FROM messages WHERE content LIKE %s ORDER BY id",
            (f"%{text}%",),
        ).fetchall()


def memorized(server: ServerProcess, key: str, user: str, query: str, expected: int, mode: str = "rrf") -> list[str]:
    """The user's memories and messages for ``query`` once ``expected`` are found (``mode`` embedding: once the
    intake worker has embedded them), within 30 s. A message is found by keywords once memorize has answered,
    and the proxy memorizes before it answers: ``expected=0`` asks once."""
    body = {"query": query, "user_id": user, "data_source": "event_log", "retrieval_mode": mode, "top_k": 20}
    deadline = time.monotonic() + 30
    while True:
        answer = httpx.post(server.base_url + RETRIEVE, json=body, headers=bearer(key), timeout=30)
        assert answer.status_code == 200, answer.text
        found = [m["content"] for m in answer.json()["result"]["memories"]]
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def found_once_embedded(server: ServerProcess, key: str, user: str, text: str) -> bool:
    """Whether ``text`` comes back by its vector within 30 s: the vector leg returns the user's other messages too,
    embedded first or not, so one answer with something in it is not yet the answer with ``text``."""
    deadline = time.monotonic() + 30
    while True:
        if any(text in m for m in memorized(server, key, user, text, expected=1, mode="embedding")):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)


def completion(content: str, completion_id: str = "chatcmpl-scripted-1") -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1700000000,
        "model": UPSTREAM_MODEL,
        "system_fingerprint": "fp_scripted",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


def test_a_turn_goes_out_with_the_users_memories_and_comes_back_unchanged(server, keys, upstream, database_url):
    sent = completion("Noted: teal it is.")
    REPLIES["favourite colour is teal"] = Reply(json_body=sent)
    raw = client(server, keys["a"]).chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "My favourite colour is teal"},
        ],
        user="alice",
        temperature=0.3,
    )
    assert raw.http_response.json() == sent  # the upstream's answer, byte for byte the same JSON
    answer = raw.parse()
    assert answer.choices[0].message.content == "Noted: teal it is." and answer.model == UPSTREAM_MODEL

    [request] = proxied(upstream)
    assert request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the server's key, not the client's
    assert keys["a"] not in str(request.headers) and keys["a"] not in str(request.body)
    assert request.body["model"] == UPSTREAM_MODEL and request.body["max_tokens"] == 1000
    assert request.body["temperature"] == 0.3
    assert "user" not in request.body  # whose memories is memsys's to know (MEMSYS_PROXY_FORWARD_USER)
    assert request.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "My favourite colour is teal"},
    ]  # nothing remembered yet: no memory message
    assert UPSTREAM_KEY not in raw.http_response.text and UPSTREAM_KEY not in str(raw.http_response.headers)

    # The user's message and the answer are memorized in alice's conversation, each under its own speaker, in
    # tenant a only: a search of alice's memories finds her words, not the assistant's as hers.
    found = memorized(server, keys["a"], "alice", "favourite colour teal", expected=1, mode="embedding")
    assert found == ["alice: My favourite colour is teal"]
    assert stored(database_url, "teal") == [
        ("personal", "alice", "alice", "alice", "user"),
        ("personal", "alice", "assistant", "assistant", "assistant"),
    ]
    assert memorized(server, keys["b"], "alice", "favourite colour teal", expected=0) == []

    # The next turn goes out with what was memorized, after the client's system prompt.
    REPLIES["What is my favourite colour?"] = "Teal."
    again = client(server, keys["a"]).chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is my favourite colour?"},
        ],
        user="alice",
    )
    assert again.choices[0].message.content == "Teal."
    messages = proxied(upstream)[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[0]["content"] == "You are terse." and "My favourite colour is teal" in messages[1]["content"]
    assert "[Retrieved Knowledge]" in messages[1]["content"]

    # Tenant b's alice (the same name) has no such memory: the upstream sees none.
    client(server, keys["b"]).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "What is my favourite colour?"}], user="alice"
    )
    assert "teal" not in proxied(upstream)[-1].prompt.lower()


def test_a_streamed_answer_is_relayed_chunk_by_chunk_and_memorized(server, keys, upstream, database_url):
    REPLIES["I adopted a cat named Miso"] = "What a lovely name for a cat!"
    stream = client(server, keys["a"], default_headers={"X-Memsys-User": "bob"}).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "I adopted a cat named Miso"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "What a lovely name for a cat!" and len(chunks) > 5
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 2
    assert proxied(upstream)[-1].body["stream"] is True
    found = memorized(server, keys["a"], "bob", "cat named Miso", expected=1)
    assert found == ["bob: I adopted a cat named Miso"]
    assert [row[2:] for row in stored(database_url, "Miso")] == [("bob", "bob", "user")]
    assert stored(database_url, "lovely name for a cat") == [("personal", "bob", "assistant", "assistant", "assistant")]

    # A retried request (the same conversation) stores the user's message once.
    REPLIES["I adopted a cat named Miso"] = "What a lovely name for a cat!"
    client(server, keys["a"]).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "I adopted a cat named Miso"}], user="bob"
    )
    assert sorted(memorized(server, keys["a"], "bob", "cat named Miso", expected=0)) == sorted(found)


def test_a_group_header_memorizes_into_the_groups_conversation(server, keys, upstream):
    REPLIES["The launch moved to Friday"] = "Friday, noted."
    client(server, keys["a"], default_headers={"X-Memsys-Group": "launch-team"}).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "The launch moved to Friday"}], user="carol"
    )
    body = {"query": "launch Friday", "group_id": "launch-team", "data_source": "event_log"}
    answer = httpx.post(server.base_url + RETRIEVE, json=body, headers=bearer(keys["a"]), timeout=30).json()
    senders = sorted((m["user_id"], m["content"]) for m in answer["result"]["memories"])
    assert senders == [("assistant", "assistant: Friday, noted."), ("carol", "carol: The launch moved to Friday")]


def invalid(server: ServerProcess, key: str, **request: Any) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        client(server, key).chat.completions.create(**{"model": "m", **request})
    return caught.value


def test_bad_requests_are_refused_naming_the_field(server, keys, upstream):
    hello = [{"role": "user", "content": "hello"}]
    error = invalid(server, keys["a"], messages=hello)
    assert isinstance(error, openai.BadRequestError) and error.code == "INVALID_PARAMETER" and error.param == "user"
    assert error.response.json()["code"] == "INVALID_PARAMETER" and "X-Memsys-User" in error.response.json()["message"]
    error = invalid(server, keys["a"], messages=[{"role": "system", "content": "only a system prompt"}], user="u")
    assert error.status_code == 400 and error.param == "messages"
    error = invalid(server, keys["a"], messages=hello, user="u", max_tokens=5000)
    assert error.status_code == 400 and error.param == "max_tokens" and "MEMSYS_LLM_MAX_TOKENS" in error.message
    error = invalid(server, keys["a"], messages=hello * 21, user="u")
    assert error.status_code == 400 and error.param == "messages" and "MEMSYS_PROXY_MAX_MESSAGES" in error.message
    error = invalid(server, keys["a"], messages=[{"role": "narrator", "content": "x"}], user="u")
    assert error.status_code == 400 and error.param == "messages.0.role"
    error = invalid(server, keys["a"], messages=hello, user="u", n=2)
    assert error.status_code == 400 and error.param == "n"
    error = invalid(server, keys["a"], messages=[{"role": "user", "content": "x" * 70_000}], user="u")
    assert error.status_code == 413 and error.param == "messages[0].content"
    error = invalid(server, "not-a-key", messages=hello, user="u")
    assert isinstance(error, openai.AuthenticationError) and error.code == "UNAUTHORIZED"
    assert proxied(upstream) == []  # none of them reached the upstream


def test_upstream_failures_are_502_or_503_and_memorize_nothing(server, keys, upstream):
    hello = [{"role": "user", "content": "Remember the blue door"}]
    for reply, status, retry in ((Reply(status=500), 502, "true"), (Reply(status=401), 502, "false")):
        REPLIES["blue door"] = reply
        error = invalid(server, keys["a"], messages=hello, user="dave")
        assert error.status_code == status and error.response.headers["x-should-retry"] == retry
        assert error.code == "UPSTREAM_ERROR" and error.type == "upstream_error"
        assert UPSTREAM_KEY not in error.response.text
    REPLIES["blue door"] = Reply(status=400, json_body={"error": {"message": f"context too long for {UPSTREAM_KEY}"}})
    error = invalid(server, keys["a"], messages=hello, user="dave")
    assert error.status_code == 502 and "context too long for ***" in error.message
    assert UPSTREAM_KEY not in error.response.text
    REPLIES["blue door"] = Reply(content="late", delay=5)  # past MEMSYS_LLM_TIMEOUT_SECONDS
    error = invalid(server, keys["a"], messages=hello, user="dave")
    assert isinstance(error, openai.InternalServerError) and error.status_code == 503
    assert error.code == "SERVICE_UNAVAILABLE" and "3s" in error.message

    REPLIES["blue door"] = Reply(content="The blue door is the second one on the left", cut_stream=True)
    stream = client(server, keys["a"]).chat.completions.create(model="m", messages=hello, user="dave", stream=True)
    with pytest.raises(openai.APIError, match="ended before its answer"):
        list(stream)
    assert memorized(server, keys["a"], "dave", "blue door", expected=0) == []


def test_a_client_cannot_send_the_upstream_key_elsewhere(server, keys, upstream):
    with FakeLLM() as elsewhere:
        elsewhere.handler = lambda body: "hijacked"
        REPLIES["weather"] = "Sunny."
        answer = client(server, keys["a"]).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "How is the weather?"}],
            user="erin",
            extra_headers={"X-Forwarded-Host": f"127.0.0.1:{elsewhere.port}", "X-Memsys-Upstream": elsewhere.base_url},
            extra_body={"base_url": elsewhere.base_url, "api_base": elsewhere.base_url},
        )
        assert answer.choices[0].message.content == "Sunny."
        assert elsewhere.requests == []
    [request] = proxied(upstream)
    assert request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "x-forwarded-host" not in request.headers and "x-memsys-upstream" not in request.headers


def test_the_docs_examples_run_as_written(server, keys, upstream, tmp_path):
    """docs/integrations/openai-proxy.md: the Python example with the ``openai`` package, the Node one with ``openai``
    from npm (clients/typescript's devDependency), streaming and not."""
    REPLIES["allergic to peanuts"] = "Try roasted chickpeas."
    REPLIES["dinner tonight"] = "How about a peanut-free pad thai?"
    env = {"MEMSYS_URL": server.base_url, "MEMSYS_API_KEY": keys["a"]}
    example = doc_example(PROXY_DOC, "python")
    done = subprocess.run(
        [sys.executable, "-c", example], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Try roasted chickpeas.\nHow about a peanut-free pad thai?\n"
    assert found_once_embedded(server, keys["a"], "alice", "allergic to peanuts")

    node_or_skip()
    built_client()
    upstream.requests.clear()
    output = run_node_example(doc_example(PROXY_DOC, "js"), tmp_path, env)
    assert output == "Try roasted chickpeas.\nHow about a peanut-free pad thai?\n"
    first, second = proxied(upstream)
    assert first.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" and second.body["stream"] is True
    assert "x-memsys-user" not in first.headers


def test_a_server_without_an_upstream_llm_refuses_the_proxy_for_good_not_for_a_retry(settings, keys):
    """No MEMSYS_LLM_API_KEY is the operator's choice, not an outage: 403 as with the proxy off, never a 503 that an
    OpenAI client would retry (the fuzzer found a valid request answered 503 on the offline default)."""
    from tests.formation_helpers import app_client

    body = {"model": "m", "messages": [{"role": "user", "content": "Remember the blue door"}], "user": "dave"}
    with app_client(settings, llm_api_key=None, workers=0) as offline:
        answer = offline.post("/v1/chat/completions", json=body, headers=bearer(keys["a"]))
    assert answer.status_code == 403, answer.text
    assert answer.headers.get("x-should-retry") != "true"
    error = answer.json()["error"]
    assert error["type"] == "permission_error" and "MEMSYS_LLM_API_KEY is not set" in error["message"]


def test_formation_stays_offline_and_the_answer_is_the_assistants(server, keys, upstream, database_url):
    """``MEMSYS_FORMATION_LLM=offline``: the proxy's upstream answers chats, formation asks it nothing. The formed
    conversation gives alice her episode and profile; the assistant's answer is its own event-log entry (marked
    an assistant's), with no episode or profile of its own."""
    REPLIES["I moved to Lisbon"] = "Lisbon is lovely."
    client(server, keys["a"]).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "I moved to Lisbon last month"}], user="erin"
    )
    flushed = httpx.post(
        server.base_url + "/api/v3/agentic/flush", json={"sender": "erin"}, headers=bearer(keys["a"]), timeout=60
    ).json()
    assert flushed["result"]["status_info"] == "extracted", flushed
    assert len(proxied(upstream)) == 1  # the chat only: no boundary judgement, no extraction
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT extraction_mode FROM memcells").fetchall() == [("offline",)]
        memories = conn.execute(
            "SELECT memory_type, user_id, metadata->>'assistant' FROM memories ORDER BY memory_type, user_id"
        ).fetchall()
        profiles = conn.execute("SELECT user_id FROM profiles").fetchall()
    assert ("episode", "erin", None) in memories and not [m for m in memories if m[:2] == ("episode", "assistant")]
    assert ("event_log", "assistant", "true") in memories and ("event_log", "erin", None) in memories
    assert profiles == [("erin",)]
    # Forgetting erin takes the whole conversation: the assistant's answer to her too, and nothing is formed again.
    forgotten = httpx.delete(
        server.base_url + "/api/v3/agentic/users", params={"user_id": "erin"}, headers=bearer(keys["a"]), timeout=60
    )
    assert forgotten.status_code == 200, forgotten.text
    time.sleep(1)  # a form_again job, had one been queued, would have run
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM messages WHERE stream_id = 'erin'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM memories WHERE content LIKE '%Lisbon%'").fetchone() == (0,)
