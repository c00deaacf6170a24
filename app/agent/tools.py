"""The agent's tools, offered to the LLM by OpenAI function calling, and their execution.

A call of an unknown tool, or with arguments that do not fit, gets a tool reply saying so and listing the
tools; the loop goes on. Every tool works inside the request's tenant and its user / group scope: the model's
arguments are untrusted (a memory it reads may carry a prompt injection), so one naming another user is
refused in the tool's reply, never run; offloaded content is read back only by the chat and user that stored it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.agent import repository
from app.agent.schemas import AgentRequest
from app.providers.llm_json import UnusableJSON, loads_within_depth, parse_answer, tagged_blocks
from app.retrieval import service as retrieval
from app.runtime import Runtime
from app.text.cpu import run_off_loop
from app.text.tokens import count_tokens, truncate_tokens


class SearchMemories(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=2000)
    memory_type: Literal["episode", "event_log", "semantic_memory"] = "event_log"
    time_range_days: int | None = Field(default=None, ge=1, le=100000)
    top_k: int = Field(default=8, ge=1, le=20)


class ReadProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str | None = Field(default=None, max_length=256)


class ReadOffloaded(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ref: str = Field(min_length=1, max_length=256)
    offset: int = Field(default=0, ge=0, description="Character offset to read from")


def tool_parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments as offered to the model: without length bounds."""
    schema = model.model_json_schema()
    for field in schema.get("properties", {}).values():
        field.pop("maxLength", None)
        field.pop("minLength", None)
    return schema


ARGUMENTS: dict[str, type[BaseModel]] = {
    "search_memories": SearchMemories,
    "read_profile": ReadProfile,
    "read_offloaded": ReadOffloaded,
}
DESCRIPTIONS = {
    "search_memories": "Search the user's long-term memories (hybrid vector + keyword search). memory_type: "
    "event_log (atomic facts, the default), episode (narratives of whole conversations) or semantic_memory "
    "(plans, preferences, lasting states). time_range_days limits how far back (default: the request's).",
    "read_profile": "Read the user's profile (name, role, interests, facts gathered over conversations). "
    "user_id defaults to the request's user; another user's profile is readable only when the request "
    "searches a whole group (or the whole store).",
    "read_offloaded": "Read content that was taken out of this conversation to save space, by the reference "
    "shown in its place (a long tool result, or earlier messages summarised). Long content comes in windows: "
    "pass the offset given at the end of a window to read on.",
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        # Length bounds are checked on the arguments, not sent: llama.cpp turns a maxLength of 2000 into a
        # grammar too large to parse (its server process died on it).
        "function": {"name": name, "description": DESCRIPTIONS[name], "parameters": tool_parameters(model)},
    }
    for name, model in ARGUMENTS.items()
]


SEARCH_FIRST: dict[str, Any] = {"type": "function", "function": {"name": "search_memories"}}
"""``tool_choice`` of the agent's first LLM call: a search, whatever the model would do (where the endpoint
honours tool_choice; ``app.agent.service`` makes the search itself where it does not)."""
SEARCH_QUERY_CHARS = 2000


def search_call(question: str, step: int) -> dict[str, Any]:
    """The ``search_memories`` call memsys makes for a model that answered without searching."""
    query = " ".join(question.split())[:SEARCH_QUERY_CHARS] or "recent memories"
    arguments = json.dumps({"query": query}, ensure_ascii=False)
    return {
        "id": f"memsys-search-{step}",
        "type": "function",
        "function": {"name": "search_memories", "arguments": arguments},
    }


def calls_in_text(content: str, step: int) -> list[dict[str, Any]]:
    """Tool calls a model wrote in its text instead of the API's ``tool_calls`` (prompt-level tools, as a local
    server without a function-calling chat format returns them): ``<tool_call>{"name": …, "arguments": …}
    </tool_call>`` blocks (Qwen, Hermes), or an answer holding such an object (bare or fenced). Only our
    tools' names count: any other answer is an answer."""
    blocks = tagged_blocks(content, "tool_call") or [content]
    calls = []
    for number, block in enumerate(blocks):
        try:
            value = parse_answer(block)
        except UnusableJSON:
            continue
        if not isinstance(value, dict) or value.get("name") not in ARGUMENTS:
            continue
        given = value.get("arguments", value.get("parameters", {}))
        arguments = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
        calls.append(
            {
                "id": f"text-call-{step}-{number}",
                "type": "function",
                "function": {"name": value["name"], "arguments": arguments},
            }
        )
    return calls


@dataclass
class ToolResult:
    content: str
    ok: bool
    arguments: dict[str, Any] | str = ""
    """The call's arguments as parsed (a JSON object), or as the model wrote them when they are none."""


async def run(
    runtime: Runtime, request: AgentRequest, chat_id: str, name: str, arguments: str, window_tokens: int
) -> ToolResult:
    """Call tool ``name`` with the model's ``arguments`` (a JSON object) for ``request`` in chat ``chat_id``.
    The arguments are parsed off the event loop: they are the untrusted answer's, up to its size cap."""
    try:
        given: Any = await run_off_loop(loads_within_depth, arguments or "{}")
    except ValueError:  # not JSON, or nested past the depth limit
        given = None
    result = await _call(runtime, request, chat_id, name, given, window_tokens)
    result.arguments = given if isinstance(given, dict) else arguments
    return result


async def _call(
    runtime: Runtime, request: AgentRequest, chat_id: str, name: str, given: Any, window_tokens: int
) -> ToolResult:
    model = ARGUMENTS.get(name)
    if model is None:
        return ToolResult(f"Error: there is no tool {name!r}. The tools are: {', '.join(ARGUMENTS)}.", False)
    try:
        if not isinstance(given, dict):
            raise ValueError("not a JSON object")
        parsed = model.model_validate(given)
    except ValueError as exc:  # pydantic's ValidationError is one too
        problem = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        where = ".".join(str(p) for p in exc.errors()[0]["loc"]) if isinstance(exc, ValidationError) else ""
        return ToolResult(
            f"Error: bad arguments for {name} ({where + ': ' if where else ''}{problem}). Its parameters: "
            f"{json.dumps(model.model_json_schema()['properties'])}. The tools are: {', '.join(ARGUMENTS)}.",
            False,
        )
    if isinstance(parsed, SearchMemories):
        return ToolResult(await _search(runtime, request, parsed), True)
    if isinstance(parsed, ReadProfile):
        return await _profile(runtime, request, parsed)
    return await _read_offloaded(runtime, request, chat_id, parsed, window_tokens)


async def _search(runtime: Runtime, request: AgentRequest, arguments: SearchMemories) -> str:
    """The search's results as the model reads them. A narrowing the model chose itself that finds nothing (a
    ``time_range_days`` other than the request's, a ``memory_type`` other than the default event log) is
    searched again without it: a weak model fills optional arguments at random ("the last 10 days" of a
    conversation held a year ago, semantic memories where the facts are event logs), and an empty result would
    read as "no memory"."""
    found = await _search_within(runtime, request, arguments)
    if not found.startswith("No "):
        return found
    chosen_window = arguments.time_range_days and arguments.time_range_days != request.time_range_days
    default_type = SearchMemories.model_fields["memory_type"].default
    wider = arguments.model_copy(
        update={"time_range_days": None if chosen_window else arguments.time_range_days, "memory_type": default_type}
    )
    if wider == arguments:
        return found
    again = await _search_within(runtime, request, wider)
    if again.startswith("No "):
        return found
    window = request.time_range_days and f"the last {request.time_range_days} days" or "all time"
    nothing = f"no {arguments.memory_type} memories" + (
        f" in the last {arguments.time_range_days} days" if chosen_window else ""
    )
    return f"(Found {nothing}; these are {default_type} memories from {window}.)\n{again}"


async def _search_within(runtime: Runtime, request: AgentRequest, arguments: SearchMemories) -> str:
    scoped = request.model_copy(update={"time_range_days": arguments.time_range_days or request.time_range_days})
    filters = retrieval.filters_for(scoped, memory_type=arguments.memory_type)
    found = await retrieval.search(
        runtime,
        query=arguments.query,
        filters=filters,
        top_k=arguments.top_k,
        mode="rrf",
    )
    if len(found.memories) < arguments.top_k:
        found.hidden = await retrieval.hidden(runtime, filters, radius=None, found=found)
    note = (
        "\n(" + retrieval.hidden_advice(found.hidden, arguments.memory_type, scoped.time_range_days, None) + ")"
        if found.hidden
        else ""
    )
    if not found.memories:
        return f"No {arguments.memory_type} memories found for {arguments.query!r}.{note}"
    lines = [
        f"{i}. [{m['memory_type']}{'' if m['formed'] else ' not yet formed'} {m['timestamp'][:10]}"
        + (f" user {m['user_id']}" if m.get("user_id") else "")
        + f"] {m['content']} (score {m['score']:.2f}, id {m['id']})"
        for i, m in enumerate(found.memories, 1)
    ]
    return "\n".join(lines) + note


async def _profile(runtime: Runtime, request: AgentRequest, arguments: ReadProfile) -> ToolResult:
    """The profile of the request's user, or of another user when the request's searches span every user
    (a group scope: that user's profile in the group; no user or group: the whole store)."""
    scope = retrieval.filters_for(request, memory_type="profile")  # the user / group its searches are limited to
    user_id = arguments.user_id or request.user_id
    if not user_id:
        return ToolResult("Error: no user_id: pass one (the request names no user).", False)
    if scope.user_id is not None and user_id != scope.user_id:
        return ToolResult(
            f"Error: user {user_id!r} is outside this request's scope (user {scope.user_id!r}): "
            "read_profile reads only that user's profile.",
            False,
        )
    profiles = await retrieval.profile(runtime, user_id, scope.group_id)
    if not profiles:
        return ToolResult(f"No profile of {user_id}.", True)
    return ToolResult(
        "\n".join(f"{p['title']}: {json.dumps(p['profile'], ensure_ascii=False)}" for p in profiles), True
    )


async def _read_offloaded(
    runtime: Runtime, request: AgentRequest, chat_id: str, arguments: ReadOffloaded, window_tokens: int
) -> ToolResult:
    async with runtime.engine.connect() as conn:
        row = await repository.read(conn, arguments.ref, chat_id=chat_id, user_id=request.user_id)
    if row is None:
        return ToolResult(
            f"Error: nothing is stored under {arguments.ref!r} by this chat ({chat_id!r}) for its user.", False
        )
    rest = row["content"][arguments.offset :]
    window = truncate_tokens(rest, window_tokens)
    end = arguments.offset + len(window)
    more = (
        f"\n[{count_tokens(rest[len(window) :])} tokens more: read_offloaded offset {end}]"
        if end < len(row["content"])
        else ""
    )
    return ToolResult(window + more, True)
