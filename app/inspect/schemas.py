"""The inspector's one form body."""

from __future__ import annotations

from pydantic import BaseModel


class LoginForm(BaseModel):
    key: str = ""
