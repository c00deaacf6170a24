"""The inspector's form bodies."""

from __future__ import annotations

from pydantic import BaseModel


class LoginForm(BaseModel):
    key: str = ""


class LogoutForm(BaseModel):
    csrf_token: str = ""
