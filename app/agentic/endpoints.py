"""HTTP route of agentic retrieval."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from app.agentic import service
from app.agentic.schemas import AgenticRequest, AgenticResult
from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime


class AgenticController(Controller):
    path = "/api/v3/agentic"
    tags = ["retrieval"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post(
        "/retrieve_agentic",
        status_code=200,
        operation_id="retrieveAgentic",
        summary="LLM-guided multi-round retrieval with rerank and time awareness",
    )
    async def retrieve_agentic(
        self, data: JSONBody[AgenticRequest], runtime: NamedDependency[Runtime]
    ) -> Envelope[AgenticResult]:
        return ok(*await service.retrieve_agentic(runtime, data))
