"""Request shapes of EverOS's v2 memory API (``/api/v2/memory/*``), as the ``everos-cloud`` 1.0.0 client sends them
(its models are generated from EverOS's OpenAPI 2.0.0)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from app.validation import Identifier, RequestModel, Text

ScopeId = Identifier


class ToolCallFunction(RequestModel):
    name: Identifier
    arguments: Text


class ToolCall(RequestModel):
    id: Identifier
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ContentItem(RequestModel):
    """A content element: text is searchable; any other kind is kept as a reference (its name, uri and extension),
    never fetched. ``base64`` payloads are refused: memsys stores no objects."""

    type: Literal["text", "audio", "image", "doc", "pdf", "html", "email"]
    text: Text | None = None
    source: Text | None = None
    uri: Text | None = Field(default=None, max_length=2048)
    ext: Identifier | None = None
    name: Identifier | None = None
    source_info: dict[str, Any] | None = None
    extras: dict[str, Any] | None = None


class Message(RequestModel):
    sender_id: Identifier = Field(min_length=1)
    sender_name: Identifier | None = None
    role: Literal["user", "assistant", "tool"]
    timestamp: int = Field(description="Epoch milliseconds")
    content: Text | list[ContentItem]
    tool_calls: list[ToolCall] | None = Field(default=None, max_length=32)
    tool_call_id: Identifier | None = None


class Scoped(RequestModel):
    app_id: ScopeId = "default"
    project_id: ScopeId = "default"


class AddInput(Scoped):
    session_id: Identifier = Field(min_length=1, max_length=128)
    mode: Literal["chat", "agent"] = "chat"
    messages: list[Message] = Field(min_length=1, max_length=500)
    async_mode: bool = True


class FlushInput(Scoped):
    session_id: Identifier = Field(min_length=1)


class SearchInput(Scoped):
    user_id: Identifier | None = Field(default=None, min_length=1)
    agent_id: Identifier | None = Field(default=None, min_length=1)
    query: Text = Field(min_length=1)
    method: Literal["keyword", "vector", "hybrid", "agentic"] = "hybrid"
    top_k: int = Field(default=-1, ge=-1, le=100, description="-1: memsys's default (10)")
    radius: float | None = Field(default=None, ge=0, le=1)
    min_score: float | None = Field(default=None, ge=0, le=1)
    include_profile: bool = False
    enable_llm_rerank: bool = False
    filters: dict[str, Any] | None = None


class GetInput(Scoped):
    user_id: Identifier | None = Field(default=None, min_length=1)
    agent_id: Identifier | None = Field(default=None, min_length=1)
    memory_type: Literal["episode", "profile", "agent_case", "agent_skill"]
    page: int = Field(default=1, ge=1, le=10_000)
    page_size: int = Field(default=20, ge=1, le=100)
    sort_by: Literal["timestamp"] = "timestamp"
    sort_order: Literal["asc", "desc"] = "desc"
    filters: dict[str, Any] | None = None


class DeleteInput(Scoped):
    user_id: Identifier | None = Field(default=None, min_length=1)
    agent_id: Identifier | None = Field(default=None, min_length=1)
    session_id: Identifier | None = None


class ProfileData(RequestModel):
    category: Identifier | None = Field(default=None, min_length=1)
    trait: Identifier | None = Field(default=None, min_length=1)
    description: Text | None = Field(default=None, min_length=1, max_length=4000)


class EditOperation(RequestModel):
    reason: Text | None = Field(default=None, max_length=256)
    action: Literal["add", "update", "delete"]
    type: Literal["explicit_info", "implicit_traits"]
    item_id: Identifier | None = None
    data: ProfileData | None = None


class EditInput(Scoped):
    user_id: Identifier = Field(min_length=1)
    memory_type: Literal["profile"] = "profile"
    operations: list[EditOperation] = Field(min_length=1, max_length=50)
