"""The ReAct retrieval agent (seed 003): the LLM reasons, calls memory tools, reads their results, and
answers; its context is managed before every LLM call (``context_manager``).

Stops when the LLM answers without a tool call (``answered``), after ``max_steps`` LLM calls
(``max_steps``), or when the LLM fails after its retries (``llm_error``); only ``answered`` is a success.
No LLM key at all (request or server) is a 400 before anything runs; a key the endpoint refuses, a 400.

The agent never answers without having looked in memory: its first LLM call forces ``search_memories``
(``tool_choice``), and a model that answers before calling any memory tool (an endpoint that ignores
tool_choice, a model that writes its answer instead) has its answer set aside: memsys searches with the user's
last message, records that call as its own (``made_by: memsys``) and asks the model again with the results.
Tool calls a model writes in its text (prompt-level tools of a local server) are read as calls
(``tools.calls_in_text``).
"""

from __future__ import annotations

import time
import uuid

from app.agent import context_manager, tools
from app.agent.schemas import AgentMetadata, AgentRequest, AgentResult, ToolCallRecord
from app.agentic.service import client_llm_config
from app.errors import InvalidParameter
from app.providers.llm import ChatReply, LLMAuthError, LLMClient, LLMError, LLMNotConfigured
from app.retrieval import service as retrieval
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.tokens import count_tokens

INSTRUCTIONS = """You answer the user's questions from their long-term memories, which you reach with tools:
search_memories (facts, episodes, plans), read_profile, and read_offloaded (content moved out of the
conversation, by its reference). Search before you answer; search again with other words or another
memory_type if the first results do not answer the question. When you know enough, answer directly and
concisely, in the user's language, without calling a tool. If the memories do not contain the answer, say so."""
TOOL_CALLS_PER_STEP = 8
"""Tool calls run per LLM answer; more are dropped from the answer (each is a search: an answer is untrusted)."""


async def run(runtime: Runtime, request: AgentRequest) -> tuple[str, AgentResult]:
    started = time.perf_counter()
    retrieval.check_scope(request)
    llm = runtime.llm or LLMClient.from_settings(runtime.settings)
    config = await client_llm_config(request.llm_config, runtime.settings)
    if not config.over(llm.default).api_key:
        raise LLMNotConfigured(
            "No LLM API key: pass llm_config.api_key in the request, or set MEMSYS_LLM_API_KEY on the server"
        )
    chat_id = request.chat_id or uuid.uuid4().hex
    instructions = {"role": "system", "content": INSTRUCTIONS}
    messages = [message.as_openai() for message in request.messages]
    managed = context_manager.Managed()
    records: list[ToolCallRecord] = []
    timings = {"llm": 0.0, "tools": 0.0, "context": 0.0}
    answer, stop, error, steps = "", "max_steps", None, 0
    searched = False
    for step in range(1, request.max_steps + 1):
        steps = step
        try:
            t = time.perf_counter()
            messages = await context_manager.manage(runtime, request, chat_id, messages, llm, config, managed)
            timings["context"] += time.perf_counter() - t
            t = time.perf_counter()
            reply = await llm.chat(
                [instructions, *messages],
                tools=tools.TOOLS,
                tool_choice=None if searched else tools.SEARCH_FIRST,
                config=config,
            )
            timings["llm"] += time.perf_counter() - t
        except LLMAuthError as exc:
            raise InvalidParameter(
                "The LLM rejected the API key (llm_config.api_key or the server's MEMSYS_LLM_API_KEY)"
            ) from exc
        except LLMError as exc:
            stop, error = "llm_error", str(exc)
            break
        managed.prompt_tokens += reply.prompt_tokens
        managed.completion_tokens += reply.completion_tokens
        if not reply.tool_calls and reply.content:
            reply.tool_calls = await run_off_loop(tools.calls_in_text, reply.content, step)
            reply.content = "" if reply.tool_calls else reply.content
        made_by = "model"
        if not reply.tool_calls and not searched:
            reply = ChatReply(content="", tool_calls=[tools.search_call(_last_user_text(messages), step)])
            made_by = "memsys"
        reply.tool_calls = reply.tool_calls[:TOOL_CALLS_PER_STEP]
        messages.append(reply.as_message())
        if not reply.tool_calls:
            answer, stop = reply.content, "answered"
            break
        searched = True  # any memory tool the model called counts as having looked
        for call in reply.tool_calls:
            t = time.perf_counter()
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = await tools.run(runtime, request, chat_id, name, arguments, request.max_tool_message_tokens)
            elapsed = time.perf_counter() - t
            timings["tools"] += elapsed
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
            records.append(
                ToolCallRecord(
                    step=step,
                    name=name,
                    arguments=result.arguments,
                    ok=result.ok,
                    tokens=count_tokens(result.content),
                    ms=round(elapsed * 1000, 2),
                    made_by=made_by,
                )
            )
    total_ms = (time.perf_counter() - started) * 1000
    metadata = AgentMetadata(
        chat_id=chat_id,
        stop_reason=stop,
        steps=steps,
        tool_calls=records,
        offloaded=managed.offloaded,
        compacted=managed.compacted,
        compressed=managed.compressed,
        usage={
            "prompt_tokens": managed.prompt_tokens,
            "completion_tokens": managed.completion_tokens,
            "total_tokens": managed.prompt_tokens + managed.completion_tokens,
        },
        context_tokens=context_manager.total_tokens(messages),
        timings_ms={
            **{name: round(seconds * 1000, 2) for name, seconds in timings.items()},
            "total": round(total_ms, 2),
            "overhead": round(total_ms - timings["llm"] * 1000, 2),
        },
        error=error,
    )
    message = {"answered": "Answered", "max_steps": "Stopped after max_steps", "llm_error": "The LLM failed"}[stop]
    return message, AgentResult(answer=answer, messages=messages, success=stop == "answered", metadata=metadata)


def _last_user_text(messages: list[dict]) -> str:
    """The text of the dialogue's last user message (what memsys searches for when the model did not)."""
    return next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
