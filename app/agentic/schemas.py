"""Request and response shapes of POST /api/v3/agentic/retrieve_agentic (seeds 000/001, issue 6)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.retrieval.schemas import ScopedSearchRequest
from app.validation import Identifier, NonBlankText, RequestModel, Text


class LLMConfigIn(RequestModel):
    """Overrides the server's LLM settings for this request only; the key is never logged or stored."""

    api_key: Text | None = None
    base_url: Text | None = Field(default=None, description="An http(s) URL whose host resolves to public addresses")
    model: Identifier | None = None

    def __repr__(self) -> str:
        return (
            f"LLMConfigIn(base_url={self.base_url!r}, model={self.model!r}, api_key={'***' if self.api_key else None})"
        )


class AgenticRequest(ScopedSearchRequest):
    query: NonBlankText = Field(min_length=1)
    data_source: Literal["episode", "event_log", "semantic_memory"] = Field(
        default="episode", description="memcell is accepted as an alias of episode"
    )
    time_aware: bool = Field(default=True, description="Boost (or filter to) the time window the query names")
    llm_config: LLMConfigIn | None = None


class AgenticMetadata(BaseModel):
    retrieval_mode: Literal["agentic", "agentic_fallback"]
    is_multi_round: bool
    round1_count: int
    is_sufficient: bool | None
    reasoning: str
    refined_queries: list[str]
    round2_count: int
    final_count: int
    total_latency_ms: float
    missing_information: str = ""
    reranker: str
    data_source: str
    memory_scope: str
    time_window: dict[str, Any] | None = None
    fallback_reason: str | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    hidden: dict[str, int] | None = Field(
        default=None, description="What the scope holds that its life hides: superseded, deleted, expired"
    )


class AgenticResult(BaseModel):
    memories: list[dict[str, Any]]
    count: int
    metadata: AgenticMetadata
