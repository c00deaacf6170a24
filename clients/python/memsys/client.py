"""The typed Python client of memsys's v3 API: ``Memsys`` (sync) and ``AsyncMemsys`` (asyncio), on httpx.

    from memsys.client import Memsys

    with Memsys(api_key="msk_…") as memsys:          # or MEMSYS_API_KEY; base_url defaults to 127.0.0.1:1995
        memsys.memorize(message_id="m1", sender="alice", content="I am vegetarian", create_time=now, group_id="g")
        found = memsys.retrieve_lightweight(query="What does Alice eat?", group_id="g")

Each operation takes its request as keyword arguments, a dict or the request model (``memsys.models``) and
returns the result model. Refusals raise ``memsys.errors.MemsysError`` subclasses carrying the envelope's
``code``; 429, 503 and connection failures are retried (``memsys.retries``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import httpx
from tqdm import tqdm

from memsys import batch, models, operations
from memsys.errors import ConnectionFailed, MemsysError, RateLimited, RequestTimeout, error_from_response
from memsys.operations import Call, request_of
from memsys.retries import RetryPolicy

DEFAULT_BASE_URL = "http://127.0.0.1:1995"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
Batch = Iterable[models.MemorizeRequest | dict[str, Any]]
Retried = Callable[[MemsysError | httpx.TransportError], None]


def _headers(api_key: str | None) -> dict[str, str]:
    key = api_key if api_key is not None else os.environ.get("MEMSYS_API_KEY")
    headers = {"User-Agent": "memsys-python-client", "Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _base_url(base_url: str | None) -> str:
    return (base_url or os.environ.get("MEMSYS_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def _answer(call: Call, response: httpx.Response) -> Any:
    if not response.is_success:
        raise error_from_response(response)
    return call.parse(response.json()["result"])


def _no_answer(exc: httpx.TransportError) -> MemsysError:
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return RequestTimeout(f"no answer within the client's timeout ({exc!r})", code="CLIENT_TIMEOUT")
    return ConnectionFailed(f"memsys could not be reached: {exc!r}", code="CONNECTION_FAILED")


def _requests(messages: Batch) -> list[models.MemorizeRequest]:
    """All validated before the first is sent: a malformed message fails the batch before anything is stored."""
    return [request_of(models.MemorizeRequest, message, {}) for message in messages]


def _progress(total: int, progress: bool) -> tqdm:
    return tqdm(total=total, desc="memorize", unit=" msg", disable=not progress)


class Memsys:
    """The sync client. Thread-safe: one instance may serve many threads (``memorize_conversation`` does)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: RetryPolicy | int = RetryPolicy(),
        http_client: httpx.Client | None = None,
    ) -> None:
        """``base_url``: else ``MEMSYS_BASE_URL``, else http://127.0.0.1:1995. ``api_key``: else
        ``MEMSYS_API_KEY``; none for a server without keys. ``retries``: a policy, or the number of retries.
        ``http_client``: your own httpx.Client (proxies, TLS), used as given."""
        self.retries = RetryPolicy(max_retries=retries) if isinstance(retries, int) else retries
        self._http = http_client or httpx.Client(timeout=timeout)
        self._base_url = _base_url(base_url)
        self._headers = _headers(api_key)

    def __enter__(self) -> Memsys:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call) -> Any:
        """One call, retried as ``self.retries`` says; its result, or a typed error."""
        return self._send(call, self.retries)

    def _send(self, call: Call, retries: RetryPolicy, retried: Retried | None = None) -> Any:
        """``send`` with ``retries``; ``retried`` is told of each failed try that will be made again."""
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method, self._base_url + call.path, json=call.json, params=call.params, headers=self._headers
                )
                return _answer(call, response)
            except (MemsysError, httpx.TransportError) as exc:
                if not retries.should_retry(attempt, exc):
                    if isinstance(exc, httpx.TransportError):
                        raise _no_answer(exc) from exc
                    raise
                if retried is not None:
                    retried(exc)
                time.sleep(retries.delay_s(attempt, exc))
                attempt += 1

    def memorize(self, request: models.MemorizeRequest | dict | None = None, **fields: Any) -> models.MemorizeResult:
        """Store one message (``message_id``, ``sender``, ``content``, ``create_time``; ``group_id`` for a group)."""
        return self.send(operations.memorize(request_of(models.MemorizeRequest, request, fields)))

    def flush(self, request: models.FlushRequest | dict | None = None, **fields: Any) -> models.MemorizeResult:
        """Form a conversation's open messages into memories now (``group_id``, or ``sender`` of a personal one)."""
        return self.send(operations.flush(request_of(models.FlushRequest, request, fields)))

    def retrieve_lightweight(
        self, request: models.RetrieveLightweightRequest | dict | None = None, **fields: Any
    ) -> models.RetrieveLightweightResult:
        """Hybrid retrieval (vector + BM25 fused by RRF, or one leg: ``retrieval_mode``)."""
        call = operations.retrieve_lightweight(request_of(models.RetrieveLightweightRequest, request, fields))
        return self.send(call)

    def retrieve_agentic(
        self, request: models.AgenticRequest | dict | None = None, **fields: Any
    ) -> models.AgenticResult:
        """LLM-guided multi-round retrieval (the server's LLM, or ``llm_config``)."""
        return self.send(operations.retrieve_agentic(request_of(models.AgenticRequest, request, fields)))

    def context(self, request: models.ContextRequest | dict | None = None, **fields: Any) -> models.ContextResult:
        """The messages to send to an LLM for the user's ``query``, within token budgets."""
        return self.send(operations.context(request_of(models.ContextRequest, request, fields)))

    def agent(self, request: models.AgentRequest | dict | None = None, **fields: Any) -> models.AgentResult:
        """The server's ReAct agent answers ``messages`` from the memories."""
        return self.send(operations.agent(request_of(models.AgentRequest, request, fields)))

    def save_conversation_meta(
        self, request: models.ConversationMetaRequest | dict | None = None, **fields: Any
    ) -> models.ConversationMetaSaved:
        return self.send(operations.save_conversation_meta(request_of(models.ConversationMetaRequest, request, fields)))

    def get_conversation_meta(self, group_id: str) -> models.ConversationMeta:
        """A group's metadata; ``NotFound`` if none was saved."""
        return self.send(operations.get_conversation_meta(group_id))

    def save_instructions(self, request: models.InstructionsIn | dict | None = None, **fields: Any) -> dict[str, Any]:
        """Extraction instructions for the LLM (and profile fields of your own) for an app and project."""
        return self.send(operations.save_instructions(request_of(models.InstructionsIn, request, fields)))

    def list_instructions(self) -> dict[str, Any]:
        return self.send(operations.list_instructions())

    def delete_instructions(self, app_id: str = "*", project_id: str = "*") -> dict[str, Any]:
        return self.send(operations.delete_instructions(app_id, project_id))

    def list_memories(self, **filters: Any) -> models.MemoryPage:
        """One page, newest first: ``user_id``, ``group_id``, ``memory_type``, ``start_time``, ``end_time``,
        ``filters`` (the filter language, a dict), ``limit`` (≤ 200), ``cursor`` (the previous page's
        ``next_cursor``)."""
        return self.send(operations.list_memories(**filters))

    def iter_memories(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every memory the filters select, page after page."""
        while True:
            page = self.list_memories(**filters)
            yield from page.memories
            if page.next_cursor is None:
                return
            filters["cursor"] = page.next_cursor

    def get_memory(self, memory_id: str) -> models.MemoryDetail:
        """One memory with its status, validity, sources and what superseded it."""
        return self.send(operations.get_memory(memory_id))

    def edit_memory(
        self, memory_id: str, request: models.MemoryPatch | dict | None = None, **fields: Any
    ) -> models.MemoryDetail:
        """Correct ``content``, ``valid_from``, ``valid_to``, ``expires_at``, or set ``status`` back to current."""
        return self.send(operations.edit_memory(memory_id, request_of(models.MemoryPatch, request, fields)))

    def delete_memory(self, memory_id: str) -> dict[str, Any]:
        """Delete a memory (restorable until the purge)."""
        return self.send(operations.delete_memory(memory_id))

    def restore_memory(self, memory_id: str) -> models.MemoryDetail:
        """Bring back a deleted, superseded or expired memory."""
        return self.send(operations.restore_memory(memory_id))

    def memory_history(self, memory_id: str) -> models.MemoryHistory:
        """A memory's events, oldest first."""
        return self.send(operations.memory_history(memory_id))

    def forget_user(self, user_id: str) -> dict[str, Any]:
        """Delete a user's messages, memories and profiles (any id, ``/`` included); what was deleted."""
        return self.send(operations.forget_user(user_id))

    def forget_group(self, group_id: str) -> dict[str, Any]:
        """Delete a group's messages, memories, profiles and metadata."""
        return self.send(operations.forget_group(group_id))

    def export_user(self, user_id: str) -> dict[str, Any]:
        """Everything held about a user (``memsys.user-export`` v1): messages, memories, profiles."""
        return self.send(operations.export_user(user_id))

    def memorize_conversation(
        self, messages: Batch, *, concurrency: int = batch.DEFAULT_CONCURRENCY, progress: bool = True
    ) -> list[models.MemorizeResult]:
        """Memorize many messages, at most ``concurrency`` at a time, with a progress bar; the results in their order.

        The server orders a conversation by ``create_time``, so sending in parallel keeps its order. A 429 (the
        key over its share of the server) halves the requests in flight for a while and the message is sent again
        after the server's Retry-After (``memsys.batch``); the bar counts the retries. The default 4 is half a key's
        share of a default server (8). On the first error that is not retried the messages not sent yet are
        dropped and the error raised; calling again with the same messages is safe (those stored answer
        ``duplicate``)."""
        requests = _requests(messages)
        results: list[models.MemorizeResult | None] = [None] * len(requests)
        with _progress(len(requests), progress) as bar, ThreadPoolExecutor(max_workers=concurrency) as pool:
            gate = batch.ThreadGate(batch.Pace(concurrency, bar))
            futures = {pool.submit(self._memorize_paced, request, gate): n for n, request in enumerate(requests)}
            try:
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return results  # type: ignore[return-value]

    def _memorize_paced(self, request: models.MemorizeRequest, gate: batch.ThreadGate) -> models.MemorizeResult:
        """One message of a batch, sent within the gate's window; after a 429, again after the Retry-After."""
        retries = batch.BatchRetries.of(self.retries)
        for attempt in itertools.count():
            with gate.slot():
                try:
                    result = self._send(operations.memorize(request), retries, gate.refused)
                except RateLimited as exc:
                    refused = exc
                else:
                    gate.answered()
                    return result
            if not self.retries.should_retry(attempt, refused):
                raise refused
            gate.refused(refused)
            time.sleep(self.retries.delay_s(attempt, refused))
        raise AssertionError("unreachable")


class AsyncMemsys:
    """The asyncio client: the same operations as ``Memsys``, awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: RetryPolicy | int = RetryPolicy(),
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.retries = RetryPolicy(max_retries=retries) if isinstance(retries, int) else retries
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._base_url = _base_url(base_url)
        self._headers = _headers(api_key)

    async def __aenter__(self) -> AsyncMemsys:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call) -> Any:
        return await self._send(call, self.retries)

    async def _send(self, call: Call, retries: RetryPolicy, retried: Retried | None = None) -> Any:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method, self._base_url + call.path, json=call.json, params=call.params, headers=self._headers
                )
                return _answer(call, response)
            except (MemsysError, httpx.TransportError) as exc:
                if not retries.should_retry(attempt, exc):
                    if isinstance(exc, httpx.TransportError):
                        raise _no_answer(exc) from exc
                    raise
                if retried is not None:
                    retried(exc)
                await asyncio.sleep(retries.delay_s(attempt, exc))
                attempt += 1

    async def memorize(
        self, request: models.MemorizeRequest | dict | None = None, **fields: Any
    ) -> models.MemorizeResult:
        return await self.send(operations.memorize(request_of(models.MemorizeRequest, request, fields)))

    async def flush(self, request: models.FlushRequest | dict | None = None, **fields: Any) -> models.MemorizeResult:
        return await self.send(operations.flush(request_of(models.FlushRequest, request, fields)))

    async def retrieve_lightweight(
        self, request: models.RetrieveLightweightRequest | dict | None = None, **fields: Any
    ) -> models.RetrieveLightweightResult:
        call = operations.retrieve_lightweight(request_of(models.RetrieveLightweightRequest, request, fields))
        return await self.send(call)

    async def retrieve_agentic(
        self, request: models.AgenticRequest | dict | None = None, **fields: Any
    ) -> models.AgenticResult:
        return await self.send(operations.retrieve_agentic(request_of(models.AgenticRequest, request, fields)))

    async def context(self, request: models.ContextRequest | dict | None = None, **fields: Any) -> models.ContextResult:
        return await self.send(operations.context(request_of(models.ContextRequest, request, fields)))

    async def agent(self, request: models.AgentRequest | dict | None = None, **fields: Any) -> models.AgentResult:
        return await self.send(operations.agent(request_of(models.AgentRequest, request, fields)))

    async def save_conversation_meta(
        self, request: models.ConversationMetaRequest | dict | None = None, **fields: Any
    ) -> models.ConversationMetaSaved:
        call = operations.save_conversation_meta(request_of(models.ConversationMetaRequest, request, fields))
        return await self.send(call)

    async def get_conversation_meta(self, group_id: str) -> models.ConversationMeta:
        return await self.send(operations.get_conversation_meta(group_id))

    async def save_instructions(
        self, request: models.InstructionsIn | dict | None = None, **fields: Any
    ) -> dict[str, Any]:
        return await self.send(operations.save_instructions(request_of(models.InstructionsIn, request, fields)))

    async def list_instructions(self) -> dict[str, Any]:
        return await self.send(operations.list_instructions())

    async def delete_instructions(self, app_id: str = "*", project_id: str = "*") -> dict[str, Any]:
        return await self.send(operations.delete_instructions(app_id, project_id))

    async def list_memories(self, **filters: Any) -> models.MemoryPage:
        return await self.send(operations.list_memories(**filters))

    async def iter_memories(self, **filters: Any) -> AsyncIterator[dict[str, Any]]:
        while True:
            page = await self.list_memories(**filters)
            for memory in page.memories:
                yield memory
            if page.next_cursor is None:
                return
            filters["cursor"] = page.next_cursor

    async def get_memory(self, memory_id: str) -> models.MemoryDetail:
        return await self.send(operations.get_memory(memory_id))

    async def edit_memory(
        self, memory_id: str, request: models.MemoryPatch | dict | None = None, **fields: Any
    ) -> models.MemoryDetail:
        return await self.send(operations.edit_memory(memory_id, request_of(models.MemoryPatch, request, fields)))

    async def delete_memory(self, memory_id: str) -> dict[str, Any]:
        return await self.send(operations.delete_memory(memory_id))

    async def restore_memory(self, memory_id: str) -> models.MemoryDetail:
        return await self.send(operations.restore_memory(memory_id))

    async def memory_history(self, memory_id: str) -> models.MemoryHistory:
        return await self.send(operations.memory_history(memory_id))

    async def forget_user(self, user_id: str) -> dict[str, Any]:
        return await self.send(operations.forget_user(user_id))

    async def forget_group(self, group_id: str) -> dict[str, Any]:
        return await self.send(operations.forget_group(group_id))

    async def export_user(self, user_id: str) -> dict[str, Any]:
        return await self.send(operations.export_user(user_id))

    async def memorize_conversation(
        self, messages: Batch, *, concurrency: int = batch.DEFAULT_CONCURRENCY, progress: bool = True
    ) -> list[models.MemorizeResult]:
        """As ``Memsys.memorize_conversation``: at most ``concurrency`` requests in flight, fewer after a 429."""
        requests = _requests(messages)
        results: list[models.MemorizeResult | None] = [None] * len(requests)

        async def one(n: int, request: models.MemorizeRequest, gate: batch.TaskGate, bar: tqdm) -> None:
            results[n] = await self._memorize_paced(request, gate)
            bar.update()

        with _progress(len(requests), progress) as bar:
            gate = batch.TaskGate(batch.Pace(concurrency, bar))
            try:
                async with asyncio.TaskGroup() as group:
                    for n, request in enumerate(requests):
                        group.create_task(one(n, request, gate, bar))
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None
        return results  # type: ignore[return-value]

    async def _memorize_paced(self, request: models.MemorizeRequest, gate: batch.TaskGate) -> models.MemorizeResult:
        retries = batch.BatchRetries.of(self.retries)
        for attempt in itertools.count():
            async with gate.slot():
                try:
                    result = await self._send(operations.memorize(request), retries, gate.refused)
                except RateLimited as exc:
                    refused = exc
                else:
                    await gate.answered()
                    return result
            if not self.retries.should_retry(attempt, refused):
                raise refused
            gate.refused(refused)
            await asyncio.sleep(self.retries.delay_s(attempt, refused))
        raise AssertionError("unreachable")
