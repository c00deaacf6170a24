"""Request shape of POST /v1/chat/completions: OpenAI's, with the fields memsys reads typed and bounded.

Fields memsys does not read (``temperature``, ``tools``, ``response_format``...) are kept as sent and go to the
upstream unchanged (``extra="allow"``): a parameter OpenAI adds tomorrow passes through without a change here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.validation import Identifier, Text

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
MEMORY_ROLES = ("system", "developer")
"""The client's leading messages of these roles stay first; memsys's context message follows them."""


class ProxyMessage(BaseModel):
    """An OpenAI chat message: ``content`` a string or a list of parts (``{"type": "text", "text": ...}``, images)."""

    model_config = ConfigDict(extra="allow")

    role: Role
    content: Text | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The message's text: the string, or its text parts joined (images and audio left out)."""
        if isinstance(self.content, str):
            return self.content
        parts = self.content or []
        return "\n".join(str(p["text"]) for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str))


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: Identifier = Field(
        min_length=1,
        description="Forwarded when MEMSYS_LLM_ALLOW_CLIENT_MODEL is true; otherwise the server's MEMSYS_LLM_MODEL "
        "answers (the response's model field says which)",
    )
    messages: list[ProxyMessage] = Field(min_length=1, description="At most MEMSYS_PROXY_MAX_MESSAGES")
    stream: bool = False
    max_tokens: int | None = Field(default=None, ge=1, description="At most MEMSYS_LLM_MAX_TOKENS; unset: that")
    max_completion_tokens: int | None = Field(default=None, ge=1, description="At most MEMSYS_LLM_MAX_TOKENS")
    n: int = Field(default=1, ge=1, le=1, description="One answer: it is the one memorized")
    user: Identifier | None = Field(
        default=None, description="The memsys user, unless the X-Memsys-User header names one (the header wins)"
    )
