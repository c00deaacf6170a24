"""Query and result of GET /api/v3/agentic/memories (listing, newest first, cursor pagination)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from app.text.timeparse import parse_iso_datetime
from app.validation import check_identifier


class MemoryListQuery(BaseModel):
    user_id: str | None = None
    group_id: str | None = None
    memory_type: Literal["episode", "event_log", "semantic_memory"] | None = None
    start_time: datetime | None = Field(default=None, description="ISO 8601: memories at or after it")
    end_time: datetime | None = Field(default=None, description="ISO 8601: memories before it")
    limit: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, description="next_cursor of the previous page")

    _parse_times = field_validator("start_time", "end_time", mode="before")(
        lambda value: None if value is None else parse_iso_datetime(value)
    )

    @field_validator("user_id", "group_id")
    @classmethod
    def _identifier(cls, value: str | None, info) -> str | None:
        return None if value is None else check_identifier(info.field_name, value)


class MemoryPage(BaseModel):
    memories: list[dict[str, Any]]
    count: int
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last page")
