"""The inspector's form bodies."""

from __future__ import annotations

from pydantic import BaseModel


class LoginForm(BaseModel):
    key: str = ""


class LogoutForm(BaseModel):
    csrf_token: str = ""


class MemoryForm(BaseModel):
    """An operator's correction, deletion or restore of one memory (``content`` only for a correction)."""

    csrf_token: str = ""
    content: str | None = None
