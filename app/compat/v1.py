"""EverMemOS v1 routes (``/api/v1``), as upstream serves them and ``evermemos-mcp`` calls them: answers are
``{"data": ...}``. Where the MCP server and upstream differ, both are answered: an add returns ``task_id`` and
``request_id``, a delete returns 200 with a count (not 204), and ``GET /tasks/{id}`` exists."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody

from app.compat import service
from app.compat.schemas import (
    DeleteRequest,
    GetRequest,
    GroupAdd,
    GroupFlush,
    GroupIn,
    GroupPatch,
    MessageItem,
    PersonalAdd,
    PersonalFlush,
    SearchRequest,
)
from app.conversation_meta import service as conversation_meta
from app.errors import InvalidParameter
from app.forget import service as forget
from app.http.auth import actor_of
from app.http.dependencies import provide_runtime
from app.memorize.schemas import MemorizeRequest
from app.runtime import Runtime
from app.validation import check_identifier

Data = dict[str, Any]


def personal_group(user_id: str, session_id: str | None) -> str:
    """A personal conversation (a user and an assistant) is a stream of its own: the session, or the user's
    (forgotten whole with the user: app.forget.service)."""
    return session_id or forget.personal_conversation(user_id)


class V1Controller(Controller):
    path = "/api/v1"
    tags = ["EverMemOS v1"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post("/memories/group", status_code=200, operation_id="v1AddGroupMessages")
    async def add_group(self, data: JSONBody[GroupAdd], runtime: NamedDependency[Runtime]) -> Data:
        return {"data": await _add(runtime, data.group_id, data.messages, default_sender=None)}

    @post("/memories", status_code=200, operation_id="v1AddPersonalMessages")
    async def add_personal(self, data: JSONBody[PersonalAdd], runtime: NamedDependency[Runtime]) -> Data:
        group_id = personal_group(data.user_id, data.session_id)
        return {"data": await _add(runtime, group_id, data.messages, default_sender=data.user_id)}

    @post("/memories/group/flush", status_code=200, operation_id="v1FlushGroup")
    async def flush_group(self, data: JSONBody[GroupFlush], runtime: NamedDependency[Runtime]) -> Data:
        return {"data": await _flush(runtime, data.group_id)}

    @post("/memories/flush", status_code=200, operation_id="v1FlushPersonal")
    async def flush_personal(self, data: JSONBody[PersonalFlush], runtime: NamedDependency[Runtime]) -> Data:
        return {"data": await _flush(runtime, personal_group(data.user_id, data.session_id))}

    @post("/memories/get", status_code=200, operation_id="v1GetMemories")
    async def get_memories(self, data: JSONBody[GetRequest], runtime: NamedDependency[Runtime]) -> Data:
        scope = service.scope_of(data.filters)
        items, total = await service.fetch(
            runtime, scope=scope, memory_type=data.memory_type, page=data.page, page_size=data.page_size
        )
        key = _list_key(data.memory_type)
        lists: dict[str, Any] = {name: [] for name in ("episodes", "event_logs", "foresights", "profiles")}
        lists.update(agent_cases=[], agent_skills=[])
        lists[key] = items
        return {"data": {**lists, "count": len(items), "total_count": total}}

    @post("/memories/search", status_code=200, operation_id="v1SearchMemories")
    async def search(self, data: JSONBody[SearchRequest], runtime: NamedDependency[Runtime]) -> Data:
        scope = service.scope_of(data.filters)
        found = await service.search(
            runtime,
            query=data.query,
            scope=scope,
            method=data.method,
            memory_types=data.memory_types,
            top_k=data.top_k,
            radius=data.radius,
        )
        lists: dict[str, list] = {"episodes": [], "event_logs": [], "foresights": []}
        for item in found["memories"]:
            lists[_list_key(item["memory_type"])].append(item)
        return {
            "data": {
                **lists,
                "profiles": found["profiles"],
                "raw_messages": [],
                "pending_messages": [],
                "query": {"text": data.query, "method": data.method, "filters_applied": data.filters},
                "count": len(found["memories"]) + len(found["profiles"]),
                "total_count": len(found["memories"]) + len(found["profiles"]),
            }
        }

    @post("/memories/delete", status_code=200, operation_id="v1DeleteMemories")
    async def delete(self, request: Request, data: JSONBody[DeleteRequest], runtime: NamedDependency[Runtime]) -> Data:
        scope = service.scope_of(data.filters) if data.filters else service.Scope()
        user_id = data.user_id or data.sender_id or scope.user_id
        group_ids = [data.group_id or data.session_id] if (data.group_id or data.session_id) else scope.group_ids
        if group_ids and len(group_ids) > 1:
            raise InvalidParameter("Invalid field filters.group_id: one group per delete")
        count = await service.delete(
            runtime,
            memory_id=data.memory_id,
            user_id=user_id,
            group_id=group_ids[0] if group_ids else None,
            actor=actor_of(request),
            caller=scope.caller,
        )
        return {"data": {"count": count, "deleted_count": count}, "message": f"{count} records affected"}

    @get("/tasks/{task_id:str}", operation_id="v1TaskStatus")
    async def task(self, task_id: FromPath[str], runtime: NamedDependency[Runtime]) -> Data:
        status = await service.task_status(runtime, task_id)
        return {"data": {"task_id": task_id, "status": status}}

    @post("/groups", status_code=200, operation_id="v1SaveGroup")
    async def save_group(self, data: JSONBody[GroupIn], runtime: NamedDependency[Runtime]) -> Data:
        return {"data": await _save_group(runtime, data.group_id, {"name": data.name, "description": data.description})}

    @get("/groups/{group_id:str}", operation_id="v1GetGroup")
    async def get_group(self, group_id: FromPath[str], runtime: NamedDependency[Runtime]) -> Data:
        async with runtime.engine.begin() as conn:
            meta = await conversation_meta.get(conn, check_identifier("group_id", group_id))
        return {"data": _group(meta.model_dump())}

    @patch("/groups/{group_id:str}", operation_id="v1UpdateGroup")
    async def update_group(
        self, group_id: FromPath[str], data: JSONBody[GroupPatch], runtime: NamedDependency[Runtime]
    ) -> Data:
        if data.name is None and data.description is None:
            raise InvalidParameter("Missing required field: name or description")
        changes = {"name": data.name, "description": data.description}
        return {"data": await _save_group(runtime, check_identifier("group_id", group_id), changes)}


async def _add(runtime: Runtime, group_id: str, items: list[MessageItem], *, default_sender: str | None) -> Data:
    requests = [_memorize_request(group_id, item, number, default_sender) for number, item in enumerate(items)]
    stored = 0
    for request in requests:
        result = await service.add(runtime, request)
        stored += result.status_info != "duplicate"
    last = requests[-1]
    task = service.task_id(last.group_id, last.sender, last.message_id)
    return {
        "task_id": task,
        "request_id": task,
        "message_count": len(requests),
        "stored_count": stored,
        "status": "accumulated" if stored else "duplicate",
        "message": "Messages accepted",
    }


def _memorize_request(group_id: str, item: MessageItem, number: int, default_sender: str | None) -> MemorizeRequest:
    where = f"messages[{number}]"
    sender = item.sender_id or (default_sender if item.role == "user" else None) or item.role
    if default_sender is None and not item.sender_id:
        raise InvalidParameter(f"Missing required field: {where}.sender_id")
    when = service.moment(item.timestamp, f"{where}.timestamp")
    content = service.text_of(item.content, f"{where}.content")
    return service.memorize_request(
        where,
        group_id=group_id,
        message_id=item.message_id or service.message_id_for(group_id, sender, when, content),
        create_time=when,
        sender=sender,
        sender_name=item.sender_name,
        content=content,
        refer_list=item.refer_list,
    )


async def _flush(runtime: Runtime, group_id: str) -> Data:
    message, result = await service.flush(runtime, group_id, None)
    status = result.status_info if result.status_info == "pending" else "extracted" if result.count else "no_extraction"
    return {"request_id": str(uuid.uuid4()), "status": status, "message": message, "count": result.count}


async def _save_group(runtime: Runtime, group_id: str, changes: dict[str, Any]) -> Data:
    async with runtime.engine.begin() as conn:
        meta = await conversation_meta.save_partial(conn, group_id, changes)
    return _group(meta.model_dump())


def _group(meta: dict[str, Any]) -> Data:
    keys = ("group_id", "name", "description", "created_at", "updated_at")
    return {key: meta[key] for key in keys}


def _list_key(memory_type: str) -> str:
    return {"episodic_memory": "episodes", "event_log": "event_logs", "foresight": "foresights"}.get(
        memory_type, f"{memory_type}s"
    )
