"""HTTP route of context assembly (seed 002)."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from app.context import service
from app.context.schemas import ContextRequest, ContextResult
from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime


class ContextController(Controller):
    path = "/api/v3/agentic"
    tags = ["context"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post(
        "/context",
        status_code=200,
        operation_id="assembleContext",
        summary="The messages to send to an LLM: system prompt, retrieved knowledge, episode snippets, history "
        "pruned to its budget and the user's message, within token budgets",
    )
    async def context(
        self, data: JSONBody[ContextRequest], runtime: NamedDependency[Runtime]
    ) -> Envelope[ContextResult]:
        return ok(*await service.assemble(runtime, data))
