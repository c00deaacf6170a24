"""Query and result of GET /api/v3/agentic/memories (listing, newest first, cursor pagination)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from app.text.timeparse import parse_iso_datetime
from app.validation import Identifier, Text


class MemoryListQuery(BaseModel):
    user_id: Identifier | None = None
    group_id: Identifier | None = None
    memory_type: Literal["episode", "event_log", "semantic_memory"] | None = None
    start_time: datetime | None = Field(default=None, description="ISO 8601: memories at or after it")
    end_time: datetime | None = Field(default=None, description="ISO 8601: memories before it")
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Text | None = Field(default=None, max_length=200, description="next_cursor of the previous page")

    _parse_times = field_validator("start_time", "end_time", mode="before")(
        lambda value: None if value is None else parse_iso_datetime(value)
    )


class MemoryPage(BaseModel):
    memories: list[dict[str, Any]]
    count: int
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last page")
