"""HTTP routes of message intake: memorize and flush."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.memorize import service
from app.memorize.schemas import FlushRequest, MemorizeRequest, MemorizeResult
from app.runtime import Runtime


class MemorizeController(Controller):
    path = "/api/v3/agentic"
    tags = ["memorize"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post("/memorize", status_code=200, operation_id="memorize", summary="Store one message")
    async def memorize(
        self, data: JSONBody[MemorizeRequest], runtime: NamedDependency[Runtime]
    ) -> Envelope[MemorizeResult]:
        return ok(*await service.memorize(runtime, data))

    @post("/flush", status_code=200, operation_id="flush", summary="Close a stream's open MemCell now")
    async def flush(self, data: JSONBody[FlushRequest], runtime: NamedDependency[Runtime]) -> Envelope[MemorizeResult]:
        return ok(*await service.flush(runtime, data))
