"""Memory formation entry point: run boundary detection on a stream and extract closed MemCells."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.formation.streams import Stream

if TYPE_CHECKING:
    from app.runtime import Runtime


@dataclass
class FormationOutcome:
    """What one pass over a stream produced: the memories saved (API-shaped dicts) and any warning."""

    memories: list[dict[str, Any]] = field(default_factory=list)
    warning: str | None = None


async def process_stream(runtime: Runtime, stream: Stream, *, flush: bool = False) -> FormationOutcome:
    """Close every MemCell the stream's pending messages call for (all of them when ``flush``)."""
    return FormationOutcome()
