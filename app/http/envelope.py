"""The seed's success body: ``{"status": "ok", "message": ..., "result": ...}``."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class Envelope(BaseModel, Generic[T]):
    status: str = "ok"
    message: str
    result: T


def ok(message: str, result: T) -> Envelope[T]:
    return Envelope[T](message=message, result=result)
