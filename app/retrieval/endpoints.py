"""HTTP route of lightweight retrieval."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from app.http.dependencies import provide_runtime
from app.http.envelope import Envelope, ok
from app.retrieval import service
from app.retrieval.schemas import RetrieveLightweightRequest, RetrieveLightweightResult
from app.runtime import Runtime


class RetrievalController(Controller):
    path = "/api/v3/agentic"
    tags = ["retrieval"]
    dependencies = {"runtime": Provide(provide_runtime)}

    @post(
        "/retrieve_lightweight",
        status_code=200,
        operation_id="retrieve_lightweight",
        summary="Hybrid retrieval: HNSW vector leg + BM25 leg fused by RRF, in one SQL statement",
    )
    async def retrieve_lightweight(
        self, data: JSONBody[RetrieveLightweightRequest], runtime: NamedDependency[Runtime]
    ) -> Envelope[RetrieveLightweightResult]:
        return ok(*await service.retrieve(runtime, data))
