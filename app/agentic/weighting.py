"""Seed 004's fuse-rerank step: memory-type weights and the time window (boost, or filter when asked plainly).

The type weights follow seed 004's defaults mapped onto memsys's types: ``semantic_memory`` ↔ insight
(2.0), ``profile`` ↔ obs_customized (1.2), ``event_log`` ↔ observation (1.0), ``episode`` ↔ conversation
(0.5). A memory's ``score`` stays its relevance in [0, 1]; ``weight`` is the product of its type weight
and its time factor, and the order is by ``score * weight``.
"""

from __future__ import annotations

from datetime import date

from app.settings import Settings
from app.text.time_expressions import TimeWindow


def in_window(memory: dict, window: TimeWindow) -> bool:
    """The memory's day lies in the window, or its validity overlaps it."""
    day = date.fromisoformat(str(memory["timestamp"])[:10])
    if window.start <= day <= window.end:
        return True
    valid_from, valid_to = memory.get("valid_from"), memory.get("valid_to")
    if valid_from or valid_to:
        start = date.fromisoformat(str(valid_from)[:10]) if valid_from else date.min
        end = date.fromisoformat(str(valid_to)[:10]) if valid_to else date.max
        return start <= window.end and end >= window.start
    return False


def apply_weights(memories: list[dict], window: TimeWindow | None, settings: Settings) -> list[dict]:
    weighted = []
    for memory in memories:
        factor = settings.memory_type_weights.get(memory.get("memory_type", ""), 1.0)
        if window is not None:
            inside = in_window(memory, window)
            if window.plain_filter and not inside:
                continue
            if inside:
                factor *= settings.time_boost
        weighted.append({**memory, "weight": round(factor, 4)})
    weighted.sort(key=lambda memory: -(memory["score"] * memory["weight"]))
    return weighted
