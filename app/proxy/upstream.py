"""The proxy's upstream: the server's own OpenAI-compatible endpoint (``MEMSYS_LLM_BASE_URL``, ``MEMSYS_LLM_API_KEY``).

Only the JSON body comes from the client. The URL, the headers and the key are the server's: a client's
headers (its memsys key among them) are not forwarded and nothing in its body names an address, so the
server's key goes to the configured URL and nowhere else. Its answer is untrusted like every LLM answer: read
up to ``MEMSYS_PROXY_MAX_ANSWER_BYTES`` (``app.providers.llm_http``), a whole stream included.

Failures become two errors an OpenAI client knows what to do with: ``UpstreamUnavailable`` (503: not reached,
no answer in time, rate-limited; worth retrying) and ``UpstreamError`` (502: it answered with an error or
with something that is not an answer). An upstream's own error message is passed on for a refused request
(400, 404, 422: the client's request is what it refused), never for a refused key: OpenAI quotes part of
the key in that message.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from app.errors import MemsysError, ServiceUnavailable
from app.observability import tracing
from app.providers.llm_http import UnreadableAnswer, answer_capped_client
from app.settings import Settings

MAX_QUOTED_CHARS = 300
"""Of an upstream's error message, at most this much is passed on."""


class UpstreamError(MemsysError):
    """The upstream LLM answered with an error, or with something that is not a chat completion (502)."""

    code = "UPSTREAM_ERROR"
    status_code = 502

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry
        """Whether an OpenAI client should retry (``x-should-retry``, which both SDKs obey)."""


class UpstreamUnavailable(ServiceUnavailable):
    """The upstream LLM was not reached, did not answer in time, or is rate-limiting (503); retry."""

    retry = True


def chat_url(settings: Settings) -> str:
    return settings.llm_base_url.rstrip("/") + "/chat/completions"


@asynccontextmanager
async def opened(settings: Settings, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
    """The upstream's answer to ``body``, status 200, its body not yet read (``read`` or ``chunks``)."""
    client = answer_capped_client(settings.proxy_max_answer_bytes, settings.llm_timeout_s, None)
    traced = tracing.span("memsys.llm.chat", **{"gen_ai.request.model": body.get("model"), "memsys.proxy": True})
    try:
        request = client.build_request(
            "POST", chat_url(settings), json=body, headers={"Authorization": f"Bearer {settings.llm_server_key}"}
        )
        try:
            with traced:
                response = await client.send(request, stream=True)
        except (httpx.HTTPError, UnreadableAnswer) as exc:
            raise _failure(exc, settings) from exc
        try:
            if response.status_code != 200:
                raise await _refusal(response, settings)
            yield response
        finally:
            await response.aclose()
    finally:
        await client.aclose()


async def read(response: httpx.Response, settings: Settings) -> bytes:
    try:
        return await response.aread()
    except (httpx.HTTPError, UnreadableAnswer) as exc:
        raise _failure(exc, settings) from exc


async def chunks(response: httpx.Response, settings: Settings) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except (httpx.HTTPError, UnreadableAnswer) as exc:
        raise _failure(exc, settings) from exc


def _failure(exc: Exception, settings: Settings) -> MemsysError:
    if isinstance(exc, UnreadableAnswer):
        cap = str(exc).replace("MEMSYS_LLM_MAX_ANSWER_BYTES", "MEMSYS_PROXY_MAX_ANSWER_BYTES")
        return UpstreamError(f"The upstream LLM's answer {cap}")
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamUnavailable(f"The upstream LLM did not answer within {settings.llm_timeout_s:g}s")
    if isinstance(exc, httpx.ConnectError):
        return UpstreamUnavailable("The upstream LLM could not be reached")
    return UpstreamError("The upstream LLM's connection broke off", retry=True)


async def _refusal(response: httpx.Response, settings: Settings) -> MemsysError:
    status = response.status_code
    if status in (401, 403):
        return UpstreamError(f"The upstream LLM refused the server's key (HTTP {status})")
    if status == 429:
        return UpstreamUnavailable("The upstream LLM is rate-limiting (HTTP 429); retry later")
    if status >= 500:
        return UpstreamError(f"The upstream LLM failed (HTTP {status})", retry=True)
    try:
        quoted = _error_message(await response.aread(), settings)
    except (httpx.HTTPError, UnreadableAnswer):
        quoted = ""
    return UpstreamError(f"The upstream LLM refused the request (HTTP {status})" + (f": {quoted}" if quoted else ""))


def _error_message(raw: bytes, settings: Settings) -> str:
    try:
        body = json.loads(raw[:16384])
    except (ValueError, RecursionError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        return ""
    if settings.llm_api_key:
        message = message.replace(settings.llm_api_key, "***")
    return message[:MAX_QUOTED_CHARS]
