"""The v3 API's request and result shapes, for the client.

Kept by hand, field for field, in step with the server's OpenAPI document (``tests/test_client_openapi.py``
fails when a field is missing, renamed or of another type). By hand rather than generated because the client
must install and import without the server (``app`` pulls in Litestar, PostgreSQL drivers and the embedding
runtime), and because these carry the docs a user reads in an editor. Bounds (``top_k`` ≤ 100, …) are the
server's to check: it answers a 400 naming the field, raised here as ``InvalidParameter``.

Requests refuse unknown fields (a typo fails before it is sent); results keep fields a newer server adds.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RetrievalMode = Literal["rrf", "embedding", "bm25"]
DataSource = Literal["episode", "event_log", "semantic_memory", "agent_case", "agent_skill", "profile"]
MemoryScope = Literal["all", "personal", "group"]
MemoryType = Literal["episode", "event_log", "semantic_memory", "agent_case", "agent_skill"]
Role = Literal["system", "user", "assistant", "tool", "developer"]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def body(self) -> dict[str, Any]:
        """The JSON body: fields left unset stay out, so the server applies its own defaults."""
        return self.model_dump(mode="json", exclude_unset=True)


class Result(BaseModel):
    model_config = ConfigDict(extra="allow")


# ---- memorize and flush ----


class MemorizeRequest(Request):
    """One message. ``message_id`` makes memorize idempotent: a repeat is stored once (``status_info`` duplicate)."""

    group_id: str | None = None
    group_name: str | None = None
    message_id: str
    create_time: datetime = Field(description="With an offset; a naive time takes the conversation's time zone")
    sender: str
    sender_name: str | None = None
    content: str
    refer_list: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict, description="Your own JSON object, carried to its memories")
    app_id: str = "default"
    project_id: str = "default"
    agent_id: str | None = None
    session_id: str | None = Field(default=None, description="Defaults to group_id")


class FlushRequest(Request):
    group_id: str | None = None
    sender: str | None = Field(default=None, description="For a personal stream (no group_id): its sender")


class SavedMemory(Result):
    id: str
    memory_type: str
    user_id: str | None
    group_id: str | None
    timestamp: str
    content: str
    title: str | None = None
    summary: str | None = None
    memcell_id: str
    source_message_ids: list[str]
    valid_from: str | None = None
    valid_to: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemorizeResult(Result):
    saved_memories: list[SavedMemory]
    count: int
    status_info: Literal["extracted", "accumulated", "duplicate", "pending"]
    warning: str | None = None
    formation: str | None = None
    idle_close_seconds: float | None = None


# ---- retrieval ----


class ScopedSearchRequest(Request):
    user_id: str | None = None
    group_id: str | None = None
    time_range_days: int | None = None
    top_k: int = 20
    memory_scope: MemoryScope = "all"
    current_time: date | None = None
    include_superseded: bool = False
    as_of: datetime | None = None
    explain: bool = False
    filters: dict[str, Any] | None = Field(
        default=None, description="Scopes, time and your metadata: AND / OR / NOT of field conditions"
    )


class RetrieveLightweightRequest(ScopedSearchRequest):
    query: str | None = None
    retrieval_mode: RetrievalMode = "rrf"
    data_source: DataSource = "episode"
    radius: float | None = None
    participant_copies: bool = False
    time_aware: bool = True


class RetrievedMemory(Result):
    id: str
    memory_type: str = Field(description="episode, event_log, semantic_memory, profile; or message: not yet formed")
    formed: bool = True
    content: str
    title: str | None = None
    summary: str | None = None
    score: float = Field(description="In [0, 1], higher is better")
    timestamp: str
    user_id: str | None
    group_id: str | None
    memcell_id: str | None
    source_message_ids: list[str]
    valid_from: str | None = None
    valid_to: str | None = None
    status: str = "current"
    superseded_by: str | None = None
    subject: str | None = None
    episode: str | None = None
    profile: dict[str, Any] | None = None
    weight: float | None = None
    explain: dict[str, Any] | None = None


class RetrievalMetadata(Result):
    retrieval_mode: str
    data_source: str
    memory_scope: str
    emb_count: int
    bm25_count: int
    final_count: int
    total_latency_ms: float
    query_embedding_ms: float
    time_range_days: int | None
    time_window: dict[str, Any] | None = None
    hidden: dict[str, int] | None = None


class RetrieveLightweightResult(Result):
    memories: list[RetrievedMemory]
    count: int
    metadata: RetrievalMetadata


class LLMConfigIn(Request):
    """This request's own LLM endpoint (agentic retrieval, the agent); the server never stores the key."""

    api_key: str | None = None
    base_url: str | None = None
    model: str | None = None


class AgenticRequest(ScopedSearchRequest):
    query: str
    data_source: Literal["episode", "event_log", "semantic_memory"] = "episode"
    time_aware: bool = True
    llm_config: LLMConfigIn | None = None


class AgenticMetadata(Result):
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
    hidden: dict[str, int] | None = None


class AgenticResult(Result):
    memories: list[dict[str, Any]]
    count: int
    metadata: AgenticMetadata


# ---- context and the agent ----


class ChatMessage(Request):
    """An OpenAI-style chat message. ``refusal``, ``annotations``, ``audio`` and ``function_call`` (what OpenAI's SDKs
    put in a message they return) are accepted, and dropped by the server."""

    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None
    annotations: list[Any] | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None


class SemanticSection(Request):
    enabled: bool = True
    top_k: int = 5
    min_score: float | None = None
    max_tokens: int = 2000


class EpisodeSection(Request):
    enabled: bool = True
    top_k: int = 3
    max_tokens: int = 1500


class ContextRequest(ScopedSearchRequest):
    query: str = Field(description="The user's new message: the query, and the last message")
    system_prompt: str | None = None
    history: list[ChatMessage] = Field(default_factory=list)
    semantic: SemanticSection = Field(default_factory=SemanticSection)
    episodes: EpisodeSection = Field(default_factory=EpisodeSection)
    history_max_tokens: int = 4000
    context_max_tokens: int = 8000


class Source(Result):
    id: str
    memory_type: str
    score: float
    tokens: int
    truncated: bool = False


class Section(Result):
    tokens: int
    budget: int | None = None
    sources: list[Source] | None = None
    messages: int | None = None
    dropped: int | None = None


class ContextResult(Result):
    messages: list[dict[str, Any]] = Field(description="OpenAI-style messages, ready for a chat completion")
    sections: dict[str, Section]
    total_tokens: int
    context_max_tokens: int


class AgentRequest(ScopedSearchRequest):
    messages: list[ChatMessage]
    context_manage_mode: Literal["compact", "compress", "auto"]
    max_total_tokens: int = 20000
    max_tool_message_tokens: int = 2000
    group_token_threshold: int | None = None
    keep_recent_count: int | None = None
    chat_id: str | None = None
    llm_config: LLMConfigIn | None = None
    max_steps: int = 8


class ToolCallRecord(Result):
    step: int
    name: str
    arguments: dict[str, Any] | str
    ok: bool
    tokens: int
    ms: float
    made_by: Literal["model", "memsys"] = "model"
    """memsys: the model answered before searching, so memsys searched with the user's last message."""


class AgentMetadata(Result):
    chat_id: str
    stop_reason: Literal["answered", "max_steps", "llm_error"]
    steps: int
    tool_calls: list[ToolCallRecord]
    offloaded: list[str]
    compacted: int
    compressed: int
    usage: dict[str, int]
    context_tokens: int
    timings_ms: dict[str, float]
    error: str | None = None


class AgentResult(Result):
    answer: str
    messages: list[dict[str, Any]]
    success: bool
    metadata: AgentMetadata


# ---- conversation metadata ----


class UserDetail(BaseModel):
    """A participant of a conversation (in a request and in what GET returns)."""

    model_config = ConfigDict(extra="allow")

    full_name: str
    role: str
    extra: dict[str, Any] | None = None


class InstructionsIn(Request):
    """A tenant's extraction instructions for an app and project ('*': every one)."""

    app_id: str = "*"
    project_id: str = "*"
    instructions: str = ""
    profile_fields: list[str] = Field(default_factory=list)


class ConversationMetaRequest(Request):
    version: str
    scene: str
    scene_desc: str | dict[str, Any]
    name: str
    description: str
    group_id: str
    created_at: datetime
    default_timezone: str = Field(description="An IANA name, e.g. Asia/Shanghai")
    user_details: dict[str, UserDetail]
    tags: list[str] = Field(default_factory=list)


class ConversationMeta(Result):
    id: str
    group_id: str
    version: str
    scene: str
    scene_desc: str | dict[str, Any]
    name: str
    description: str
    default_timezone: str
    user_details: dict[str, UserDetail]
    tags: list[str]
    created_at: str
    updated_at: str


class ConversationMetaSaved(Result):
    id: str
    group_id: str
    scene: str
    name: str
    version: str
    created_at: str
    updated_at: str


# ---- memories ----


class MemoryPage(Result):
    memories: list[dict[str, Any]]
    count: int
    next_cursor: str | None = Field(description="Pass as cursor for the next page; None on the last page")


class MemoryPatch(Request):
    """A correction of one memory; the fields left out stay as they are."""

    content: str | None = None
    valid_from: date | None = None
    valid_to: date | None = None
    expires_at: datetime | None = None
    status: str | None = Field(default=None, description="current: bring back a superseded or expired memory")


class MemoryDetail(Result):
    memory: dict[str, Any]
    sources: dict[str, Any]
    superseded_by: dict[str, Any] | None = None
    supersedes: list[dict[str, Any]] = Field(default_factory=list)


class MemoryHistory(Result):
    memory_id: str
    events: list[dict[str, Any]]
