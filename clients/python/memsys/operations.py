"""Each v3 operation as the HTTP call it makes: method, path, body or query, and the model of its result.
Pure (no I/O), so the sync and the async client send the very same calls."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from memsys import models

V3 = "/api/v3/agentic"
M = TypeVar("M", bound=models.Request)


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    result: type[BaseModel] | None
    """The model of the envelope's ``result``; None: a JSON object, returned as a dict."""
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None

    def parse(self, result: Any) -> Any:
        return result if self.result is None else self.result.model_validate(result)


OPERATION_IDS = {
    "memorize": "memorize",
    "flush": "flush",
    "retrieve_lightweight": "retrieve_lightweight",
    "retrieveAgentic": "retrieve_agentic",
    "assembleContext": "context",
    "retrievalAgent": "agent",
    "saveConversationMeta": "save_conversation_meta",
    "getConversationMeta": "get_conversation_meta",
    "listMemories": "list_memories",
    "getMemory": "get_memory",
    "editMemory": "edit_memory",
    "deleteMemory": "delete_memory",
    "restoreMemory": "restore_memory",
    "memoryHistory": "memory_history",
    # The client sends an id as a query parameter, which carries any id ("/" included); the path forms are
    # the same operations for curl.
    "forgetUser": "forget_user",
    "forgetUserByQuery": "forget_user",
    "forgetGroup": "forget_group",
    "forgetGroupByQuery": "forget_group",
    "exportUser": "export_user",
    "exportUserByQuery": "export_user",
    "saveInstructions": "save_instructions",
    "listInstructions": "list_instructions",
    "deleteInstructions": "delete_instructions",
}
"""The server's operationId → the client's method (tests/test_client_openapi.py: every v3 operation has one)."""


def request_of(model: type[M], request: M | dict[str, Any] | None, fields: dict[str, Any]) -> M:
    """A request given as a model, a dict, or keyword arguments (validated here: a typo fails before sending)."""
    if request is None:
        return model(**fields)
    if fields:
        raise TypeError(f"give a {model.__name__} or keyword arguments, not both")
    return request if isinstance(request, model) else model.model_validate(request)


def memorize(request: models.MemorizeRequest) -> Call:
    return Call("POST", f"{V3}/memorize", models.MemorizeResult, json=request.body())


def flush(request: models.FlushRequest) -> Call:
    return Call("POST", f"{V3}/flush", models.MemorizeResult, json=request.body())


def retrieve_lightweight(request: models.RetrieveLightweightRequest) -> Call:
    return Call("POST", f"{V3}/retrieve_lightweight", models.RetrieveLightweightResult, json=request.body())


def retrieve_agentic(request: models.AgenticRequest) -> Call:
    return Call("POST", f"{V3}/retrieve_agentic", models.AgenticResult, json=request.body())


def context(request: models.ContextRequest) -> Call:
    return Call("POST", f"{V3}/context", models.ContextResult, json=request.body())


def agent(request: models.AgentRequest) -> Call:
    return Call("POST", f"{V3}/agent", models.AgentResult, json=request.body())


def save_conversation_meta(request: models.ConversationMetaRequest) -> Call:
    return Call("POST", f"{V3}/conversation-meta", models.ConversationMetaSaved, json=request.body())


def get_conversation_meta(group_id: str) -> Call:
    return Call("GET", f"{V3}/conversation-meta", models.ConversationMeta, params={"group_id": group_id})


def list_memories(
    *,
    user_id: str | None = None,
    group_id: str | None = None,
    memory_type: models.MemoryType | None = None,
    start_time: datetime | str | None = None,
    end_time: datetime | str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    filters: dict[str, Any] | None = None,
) -> Call:
    params = {
        "user_id": user_id,
        "group_id": group_id,
        "memory_type": memory_type,
        "start_time": start_time.isoformat() if isinstance(start_time, datetime) else start_time,
        "end_time": end_time.isoformat() if isinstance(end_time, datetime) else end_time,
        "limit": limit,
        "cursor": cursor,
        "filters": json.dumps(filters) if filters is not None else None,
    }
    return Call("GET", f"{V3}/memories", models.MemoryPage, params={k: v for k, v in params.items() if v is not None})


def save_instructions(request: models.InstructionsIn) -> Call:
    return Call("PUT", f"{V3}/instructions", None, json=request.body())


def list_instructions() -> Call:
    return Call("GET", f"{V3}/instructions", None)


def delete_instructions(app_id: str = "*", project_id: str = "*") -> Call:
    return Call("DELETE", f"{V3}/instructions", None, params={"app_id": app_id, "project_id": project_id})


def forget_user(user_id: str) -> Call:
    return Call("DELETE", f"{V3}/users", None, params={"user_id": user_id})


def forget_group(group_id: str) -> Call:
    return Call("DELETE", f"{V3}/groups", None, params={"group_id": group_id})


def export_user(user_id: str) -> Call:
    return Call("GET", f"{V3}/export", None, params={"user_id": user_id})


def get_memory(memory_id: str) -> Call:
    return Call("GET", f"{V3}/memories/{_memory_id(memory_id)}", models.MemoryDetail)


def edit_memory(memory_id: str, request: models.MemoryPatch) -> Call:
    return Call("PATCH", f"{V3}/memories/{_memory_id(memory_id)}", models.MemoryDetail, json=request.body())


def delete_memory(memory_id: str) -> Call:
    return Call("DELETE", f"{V3}/memories/{_memory_id(memory_id)}", None)


def restore_memory(memory_id: str) -> Call:
    return Call("POST", f"{V3}/memories/{_memory_id(memory_id)}/restore", models.MemoryDetail)


def memory_history(memory_id: str) -> Call:
    return Call("GET", f"{V3}/memories/{_memory_id(memory_id)}/history", models.MemoryHistory)


def _memory_id(memory_id: str) -> str:
    """Memory ids are UUIDs, which a path carries as they are; anything else would change the path."""
    if not memory_id or any(not (char.isalnum() or char == "-") for char in memory_id):
        raise ValueError(f"not a memory id: {memory_id!r}")
    return memory_id
