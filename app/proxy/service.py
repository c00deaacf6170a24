"""One chat completion through memsys: recall, forward, memorize.

1. **Recall**: the last user message is the query of context assembly (``app.context.service``: retrieved
   knowledge and episode snippets within their budgets) for the request's user (and group). What it finds
   goes to the upstream as one system message, after the client's own leading system messages. The client's
   messages go on as they are: the client owns its conversation.
2. **Forward** to the server's upstream LLM (``app.proxy.upstream``), with the server's model unless
   ``MEMSYS_LLM_ALLOW_CLIENT_MODEL``, and ``max_tokens`` always bounded.
3. **Memorize** the user's message and the answer's text once the answer is complete (a stream: before its
   ``[DONE]``), store-only, as every memorize (workers form memories). An answer that failed or broke off
   memorizes nothing. Ids are derived from the conversation, so a retried request stores nothing twice.

The turn joins the request's group, or without one the user's personal stream; the user's message is the
user's (role ``user``), the answer the assistant's (``MEMSYS_PROXY_ASSISTANT_ID`` / ``…_NAME``, role
``assistant``) in the same conversation. The request's ``user`` says whose memories; it goes on to the upstream
only with ``MEMSYS_PROXY_FORWARD_USER``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from app.context import service as context
from app.context.schemas import ContextRequest, EpisodeSection, SemanticSection
from app.errors import Forbidden, InvalidParameter, MemsysError, PayloadTooLarge
from app.formation.streams import Stream
from app.memorize import service as memorize
from app.memorize.schemas import MemorizeRequest
from app.proxy import sse, upstream
from app.proxy.schemas import MEMORY_ROLES, ChatCompletionRequest
from app.runtime import Runtime
from app.settings import Settings
from app.text.cpu import run_off_loop
from app.validation import check_identifier

log = logging.getLogger(__name__)

MEMORY_PREAMBLE = (
    "Memories of this user from earlier conversations (memsys). Use them when they are relevant; do not "
    "mention them otherwise.\n\n"
)
USER_HEADER = "X-Memsys-User"
GROUP_HEADER = "X-Memsys-Group"
_CONTEXT_MAX_TOKENS = 10_000_000
"""The sections' own budgets bound the context; the user's message is not cut (it goes as the client sent it)."""


@dataclass(frozen=True)
class Turn:
    """Whose turn it is, and the user's message it starts with."""

    user_id: str
    group_id: str | None
    message_id: str
    text: str
    at: datetime


@dataclass
class Answer:
    """The upstream's answer as it sent it: a whole completion (``body``), or server-sent ``events``."""

    body: bytes | None = None
    events: AsyncIterator[bytes] | None = None


async def chat_completion(
    runtime: Runtime, request: ChatCompletionRequest, *, header_user: str | None, header_group: str | None
) -> Answer:
    settings = runtime.settings
    if not settings.proxy_enabled:
        raise Forbidden("The OpenAI-compatible proxy is off on this server (MEMSYS_PROXY_ENABLED)")
    if not settings.llm_server_key:  # the operator's setting, not an outage: an OpenAI client must not retry it
        raise Forbidden(
            "The OpenAI-compatible proxy has no upstream LLM here "
            "(MEMSYS_LLM_API_KEY is not set and MEMSYS_LLM_BASE_URL is not a local server)"
        )
    turn = _turn(settings, request, header_user, header_group)
    body = _upstream_body(settings, request, await _memory_message(runtime, turn))
    if request.stream:
        stack = AsyncExitStack()
        response = await stack.enter_async_context(upstream.opened(settings, body))
        return Answer(events=_relay(runtime, turn, response, stack))
    async with upstream.opened(settings, body) as response:
        raw = await upstream.read(response, settings)
    await _memorize(runtime, turn, await run_off_loop(_answer_text, raw))
    return Answer(body=raw)


def _turn(
    settings: Settings, request: ChatCompletionRequest, header_user: str | None, header_group: str | None
) -> Turn:
    if header_user is not None:
        user = check_identifier(USER_HEADER, header_user)
    elif request.user is not None:
        user = request.user
    else:
        raise InvalidParameter(f"Missing required field: user (or the {USER_HEADER} header)")
    if not user.strip():
        raise InvalidParameter(f"Invalid field user: must not be blank ({USER_HEADER} or the body's user)")
    group = check_identifier(GROUP_HEADER, header_group) if header_group else None
    if len(request.messages) > settings.proxy_max_messages:
        raise InvalidParameter(
            f"Invalid field messages: {len(request.messages)} messages; the limit is {settings.proxy_max_messages} "
            "(MEMSYS_PROXY_MAX_MESSAGES)"
        )
    for field in ("max_tokens", "max_completion_tokens"):
        asked = getattr(request, field)
        if asked is not None and asked > settings.llm_max_tokens:
            raise InvalidParameter(
                f"Invalid field {field}: {asked}; the limit is {settings.llm_max_tokens} (MEMSYS_LLM_MAX_TOKENS)"
            )
    last = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=None)
    if last is None:
        raise InvalidParameter("Invalid field messages: no user message (its text is what memsys recalls for)")
    text = request.messages[last].text()
    if not text.strip():
        raise InvalidParameter(f"Invalid field messages[{last}].content: the user's message has no text")
    size = len(text.encode("utf-8"))
    if size > settings.max_content_bytes:
        raise PayloadTooLarge(
            f"Field messages[{last}].content is {size} bytes; the limit is {settings.max_content_bytes} "
            "(MEMSYS_MAX_CONTENT_BYTES)"
        )
    conversation = [m.model_dump(exclude_unset=True) for m in request.messages[: last + 1]]
    return Turn(user, group, _message_id(user, group, conversation), text, datetime.now(UTC))


def _message_id(*parts: Any) -> str:
    """The same conversation so far (a retried request) gives the same id: memorize stores it once."""
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str).encode())
    return "proxy-" + digest.hexdigest()[:40]


async def _memory_message(runtime: Runtime, turn: Turn) -> dict[str, str] | None:
    """What memsys recalls for the turn, as one system message; None when nothing was found."""
    request = ContextRequest(
        query=turn.text[: runtime.settings.max_query_chars],
        user_id=turn.user_id,
        group_id=turn.group_id,
        semantic=SemanticSection(),
        episodes=EpisodeSection(),
        history_max_tokens=0,
        context_max_tokens=_CONTEXT_MAX_TOKENS,
    )
    _, assembled = await context.assemble(runtime, request)
    sections = [m["content"] for m in assembled.messages if m["role"] == "system"]
    return {"role": "system", "content": MEMORY_PREAMBLE + "\n".join(sections)} if sections else None


def _upstream_body(settings: Settings, request: ChatCompletionRequest, memory: dict[str, str] | None) -> dict[str, Any]:
    body = request.model_dump(exclude_unset=True)
    if not settings.proxy_forward_user:
        body.pop("user", None)  # whose memories: memsys's to know, not the upstream's
    messages = body["messages"]
    if memory is not None:
        lead = next((i for i, m in enumerate(messages) if m["role"] not in MEMORY_ROLES), len(messages))
        messages.insert(lead, memory)
    body["model"] = request.model if settings.llm_allow_client_model else settings.llm_model
    if request.max_tokens is None and request.max_completion_tokens is None:
        # Always bounded: a server such as llama.cpp's generates until its context is full without it.
        body["max_tokens"] = settings.llm_max_tokens
    return body


def _answer_text(raw: bytes) -> str:
    """The first choice's text of a chat completion; ``UpstreamError`` when ``raw`` is not one."""
    try:
        completion = json.loads(raw)
        message = completion["choices"][0]["message"]
    except (ValueError, RecursionError, KeyError, IndexError, TypeError) as exc:
        raise upstream.UpstreamError("The upstream LLM's answer is not a chat completion") from exc
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


async def _relay(runtime: Runtime, turn: Turn, response: httpx.Response, stack: AsyncExitStack) -> AsyncIterator[bytes]:
    """The upstream's events as they come; the turn memorized before ``[DONE]``. A failure after the first
    event can only be told in the stream: an error event, which OpenAI's SDKs raise."""
    pieces: list[str] = []
    finished = False
    done: bytes | None = None
    try:
        async for event in sse.events(upstream.chunks(response, runtime.settings)):
            data = sse.data_of(event)
            if data is not None and data.strip() == sse.DONE:
                done = event
                continue
            finished = _collect(data, pieces) or finished
            yield event
    except MemsysError as exc:
        yield sse.error_event(exc.code, str(exc), "upstream_error")
        return
    finally:
        await stack.aclose()
    if not (finished or done):
        yield sse.error_event(
            "UPSTREAM_ERROR", "The upstream LLM's stream ended before its answer did", "upstream_error"
        )
        return
    try:
        await _memorize(runtime, turn, "".join(pieces))
    except Exception as exc:  # the answer is out already: the stream is the only place left to say it
        log.error("The proxy could not memorize a streamed turn", exc_info=exc)
        code = exc.code if isinstance(exc, MemsysError) else "SERVICE_UNAVAILABLE"
        yield sse.error_event(code, "The answer was not memorized; retry the request", "memorize_error")
        return
    if done is not None:
        yield done


def _collect(data: str | None, pieces: list[str]) -> bool:
    """Add the event's text (first choice) to ``pieces``; whether the event finished the answer."""
    if not data:
        return False
    try:
        chunk = json.loads(data)
        choice = chunk["choices"][0] if chunk.get("choices") else {}
    except (ValueError, RecursionError, KeyError, IndexError, TypeError, AttributeError):
        return False  # relayed all the same: the client's SDK judges it
    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
        return False
    delta = choice.get("delta") or {}
    if isinstance(delta, dict) and isinstance(delta.get("content"), str):
        pieces.append(delta["content"])
    return bool(choice.get("finish_reason"))


async def _memorize(runtime: Runtime, turn: Turn, answer: str) -> None:
    """The user's turn and the answer, each under its own speaker, in the user's conversation: the request's group,
    or the user's personal stream (the answer filed there, under the assistant's id, not in a stream of its own)."""
    settings = runtime.settings
    conversation = Stream.of(turn.group_id, turn.user_id)
    await memorize.memorize(
        runtime,
        MemorizeRequest(
            group_id=turn.group_id,
            message_id=turn.message_id,
            create_time=turn.at,
            sender=turn.user_id,
            content=turn.text,
        ),
        stream=conversation,
        role="user",
    )
    if not answer.strip():
        return  # a turn of tool calls only: nothing said to remember
    answer = answer.encode("utf-8")[: settings.max_content_bytes].decode("utf-8", errors="ignore")
    await memorize.memorize(
        runtime,
        MemorizeRequest(
            group_id=turn.group_id,
            message_id=_message_id(turn.message_id, answer),
            create_time=datetime.now(UTC),
            sender=settings.proxy_assistant_id,
            sender_name=settings.proxy_assistant_name,
            content=answer,
        ),
        stream=conversation,
        role="assistant",
    )
