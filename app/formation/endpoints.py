"""HTTP routes of a tenant's extraction instructions (app.formation.instructions)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, delete, get, put
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery, JSONBody
from sqlalchemy.ext.asyncio import AsyncConnection

from app.errors import NotFound
from app.formation import instructions
from app.http.dependencies import provide_transaction
from app.http.envelope import Envelope, ok
from app.validation import check_identifier


class InstructionsController(Controller):
    path = "/api/v3/agentic/instructions"
    tags = ["instructions"]
    dependencies = {"conn": Provide(provide_transaction)}

    @put("", operation_id="saveInstructions", summary="Set extraction instructions for an app and project")
    async def save(
        self, data: JSONBody[instructions.InstructionsIn], conn: NamedDependency[AsyncConnection]
    ) -> Envelope[dict[str, Any]]:
        return ok("Extraction instructions saved", await instructions.save(conn, data))

    @get("", operation_id="listInstructions", summary="The tenant's extraction instructions")
    async def listed(self, conn: NamedDependency[AsyncConnection]) -> Envelope[dict[str, Any]]:
        found = await instructions.listed(conn)
        count = len(found)
        return ok(f"{count} set{'' if count == 1 else 's'} of extraction instructions", {"instructions": found})

    @delete("", status_code=200, operation_id="deleteInstructions", summary="Remove extraction instructions")
    async def remove(
        self,
        conn: NamedDependency[AsyncConnection],
        app_id: FromQuery[str] = instructions.ANY,
        project_id: FromQuery[str] = instructions.ANY,
    ) -> Envelope[dict[str, Any]]:
        app_id, project_id = check_identifier("app_id", app_id), check_identifier("project_id", project_id)
        if not await instructions.delete(conn, app_id, project_id):
            raise NotFound(f"No extraction instructions for app {app_id!r}, project {project_id!r}")
        return ok("Extraction instructions removed", {"app_id": app_id, "project_id": project_id})
