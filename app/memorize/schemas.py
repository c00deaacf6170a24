"""Request and response shapes of POST /api/v3/agentic/memorize and /flush (seeds 000/001)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from app.text.timeparse import parse_iso_datetime
from app.validation import Identifier, Metadata, RequestModel, Text


class MemorizeRequest(RequestModel):
    group_id: Identifier | None = Field(
        default=None, description="Without it the message joins the sender's personal stream"
    )
    group_name: Identifier | None = None
    message_id: Identifier = Field(min_length=1)
    create_time: datetime = Field(
        description="ISO 8601; its offset is kept. Without one: the conversation's default_timezone "
        "(conversation-meta), else UTC"
    )
    sender: Identifier = Field(min_length=1)
    sender_name: Identifier | None = Field(default=None, description="Defaults to sender")
    content: Text
    refer_list: list[Identifier] = Field(default_factory=list)
    metadata: Metadata = Field(
        default_factory=dict,
        description="Your own JSON object (up to 8 KB): carried to the memories formed from the message; filters "
        "find them by it",
    )
    app_id: Identifier = Field(default="default", description="Scope: your application (EverOS's app_id)")
    project_id: Identifier = Field(default="default", description="Scope: a project within the application")
    agent_id: Identifier | None = Field(default=None, description="Scope: the agent the conversation is with")
    session_id: Identifier | None = Field(default=None, description="Scope: the conversation; defaults to group_id")

    @field_validator("create_time", mode="before")
    @classmethod
    def _parse_create_time(cls, value: object) -> datetime:
        return parse_iso_datetime(value, naive=None)  # memorize knows the conversation's zone

    @field_validator("group_id")
    @classmethod
    def _group_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank; leave it out for a personal stream")
        return value

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _default_sender_name(self) -> MemorizeRequest:
        if not self.sender_name:
            self.sender_name = self.sender
        return self


class SavedMemory(BaseModel):
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
    metadata: dict = Field(default_factory=dict)


StatusInfo = Literal["extracted", "accumulated", "duplicate", "pending"]
"""``accumulated``: stored, a worker forms it; ``extracted``: a flush formed it (saved_memories);
``pending``: a flush timed out, formation is still running; ``duplicate``: the message was already stored."""


class MemorizeResult(BaseModel):
    saved_memories: list[SavedMemory]
    count: int
    status_info: StatusInfo
    warning: str | None = None
    formation: str | None = Field(default=None, description="A stored message: how and when it becomes memories")
    idle_close_seconds: float | None = Field(
        default=None,
        description="A stored message: its conversation is formed after this long without new messages (unless a "
        "boundary or a flush forms it sooner); until then it is found by retrieval as a message not yet formed",
    )


class FlushRequest(RequestModel):
    group_id: Identifier | None = Field(default=None, description="The group whose open MemCell closes now")
    sender: Identifier | None = Field(default=None, description="For a personal stream (no group_id): its sender")

    @model_validator(mode="after")
    def _one_stream(self) -> FlushRequest:
        if not self.group_id and not self.sender:
            raise ValueError("give group_id, or sender for a personal stream")
        return self
