"""``"explain": true``: why a memory was recalled, from what the hybrid statement and the weighting computed.

Per memory: each leg's raw figure and rank (the vector leg's cosine distance, the BM25 leg's score) and its
reciprocal-rank contribution ``1/(rrf_k + rank)``, their sum, the speaker's weight (an assistant's turn weighs
``assistant_weight``, already in the score), the score the mode reports, the time and type
weights applied after the search, and the reranker's score where one reordered the memories. A leg that did
not find the memory is ``null``: its contribution is 0.
"""

from __future__ import annotations

from typing import Any

from app.retrieval.legs import LEGS


def explanation(memory: dict[str, Any], *, mode: str, rrf_k: int, reranker: str | None = None) -> dict[str, Any]:
    weights = memory.get("weights") or {}
    weight = float(memory.get("weight") or 1.0)
    explained: dict[str, Any] = {
        "mode": mode,
        **{leg.name: _leg(memory.get(leg.rank), rrf_k, **{leg.figure: memory.get(leg.figure)}) for leg in LEGS},
        "rrf": {"k": rrf_k, "sum": _float(memory.get("rrf")), "best_possible": _float(memory.get("rrf_best"))},
        "speaker_weight": _float(memory.get("speaker_weight", 1.0)),
        "fact_weight": _float(memory.get("fact_weight", 1.0)),
        "retrieval_score": _float(memory.get("retrieval_score", memory.get("score"))),
        "weights": {"time": weights.get("time", weight), "type": weights.get("type", 1.0), "product": weight},
        "order_key": _float(float(memory.get("score") or 0.0) * weight),
    }
    if reranker and reranker != "none":
        explained["rerank"] = {"reranker": reranker, "score": memory.get("score")}
    return explained


def _leg(rank: int | None, rrf_k: int, **figure: float | None) -> dict[str, Any] | None:
    if rank is None:
        return None
    ((name, value),) = figure.items()
    leg: dict[str, Any] = {"rank": int(rank), "rrf_contribution": _float(1.0 / (rrf_k + int(rank)))}
    if name == "cosine":
        leg.update(cosine=_float(value), distance=_float(1.0 - value) if value is not None else None)
    else:
        leg["score"] = _float(value)
    return leg


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
