"""HTTP routes of forgetting: DELETE a user, DELETE a group (in the caller's tenant)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, delete
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath

from app.forget import service
from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime
from app.validation import check_identifier


class ForgetController(Controller):
    path = "/api/v3/agentic"
    tags = ["forget and export"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @delete(
        "/users/{user_id:str}",
        status_code=200,
        operation_id="forgetUser",
        summary="Forget a user: their messages, memories and profiles; shared episodes formed again without them",
    )
    async def forget_user(self, user_id: FromPath[str], runtime: NamedDependency[Runtime]) -> Envelope[dict[str, Any]]:
        result = await service.forget_user(runtime, check_identifier("user_id", user_id))
        return ok(f"Forgot user {user_id}", result)

    @delete(
        "/groups/{group_id:str}",
        status_code=200,
        operation_id="forgetGroup",
        summary="Forget a group: its messages, memories, profiles and metadata",
    )
    async def forget_group(
        self, group_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        result = await service.forget_group(runtime, check_identifier("group_id", group_id))
        return ok(f"Forgot group {group_id}", result)
