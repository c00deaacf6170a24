"""Issue 27: an LLM answer is untrusted (a tenant names its own endpoint in ``llm_config``). It is read up to
MEMSYS_LLM_MAX_ANSWER_BYTES, parsed off the event loop in linear time with a depth limit, its fields capped,
and a bad one is a clean fallback: never a 500, never a stalled process. The endpoint is a small server this
module starts on 127.0.0.1; the server under test is a real ``memsys serve`` where the event loop matters."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from app.http.app import create_app
from app.providers.llm import LLMBadOutput, LLMClient, LLMConfig, parse_json_output
from app.providers.llm_json import MAX_DEPTH
from app.settings import Settings
from benchmarks.fake_llm import FakeLLM
from tests.conftest import ServerProcess, process_env

URL = "/api/v3/agentic/retrieve_agentic"
ASK = [{"role": "user", "content": "give me JSON"}]
KB = 1024
ANSWER_CAP = 256 * KB  # the default of MEMSYS_LLM_MAX_ANSWER_BYTES


def completion(content: str) -> bytes:
    """A chat completion whose assistant message is ``content``."""
    message = {"role": "assistant", "content": content}
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "message": message, "finish_reason": "stop"}]}).encode()  # fmt: skip


class HostileLLM:
    """An OpenAI-compatible endpoint that answers every chat request with what the test sets: ``body`` (sent
    with its length, and ``encoding`` as Content-Encoding), or ``stream_bytes`` of a completion that never
    ends, with no length (then ``sent`` counts what the client took before it hung up)."""

    def __init__(self) -> None:
        self.body = completion("{}")
        self.encoding: str | None = None
        self.stream_bytes = 0
        self.sent = 0
        self.requests: list[dict[str, str]] = []
        self.answered = threading.Event()
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hostile.requests.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if hostile.stream_bytes:
                        self.end_headers()  # no length: the body ends when the connection does
                        hostile._stream(self.wfile)
                    else:
                        if hostile.encoding:
                            self.send_header("Content-Encoding", hostile.encoding)
                        self.send_header("Content-Length", str(len(hostile.body)))
                        self.end_headers()
                        self.wfile.write(hostile.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    hostile.answered.set()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _stream(self, out) -> None:
        out.write(b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "')
        chunk = b"a" * (64 * KB)
        while self.sent < self.stream_bytes:
            out.write(chunk)
            self.sent += len(chunk)

    def answer(self, body: bytes = b"", *, encoding: str | None = None, stream_bytes: int = 0) -> None:
        self.body, self.encoding, self.stream_bytes, self.sent = body, encoding, stream_bytes, 0
        self.answered.clear()

    def __enter__(self) -> HostileLLM:
        threading.Thread(target=self._server.serve_forever, name="hostile-llm", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def hostile() -> Iterator[HostileLLM]:
    with HostileLLM() as server:
        yield server


# Answers that froze the server or gave 500s before (issue 27), each about 200 KB, under the size cap.
HOSTILE_CONTENT = {
    "unclosed think tags": "<think>" * 30_000,
    "open braces": "{" * 200_000,
    "a quote, then open braces": '"' + "{" * 200_000,
    "brackets 32 deep, then a word": "{[" * 32 + "a" * 200_000,
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "tokens": "[" + "1," * 100_000,
}


# --- the parser -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", HOSTILE_CONTENT)
def test_hostile_answers_parse_in_bounded_time(name: str) -> None:
    # json_repair and the <think> regex took 4-49 s on such answers; the linear parser takes well under 1 s.
    text = HOSTILE_CONTENT[name]
    started = time.perf_counter()
    try:
        value = parse_json_output(text)
    except LLMBadOutput as exc:
        value = exc
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, f"{name}: {elapsed:.2f}s"
    if name == "tokens":
        assert value == [1] * 100_000  # cut off by the token limit: repaired
    elif name == "brackets 32 deep, then a word":
        assert isinstance(value, dict)  # read, for the caller's schema to judge
    else:
        assert isinstance(value, LLMBadOutput), (name, str(value)[:80])


def test_tool_calls_in_a_hostile_answers_text_are_read_in_bounded_time() -> None:
    """The agent reads tool calls a model wrote as text (``<tool_call>`` blocks): 220 KB of unclosed tags took a
    lazy regex seconds (it rescans the rest from each tag); one pass finds that there is no call."""
    from app.agent.tools import calls_in_text

    started = time.perf_counter()
    assert calls_in_text("<tool_call>" * 20_000, 1) == []
    assert time.perf_counter() - started < 2.0


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    assert parse_json_output("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    for text in ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), '{"a": ' * (MAX_DEPTH + 1)):
        with pytest.raises(LLMBadOutput, match=f"deeper than {MAX_DEPTH}"):
            parse_json_output(text)


def test_think_blocks_are_dropped_and_an_unclosed_one_stays() -> None:
    assert parse_json_output('<THINK>{"a": 0}</think> {"a": 1} <think>x</think>') == {"a": 1}
    assert parse_json_output('<think>{"a": 0}</think><think>{"a": 2}') == {"a": 2}  # cut off while thinking


# --- the LLM client against the endpoint --------------------------------------------------------------------
def client_for(base_url: str, **options) -> LLMClient:
    return LLMClient(LLMConfig("k", base_url, "m"), timeout_s=10, max_retries=0, **options)


def test_an_endless_answer_is_read_only_up_to_the_cap(hostile: HostileLLM) -> None:
    hostile.answer(stream_bytes=300 * 1024 * KB)
    with pytest.raises(LLMBadOutput, match="MEMSYS_LLM_MAX_ANSWER_BYTES"):
        asyncio.run(client_for(hostile.base_url).complete_json(ASK))
    assert hostile.answered.wait(10)
    # What it took is the cap plus what the sockets' buffers held, not the 300 MB offered.
    assert hostile.sent < 16 * 1024 * KB, hostile.sent
    assert hostile.requests[-1]["accept-encoding"] == "identity"


def test_an_answer_announced_over_the_cap_or_compressed_is_unusable(hostile: HostileLLM) -> None:
    client = client_for(hostile.base_url, max_answer_bytes=64 * KB)
    hostile.answer(completion('{"a": "' + "x" * 70 * KB + '"}'))
    with pytest.raises(LLMBadOutput, match="more than 65536"):
        asyncio.run(client.complete_json(ASK))
    hostile.answer(completion('{"a": "' + "x" * 60 * KB + '"}'))
    assert asyncio.run(client.complete_json(ASK)) == {"a": "x" * 60 * KB}
    # 1 KB of gzip that would be 50 MB: refused, never inflated.
    hostile.answer(gzip.compress(completion("x" * 50 * 1024 * KB)), encoding="gzip")
    with pytest.raises(LLMBadOutput, match="compressed"):
        asyncio.run(client.complete_json(ASK))


def test_a_deeply_nested_http_body_is_unusable_not_a_crash(hostile: HostileLLM) -> None:
    hostile.answer(b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    with pytest.raises(LLMBadOutput):
        asyncio.run(client_for(hostile.base_url).complete_json(ASK))


# --- the whole server: the event loop stays free, the request falls back ---------------------------------
@pytest.fixture(scope="module")
def server(database_url: str) -> Iterator[ServerProcess]:
    env = {
        **process_env(database_url),
        "MEMSYS_LLM_ALLOW_PRIVATE_URLS": "true",  # the hostile endpoint listens on 127.0.0.1
        "MEMSYS_LLM_MAX_RETRIES": "0",
        "MEMSYS_LLM_TIMEOUT_SECONDS": "20",
    }
    process = ServerProcess(env, cwd=Path(__file__).resolve().parent.parent)
    process.start(timeout=120)
    yield process
    process.stop()


def liveness_during(server: ServerProcess, request) -> tuple[httpx.Response, list[float]]:
    """``request()`` run in a thread while GET /health/live is asked every 50 ms (at most 600 times);
    the response and each liveness answer's latency."""
    latencies: list[float] = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool, httpx.Client(timeout=10) as live:
        pending = pool.submit(request)
        for _ in range(600):
            started = time.perf_counter()
            assert live.get(server.base_url + "/health/live").status_code == 200
            latencies.append(time.perf_counter() - started)
            if pending.done():
                break
            time.sleep(0.05)
        return pending.result(timeout=60), latencies


CASES = {
    **{name: (completion(text), {}) for name, text in HOSTILE_CONTENT.items()},
    "a nested http body": (b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", {}),
    "an endless answer": (b"", {"stream_bytes": 300 * 1024 * KB}),
    "a gzip bomb": (gzip.compress(completion("x" * 50 * 1024 * KB)), {"encoding": "gzip"}),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_endpoint_neither_stalls_the_server_nor_gives_a_500(server, hostile, case: str) -> None:
    body, options = CASES[case]
    hostile.answer(body, **options)
    request = {
        "query": "what did we decide about the launch",
        "group_id": "g1",
        "llm_config": {"base_url": hostile.base_url, "api_key": "tenant-key", "model": "m"},
    }
    response, latencies = liveness_during(server, lambda: httpx.post(server.base_url + URL, json=request, timeout=60))
    assert response.status_code == 200, response.text
    metadata = response.json()["result"]["metadata"]
    assert metadata["retrieval_mode"] == "agentic_fallback" and metadata["fallback_reason"], metadata
    assert hostile.requests, "the tenant's endpoint was asked"
    assert max(latencies) < 2.0, f"GET /health/live took up to {max(latencies):.2f}s while the answer was read"
    if options.get("stream_bytes"):
        assert hostile.answered.wait(10) and hostile.sent < 16 * 1024 * KB, hostile.sent


# --- fields of the answer, and what a request may ask of the server's key ---------------------------------
@pytest.fixture
def api(settings: Settings, database_url: str) -> Iterator[TestClient]:
    update = {"llm_max_retries": 0, "llm_timeout_s": 5.0, "llm_allow_private_urls": True}
    with TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False) as client:
        yield client


def ask(api: TestClient, fake: FakeLLM, **llm_config) -> httpx.Response:
    llm_config = llm_config or {"api_key": "k", "base_url": fake.base_url, "model": "m"}
    return api.post(URL, json={"query": "launch plans", "group_id": "g1", "llm_config": llm_config})


def test_refined_queries_are_capped_in_count_and_length(api, fake_llm: FakeLLM) -> None:
    fake_llm.on(
        "is_sufficient",
        {
            "is_sufficient": False,
            "reasoning": "r" * 20_000,
            "missing_information": "m" * 20_000,
            "refined_queries": [f"query {n} " + "word " * 150 for n in range(100)],  # ~120 KB in all
        },
    )
    response = ask(api, fake_llm)
    assert response.status_code == 200, response.text
    metadata = response.json()["result"]["metadata"]
    assert metadata["retrieval_mode"] == "agentic" and metadata["is_multi_round"] is True
    assert [q.split()[:2] for q in metadata["refined_queries"]] == [["query", "0"], ["query", "1"], ["query", "2"]]
    assert all(len(q) <= 500 for q in metadata["refined_queries"])
    assert len(metadata["reasoning"]) == len(metadata["missing_information"]) == 2000


def test_a_model_alone_does_not_spend_the_server_key_unless_allowed(settings, database_url, fake_llm) -> None:
    fake_llm.on("is_sufficient", {"is_sufficient": True, "reasoning": "ok", "refined_queries": []})
    server = {
        "llm_api_key": "server-key",
        "llm_base_url": fake_llm.base_url,
        "llm_model": "cheap",
        "llm_max_retries": 0,
    }
    with TestClient(create_app(settings.model_copy(update=server)), raise_server_exceptions=False) as client:
        refused = client.post(URL, json={"query": "q", "group_id": "g1", "llm_config": {"model": "costly"}})
        assert refused.status_code == 400 and refused.json()["code"] == "INVALID_PARAMETER"
        assert refused.json()["message"].startswith("Invalid field llm_config.model:")
        assert fake_llm.chat_requests == []
        for accepted in ({"model": "cheap"}, {"model": "costly", "api_key": "tenant-key"}):
            response = client.post(URL, json={"query": "q", "group_id": "g1", "llm_config": accepted})
            assert response.status_code == 200, response.text
    assert [(r.body["model"], r.headers["authorization"]) for r in fake_llm.chat_requests] == [
        ("cheap", "Bearer server-key"),
        ("costly", "Bearer tenant-key"),
    ]
    fake_llm.requests.clear()
    allowed = settings.model_copy(update={**server, "llm_allow_client_model": True})
    with TestClient(create_app(allowed), raise_server_exceptions=False) as client:
        response = client.post(URL, json={"query": "q", "group_id": "g1", "llm_config": {"model": "costly"}})
        assert response.status_code == 200, response.text
    assert [r.body["model"] for r in fake_llm.chat_requests] == ["costly"]


@pytest.mark.parametrize("base_url", ["http://xn--a.com/v1", "http://xn--zz.example/v1", "https://xn--.com/"])
def test_an_invalid_punycode_host_is_a_400_naming_the_field(api, fake_llm, base_url: str) -> None:
    response = ask(api, fake_llm, base_url=base_url, api_key="k")
    assert response.status_code == 400, response.text
    assert response.json()["message"].startswith("Invalid field llm_config.base_url:")


def test_an_llm_reranker_answer_with_odd_indexes_is_skipped_not_a_500(settings, database_url, fake_llm) -> None:
    from tests.retrieval_support import memory, write

    update = {"rerank_provider": "llm", "llm_max_retries": 0, "llm_allow_private_urls": True}
    with TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False) as client:
        embedder = client.app.state.runtime.embedder
        text = "The launch moved to March"
        write(database_url, [memory(text, embedder.embed_sync([text])[0], group_id="g1")])
        odd = [{"index": "first", "score": 1}, {"index": 1e400, "score": 1}, {"index": [1]}, {"index": 1, "score": "x"}]
        fake_llm.on("Rate how relevant", {"scores": odd})
        fake_llm.on("is_sufficient", {"is_sufficient": True, "reasoning": "ok", "refined_queries": []})
        response = ask(client, fake_llm)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["metadata"]["retrieval_mode"] == "agentic" and result["count"] == 1
    assert result["memories"][0]["score"] == 0.0  # no usable score: the lowest
