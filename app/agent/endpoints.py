"""HTTP route of the ReAct retrieval agent (seed 003)."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from app.agent import service
from app.agent.schemas import AgentRequest, AgentResult
from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.runtime import Runtime


class AgentController(Controller):
    path = "/api/v3/agentic"
    tags = ["retrieval"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post(
        "/agent",
        status_code=200,
        operation_id="retrievalAgent",
        summary="A ReAct agent that answers from the user's memories with tools, its context compacted and compressed",
    )
    async def agent(self, data: JSONBody[AgentRequest], runtime: NamedDependency[Runtime]) -> Envelope[AgentResult]:
        return ok(*await service.run(runtime, data))
