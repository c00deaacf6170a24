"""memsys's own MCP server: the tools an agent needs of a memory service, over stdio (``memsys mcp``) and over
streamable HTTP at ``/mcp`` on the running server (app.mcp.http).

Each tool is a thin adapter: it builds the same request the HTTP API takes, calls the same service, and
answers a compact JSON object. A refused request becomes a tool error whose text names the field.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from app.errors import InvalidParameter, MemsysError
from app.forget import service as forget
from app.http.errors import describe_validation_error
from app.memories import service as memories
from app.memories.schemas import MemoryPatch
from app.memorize import service as memorize
from app.memorize.schemas import FlushRequest, MemorizeRequest
from app.retrieval import service as retrieval
from app.retrieval.schemas import RetrieveLightweightRequest
from app.runtime import Runtime
from app.validation import check_identifier

INSTRUCTIONS = (
    "memsys is a long-term memory for conversations. Store what is said with add_memory (one message at a "
    "time, as it happens), find what was said or learned before with search_memories, read what is known "
    "about a person with get_profile, read or correct one memory with get_memory and correct_memory, and erase a "
    "person with forget_user."
)

MCP_ACTOR = "mcp"
"""Who a memory's history says corrected it through these tools."""

RuntimeOf = Callable[[Context], Runtime]
"""The runtime of the calling tenant: fixed for stdio, the key's tenant over HTTP."""


def build_server(runtime_of: RuntimeOf) -> MCPServer:
    server = MCPServer(name="memsys", instructions=INSTRUCTIONS, version="0.1.0")

    @server.tool(
        description="Store one message of a conversation in long-term memory. Memories (episodes, facts, "
        "the user's profile) are formed from the messages in the background; pass flush=true to form them "
        "now (for example at the end of a conversation) and get them back. Without group_id the message "
        "goes to user_id's personal notes, and the sender must then be the user. metadata: your own JSON object "
        '(up to 8 KB, for example {"channel": "support", "tags": ["billing"]}), carried to the memories '
        "formed from the message, so that search_memories' filters find them by it."
    )
    async def add_memory(
        ctx: Context,
        content: str,
        user_id: str,
        group_id: str | None = None,
        sender: str | None = None,
        sender_name: str | None = None,
        metadata: dict[str, Any] | None = None,
        flush: bool = False,
    ) -> dict[str, Any]:
        runtime = runtime_of(ctx)
        sender = sender or user_id
        if group_id is None and sender != user_id:
            raise ToolError("Invalid field group_id: a message from someone else than user_id needs a group_id")
        request = _parsed(
            MemorizeRequest,
            group_id=group_id,
            message_id=f"mcp-{uuid.uuid4()}",
            create_time=datetime.now(UTC),
            sender=sender,
            sender_name=sender_name,
            content=content,
            metadata=metadata,
        )
        message, result = await _called(memorize.memorize(runtime, request))
        answer: dict[str, Any] = {"stored": True, "message_id": request.message_id, "status": result.status_info}
        if flush:
            stream = {"group_id": group_id} if group_id else {"sender": sender}
            message, result = await _called(memorize.flush(runtime, _parsed(FlushRequest, **stream)))
            answer["status"] = result.status_info
            answer["memories"] = [_compact(m.model_dump()) for m in result.saved_memories]
        answer["message"] = message
        return answer

    @server.tool(
        description="Search long-term memory with a question or keywords (hybrid vector + keyword search). "
        "Filter by user_id and/or group_id. memory_type: episode (what happened, the default), event_log "
        "(atomic facts), semantic_memory (lasting facts and plans), agent_case and agent_skill (what an agent did "
        'and learned). filters: conditions on your metadata, scopes and time, for example {"channel": '
        '"support"}, {"tags": {"contains": "billing"}} or {"OR": [{"plan": "pro"}, '
        '{"timestamp": {"gte": "2026-01-01"}}]} (operators eq ne in nin gt gte lt lte contains exists; AND, OR, '
        "NOT). Returns the best memories first."
    )
    async def search_memories(
        ctx: Context,
        query: str,
        user_id: str | None = None,
        group_id: str | None = None,
        memory_type: Literal["episode", "event_log", "semantic_memory", "agent_case", "agent_skill"] = "episode",
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
    ) -> dict[str, Any]:
        request = _parsed(
            RetrieveLightweightRequest,
            query=query,
            user_id=user_id,
            group_id=group_id,
            data_source=memory_type,
            filters=filters,
            top_k=top_k,
        )
        message, result = await _called(retrieval.retrieve(runtime_of(ctx), request))
        answer = {"count": result.count, "memories": [_compact(m.model_dump()) for m in result.memories]}
        if result.metadata.hidden:
            answer["note"] = message  # what the filters left out, and what to change
        return answer

    @server.tool(
        description="What is known about a person: their latest profile (traits, preferences, facts) in "
        "group_id, or without group_id in every conversation they were profiled in."
    )
    async def get_profile(ctx: Context, user_id: str, group_id: str | None = None) -> dict[str, Any]:
        _identifiers(user_id=user_id, group_id=group_id)
        profiles = await _called(retrieval.profile(runtime_of(ctx), user_id, group_id))
        return {
            "user_id": user_id,
            "profiles": [
                {"group_id": p["group_id"], "updated_at": p["timestamp"], "profile": p["profile"]} for p in profiles
            ],
        }

    @server.tool(
        description="Read one memory by its id (as search_memories returns it): its content, status (current, "
        "superseded by a newer fact, deleted, expired), validity, sources, and with history=true every event of "
        "its life (formed, superseded, edited, deleted, restored)."
    )
    async def get_memory(ctx: Context, memory_id: str, history: bool = False) -> dict[str, Any]:
        runtime = runtime_of(ctx)
        detail = await _called(memories.get_memory(runtime, memory_id))
        answer = detail.model_dump()
        if history:
            answer["history"] = (await _called(memories.memory_history(runtime, memory_id))).events
        return answer

    @server.tool(
        description="Correct a memory that is wrong: give its id and the corrected content (what it should say), "
        "or restore=true to bring back a memory that was deleted or superseded, or delete=true to delete it (it "
        "can be restored for a while). The change is recorded in the memory's history."
    )
    async def correct_memory(
        ctx: Context, memory_id: str, content: str | None = None, delete: bool = False, restore: bool = False
    ) -> dict[str, Any]:
        runtime = runtime_of(ctx)
        if sum((content is not None, delete, restore)) != 1:
            raise ToolError("Invalid field content: give exactly one of content, delete=true or restore=true")
        if delete:
            return await _called(memories.delete_memory(runtime, memory_id, MCP_ACTOR))
        if restore:
            return (await _called(memories.restore_memory(runtime, memory_id, MCP_ACTOR))).model_dump()
        patch = _parsed(MemoryPatch, content=content)
        return (await _called(memories.edit_memory(runtime, memory_id, patch, MCP_ACTOR))).model_dump()

    @server.tool(
        description="Erase everything memsys holds about a person: their messages, the memories formed from "
        "them and their profiles. Other participants' messages are kept and their memories formed again. "
        "This cannot be undone."
    )
    async def forget_user(ctx: Context, user_id: str) -> dict[str, Any]:
        _identifiers(user_id=user_id)
        return await _called(forget.forget_user(runtime_of(ctx), user_id))

    return server


def _parsed(model: type, **fields: Any) -> Any:
    try:
        return model(**{key: value for key, value in fields.items() if value is not None})
    except ValidationError as exc:
        raise ToolError(describe_validation_error(exc)) from exc


def _identifiers(**ids: str | None) -> None:
    try:
        for name, value in ids.items():
            if value is not None:
                check_identifier(name, value)
    except InvalidParameter as exc:
        raise ToolError(str(exc)) from exc


async def _called(awaitable):
    try:
        return await awaitable
    except MemsysError as exc:
        raise ToolError(str(exc)) from exc


def _compact(memory: dict[str, Any]) -> dict[str, Any]:
    """What an agent reads of a memory (no provenance ids or internal scores); ``formed: false`` marks a message
    not yet formed into memories."""
    keys = ("id", "memory_type", "title", "content", "timestamp", "user_id", "group_id", "score")
    compact = {key: memory[key] for key in keys if memory.get(key) is not None}
    return compact if memory.get("formed", True) else {**compact, "formed": False}
