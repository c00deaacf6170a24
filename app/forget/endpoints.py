"""HTTP routes of forgetting: DELETE a user, DELETE a group (in the caller's tenant).

Each has two forms: the id in the path, and the id as a query parameter (``DELETE /users?user_id=…``), which
carries any id memorize accepts, ``/`` included; the path form refuses an id it cannot carry faithfully."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, delete
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, FromQuery

from app.forget import service
from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime
from app.validation import check_identifier, check_path_identifier

FORGET_USER_BY_QUERY = "DELETE /api/v3/agentic/users?user_id=…"
FORGET_GROUP_BY_QUERY = "DELETE /api/v3/agentic/groups?group_id=…"
FORGET_USER = "Forget a user: their messages, memories and profiles; shared episodes formed again without them"
FORGET_GROUP = "Forget a group: its messages, memories, profiles and metadata"


class ForgetController(Controller):
    path = "/api/v3/agentic"
    tags = ["forget and export"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @delete("/users/{user_id:str}", status_code=200, operation_id="forgetUser", summary=FORGET_USER)
    async def forget_user(
        self, request: Request, user_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        user_id = check_path_identifier("user_id", user_id, request.scope.get("raw_path"), FORGET_USER_BY_QUERY)
        return ok(f"Forgot user {user_id}", await service.forget_user(runtime, user_id))

    @delete("/users", status_code=200, operation_id="forgetUserByQuery", summary=f"{FORGET_USER} (any id)")
    async def forget_user_by_query(
        self, user_id: FromQuery[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        user_id = check_identifier("user_id", user_id)
        return ok(f"Forgot user {user_id}", await service.forget_user(runtime, user_id))

    @delete("/groups/{group_id:str}", status_code=200, operation_id="forgetGroup", summary=FORGET_GROUP)
    async def forget_group(
        self, request: Request, group_id: FromPath[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        group_id = check_path_identifier("group_id", group_id, request.scope.get("raw_path"), FORGET_GROUP_BY_QUERY)
        return ok(f"Forgot group {group_id}", await service.forget_group(runtime, group_id))

    @delete("/groups", status_code=200, operation_id="forgetGroupByQuery", summary=f"{FORGET_GROUP} (any id)")
    async def forget_group_by_query(
        self, group_id: FromQuery[str], runtime: NamedDependency[Runtime]
    ) -> Envelope[dict[str, Any]]:
        group_id = check_identifier("group_id", group_id)
        return ok(f"Forgot group {group_id}", await service.forget_group(runtime, group_id))
