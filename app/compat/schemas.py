"""Request shapes of the EverMemOS-compatible routes, as upstream's clients send them (``evermemos`` 0.3.13 for
/api/v0, ``evermemos-mcp`` 0.5.7 and EverMemOS's own v1 for /api/v1). Unknown fields are ignored and types are
lax, as upstream has them: ``evermemos-mcp`` sends fields memsys does not read (``async_mode``, ``current_time``,
``include_metadata``, ``llm_custom_setting``…) and v0's reads come as query strings. One exception, ``V0Add``:
v0's add is memorize, strict like it (docs/api.md, "Strict requests"). Every string is bounded like memsys's own
(``Identifier``, ``Text``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from app.memorize.schemas import MemorizeRequest
from app.validation import Identifier, NonBlankText, Text

MAX_MESSAGES = 500


class MessageItem(BaseModel):
    message_id: Identifier | None = None
    sender_id: Identifier | None = None
    sender_name: Identifier | None = None
    role: Identifier = "user"
    timestamp: int | float | Text = Field(description="Unix milliseconds (or ISO 8601)")
    content: Text | list[dict[str, Any]]
    refer_list: list[Identifier] = Field(default_factory=list)


class GroupAdd(BaseModel):
    group_id: Identifier = Field(min_length=1)
    group_meta: dict[str, Any] | None = None
    messages: list[MessageItem] = Field(min_length=1, max_length=MAX_MESSAGES)


class PersonalAdd(BaseModel):
    user_id: Identifier = Field(min_length=1)
    session_id: Identifier | None = None
    messages: list[MessageItem] = Field(min_length=1, max_length=MAX_MESSAGES)


class GroupFlush(BaseModel):
    group_id: Identifier = Field(min_length=1)


class PersonalFlush(BaseModel):
    user_id: Identifier = Field(min_length=1)
    session_id: Identifier | None = None


class GetRequest(BaseModel):
    memory_type: Identifier = "episodic_memory"
    page: int = 1
    page_size: int = 20
    filters: dict[str, Any] = Field(default_factory=dict)


class SearchRequest(BaseModel):
    query: NonBlankText = Field(min_length=1)
    method: Identifier = "hybrid"
    memory_types: list[Identifier] = Field(default_factory=lambda: ["episodic_memory", "profile"])
    top_k: int = -1
    radius: float | None = Field(default=None, ge=-1, le=1)
    filters: dict[str, Any] = Field(default_factory=dict)


class DeleteRequest(BaseModel):
    memory_id: Identifier | None = None
    user_id: Identifier | None = None
    group_id: Identifier | None = None
    session_id: Identifier | None = None
    sender_id: Identifier | None = None
    filters: dict[str, Any] | None = None


class GroupIn(BaseModel):
    group_id: Identifier = Field(min_length=1)
    name: Identifier | None = None
    description: Text | None = None


class GroupPatch(BaseModel):
    name: Identifier | None = None
    description: Text | None = None


# ---- v0 ----


class V0Add(MemorizeRequest):
    """Strict like memorize (``RequestModel``): these are upstream's own fields for it (the SDK's
    ``MemoryAddParams``), the only ones either client sends, and ``group_id`` misspelt would store the message in
    another stream."""

    flush: bool = False
    role: Identifier | None = None


class V0Search(BaseModel):
    query: NonBlankText = Field(min_length=1)
    user_id: Identifier | None = None
    group_ids: list[Identifier] | None = Field(default=None, max_length=50)
    retrieve_method: Identifier = "keyword"
    memory_types: list[Identifier] = Field(default_factory=lambda: ["episodic_memory", "profile"])
    top_k: int = -1
    start_time: Text | None = None
    end_time: Text | None = None
    radius: float | None = Field(default=None, ge=-1, le=1)

    _one_list = field_validator("group_ids", "memory_types", mode="before")(
        lambda value: [value] if isinstance(value, str) else value
    )


class V0Fetch(BaseModel):
    user_id: Identifier | None = None
    group_ids: list[Identifier] | None = Field(default=None, max_length=50)
    memory_type: Identifier = "episodic_memory"
    page: int = 1
    page_size: int = 20
    start_time: Text | None = None
    end_time: Text | None = None

    _one_list = field_validator("group_ids", mode="before")(lambda value: [value] if isinstance(value, str) else value)


class V0Delete(BaseModel):
    memory_id: Identifier | None = None
    id: Identifier | None = None
    event_id: Identifier | None = None
    user_id: Identifier | None = None
    group_id: Identifier | None = None


class V0UserDetail(BaseModel):
    full_name: Identifier | None = None
    role: Identifier | None = None
    custom_role: Identifier | None = None
    extra: dict[str, Any] | None = None


class V0ConversationMeta(BaseModel):
    group_id: Identifier | None = None
    name: Identifier | None = None
    created_at: Text | None = None
    scene: Identifier | None = None
    scene_desc: Text | dict[str, Any] | None = None
    description: Text | None = None
    default_timezone: Identifier | None = None
    user_details: dict[Identifier, V0UserDetail] | None = None
    tags: list[Identifier] | None = None
