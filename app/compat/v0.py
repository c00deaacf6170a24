"""EverMemOS v0 routes (``/api/v0``), as the ``evermemos`` 0.3.13 SDK calls them (and ``evermemos-mcp`` in v0
mode): answers are ``{"status": "ok", "message", "result"}``. Reads take their parameters from the query string
(lists as repeated keys) and from a JSON body, as upstream does, since the MCP server sends GET with a body."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from app.compat import service
from app.compat.schemas import V0Add, V0ConversationMeta, V0Delete, V0Fetch, V0Search
from app.conversation_meta import service as conversation_meta
from app.errors import InvalidParameter, NotFound
from app.http.auth import actor_of
from app.http.dependencies import provide_runtime
from app.memorize.schemas import MemorizeRequest
from app.runtime import Runtime
from app.validation import check_identifier

Body = dict[str, Any]
LIST_PARAMETERS = {"group_ids", "memory_types"}


class V0Controller(Controller):
    path = "/api/v0"
    tags = ["EverMemOS v0"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post("/memories", status_code=200, operation_id="v0AddMemory")
    async def add(self, data: JSONBody[V0Add], runtime: NamedDependency[Runtime]) -> Body:
        result = await service.add(runtime, MemorizeRequest(**data.model_dump(exclude={"flush", "role"})))
        message = (
            "Message already stored (duplicate message_id)" if result.status_info == "duplicate" else "Message stored"
        )
        if data.flush:
            message, result = await service.flush(runtime, data.group_id, data.sender)
        task = service.task_id(data.group_id, data.sender, data.message_id)
        return {"status": "ok", "message": message, "request_id": task, "result": result.model_dump(mode="json")}

    @get("/memories/search", operation_id="v0SearchMemories")
    async def search(self, request: Request, runtime: NamedDependency[Runtime]) -> Body:
        return await _search(runtime, V0Search(**await _parameters(request)))

    @post("/memories/search", status_code=200, operation_id="v0SearchMemoriesPost")
    async def search_post(self, request: Request, runtime: NamedDependency[Runtime]) -> Body:
        return await _search(runtime, V0Search(**await _parameters(request)))

    @get("/memories", operation_id="v0FetchMemories")
    async def fetch(self, request: Request, runtime: NamedDependency[Runtime]) -> Body:
        query = V0Fetch(**await _parameters(request))
        scope = _scope(query)
        items, total = await service.fetch(
            runtime, scope=scope, memory_type=query.memory_type, page=query.page, page_size=query.page_size
        )
        result = {"memories": items, "total_count": total, "count": len(items)}
        return {
            "status": "ok",
            "message": f"Memory retrieval successful, retrieved {len(items)} memories",
            "result": result,
        }

    @delete("/memories", status_code=200, operation_id="v0DeleteMemories")
    async def delete(self, request: Request, runtime: NamedDependency[Runtime]) -> Body:
        given = V0Delete(**await _parameters(request))
        memory_id = given.memory_id or given.id or given.event_id
        count = await service.delete(
            runtime, memory_id=memory_id, user_id=given.user_id, group_id=given.group_id, actor=actor_of(request)
        )
        filters = [
            name
            for name in ("memory_id", "user_id", "group_id")
            if getattr(given, name) or (name == "memory_id" and memory_id)
        ]
        return {
            "status": "ok",
            "message": f"Delete operation completed, {count} records affected",
            "result": {"count": count, "deleted_count": count, "filters": filters},
        }

    @get("/memories/conversation-meta", operation_id="v0GetConversationMeta")
    async def get_meta(self, request: Request, runtime: NamedDependency[Runtime]) -> Body:
        group_id = (await _parameters(request)).get("group_id")
        if not isinstance(group_id, str):
            raise InvalidParameter("Missing required field: group_id")
        async with runtime.engine.begin() as conn:
            meta = await conversation_meta.get(conn, check_identifier("group_id", group_id))
        return {"status": "ok", "message": "Conversation metadata found", "result": _meta(meta.model_dump())}

    @post("/memories/conversation-meta", status_code=200, operation_id="v0SaveConversationMeta")
    async def save_meta(self, data: JSONBody[V0ConversationMeta], runtime: NamedDependency[Runtime]) -> Body:
        if not data.created_at or not data.scene:
            raise InvalidParameter(f"Missing required field: {'created_at' if not data.created_at else 'scene'}")
        meta = await _save_meta(runtime, data)
        return {"status": "ok", "message": "Conversation metadata saved successfully", "result": _meta(meta)}

    @patch("/memories/conversation-meta", operation_id="v0UpdateConversationMeta")
    async def update_meta(self, data: JSONBody[V0ConversationMeta], runtime: NamedDependency[Runtime]) -> Body:
        meta = await _save_meta(runtime, data)
        updated = sorted(data.model_fields_set - {"group_id"})
        result = {key: meta[key] for key in ("id", "group_id", "scene", "name", "updated_at")}
        return {
            "status": "ok",
            "message": "Conversation metadata updated",
            "result": {**result, "updated_fields": updated},
        }

    @get("/status/request", operation_id="v0RequestStatus")
    async def request_status(self, request: Request, runtime: NamedDependency[Runtime]) -> Body:
        request_id = request.query_params.get("request_id") or request.headers.get("x-request-id")
        if not request_id:
            raise InvalidParameter("Missing required field: request_id")
        try:
            status = await service.task_status(runtime, check_identifier("request_id", request_id))
        except NotFound:  # an id memsys did not give: upstream answers found=false, not an error
            return {"success": True, "found": False, "data": None, "message": f"No request {request_id}"}
        return {"success": True, "found": True, "data": {"request_id": request_id, "status": status}, "message": None}


async def _parameters(request: Request) -> dict[str, Any]:
    """Query parameters (repeated keys of a list parameter as a list) overlaid by the JSON body, if any."""
    parameters: dict[str, Any] = {}
    for key in request.query_params:
        values = request.query_params.getall(key)
        parameters[key] = list(values) if key in LIST_PARAMETERS else values[-1]
    if await request.body():
        body = await request.json()
        if not isinstance(body, dict):
            raise InvalidParameter("Invalid body: a JSON object")
        parameters.update(body)
    return parameters


def _scope(query: V0Search | V0Fetch) -> service.Scope:
    """What a v0 read filters on: the user, the groups and the time window (ISO 8601)."""
    return service.Scope(
        user_id=query.user_id,
        group_ids=query.group_ids,
        start=service.moment(query.start_time, "start_time") if query.start_time else None,
        end=service.moment(query.end_time, "end_time") if query.end_time else None,
    )


async def _search(runtime: Runtime, query: V0Search) -> Body:
    scope = _scope(query)
    found = await service.search(
        runtime,
        query=query.query,
        scope=scope,
        method=query.retrieve_method,
        memory_types=query.memory_types,
        top_k=query.top_k,
        radius=query.radius,
    )
    memories, profiles = found["memories"], found["profiles"]
    return {
        "status": "ok",
        "message": f"Memory search successful, retrieved {len(profiles)} profiles and {len(memories)} memories",
        "result": {
            "memories": memories,
            "profiles": profiles,
            "pending_messages": [],
            "total_count": len(memories) + len(profiles),
            "query_metadata": {
                "query": query.query,
                "user_id": query.user_id,
                "group_ids": query.group_ids,
                "retrieve_method": query.retrieve_method,
                "memory_types": query.memory_types,
                "top_k": query.top_k,
            },
        },
    }


async def _save_meta(runtime: Runtime, data: V0ConversationMeta) -> dict[str, Any]:
    if not data.group_id:
        raise InvalidParameter("Missing required field: group_id (the SDK sends it with extra_body)")
    changes: dict[str, Any] = data.model_dump(exclude={"group_id", "user_details"}, exclude_none=True)
    if data.user_details is not None:
        changes["user_details"] = {
            user_id: {
                "full_name": detail.full_name or user_id,
                "role": detail.role or detail.custom_role or "member",
                **({"extra": detail.extra} if detail.extra else {}),
            }
            for user_id, detail in data.user_details.items()
        }
    async with runtime.engine.begin() as conn:
        meta = await conversation_meta.save_partial(conn, check_identifier("group_id", data.group_id), changes)
    return meta.model_dump()


def _meta(meta: dict[str, Any]) -> dict[str, Any]:
    return {**meta, "conversation_created_at": meta["created_at"], "is_default": False}
