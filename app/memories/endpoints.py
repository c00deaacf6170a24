"""HTTP routes of memories: listing, and one memory's life (read, correct, delete, restore, history).

Memory ids are UUIDs, which a path always carries as they are: these routes need no query-parameter form."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery, JSONBody

from app.http.auth import actor_of
from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.memories import service
from app.memories.schemas import MemoryDetail, MemoryHistory, MemoryListQuery, MemoryPage, MemoryPatch
from app.runtime import Runtime


class MemoriesController(Controller):
    path = "/api/v3/agentic/memories"
    tags = ["memories"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @get("", operation_id="listMemories", summary="List memories with filters, newest first, cursor pagination")
    async def list_memories(
        self,
        request: Request,
        runtime: NamedDependency[Runtime],
        user_id: FromQuery[str | None] = None,
        group_id: FromQuery[str | None] = None,
        memory_type: FromQuery[str | None] = None,
        start_time: FromQuery[str | None] = None,
        end_time: FromQuery[str | None] = None,
        limit: FromQuery[int] = 50,
        cursor: FromQuery[str | None] = None,
        filters: FromQuery[str | None] = None,
    ) -> Envelope[MemoryPage]:
        given = {
            "user_id": user_id,
            "group_id": group_id,
            "memory_type": memory_type,
            "start_time": start_time,
            "end_time": end_time,
            "limit": limit,
            "cursor": cursor,
            "filters": filters,
        }
        # A parameter the query does not know (groupId=…) is refused by name rather than listing every group's.
        unknown = {name: value for name, value in request.query_params.items() if name not in given}
        query = MemoryListQuery(**given, **unknown)
        page = await service.list_memories(runtime, query)
        return ok(f"Found {page.count} memories", page)

    @get(
        "/{memory_id:str}",
        operation_id="getMemory",
        summary="One memory: its status, validity, sources and what superseded it",
    )
    async def get_memory(self, memory_id: FromPath[str], runtime: NamedDependency[Runtime]) -> Envelope[MemoryDetail]:
        return ok("Memory found", await service.get_memory(runtime, memory_id))

    @patch("/{memory_id:str}", operation_id="editMemory", summary="Correct a memory's content, validity or expiry")
    async def edit_memory(
        self, request: Request, memory_id: FromPath[str], data: JSONBody[MemoryPatch], runtime: NamedDependency[Runtime]
    ) -> Envelope[MemoryDetail]:
        return ok("Memory corrected", await service.edit_memory(runtime, memory_id, data, actor_of(request)))

    @delete("/{memory_id:str}", status_code=200, operation_id="deleteMemory", summary="Delete a memory (restorable)")
    async def delete_memory(
        self, request: Request, memory_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        return ok("Memory deleted", await service.delete_memory(runtime, memory_id, actor_of(request)))

    @post("/{memory_id:str}/restore", status_code=200, operation_id="restoreMemory", summary="Bring a memory back")
    async def restore_memory(
        self, request: Request, memory_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[MemoryDetail]:
        return ok("Memory restored", await service.restore_memory(runtime, memory_id, actor_of(request)))

    @get("/{memory_id:str}/history", operation_id="memoryHistory", summary="A memory's events, oldest first")
    async def memory_history(
        self, memory_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[MemoryHistory]:
        return ok("Memory history", await service.memory_history(runtime, memory_id))
