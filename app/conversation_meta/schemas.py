"""Request and response shapes of /api/v3/agentic/conversation-meta (seed 000)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, field_validator

from app.text.timeparse import parse_iso_datetime
from app.validation import Identifier, RequestModel, Text


class UserDetail(RequestModel):
    full_name: Identifier = Field(min_length=1)
    role: Identifier
    extra: dict[str, Any] | None = None


class ConversationMetaRequest(RequestModel):
    version: Identifier = Field(min_length=1)
    scene: Identifier = Field(min_length=1, description="Any non-empty scene: group_chat, assistant, companion, ...")
    scene_desc: Text | dict[str, Any] = Field(description="A description, or an object (upstream's demos send one)")
    name: Identifier = Field(min_length=1)
    description: Text
    group_id: Identifier = Field(min_length=1)
    created_at: datetime = Field(description="ISO 8601; without an offset it is UTC")
    default_timezone: Identifier = Field(min_length=1)
    user_details: dict[Identifier, UserDetail]
    tags: list[Identifier] = Field(default_factory=list)

    _parse_created_at = field_validator("created_at", mode="before")(parse_iso_datetime)

    @field_validator("scene", "group_id", "name", "version")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("default_timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a name too long for a file
            raise ValueError(f"unknown time zone {value!r} (use an IANA name such as Asia/Shanghai)") from exc
        return value


class ConversationMeta(BaseModel):
    """The stored record, as GET returns it."""

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


class ConversationMetaSaved(BaseModel):
    """What POST returns (seed 000): the identifying fields and the two times."""

    id: str
    group_id: str
    scene: str
    name: str
    version: str
    created_at: str
    updated_at: str
