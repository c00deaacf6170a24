"""Request and response shapes of POST /api/v3/agentic/retrieve_lightweight (seeds 000/001, issue 4)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from app.text.timeparse import parse_day, parse_iso_datetime
from app.validation import Identifier, RequestModel, Text

RetrievalMode = Literal["rrf", "embedding", "bm25"]
DataSource = Literal["episode", "event_log", "semantic_memory", "agent_case", "agent_skill", "profile"]
MemoryScope = Literal["all", "personal", "group"]


class ScopedSearchRequest(RequestModel):
    """The filters every retrieval request shares (lightweight and agentic); ``data_source`` is declared by
    each request with the sources it accepts. Rules between fields: ``app.retrieval.service.validate``."""

    user_id: Identifier | None = Field(default=None, description="Filter: memories of this user")
    group_id: Identifier | None = Field(default=None, description="Filter: memories of this group")
    time_range_days: int | None = Field(
        default=None,
        ge=1,
        description="Only memories of the last N days before current_time (or now); unset, or above 36500 "
        "(clients send 100000): all time",
    )
    top_k: int = Field(default=20, ge=1, le=100)
    memory_scope: MemoryScope = "all"
    filters: dict[str, Any] | None = Field(
        default=None,
        description="Scopes, time and your metadata: AND / OR / NOT of field conditions (docs/filters.md)",
    )
    current_time: date | None = Field(
        default=None, description="YYYY-MM-DD: the reference day; semantic memories must be valid on it"
    )

    include_superseded: bool = Field(
        default=False,
        description="Also memories a newer one superseded (marked status superseded, with superseded_by); by default "
        "only current memories are searched and metadata.hidden counts the others",
    )
    as_of: datetime | None = Field(
        default=None,
        description="ISO 8601: answer with what was true at that time (a memory superseded later included, one said "
        "later left out)",
    )

    explain: bool = Field(
        default=False,
        description="Add to each memory why it was recalled: each leg's rank, score and RRF contribution, the "
        "weights applied (and the reranker's score, agentic)",
    )

    _parse_current_time = field_validator("current_time", mode="before")(
        lambda value: None if value is None else parse_day(value)
    )
    _parse_as_of = field_validator("as_of", mode="before")(
        lambda value: None if value is None else parse_iso_datetime(value)
    )

    @field_validator("data_source", mode="before", check_fields=False)
    @classmethod
    def _memcell_is_episode(cls, value: Any) -> Any:
        return "episode" if value == "memcell" else value

    @field_validator("user_id", "group_id")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        # A blank id silently dropping a tenant filter would return other tenants' memories.
        if value is not None and not value.strip():
            raise ValueError("must not be blank; leave it out to not filter by it")
        return value


class RetrieveLightweightRequest(ScopedSearchRequest):
    query: Text | None = Field(default=None, description="Required unless data_source is profile")
    retrieval_mode: RetrievalMode = "rrf"
    data_source: DataSource = Field(default="episode", description="memcell is accepted as an alias of episode")
    radius: float | None = Field(default=None, ge=-1, le=1, description="Minimum cosine similarity; none by default")
    participant_copies: bool = Field(
        default=False,
        description="Episodes without a user_id filter: also each participant's copy of a group episode (by default "
        "a group episode comes once, as the group's copy)",
    )
    time_aware: bool = Field(
        default=True,
        description="Find a time expression in the query ('last week', '去年五月') and boost memories in that window "
        "(or filter to it when the query says so plainly, 'only last week'); a query naming no time is unchanged",
    )


class RetrievedMemory(BaseModel):
    id: str
    memory_type: str = Field(description="episode, event_log, semantic_memory, profile; or message: not yet formed")
    formed: bool = Field(
        default=True,
        description="False for a message stored but not yet formed into memories (memory_type message); once "
        "formed, its memories are found instead",
    )
    content: str
    title: str | None = None
    summary: str | None = None
    score: float = Field(description="In [0, 1], higher is better; see docs/retrieval.md for each mode")
    timestamp: str
    user_id: str | None
    group_id: str | None
    memcell_id: str | None
    source_message_ids: list[str]
    valid_from: str | None = None
    valid_to: str | None = None
    status: str = Field(default="current", description="current; or superseded (include_superseded / as_of only)")
    superseded_by: str | None = Field(default=None, description="A superseded memory: the one with the newer value")
    subject: str | None = Field(default=None, description="Episodes: the title (upstream's name for it)")
    episode: str | None = Field(default=None, description="Episodes: the episode's text (upstream's name for it)")
    profile: dict[str, Any] | None = Field(default=None, description="data_source=profile only: the profile JSON")
    weight: float | None = Field(default=None, description="time_aware only: the time factor; order is score * weight")
    explain: dict[str, Any] | None = Field(default=None, description="explain=true only: why it was recalled")


class RetrievalMetadata(BaseModel):
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
    hidden: dict[str, int] | None = Field(
        default=None,
        description="Only when fewer than top_k memories came back and filters left some out: how many, by filter "
        "(outside_time_range; other_scopes up to 100, when the scope holds none; not_yet_embedded, messages of the "
        "scope stored but without a vector yet; below_radius; counted_up_to when the scope's counts stopped "
        "early); and, whenever the scope holds any, the memories hidden by their life: superseded, deleted, expired",
    )


class RetrieveLightweightResult(BaseModel):
    memories: list[RetrievedMemory]
    count: int
    metadata: RetrievalMetadata
