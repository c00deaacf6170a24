"""Seed 004's fuse-rerank step: memory-type weights and the time window (boost, or filter when asked plainly).

The type weights follow seed 004's defaults mapped onto memsys's types: ``semantic_memory`` ↔ insight
(2.0), ``profile`` ↔ obs_customized (1.2), ``event_log`` ↔ observation (1.0), ``episode`` ↔ conversation
(0.5). A memory's ``score`` stays its relevance in [0, 1]; ``weight`` is the product of its type weight
and its time factor, and the order is by ``score * weight``.
"""

from __future__ import annotations

from app.retrieval.time_aware import time_factor
from app.settings import Settings
from app.text.time_expressions import TimeWindow


def apply_weights(memories: list[dict], window: TimeWindow | None, settings: Settings) -> list[dict]:
    weighted = []
    for memory in memories:
        factor = time_factor(memory, window, settings.time_boost)
        if factor is None:
            continue
        type_weight = settings.memory_type_weights.get(memory.get("memory_type", ""), 1.0)
        weights = {"time": factor, "type": type_weight}
        weighted.append({**memory, "weight": round(factor * type_weight, 4), "weights": weights})
    weighted.sort(key=lambda memory: -(memory["score"] * memory["weight"]))
    return weighted
