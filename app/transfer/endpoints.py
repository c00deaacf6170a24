"""HTTP routes of a user's export: the id in the path, or as a query parameter (``GET /export?user_id=…``), which
carries any id memorize accepts, ``/`` included."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery

from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime
from app.transfer import service
from app.validation import check_identifier, check_path_identifier

EXPORT_USER = "Everything held about a user as JSON: messages, memories, profiles"


class ExportController(Controller):
    path = "/api/v3/agentic"
    tags = ["forget and export"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @get("/users/{user_id:str}/export", operation_id="exportUser", summary=EXPORT_USER)
    async def export_user(
        self, request: Request, user_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        raw_path = request.scope.get("raw_path")
        user_id = check_path_identifier("user_id", user_id, raw_path, "GET /api/v3/agentic/export?user_id=…")
        return ok(f"Export of user {user_id}", await service.export_user(runtime, user_id))

    @get("/export", operation_id="exportUserByQuery", summary=f"{EXPORT_USER} (any id)")
    async def export_user_by_query(
        self, user_id: FromQuery[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        user_id = check_identifier("user_id", user_id)
        return ok(f"Export of user {user_id}", await service.export_user(runtime, user_id))
