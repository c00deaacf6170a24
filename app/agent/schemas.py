"""Request and response shapes of POST /api/v3/agentic/agent (seed 003)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.agentic.schemas import LLMConfigIn
from app.context.schemas import ChatMessage
from app.retrieval.schemas import ScopedSearchRequest
from app.validation import Identifier

StopReason = Literal["answered", "max_steps", "llm_error"]


class AgentRequest(ScopedSearchRequest):
    messages: list[ChatMessage] = Field(min_length=1, max_length=2000, description="The dialogue so far")
    context_manage_mode: Literal["compact", "compress", "auto"] = Field(
        description="compact: long tool replies are stored and previewed; compress: older messages are summarised "
        "by the LLM; auto: compact, then compress if still over max_total_tokens"
    )
    max_total_tokens: int = Field(default=20000, ge=100, le=2_000_000)
    max_tool_message_tokens: int = Field(default=2000, ge=50, le=1_000_000)
    group_token_threshold: int | None = Field(
        default=None, ge=0, le=2_000_000, description="Tokens per compression group; none or 0: one group"
    )
    keep_recent_count: int | None = Field(
        default=None, ge=0, le=1000, description="Recent messages kept as they are (default 1 compact, 2 compress)"
    )
    chat_id: Identifier | None = Field(default=None, description="The session; offloaded content is kept under it")
    llm_config: LLMConfigIn | None = None
    max_steps: int = Field(default=8, ge=1, le=32, description="LLM calls at most")


class ToolCallRecord(BaseModel):
    step: int
    name: str
    arguments: dict[str, Any] | str
    ok: bool
    tokens: int
    ms: float
    made_by: Literal["model", "memsys"] = Field(
        default="model",
        description="memsys: the model answered without having searched, so memsys searched with the user's "
        "last message and asked the model again",
    )


class AgentMetadata(BaseModel):
    chat_id: str
    stop_reason: StopReason
    steps: int
    tool_calls: list[ToolCallRecord]
    offloaded: list[str] = Field(description="References of content stored out of the context (read_offloaded)")
    compacted: int = Field(description="Tool replies replaced by a preview and a reference")
    compressed: int = Field(description="Messages replaced by LLM summaries")
    usage: dict[str, int]
    context_tokens: int
    timings_ms: dict[str, float]
    error: str | None = None


class AgentResult(BaseModel):
    answer: str
    messages: list[dict[str, Any]]
    success: bool
    metadata: AgentMetadata
