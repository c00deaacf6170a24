"""A small OpenAI-compatible server for tests and benchmarks: the only stand-in for an LLM, embedding or rerank service.

It listens on 127.0.0.1 on a free port (``base_url`` ends in ``/v1``) and serves

* ``POST /v1/chat/completions``: replies are scripted per test, in this order of precedence:
  1. ``queue(*replies)``: consumed one per request, first in first out;
  2. ``on(text, reply)``: the first rule whose ``text`` occurs in the request's messages (system and
     user contents joined) answers, every time it matches;
  3. ``handler``: a function of the request body returning a reply (or None to fall through);
  4. otherwise HTTP 500 "unscripted request", which makes a forgotten script fail loudly.
  A request with ``"stream": true`` gets its content reply as server-sent events, as OpenAI sends them: a
  role chunk, the content in word-sized chunks, a chunk with ``finish_reason`` (and a usage chunk when
  ``stream_options.include_usage``), then ``data: [DONE]``.
* ``POST /v1/embeddings``: deterministic unit vectors (a hash of each text seeds them), ``dimensions``
  from the request or the server (default 384). Identical texts give identical vectors.
* ``POST /v1/rerank`` (the common ``{model, query, documents, top_n}`` → ``{results: [{index,
  relevance_score}]}`` shape): documents scored by the share of query words they contain.

A reply is a ``Reply`` or a shortcut: a ``str`` (the assistant's content as is, e.g. malformed JSON), a
``dict``/``list`` (sent as JSON content). ``Reply(status=500)``, ``Reply(status=401)``,
``Reply(delay=5)`` (to trigger client timeouts) and ``Reply(raw_body="...")`` (a broken HTTP body)
script failures. ``queue(..., path="/v1/embeddings")`` scripts the other endpoints the same way.

Faults for a whole window (the soak benchmark): ``force(reply, path=...)`` answers every request to that
path with ``reply`` (or a function of the body returning one), ahead of any script, until ``force(None)``;
``go_away()`` closes the port (connections are refused) and ``come_back()`` listens on the same port again.

Every request is recorded in ``requests`` (path, JSON body, headers with lower-case names; unless
``record`` is false, as in a long benchmark) so tests can assert what was sent: ``chat_requests``,
``prompts()`` (the joined message texts), ``last_prompt``.

Use the ``fake_llm`` fixture (tests/conftest.py), or ``with FakeLLM() as fake: ...``.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
RERANK = "/v1/rerank"


@dataclass
class Reply:
    content: str | dict | list | None = None
    status: int = 200
    delay: float = 0.0
    raw_body: str | None = None
    json_body: dict | list | None = None
    """A whole response body (for embeddings/rerank replies, or a chat body of an odd shape)."""
    cut_stream: bool = False
    """A streamed reply (``stream: true``) that stops after its first chunk, the connection closed mid-answer."""


@dataclass
class Recorded:
    path: str
    body: Any
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)

    @property
    def prompt(self) -> str:
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        return "\n".join(str(m.get("content", "")) for m in messages)


ReplyLike = Reply | str | dict | list


def _as_reply(value: ReplyLike) -> Reply:
    return value if isinstance(value, Reply) else Reply(content=value)


class FakeLLM:
    def __init__(self, embedding_dimensions: int = 384) -> None:
        self.embedding_dimensions = embedding_dimensions
        self.requests: list[Recorded] = []
        self.record = True
        self.handler: Callable[[dict], ReplyLike | None] | None = None
        self._queues: dict[str, deque[Reply]] = {}
        self._rules: list[tuple[str, Reply]] = []
        self._forced: dict[str, ReplyLike | Callable[[Any], ReplyLike]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = self._listen(0)
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    # --- scripting -------------------------------------------------------------------------------
    def queue(self, *replies: ReplyLike, path: str = CHAT) -> FakeLLM:
        with self._lock:
            self._queues.setdefault(path, deque()).extend(_as_reply(r) for r in replies)
        return self

    def on(self, text: str, reply: ReplyLike) -> FakeLLM:
        """Answer every chat request whose messages contain ``text`` with ``reply``."""
        with self._lock:
            self._rules.append((text, _as_reply(reply)))
        return self

    def force(self, reply: ReplyLike | Callable[[Any], ReplyLike] | None, path: str = CHAT) -> FakeLLM:
        """Answer every request to ``path`` with ``reply`` (or ``reply(body)``) until ``force(None, path)``."""
        with self._lock:
            if reply is None:
                self._forced.pop(path, None)
            else:
                self._forced[path] = reply
        return self

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self._rules.clear()
            self._forced.clear()
            self.handler = None
            self.requests.clear()

    # --- inspection ------------------------------------------------------------------------------
    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in list(self.requests) if r.path == CHAT]

    def prompts(self) -> list[str]:
        return [r.prompt for r in self.chat_requests]

    @property
    def last_prompt(self) -> str:
        return self.chat_requests[-1].prompt

    # --- life cycle ------------------------------------------------------------------------------
    def wait_for_prompt(self, text: str, timeout: float = 30.0) -> None:
        """Until a chat request containing ``text`` has arrived (an AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not any(text in prompt for prompt in self.prompts()):
            assert time.monotonic() < deadline, f"no request to the LLM contained {text!r}"
            time.sleep(0.05)

    def start(self) -> FakeLLM:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def go_away(self) -> None:
        """Close the port: new connections are refused (requests in hand still get their answer)."""
        self._server.shutdown()
        self._server.server_close()

    def come_back(self) -> None:
        """Listen on the same port again, after ``go_away``."""
        self._server = self._listen(self.port)
        self.start()

    def _listen(self, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        server.daemon_threads = True
        return server

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- answering -------------------------------------------------------------------------------
    def _choose(self, path: str, body: Any) -> Reply:
        with self._lock:
            forced = self._forced.get(path)
        if forced is not None:
            return _as_reply(forced(body) if callable(forced) else forced)
        with self._lock:
            queued = self._queues.get(path)
            if queued:
                return queued.popleft()
            if path == CHAT:
                prompt = Recorded(path, body, {}).prompt
                for text, reply in self._rules:
                    if text in prompt:
                        return reply
        if path == CHAT and self.handler is not None:
            chosen = self.handler(body)
            if chosen is not None:
                return _as_reply(chosen)
        if path == EMBEDDINGS:
            return Reply(json_body=self._embeddings(body))
        if path == RERANK:
            return Reply(json_body=_rerank(body))
        return Reply(status=500, json_body={"error": {"message": "unscripted request", "type": "server_error"}})

    def _embeddings(self, body: dict) -> dict:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        dims = int(body.get("dimensions") or self.embedding_dimensions)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dims)} for i, t in enumerate(texts)]
        return {"object": "list", "data": data, "model": body.get("model", "fake"), "usage": _usage()}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = raw.decode(errors="replace")
                path = self.path.split("?")[0]
                if fake.record:
                    fake.requests.append(Recorded(path, body, {k.lower(): v for k, v in self.headers.items()}))
                reply = fake._choose(path, body)
                if reply.delay and fake._stopping.wait(reply.delay):
                    return
                if reply.raw_body is not None:
                    payload = reply.raw_body.encode()
                elif reply.json_body is not None:
                    payload = json.dumps(reply.json_body).encode()
                elif reply.status >= 400:
                    payload = json.dumps({"error": {"message": f"scripted {reply.status}", "type": "error"}}).encode()
                elif isinstance(body, dict) and body.get("stream") and path == CHAT:
                    self._stream(body, reply)
                    return
                else:
                    payload = json.dumps(_completion(body, reply.content)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout it was meant to hit)

            def _stream(self, body: dict, reply: Reply) -> None:
                events = _stream_events(body, reply.content)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()  # no Content-Length: the stream ends when the connection closes
                    for event in events[:2] if reply.cut_stream else events:
                        self.wfile.write(event)
                        self.wfile.flush()
                    self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def _stream_events(request: dict, content: str | dict | list | None) -> list[bytes]:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = request.get("model", "fake")

    def chunk(delta: dict, finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + json.dumps({**base, "choices": [choice], **extra}).encode() + b"\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": word}) for word in re.findall(r"\S+\s*|\s+", text)]
    events.append(chunk({}, "stop"))
    if (request.get("stream_options") or {}).get("include_usage"):
        usage = {**base, "choices": [], "usage": _usage()}
        events.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


def _completion(request: dict, content: str | dict | list | None) -> dict:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake") if isinstance(request, dict) else "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": _usage(),
    }


def _usage() -> dict:
    return {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def fake_vector(text: str, dimensions: int = 384) -> list[float]:
    """A deterministic unit vector for ``text``."""
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    vector = [rng.gauss(0, 1) for _ in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


_WORDS = re.compile(r"\w+", re.UNICODE)


def _rerank(body: dict) -> dict:
    query = set(_WORDS.findall(str(body.get("query", "")).lower()))
    documents = body.get("documents", [])
    texts = [d if isinstance(d, str) else str(d.get("text", "")) for d in documents]
    scores = [len(query & set(_WORDS.findall(t.lower()))) / (len(query) or 1) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
    top_n = body.get("top_n") or len(order)
    return {"results": [{"index": i, "relevance_score": round(scores[i], 6)} for i in order[:top_n]]}


def tool_calls(*calls: tuple[str, dict | str]) -> Reply:
    """An assistant turn that calls tools (OpenAI function calling): ``(name, arguments)`` each, arguments a
    dict (sent as JSON) or a raw string (e.g. malformed JSON)."""
    return Reply(
        json_body={
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{i}",
                                "type": "function",
                                "function": {
                                    "name": name,
                                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                                },
                            }
                            for i, (name, arguments) in enumerate(calls)
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )
