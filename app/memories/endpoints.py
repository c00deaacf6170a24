"""HTTP route listing memories."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery

from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.memories import service
from app.memories.schemas import MemoryListQuery, MemoryPage
from app.runtime import Runtime


class MemoriesController(Controller):
    path = "/api/v3/agentic/memories"
    tags = ["memories"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @get("", operation_id="listMemories", summary="List memories with filters, newest first, cursor pagination")
    async def list_memories(
        self,
        runtime: NamedDependency[Runtime],
        user_id: FromQuery[str | None] = None,
        group_id: FromQuery[str | None] = None,
        memory_type: FromQuery[str | None] = None,
        start_time: FromQuery[str | None] = None,
        end_time: FromQuery[str | None] = None,
        limit: FromQuery[int] = 50,
        cursor: FromQuery[str | None] = None,
    ) -> Envelope[MemoryPage]:
        query = MemoryListQuery(
            user_id=user_id,
            group_id=group_id,
            memory_type=memory_type,
            start_time=start_time,
            end_time=end_time,
            limit=limit,
            cursor=cursor,
        )
        page = await service.list_memories(runtime, query)
        return ok(f"Found {page.count} memories", page)
