"""Request and response shapes of POST /api/v3/agentic/retrieve_agentic (seeds 000/001, issue 6)."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from app.text.timeparse import parse_day


class LLMConfigIn(BaseModel):
    """Overrides the server's LLM settings for this request only; the key is never logged or stored."""

    api_key: str | None = None
    base_url: str | None = None
    model: str | None = None

    def __repr__(self) -> str:
        return (
            f"LLMConfigIn(base_url={self.base_url!r}, model={self.model!r}, api_key={'***' if self.api_key else None})"
        )


class AgenticRequest(BaseModel):
    query: str = Field(min_length=1)
    user_id: str | None = None
    group_id: str | None = None
    time_range_days: int = Field(default=365, ge=1, le=36500)
    top_k: int = Field(default=20, ge=1, le=100)
    memory_scope: Literal["all", "personal", "group"] = "all"
    data_source: Literal["episode", "memcell", "event_log", "semantic_memory"] = "episode"
    current_time: date | None = Field(default=None, description="YYYY-MM-DD; 'now' for relative time expressions")
    time_aware: bool = Field(default=True, description="Boost (or filter to) the time window the query names")
    llm_config: LLMConfigIn | None = None

    _parse_day = field_validator("current_time", mode="before")(
        lambda value: None if value is None else parse_day(value)
    )

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _scope_needs_ids(self) -> AgenticRequest:
        if self.memory_scope == "personal" and not self.user_id:
            raise ValueError("memory_scope 'personal' needs user_id")
        if self.memory_scope == "group" and not self.group_id:
            raise ValueError("memory_scope 'group' needs group_id")
        if self.data_source == "memcell":
            self.data_source = "episode"
        return self


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


class AgenticResult(BaseModel):
    memories: list[dict[str, Any]]
    count: int
    metadata: AgenticMetadata
