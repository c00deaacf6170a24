"""Query and result of GET /api/v3/agentic/memories (listing, newest first, cursor pagination)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from app.text.timeparse import parse_day, parse_iso_datetime
from app.validation import Identifier, RequestModel, Text


class MemoryListQuery(RequestModel):
    user_id: Identifier | None = None
    group_id: Identifier | None = None
    memory_type: Literal["episode", "event_log", "semantic_memory", "agent_case", "agent_skill"] | None = None
    start_time: datetime | None = Field(default=None, description="ISO 8601: memories at or after it")
    end_time: datetime | None = Field(default=None, description="ISO 8601: memories before it")
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Text | None = Field(default=None, max_length=200, description="next_cursor of the previous page")
    filters: Text | None = Field(
        default=None, max_length=8192, description="The filter language as JSON: scopes, time, your metadata"
    )

    _parse_times = field_validator("start_time", "end_time", mode="before")(
        lambda value: None if value is None else parse_iso_datetime(value)
    )


class MemoryPage(BaseModel):
    memories: list[dict[str, Any]]
    count: int
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last page")


class MemoryPatch(RequestModel):
    """PATCH /api/v3/agentic/memories/{memory_id}: what a correction may change; fields left out stay as they are."""

    content: Text | None = Field(
        default=None,
        description="The corrected text: searchable by keyword at once, by "
        "meaning once it is embedded again (a worker does it within seconds)",
    )
    valid_from: date | None = Field(default=None, description="YYYY-MM-DD: from when it holds")
    valid_to: date | None = Field(default=None, description="YYYY-MM-DD: until when it held")
    expires_at: datetime | None = Field(default=None, description="ISO 8601: not found after this time")
    status: str | None = Field(
        default=None, description="current: bring back a superseded or expired memory (as restore does); the only value"
    )

    _parse_days = field_validator("valid_from", "valid_to", mode="before")(
        lambda value: None if value is None else parse_day(value)
    )
    _parse_expiry = field_validator("expires_at", mode="before")(
        lambda value: None if value is None else parse_iso_datetime(value)
    )

    @field_validator("status")
    @classmethod
    def _current(cls, value: str | None) -> str | None:
        if value is not None and value != "current":
            raise ValueError("can only be current (DELETE deletes; supersession and expiry happen by themselves)")
        return value

    @field_validator("content")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty: DELETE the memory instead")
        return value


class MemoryDetail(BaseModel):
    """One memory with its life: status, validity, sources, what superseded it and what it superseded."""

    memory: dict[str, Any]
    sources: dict[str, Any] = Field(description="The MemCell it was formed from and its source messages' ids")
    superseded_by: dict[str, Any] | None = Field(default=None, description="The memory that holds the newer value")
    supersedes: list[dict[str, Any]] = Field(default_factory=list, description="The memories this one superseded")


class MemoryHistory(BaseModel):
    memory_id: str
    events: list[dict[str, Any]] = Field(description="Oldest first: event, at, actor, reason, details")
