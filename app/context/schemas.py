"""Request and response shapes of POST /api/v3/agentic/context (seed 002: context assembly under budgets)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.retrieval.schemas import ScopedSearchRequest
from app.validation import Identifier, NonBlankText, RequestModel, Text

Role = Literal["system", "user", "assistant", "tool", "developer"]


class ChatMessage(RequestModel):
    """An OpenAI-style chat message; an assistant's ``tool_calls`` and a tool reply's ``tool_call_id`` kept. The
    other keys OpenAI's SDKs put in a message they return (``refusal``, ``annotations``, ``audio``,
    ``function_call``) are accepted and dropped, so that a dialogue passes through as an SDK holds it; any other
    key is refused (a typo of ``content`` must not leave a message empty)."""

    role: Role
    content: Text | None = None
    name: Identifier | None = None
    tool_calls: list[dict[str, Any]] | None = Field(default=None, max_length=64)
    tool_call_id: Identifier | None = None
    refusal: str | None = Field(default=None, exclude=True, description="Accepted and dropped (OpenAI SDKs send it)")
    annotations: list[Any] | None = Field(default=None, exclude=True, description="Accepted and dropped")
    audio: dict[str, Any] | None = Field(default=None, exclude=True, description="Accepted and dropped")
    function_call: dict[str, Any] | None = Field(default=None, exclude=True, description="Accepted and dropped")

    def as_openai(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class SemanticSection(RequestModel):
    """[2] Retrieved knowledge: atomic facts (event log) and semantic memories at least ``min_score`` similar by
    cosine, ranked by hybrid search (rrf)."""

    enabled: bool = True
    top_k: int = Field(default=5, ge=1, le=100)
    min_score: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Minimum cosine similarity (0-1); unset: the cut-off calibrated for the server's embedding model "
        "(MEMSYS_SIMILARITY_CUTOFF; 0.34 for the default all-MiniLM-L6-v2)",
    )
    max_tokens: int = Field(default=2000, ge=0, le=1_000_000)


class EpisodeSection(RequestModel):
    """[3] Episode snippets: the episodes hybrid search ranks first."""

    enabled: bool = True
    top_k: int = Field(default=3, ge=1, le=100)
    max_tokens: int = Field(default=1500, ge=0, le=1_000_000)


class ContextRequest(ScopedSearchRequest):
    query: NonBlankText = Field(min_length=1, description="The user's new message: the query, and the last message")
    system_prompt: Text | None = Field(default=None, description="[1] The caller's system prompt")
    history: list[ChatMessage] = Field(default_factory=list, max_length=2000, description="[4] The session so far")
    semantic: SemanticSection = Field(default_factory=SemanticSection)
    episodes: EpisodeSection = Field(default_factory=EpisodeSection)
    history_max_tokens: int = Field(default=4000, ge=0, le=10_000_000)
    context_max_tokens: int = Field(default=8000, ge=1, le=10_000_000)


class Source(BaseModel):
    id: str
    memory_type: str
    score: float
    tokens: int
    truncated: bool = False


class Section(BaseModel):
    tokens: int
    budget: int | None = None
    sources: list[Source] | None = None
    messages: int | None = None
    dropped: int | None = None


class ContextResult(BaseModel):
    messages: list[dict[str, Any]]
    sections: dict[str, Section]
    total_tokens: int
    context_max_tokens: int
