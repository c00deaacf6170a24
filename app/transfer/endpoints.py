"""HTTP route of a user's export."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath

from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime
from app.transfer import service
from app.validation import check_identifier


class ExportController(Controller):
    path = "/api/v3/agentic"
    tags = ["forget and export"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @get(
        "/users/{user_id:str}/export",
        operation_id="exportUser",
        summary="Everything held about a user as JSON: messages, memories, profiles",
    )
    async def export_user(self, user_id: FromPath[str], runtime: NamedDependency[Runtime]) -> Envelope[dict[str, Any]]:
        result = await service.export_user(runtime, check_identifier("user_id", user_id))
        return ok(f"Export of user {user_id}", result)
