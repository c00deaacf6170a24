"""A client for any OpenAI-compatible chat endpoint (OpenRouter, OpenAI, vLLM, Ollama...), JSON out.

``LLMClient.complete_json`` sends chat messages and returns the reply parsed as JSON, however the model
wrapped it (code fences, prose around it, ``<think>`` blocks, trailing commas). Every answer is untrusted: it
is read only up to ``MEMSYS_LLM_MAX_ANSWER_BYTES`` (``llm_http``) and parsed off the event loop in linear
time, no deeper than ``llm_json.MAX_DEPTH``; anything else is an ``LLMBadOutput``. Transient failures
(timeouts, connection errors, 429, 5xx, unparsable output) are retried with exponential backoff; the
caller gets a typed ``LLMError`` when every attempt failed.

A caller may override the server's key, URL or model per call (``LLMConfig``): agentic retrieval
passes a request's ``llm_config``. Such a key is used for that call only: never logged, never stored.
The server's key goes only to the server's URL: a config naming its own URL brings its own key, and a
client's URL is reached only at the address checked for it (``app.providers.llm_urls``).

Structured output (``MEMSYS_LLM_STRUCTURED_OUTPUT``): a call that expects JSON sends ``response_format``, a
JSON schema when the caller gives one (llama.cpp, vLLM, Ollama and OpenAI then constrain the model's tokens to
it), else JSON mode (with the schema in llama-cpp-python's ``schema`` field). ``auto`` learns per endpoint what
it takes: an endpoint that answers a call carrying the schema with an error status before it ever took one is
asked with JSON mode from then on, and one that refuses that too with neither. The answer is parsed, repaired
and validated the same way whatever was sent.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

import openai
from openai import AsyncOpenAI
from pydantic import BaseModel, ValidationError

from app.concurrency import Slots
from app.errors import InvalidParameter, ServiceUnavailable
from app.observability import metrics, tracing
from app.providers import llm_json
from app.providers.llm_http import UnreadableAnswer, answer_capped_client
from app.providers.llm_urls import PinnedHost
from app.settings import Settings
from app.text.cpu import run_off_loop

log = logging.getLogger(__name__)


class LLMError(ServiceUnavailable):
    """The LLM did not give a usable answer; whatever needed it may be retried later."""


class LLMAuthError(LLMError):
    """The endpoint refused the key (401/403). Not retried."""


class LLMTimeout(LLMError):
    """No answer within the timeout, on every attempt."""


class LLMBadOutput(LLMError):
    """The model answered, but not with the JSON asked for."""


STRUCTURED_LEVELS = ("json_schema", "json_object", "off")
"""What a JSON call may send, most constrained first (``MEMSYS_LLM_STRUCTURED_OUTPUT`` or learned per endpoint)."""


class FormatRefused(LLMError):
    """A 400 or 422 to a call carrying a ``response_format`` or ``tool_choice`` (or a 500 naming it, as
    llama-cpp-python answers an unknown format): before the endpoint ever took one, asked again with less."""


@dataclass
class ChatReply:
    """One assistant turn: its text, its tool calls (OpenAI's shape) and the tokens the endpoint counted."""

    content: str
    tool_calls: list[dict[str, Any]]
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


class LLMNotConfigured(InvalidParameter):
    """No API key: neither in the request's llm_config nor in the settings."""


@dataclass(frozen=True)
class LLMConfig:
    """Which endpoint, key and model to use. ``None`` fields inherit from the server's settings, except
    that a config naming its own ``base_url`` never inherits the server's key. ``pinned``: the checked
    addresses of a client's ``base_url``, the only ones it is reached at."""

    api_key: str | None = None
    base_url: str | None = None
    model: str | None = None
    pinned: PinnedHost | None = None

    def over(self, default: LLMConfig) -> LLMConfig:
        return LLMConfig(
            api_key=self.api_key or (None if self.base_url else default.api_key),
            base_url=self.base_url or default.base_url,
            model=self.model or default.model,
            pinned=self.pinned,
        )

    def __repr__(self) -> str:  # the key never reaches a log line or a traceback
        return f"LLMConfig(base_url={self.base_url!r}, model={self.model!r}, api_key={'***' if self.api_key else None})"


class LLMClient:
    """Stateless apart from one pooled HTTP client for the server's own configuration."""

    def __init__(
        self,
        default: LLMConfig,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 1.0,
        temperature: float = 0.2,
        max_tokens: int = 4096,
        max_concurrency: int = 16,
        max_answer_bytes: int = 256 * 1024,
        share: float = 1.0,
        structured_output: str = "auto",
    ) -> None:
        self.default = default
        self.max_tokens = max_tokens
        self.max_answer_bytes = max_answer_bytes
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.temperature = temperature
        self._client: AsyncOpenAI | None = None
        self.structured_output = structured_output
        self._levels: dict[str | None, str] = {}
        """auto: the most constrained ``response_format`` each endpoint (base URL) has not refused."""
        self._accepted: set[str | None] = set()
        """Endpoints that have answered a call carrying a ``response_format`` or a ``tool_choice``."""
        self._no_tool_choice: set[str | None] = set()
        """Endpoints that refused ``tool_choice``: asked without it from then on."""
        self._slots = Slots(max_concurrency, share)
        """Calls in flight at once, of which one API key holds at most its ``MEMSYS_TENANT_SHARE``: a tenant's slow
        endpoint holds its own share, never the others'."""

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMClient:
        return cls(
            LLMConfig(settings.llm_server_key, settings.llm_base_url, settings.llm_model),
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            backoff_s=settings.llm_retry_backoff_s,
            max_tokens=settings.llm_max_tokens,
            max_concurrency=settings.llm_max_concurrency,
            max_answer_bytes=settings.llm_max_answer_bytes,
            share=settings.tenant_share,
            structured_output=settings.llm_structured_output,
        )

    @property
    def configured(self) -> bool:
        """True when the server has a key of its own (memory formation then uses the LLM)."""
        return bool(self.default.api_key)

    async def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        config: LLMConfig | None = None,
        max_tokens: int | None = None,
        schema: type[BaseModel] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Any:
        """The reply to ``messages`` parsed as JSON (an object or a list), validated as ``schema`` when given
        (an answer that does not fit is retried like a failed call). The endpoint is asked for ``json_schema``
        (default: ``schema``'s, ``wire_schema``), or JSON mode without either; see the module's docstring.
        Parsed off the event loop: the answer is untrusted and may be up to ``max_answer_bytes`` long."""
        if json_schema is None and schema is not None:
            json_schema = wire_schema(schema)
        name = schema.__name__ if schema is not None else "answer"

        def parse(text: str) -> Any:
            value = parse_json_output(text)
            if schema is None:
                return value
            try:
                return schema.model_validate(value)
            except ValidationError as exc:
                where = ".".join(str(p) for p in exc.errors()[0]["loc"]) or "the answer"
                raise LLMBadOutput(f"The LLM's answer does not fit {schema.__name__} ({where})") from exc

        def counted(text: str) -> Any:
            try:
                value = parse(text)
            except LLMBadOutput:
                metrics.LLM_ANSWERS.labels(answer=name, outcome="unusable").inc()
                raise
            metrics.LLM_ANSWERS.labels(answer=name, outcome="valid").inc()
            return value

        return await self.complete(
            messages, config=config, max_tokens=max_tokens, parse=counted, structured=(name, json_schema or {})
        )

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        config: LLMConfig | None = None,
        max_tokens: int | None = None,
        parse=None,
        structured: tuple[str, dict[str, Any]] | None = None,
    ) -> Any:
        """The reply's text (or ``parse(text)``, run off the event loop), retrying transient failures with
        backoff. ``structured``: the answer's name and JSON schema (empty: any JSON object) for
        ``response_format``."""

        async def text_of(reply: ChatReply) -> Any:
            if not reply.content:
                raise LLMBadOutput("The LLM answered with no content")
            return await run_off_loop(parse, reply.content) if parse else reply.content

        return await self._call(
            messages, config=config, max_tokens=max_tokens, tools=None, read=text_of, structured=structured
        )

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        config: LLMConfig | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """One assistant turn with OpenAI function calling: its text and/or tool calls, and token usage.
        ``tool_choice`` (OpenAI's) may force a call; whether the endpoint honours it is the caller's to check."""

        async def whole(reply: ChatReply) -> ChatReply:
            if not reply.content and not reply.tool_calls:
                raise LLMBadOutput("The LLM answered with neither content nor tool calls")
            return reply

        extra = {"tools": tools, **({"tool_choice": tool_choice} if tool_choice else {})} if tools else {}
        return await self._call(messages, config=config, max_tokens=max_tokens, tools=extra, read=whole)

    async def _call(self, messages, *, config, max_tokens, tools, read, structured=None) -> Any:
        resolved = (config or LLMConfig()).over(self.default)
        if not resolved.api_key:
            raise LLMNotConfigured("No LLM API key: set MEMSYS_LLM_API_KEY or pass llm_config.api_key")
        client, owned = self._client_for(resolved)
        started, outcome = time.perf_counter(), "ok"
        try:
            return await self._with_retries(client, resolved, messages, max_tokens, tools or {}, read, structured)
        except LLMError as exc:
            outcome = "error"
            metrics.LLM_ERRORS.labels(kind=type(exc).__name__).inc()
            raise
        finally:
            metrics.LLM_SECONDS.labels(outcome=outcome).observe(time.perf_counter() - started)
            if owned:
                await client.close()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _client_for(self, config: LLMConfig) -> tuple[AsyncOpenAI, bool]:
        """The pooled client for the server's configuration; a throw-away one for a caller's own. Either reads
        an answer only up to ``max_answer_bytes`` (``llm_http``)."""
        new = lambda: AsyncOpenAI(  # noqa: E731
            api_key=config.api_key,
            base_url=config.base_url,
            timeout=self.timeout_s,
            max_retries=0,
            http_client=answer_capped_client(self.max_answer_bytes, self.timeout_s, config.pinned),
        )
        if config.pinned is None and (config.api_key, config.base_url) == (self.default.api_key, self.default.base_url):
            if self._client is None:
                self._client = new()
            return self._client, False
        return new(), True

    async def _with_retries(
        self, client: AsyncOpenAI, config: LLMConfig, messages, max_tokens, extra: dict[str, Any], read, structured
    ) -> Any:
        attempts = self.max_retries + 1
        attempt = 0
        while True:
            level = self._level(config.base_url) if structured is not None else "off"
            fields = extra if level == "off" else {**extra, "response_format": _response_format(level, *structured)}
            if config.base_url in self._no_tool_choice:
                fields.pop("tool_choice", None)
            try:
                reply = await self._once(client, config.model or "", messages, max_tokens, fields)
                if level != "off" or "tool_choice" in fields:
                    self._accepted.add(config.base_url)
                return await read(reply)
            except LLMAuthError:
                raise
            except LLMError as exc:
                if isinstance(exc, FormatRefused) and "tool_choice" in fields and config.base_url not in self._accepted:
                    log.warning("the LLM endpoint refused tool_choice (%s); calling it without", exc)
                    self._no_tool_choice.add(config.base_url)
                    continue  # the caller makes the call the model did not (app.agent.service)
                if isinstance(exc, FormatRefused) and self._may_step_down(config.base_url, level):
                    lower = STRUCTURED_LEVELS[STRUCTURED_LEVELS.index(level) + 1]
                    log.warning(
                        "the LLM endpoint refused response_format %s (%s); asking it with %s", level, exc, lower
                    )
                    self._levels[config.base_url] = lower
                    continue  # not an attempt: the same call, asked so that the endpoint takes it
                if attempt + 1 >= attempts:
                    raise
                delay = self.backoff_s * 2**attempt * (0.5 + random.random())
                log.warning("LLM call failed (%s), attempt %d/%d; retrying in %.2fs", exc, attempt + 1, attempts, delay)
                await asyncio.sleep(delay)
                attempt += 1

    def _may_step_down(self, base_url: str | None, level: str) -> bool:
        """auto, and the endpoint has never answered a call with a ``response_format`` (once it has, an error
        is an error, not a refusal of the format)."""
        return self.structured_output == "auto" and level != "off" and base_url not in self._accepted

    def _level(self, base_url: str | None) -> str:
        if self.structured_output != "auto":
            return self.structured_output
        return self._levels.get(base_url, STRUCTURED_LEVELS[0])

    async def _once(self, client: AsyncOpenAI, model: str, messages, max_tokens, extra: dict[str, Any]) -> ChatReply:
        refused = lambda: LLMTimeout(f"Every LLM call slot stayed taken for {self.timeout_s:g}s")  # noqa: E731
        async with self._slots.slot(self.timeout_s, refused):
            with tracing.span("memsys.llm.chat", **{"gen_ai.request.model": model}) as span:
                response = await self._create(client, model, messages, max_tokens, extra)
                reply = _reply(response)
                span.set_attribute("gen_ai.usage.input_tokens", reply.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", reply.completion_tokens)
        metrics.LLM_TOKENS.labels(direction="input").inc(reply.prompt_tokens)
        metrics.LLM_TOKENS.labels(direction="output").inc(reply.completion_tokens)
        return reply

    async def _create(self, client: AsyncOpenAI, model: str, messages, max_tokens, extra: dict[str, Any]) -> Any:
        """The call, its failures said as memsys's LLM errors."""
        try:
            return await client.chat.completions.create(
                model=model,
                messages=messages,
                temperature=self.temperature,
                # Always bounded: a server such as llama.cpp's generates until its context is full
                # without it, and keeps generating after a timed-out client has gone.
                max_tokens=max_tokens or self.max_tokens,
                **extra,
            )
        except openai.APITimeoutError as exc:
            raise LLMTimeout(f"The LLM did not answer within {self.timeout_s:g}s") from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise LLMAuthError(f"The LLM endpoint refused the API key (HTTP {exc.status_code})") from exc
        except openai.APIStatusError as exc:
            for field in ("response_format", "tool_choice"):
                if field in extra and (
                    exc.status_code in (400, 422) or (exc.status_code == 500 and field in f"{exc.message}{exc.body}")
                ):
                    raise FormatRefused(f"The LLM endpoint refused the {field} (HTTP {exc.status_code})") from exc
            raise LLMError(f"The LLM endpoint answered HTTP {exc.status_code}") from exc
        except openai.APIConnectionError as exc:
            raise LLMError("The LLM endpoint could not be reached") from exc
        # httpcore reads a socket's peer after connecting; an endpoint that dies in that moment leaves it None (an
        # AttributeError, seen in the soak), or the OS says so directly: the endpoint could not be reached either.
        except (AttributeError, OSError) as exc:
            raise LLMError("The LLM endpoint could not be reached") from exc
        except UnreadableAnswer as exc:
            raise LLMBadOutput(f"The LLM endpoint's answer {exc}") from exc
        # A body that is not JSON or not a chat completion; or one nested deeper than Python recurses.
        except (openai.OpenAIError, ValueError, RecursionError) as exc:
            raise LLMBadOutput(f"The LLM endpoint gave an unexpected answer ({type(exc).__name__})") from exc


def _reply(response: Any) -> ChatReply:
    """A chat completion as memsys reads it: the message's text, its tool calls, the token counts."""
    choices = getattr(response, "choices", None)
    if not choices or choices[0].message is None:
        raise LLMBadOutput("The LLM answered with no message")
    message = choices[0].message
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"},
        }
        for call in (message.tool_calls or [])
        if getattr(call, "function", None) is not None
    ]
    usage = getattr(response, "usage", None)
    return ChatReply(
        content=message.content or "",
        tool_calls=calls,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
    )


def wire_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as ``response_format`` carries it: references inlined (not every server follows
    ``$ref``), titles and defaults dropped (noise in a grammar), every property required (as OpenAI's strict
    mode wants; an optional one may still be null or empty)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return inline(definitions[node["$ref"].rsplit("/", 1)[-1]])
        out = {
            key: {name: inline(field) for name, field in value.items()} if key == "properties" else inline(value)
            for key, value in node.items()
            if key not in ("title", "default", "description")
        }
        if "properties" in out:  # every key written (null or [] when there is nothing): a constrained model
            out["required"] = list(out["properties"])  # otherwise closes the object after the first ones
        return out

    return inline(schema)


def _response_format(level: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's ``json_schema`` (also vLLM's, Ollama's, llama.cpp's own server's), or JSON mode carrying the
    schema as llama-cpp-python's server reads it (``schema``, which it turns into a grammar)."""
    if level == "json_schema" and schema:
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    return {"type": "json_object", **({"schema": schema} if schema else {})}


def parse_json_output(text: str) -> dict | list:
    """The JSON value in a model's reply, however it was wrapped or broken (``app.providers.llm_json``), in
    time linear in its length. Nothing usable, or nesting deeper than ``llm_json.MAX_DEPTH``, is an
    ``LLMBadOutput``."""
    try:
        return llm_json.parse_answer(text)
    except llm_json.UnusableJSON as exc:
        raise LLMBadOutput(f"The LLM's answer {exc}") from exc
